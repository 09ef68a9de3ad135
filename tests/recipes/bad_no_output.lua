-- expect: 6: made no outputs
-- A build that declares tensors but marks no output (the error points at the build function).
recipe {
  name = "bad_no_output",
  configs = { tiny = { hidden = 64 } },
  build = function(g, cfg)
    local x = g:input("x", "bf16", {"T", cfg.hidden})
    local w = g:weight("model.norm.weight", "bf16", {cfg.hidden})
    local y = g:rms_norm(x, w, {eps = 1e-5})
  end,
}
