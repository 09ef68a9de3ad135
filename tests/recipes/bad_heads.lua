-- expect: 9: which is not 32 heads x head_dim 100
-- The hidden size is not heads x head_dim (4096 channels, 32 heads of 100).
recipe {
  name = "bad_heads",
  configs = { tiny = { hidden = 4096, heads = 32, head_dim = 100 } },
  build = function(g, cfg)
    local x = g:input("x", "bf16", {"T", cfg.hidden})
    local pos = g:input("positions", "i32", {"T"})
    local q = g:rope(x, pos, {
      heads = cfg.heads, head_dim = cfg.head_dim, theta = 10000.0,
    })
    g:output("q", q)
  end,
}
