-- expect: 14: schedule: attention: buffer %ws_o
-- Every shape fits, but attention's split-KV workspace (65536 rows x head_dim f32) passes 2^48 bytes.
recipe {
  name = "bad_huge_workspace",
  configs = { tiny = { head_dim = 2147483647 } },
  build = function(g, cfg)
    local D = cfg.head_dim
    local q = g:input("q", "bf16", {"T", D})
    local k_cache = g:input("k_cache", "bf16", {"P", 1, 1, D})
    local v_cache = g:input("v_cache", "bf16", {"P", 1, 1, D})
    local block_table = g:input("block_table", "i32", {"B", "MP"})
    local seq_lens = g:input("seq_lens", "i32", {"B"})
    local cu_q = g:input("cu_q", "i32", {"B+1"})
    local o = g:attention(q, k_cache, v_cache, block_table, seq_lens, cu_q, {
      mode = "decode", causal = true, heads = 1, kv_heads = 1, head_dim = D, page_size = 1,
    })
    g:output("o", o)
  end,
}
