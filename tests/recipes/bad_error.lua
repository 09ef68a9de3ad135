-- expect: 8: hidden size must be positive
-- error() raised by the recipe itself while build runs.
recipe {
  name = "bad_error",
  configs = { tiny = { hidden = 0 } },
  build = function(g, cfg)
    if cfg.hidden <= 0 then
      error("hidden size must be positive")
    end
  end,
}
