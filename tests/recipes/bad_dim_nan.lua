-- expect: 7: dimension 2 is
-- NaN and infinity as dimensions.
recipe {
  name = "bad_dim_nan",
  configs = { tiny = {} },
  build = function(g, cfg)
    local x = g:input("x", "f32", {"T", 0/0})
    g:output("y", g:add(x, math.huge))
  end,
}
