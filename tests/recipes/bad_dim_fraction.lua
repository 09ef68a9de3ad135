-- expect: 7: dimension 2 is 4096.5 (must be a positive integer or a symbol name)
-- A dimension that is not a whole number.
recipe {
  name = "bad_dim_fraction",
  configs = { tiny = {} },
  build = function(g, cfg)
    local x = g:input("x", "f32", {"T", 4096.5})
    g:output("y", g:add(x, x))
  end,
}
