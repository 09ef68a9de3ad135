-- expect: 9: attribute scaling 'decode" }?%9 = x': a quote at byte 6
-- A string attribute with a quote and a newline.
recipe {
  name = "bad_attr_value",
  configs = { tiny = {} },
  build = function(g, cfg)
    local x = g:input("x", "bf16", {"T", 64})
    local pos = g:input("positions", "i32", {"T"})
    local q = g:rope(x, pos, { heads = 1, head_dim = 64, theta = 10000.0, scaling = 'decode" }\n%9 = x' })
    g:output("q", q)
  end,
}
