-- expect: 8: weight needs its checkpoint name
-- A weight whose checkpoint name is the empty string.
recipe {
  name = "bad_weight_empty",
  configs = { tiny = { hidden = 64 } },
  build = function(g, cfg)
    local x = g:input("x", "bf16", {"T", cfg.hidden})
    local w = g:weight("", "bf16", {cfg.hidden, cfg.hidden})
    g:output("y", g:matmul(x, w))
  end,
}
