-- expect: 9: attribute 'heads' is 4294967296 (at most 2147483647 in magnitude)
-- heads x head_dim would be computed from numbers past 32 bits (and 2^32 x 2^32 overflows int64).
recipe {
  name = "bad_huge_attr",
  configs = { tiny = {} },
  build = function(g, cfg)
    local x = g:input("x", "bf16", {"T", 64})
    local pos = g:input("positions", "i32", {"T"})
    local q = g:rope(x, pos, { heads = 2^32, head_dim = 2^32, theta = 10000.0 })
    g:output("q", q)
  end,
}
