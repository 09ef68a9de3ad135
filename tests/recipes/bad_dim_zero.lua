-- expect: 7: dimension 2 is 0 (must be a positive integer or a symbol name)
-- A zero dimension.
recipe {
  name = "bad_dim_zero",
  configs = { tiny = {} },
  build = function(g, cfg)
    local x = g:input("x", "f32", {"T", 0})
    g:output("y", g:add(x, x))
  end,
}
