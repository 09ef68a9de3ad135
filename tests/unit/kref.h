/* kref.h — plain C references for every kernel family (float64 accumulation), the number formats they
 * need (bf16/f16 with round-to-nearest-even), a seeded RNG for test inputs and the error metric of
 * DESIGN.md's oracles. Prefix kref_. References take inputs in their storage dtype and give float64
 * results that are NOT rounded to the output dtype (the kernel's rounding is part of its error), except
 * where a family's semantics round an intermediate (documented per function, as in docs/KERNELS.md).
 */
#ifndef KILN_KREF_H
#define KILN_KREF_H

#include <stddef.h>
#include <stdint.h>

#include "ir/kir.h"

/* ---- number formats ---- */
uint16_t kref_f32_to_bf16(float f); /* nearest even; NaN stays a (quiet) NaN */
float kref_bf16_to_f32(uint16_t h);
uint16_t kref_f32_to_f16(float f); /* nearest even, subnormals, overflow to inf */
float kref_f16_to_f32(uint16_t h);
/* An FP8 e4m3fn byte's value (S.EEEE.MMM, bias 7, no infinities, S.1111.111 NaN). */
float kref_f8e4m3_to_f32(uint8_t b);
/* x rounded to dtype t (f32, bf16, f16; nearest even); other dtypes: x. */
double kref_round(double x, KirDtype t);

/* Element i of a buffer of dtype t (f32, bf16, f16, i32), as a double / set from a double (rounded). */
double kref_get(const void *p, KirDtype t, size_t i);
void kref_set(void *p, KirDtype t, size_t i, double v);
size_t kref_bytes(KirDtype t, size_t n);

/* ---- inputs ---- */
typedef struct KrefRng {
    uint64_t s;
} KrefRng;
/* The run's seed: KILN_TEST_SEED if set, else fresh from time and pid; printed once to stdout so a
 * failure can be repeated. */
uint64_t kref_seed(void);
KrefRng kref_rng(uint64_t seed);
uint64_t kref_next(KrefRng *r);
double kref_uniform(KrefRng *r, double lo, double hi);
double kref_normal(KrefRng *r);
/* n values uniform in [lo, hi), rounded to t, into p; never all zero (lo < hi). */
void kref_fill(KrefRng *r, void *p, KirDtype t, size_t n, double lo, double hi);
void *kref_alloc(KirDtype t, size_t n);  /* malloc'd, poisoned; aborts the test on OOM */
void kref_poison(void *p, size_t bytes); /* all bits set: NaN in every float dtype, -1 in i32 */

/* ---- error ---- */
/* Relative L2 error of got vs want (||got - want|| / ||want||; absolute when want is all zero).
 * Any NaN or inf in got gives +inf, so it never passes. */
double kref_rel_l2(const double *got, const double *want, size_t n);
double kref_tol(KirDtype t); /* DESIGN.md: 1e-2 for bf16 and f16, 1e-4 for f32 */
/* Reads n elements of dtype t into a new double array (malloc'd). */
double *kref_to_double(const void *p, KirDtype t, size_t n);

/* ---- references ---- */
/* out[t, :] = table[ids[t], :], zeros for ids outside [0, V). out: [T, C] doubles. */
void kref_embedding(const int32_t *ids, const void *table, KirDtype t, int T, int V, int C, double *out);
/* y = x * rsqrt(mean(x^2) + eps) * w per row; with r: s = round_t(x + r) first (sum_out = s). */
void kref_rmsnorm(const void *x, const void *r, const void *w, KirDtype t, int rows, int C, double eps,
                  double *out, double *sum_out);

typedef struct KrefRope {
    int H, D;
    double theta;
    const char *scaling; /* "none", "linear", "llama3" */
    double factor, low_freq_factor, high_freq_factor, original_max_pos;
} KrefRope;
/* inv_freq_i (i < D/2) as the family defines it: every step in f32 (docs/KERNELS.md). */
float kref_rope_inv_freq(const KrefRope *p, int i);
/* HF rotate_half rotation with angle f32(pos * inv_freq) and cos/sin/rotation in float64. */
void kref_rope(const void *x, const int32_t *pos, KirDtype t, int T, const KrefRope *p, double *out);

/* The paged KV cache write: for each token t with slots[t] >= 0, row slots[t] of k_cache and v_cache
 * (doubles, [n_slots, Hkv*D], i.e. [P, S, Hkv, D] flattened) becomes k[t, :] and v[t, :] (inputs of
 * dtype t, [T, Hkv*D]); with rope (non-NULL, rope->H = Hkv, rope->D = D), k[t, :] rotated as kref_rope
 * does at position pos[t]. Rows of padding tokens (slot < 0) and other rows are left as they are. */
void kref_kv_write(const void *k, const void *v, const int32_t *slots, const int32_t *pos, KirDtype t, int T,
                   int Hkv, int D, const KrefRope *rope, double *k_cache, double *v_cache);

/* out = x[M,K] @ w[N,K]^T with epilogue "none" | "bias" | "residual" | "silu_mul" (w2 the up weight),
 * float64 accumulation; residual adds r to round_t(acc) (the family's semantics). */
void kref_matmul(const void *x, const void *w, const void *w2, const void *bias, const void *r, KirDtype t,
                 int M, int N, int K, const char *epilogue, double *out);

/* argmax with ties to the smallest index; all -inf gives 0. */
int kref_argmax(const float *x, int V);
/* The sampling family's allowed-set threshold in float64 (exact top-k / top-p, softmax of x / T
 * restricted to the top-k set): token j is allowed iff x[j] >= threshold. T <= 0: the maximum. top_p is
 * scaled by (1 + slack) before use (slack > 0 gives the loosest set a float32 kernel may find). */
double kref_sample_threshold(const float *x, int V, double T, int top_k, double top_p, double slack);
/* softmax(x / T) restricted to {x >= threshold} and renormalized, into p[V]. */
void kref_sample_probs(const float *x, int V, double T, double threshold, double *p);
/* Upper 1e-4 tail bound of chi-square with df degrees of freedom (Wilson-Hilferty). */
double kref_chi2_bound(int df);

/* Paged attention (the attention family's semantics, docs/KERNELS.md), float64 throughout: q [T, H*D],
 * caches [P, S, Hkv, D], block_table [B, MP], seq_lens [B], cu_q [B+1]; query row i of sequence b has
 * position seq_lens[b] - q_len_b + (i - cu_q[b]) and attends to keys <= pos (causal) or < seq_lens[b],
 * and with window W > 0 only to keys > pos - W; head h reads kv head h / (H / Hkv); softmax(scale * q.k).
 * tree (NULL: none): key j >= seq_lens[b] - q_len_b (a query token of the same step) is allowed to row
 * r only when bit j - (seq_lens[b] - q_len_b) of tree[r] is set (speculative tree verify).
 * Rows with no allowed key give 0. out: [T, H*D] doubles (rows not in any sequence are left alone). */
void kref_attention_paged(const void *q, const void *k_cache, const void *v_cache, KirDtype t,
                          const int32_t *block_table, const int32_t *seq_lens, const int32_t *cu_q, int B,
                          int MP, int H, int Hkv, int D, int S, int causal, int window, const int64_t *tree,
                          double scale, double *out);

/* spec_verify (docs/KERNELS.md), sequences b < B with k draft tokens over a vocabulary of V: logits and q
 * [B*(k+1), V] (row b*(k+1) + j is position j; q's row j = k is not read), draft [B, k].
 * Greedy: accepted[b] = longest prefix with kref_argmax(row j) == draft[j], bonus[b] = argmax of row n.
 * Exact. */
void kref_spec_verify_greedy(const float *logits, const int32_t *draft, int B, int k, int V,
                             int32_t *accepted, int32_t *bonus);
/* Rejection sampling with the family's noise (kir_rand_ref counters) in float64: params [B, 4] =
 * (T, top_k, top_p, seed) as the family reads them; T <= 0 or an all -inf row: that position greedy.
 * Decisions the float32 kernel may take otherwise are flagged in ambiguous[b] (1: do not compare that
 * sequence): with the kernel's p off by a relative `margin` and its key terms (log-probability, Gumbel
 * noise) by 1e-5 * (1 + |term|), an acceptance u*q < p, the emptiness of the residual max(0, p - q) or
 * the Gumbel-max winner could change. Returns the number of ambiguous sequences. */
int kref_spec_verify_sample(const float *logits, const int32_t *draft, const float *q, const float *params,
                            int B, int k, int V, double margin, int32_t *accepted, int32_t *bonus,
                            unsigned char *ambiguous);
/* The family's Gumbel noise -log(-log(max(rand(seed, counter), 2^-25))) in float64. */
double kref_gumbel(int64_t seed, int32_t counter);

/* ---- quantized weights (the qmatmul family, docs/KERNELS.md) ---- */
/* Dequantized weights [N, K] as f32, from the qmatmul family's layouts: "w4a16": w i32 [N, K/8] in the
 * fragment order (of each 32 k, word (k/2)%4 at nibble (k/8)%4 + 4(k%2)), scales of dtype t [N, K/group],
 * zeros u8 [N, K/group] read as z & 127, or NULL (z = 8), value f32(q - z) * f32(s); "w8a16": w i8 [N, K], value q (the per-channel scale is kref_qmatmul's chan);
 * "fp8": w e4m3fn bytes [N, K], value q (its f32 scales are kref_qmatmul's chan too) or, with group > 1,
 * f32(q * s) with f32 scales [N, K/group];
 * "q4_0", "q4_1", "q8_0": w the GGUF blocks (rows of K/32 blocks), "q4_k", "q6_k": the super-blocks
 * (rows of K/256), values bit-identical to rt_gguf_dequant (NaN halves give NaN). */
void kref_qdequant(const char *wfmt, const void *w, const void *scales, const uint8_t *zeros, KirDtype t,
                   int N, int K, int group, float *out);
/* out = x[M,K] @ w[N,K]^T with kref_matmul's epilogues, each weight rounded to t first (the family's B
 * tile is dtype); x of dtype xt (t, or W8A8's f8e4m3 / i8 codes) and, when xs is not NULL, row m's sums
 * multiplied by xs[m]; chan (w8a16, fp8: per-channel scales of dtype ct, [N]; NULL: none) multiplies the
 * sum of row n before the epilogue, chan2 the sum with w2. Float64 accumulation. */
void kref_qmatmul(const void *x, KirDtype xt, const float *xs, const float *w, const float *w2,
                  const void *chan, const void *chan2, KirDtype ct, const void *bias, const void *r,
                  KirDtype t, int M, int N, int K, const char *epilogue, double *out);

#endif
