-- expect: 9: unknown op 'flash_attn'
-- An op that does not exist in gir_ops.def.
recipe {
  name = "bad_unknown_op",
  configs = { tiny = { hidden = 64 } },
  build = function(g, cfg)
    local x = g:input("x", "bf16", {"T", cfg.hidden})
    local pos = g:input("positions", "i32", {"T"})
    local y = g:flash_attn(x, pos)
    g:output("y", y)
  end,
}
