-- expect: 7: dimension 2 is 9.2233720368548e+18 (must be a positive integer or a symbol name)
-- 2^63 as a float: no int64 holds it.
recipe {
  name = "bad_dim_2p63",
  configs = { tiny = {} },
  build = function(g, cfg)
    local x = g:input("x", "f32", {"T", 2^63})
    g:output("y", g:add(x, x))
  end,
}
