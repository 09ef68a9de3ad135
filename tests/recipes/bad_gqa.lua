-- expect: 14: heads 32 is not a whole multiple of kv_heads 5
-- A GQA ratio that is not whole: 32 query heads over 5 KV heads.
recipe {
  name = "bad_gqa",
  configs = { tiny = { heads = 32, kv_heads = 5, head_dim = 8, page_size = 16 } },
  build = function(g, cfg)
    local H, KV, D, PS = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.page_size
    local q = g:input("q", "bf16", {"T", H * D})
    local k_cache = g:input("k_cache", "bf16", {"P", PS, KV, D})
    local v_cache = g:input("v_cache", "bf16", {"P", PS, KV, D})
    local block_table = g:input("block_table", "i32", {"B", "MP"})
    local seq_lens = g:input("seq_lens", "i32", {"B"})
    local cu_q = g:input("cu_q", "i32", {"B1"})
    local o = g:attention(q, k_cache, v_cache, block_table, seq_lens, cu_q, {
      mode = "decode", causal = true, heads = H, kv_heads = KV, head_dim = D, page_size = PS,
    })
    g:output("o", o)
  end,
}
