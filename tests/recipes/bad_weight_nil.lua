-- expect: 8: weight needs its checkpoint name
-- A weight declared without its checkpoint tensor name.
recipe {
  name = "bad_weight_nil",
  configs = { tiny = { hidden = 64 } },
  build = function(g, cfg)
    local x = g:input("x", "bf16", {"T", cfg.hidden})
    local w = g:weight(nil, "bf16", {4, 4})
    g:output("y", g:matmul(x, w))
  end,
}
