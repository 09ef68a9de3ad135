-- llama.lua — the Llama family by config: Llama 2/3/3.2, Mistral (sliding window), Qwen2 (QKV bias),
-- SmolLM2. One decoder-only graph: embedding, n_layers x (RMSNorm, GQA attention over a paged KV cache
-- with RoPE, RMSNorm, SiLU-gated MLP), final norm, logits for the requested rows, sampling.
-- Weight names are the Hugging Face checkpoint names. The language is described in docs/RECIPES.md.
--
-- Runtime inputs (symbolic dims): T tokens in this step, B sequences, B+1 their offsets, P pages in the
-- KV pool, MP max pages per sequence, R rows that need logits (the last token of each sequence, or the
-- k+1 positions of a speculative verify). With tree = true, tree_mask: per token, the chunk tokens it
-- may see (bit i: the sequence's i-th token of this step; -1: causal).

local base = {
  dtype = "bf16",
  weight_dtype = "",         -- the linear layers' weights: "" = dtype, a GGUF block format (q4_0, q4_1, q8_0;
                             -- q4_k, q6_k: every linear layer's K a multiple of 256), w4g<G>[z] (GPTQ/AWQ
                             -- INT4), f8g<G> (FP8 e4m3), G = 32, 64 or 128, or gguf:PATH: each as that
                             -- GGUF file stores it (mixed files such as Q4_K_M; float tensors as dtype)
  page_size = 16,
  head_dim = 0,              -- 0: hidden_size / n_heads
  qkv_bias = false,
  tie_embeddings = false,
  sliding_window = 0,        -- 0: full attention
  rope_scaling = "none",     -- "none" | "linear" | "llama3"
  rope_factor = 1.0,
  rope_low_freq_factor = 1.0,
  rope_high_freq_factor = 4.0,
  rope_original_max_pos = 8192,
  tree = false,              -- true: attention takes a tree_mask input (speculative decoding's draft trees,
                             -- kiln.h spec_branches); plain steps pass -1 (causal), at a small cost in prefill
}

local function config(t)
  local c = {}
  for k, v in pairs(base) do c[k] = v end
  for k, v in pairs(t) do c[k] = v end
  return c
end

local configs = {
  ["llama-2-7b"] = config {
    hidden_size = 4096, intermediate_size = 11008, n_layers = 32, n_heads = 32, n_kv_heads = 32,
    vocab_size = 32000, rms_eps = 1e-5, rope_theta = 10000.0, max_seq_len = 4096,
  },
  ["llama-3-8b"] = config {
    hidden_size = 4096, intermediate_size = 14336, n_layers = 32, n_heads = 32, n_kv_heads = 8,
    vocab_size = 128256, rms_eps = 1e-5, rope_theta = 500000.0, max_seq_len = 8192,
  },
  ["llama-3.2-1b"] = config {
    hidden_size = 2048, intermediate_size = 8192, n_layers = 16, n_heads = 32, n_kv_heads = 8,
    head_dim = 64, vocab_size = 128256, rms_eps = 1e-5, rope_theta = 500000.0, max_seq_len = 131072,
    tie_embeddings = true, rope_scaling = "llama3", rope_factor = 32.0, rope_low_freq_factor = 1.0,
    rope_high_freq_factor = 4.0, rope_original_max_pos = 8192,
  },
  ["mistral-7b"] = config {
    hidden_size = 4096, intermediate_size = 14336, n_layers = 32, n_heads = 32, n_kv_heads = 8,
    vocab_size = 32000, rms_eps = 1e-5, rope_theta = 10000.0, max_seq_len = 32768,
    sliding_window = 4096,
  },
  ["qwen2-7b"] = config {
    hidden_size = 3584, intermediate_size = 18944, n_layers = 28, n_heads = 28, n_kv_heads = 4,
    vocab_size = 152064, rms_eps = 1e-6, rope_theta = 1000000.0, max_seq_len = 32768,
    qkv_bias = true,
  },
  ["smollm2-135m"] = config {
    hidden_size = 576, intermediate_size = 1536, n_layers = 30, n_heads = 9, n_kv_heads = 3,
    head_dim = 64, vocab_size = 49152, rms_eps = 1e-5, rope_theta = 100000.0, max_seq_len = 8192,
    tie_embeddings = true,
  },
  -- A tiny model of the same shape family, for tests and the host backend.
  ["tiny"] = config {
    hidden_size = 64, intermediate_size = 160, n_layers = 2, n_heads = 4, n_kv_heads = 2,
    vocab_size = 256, rms_eps = 1e-5, rope_theta = 10000.0, max_seq_len = 512, page_size = 8,
  },
}

-- The range of each setting, for the configs above and for --set (kiln refuses a value outside them in
-- one line before build runs). weight_dtype is checked by g:weight, which knows every format.
local limits = {
  hidden_size = { min = 1, max = 65536 }, intermediate_size = { min = 1, max = 1 << 20 },
  n_layers = { min = 1, max = 1024 }, n_heads = { min = 1, max = 1024 }, n_kv_heads = { min = 1, max = 1024 },
  head_dim = { min = 0, max = 1024 }, vocab_size = { min = 1, max = 1 << 24 },
  max_seq_len = { min = 1, max = 1 << 24 }, page_size = { min = 1, max = 1024 },
  sliding_window = { min = 0, max = 1 << 24 }, rope_original_max_pos = { min = 1, max = 1 << 24 },
  rms_eps = { min = 1e-12, max = 1.0 }, rope_theta = { min = 1.0, max = 1e12 },
  rope_factor = { min = 1e-6, max = 1e6 }, rope_low_freq_factor = { min = 1e-6, max = 1e6 },
  rope_high_freq_factor = { min = 1e-6, max = 1e6 },
  dtype = { one_of = { "bf16", "f16", "f32" } }, rope_scaling = { one_of = { "none", "linear", "llama3" } },
}

local function build(g, c)
  local H, Hkv, C, F, V = c.n_heads, c.n_kv_heads, c.hidden_size, c.intermediate_size, c.vocab_size
  if c.head_dim == 0 and C % H ~= 0 then
    error(("hidden_size %d is not divisible by n_heads %d"):format(C, H))
  end
  local D = c.head_dim ~= 0 and c.head_dim or C // H
  local dt, ps = c.dtype, c.page_size
  local function weight(name, shape) return g:weight(name, dt, shape) end

  local tokens = g:input("tokens", "i32", {"T"})
  local positions = g:input("positions", "i32", {"T"})
  local slots = g:input("slots", "i32", {"T"})
  local block_table = g:input("block_table", "i32", {"B", "MP"})
  local seq_lens = g:input("seq_lens", "i32", {"B"})
  local cu_q = g:input("cu_q", "i32", {"B+1"})
  local tree_mask = c.tree and g:input("tree_mask", "i64", {"T"}) or nil

  local rope = { theta = c.rope_theta, head_dim = D, scaling = c.rope_scaling }
  if c.rope_scaling ~= "none" then rope.factor = c.rope_factor end
  if c.rope_scaling == "llama3" then
    rope.low_freq_factor = c.rope_low_freq_factor
    rope.high_freq_factor = c.rope_high_freq_factor
    rope.original_max_pos = c.rope_original_max_pos
  end
  local function rope_heads(n)
    local a = { heads = n }
    for k, v in pairs(rope) do a[k] = v end
    return a
  end
  local rope_q, rope_k = rope_heads(H), rope_heads(Hkv)
  local attn = { mode = "mixed", causal = 1, heads = H, kv_heads = Hkv, head_dim = D, page_size = ps,
                 window = c.sliding_window }
  local kv = { kv_heads = Hkv, head_dim = D, page_size = ps }
  local norm = { eps = c.rms_eps }

  local wdt = c.weight_dtype ~= "" and c.weight_dtype or dt
  local file = wdt:match("^gguf:(.*)$")
  if file == "" then error("weight_dtype=gguf:PATH: the path of the GGUF file is missing") end
  local function proj(x, name, n_out, n_in, bias)
    local wname = name .. ".weight"
    local w = g:weight(wname, file and g:file_dtype(file, wname, dt) or wdt, {n_out, n_in})
    if bias then return g:matmul(x, w, weight(name .. ".bias", {n_out})) end
    return g:matmul(x, w)
  end

  local embed = weight("model.embed_tokens.weight", {V, C})
  local x = g:embedding(tokens, embed)
  for l = 0, c.n_layers - 1 do
    local p = ("model.layers.%d."):format(l)
    local h = g:rms_norm(x, weight(p .. "input_layernorm.weight", {C}), norm)
    local q = proj(h, p .. "self_attn.q_proj", H * D, C, c.qkv_bias)
    local k = proj(h, p .. "self_attn.k_proj", Hkv * D, C, c.qkv_bias)
    local v = proj(h, p .. "self_attn.v_proj", Hkv * D, C, c.qkv_bias)
    q, k = g:rope(q, positions, rope_q), g:rope(k, positions, rope_k)
    local kc = g:input(("k_cache.%d"):format(l), dt, {"P", ps, Hkv, D})
    local vc = g:input(("v_cache.%d"):format(l), dt, {"P", ps, Hkv, D})
    kc, vc = g:kv_write(k, v, kc, vc, slots, kv)
    local o = tree_mask and g:attention(q, kc, vc, block_table, seq_lens, cu_q, tree_mask, attn)
              or g:attention(q, kc, vc, block_table, seq_lens, cu_q, attn)
    x = g:add(x, proj(o, p .. "self_attn.o_proj", C, H * D))
    h = g:rms_norm(x, weight(p .. "post_attention_layernorm.weight", {C}), norm)
    local m = g:silu_mul(proj(h, p .. "mlp.gate_proj", F, C), proj(h, p .. "mlp.up_proj", F, C))
    x = g:add(x, proj(m, p .. "mlp.down_proj", C, F))
  end
  local h = g:rms_norm(x, weight("model.norm.weight", {C}), norm)
  local lm_head = c.tie_embeddings and embed or weight("lm_head.weight", {V, C})
  local logits = g:logits(h, lm_head, g:input("logit_rows", "i32", {"R"}))
  g:output("logits", logits)
  g:output("next_tokens", g:sample(logits, g:input("sampling", "f32", {"R", 4})))
end

recipe {
  name = "llama",
  default = "smollm2-135m",
  configs = configs,
  limits = limits,
  build = build,
}
