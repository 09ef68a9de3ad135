-- expect: 7: dimension 2 is -4096 (must be a positive integer or a symbol name)
-- A negative dimension.
recipe {
  name = "bad_dim_negative",
  configs = { tiny = {} },
  build = function(g, cfg)
    local x = g:input("x", "f32", {"T", -4096})
    g:output("y", g:add(x, x))
  end,
}
