/* rt_weights.h — binds a weight file to a package's weight table: finds each tensor the package lists
 * (by its Hugging Face name), checks it can be served, and reads it converted to the package's dtype.
 * Prefix rt_w_. Mapping, conversions and errors: docs/WEIGHTS.md ("Binding a weight file to a package").
 *
 *     RtWeights *w;
 *     char err[512];
 *     // a .gguf, a .safetensors, a *.safetensors.index.json, or a directory holding one of them
 *     if (rt_w_open("SmolLM2-135M-Instruct.Q4_1.gguf", &w, err, sizeof err)) fail(err);
 *     RtWeightSpec spec[N];                       // one per row of the package's weights table
 *     for (i...) if (!rt_w_spec_parse(row.name, row.dtype, row.shape, row.nbytes, &spec[i])) fail(...);
 *     if (rt_w_check(w, spec, N, err, sizeof err)) fail(err);   // before anything big is allocated
 *     for (i...) rt_w_read(w, &spec[i], host_buffer_of(spec[i].nbytes), err, sizeof err);
 *     rt_w_close(w);
 *
 * A GGUF file's tensors are found under llama.cpp's names (blk.N.attn_q.weight for
 * model.layers.N.self_attn.q_proj.weight, ...); for architecture llama, q_proj and k_proj rows are
 * un-permuted back to Hugging Face order as they are read (rt_w_unpermute_row). Safetensors names are
 * used as they are. Shapes are the package's: row-major, outermost first (GGUF ne [K, N] is [N, K]).
 *
 * Ownership and threads: the handle owns the open file(s); rt_w_gguf's handle and every pointer from it
 * die at rt_w_close. An open handle is never modified: rt_w_check and rt_w_read may run on several
 * threads at once (each read allocates its own scratch row).
 */
#ifndef KILN_RT_WEIGHTS_H
#define KILN_RT_WEIGHTS_H

#include <stdint.h>

#include "kiln.h"
#include "rt_gguf.h"

#define RT_W_MAX_RANK 4 /* dimensions of a package weight */

/* One row of a package's weights table. name and dtype are borrowed (they must outlive every call that
 * is given the spec). dtype is package dtype text: f32, f16, bf16, q4_0, q4_1, q8_0, q4_k, q6_k. shape:
 * row-major, outermost first, rank entries used (the rest 0). nbytes: the tensor's size in dtype, bytes. */
typedef struct RtWeightSpec {
    const char *name;
    const char *dtype;
    int rank;
    int64_t shape[RT_W_MAX_RANK];
    int64_t nbytes;
} RtWeightSpec;

typedef struct RtWeights RtWeights;

/* Fills *out from one package row: shape_text is "[a,b,...]" (0 to 4 decimal integers without sign,
 * spaces or leading zeros, each < 2^62; "[]" is a scalar). Returns 1, or 0 for malformed text, a
 * negative nbytes or a NULL argument (then *out is zeroed). Does not check dtype or nbytes against the
 * shape: rt_w_check does. */
int rt_w_spec_parse(const char *name, const char *dtype, const char *shape_text, int64_t nbytes,
                    RtWeightSpec *out);

/* A spec's own consistency, with no file: a dtype kiln loads, a valid shape (rows whole blocks of a
 * block format), nbytes equal to what the dtype takes for the shape. KILN_OK, or KILN_ERR_UNSUPPORTED /
 * KILN_ERR_CORRUPT / KILN_ERR_ARG with one line starting with `where` (the package's path). rt_w_check
 * does the same with a file; random weights (rt_w_random) need this first. */
KilnStatus rt_w_spec_check(const RtWeightSpec *spec, const char *where, char *err, int errlen);

/* Opens the weights at path: a GGUF file (magic "GGUF", or a .gguf name), a safetensors file, a sharded
 * checkpoint's index (a file whose name ends in ".json", or that starts with '{'), or a directory holding, in
 * this order of preference, model.safetensors.index.json, exactly one other *.safetensors.index.json, exactly
 * one *.safetensors, exactly one *.gguf. The file is validated as by rt_gguf_open / rt_st_open /
 * rt_st_open_index. Returns KILN_OK and *out (free with rt_w_close), or a status with a one-line
 * message naming the path, *out NULL: KILN_ERR_ARG (NULL path/out; a directory with several candidates
 * of one kind), KILN_ERR_IO (missing, unreadable, a directory with no weight file) and the readers'
 * statuses (FORMAT, CORRUPT, UNSUPPORTED, NOMEM). */
KilnStatus rt_w_open(const char *path, RtWeights **out, char *err, int errlen);
/* Closes the file(s) (NULL is fine). */
void rt_w_close(RtWeights *w);

/* "gguf" or "safetensors" (NULL for NULL). */
const char *rt_w_kind(const RtWeights *w);
/* The file opened (for a directory: the file chosen in it; for an index: the index). Owned by w. */
const char *rt_w_path(const RtWeights *w);
/* The GGUF handle (to read the tokenizer and config from the same file), or NULL for safetensors.
 * Owned by w: do not close it. */
RtGgufFile *rt_w_gguf(const RtWeights *w);

/* Checks, without reading tensor data, that every spec can be served: the package dtype is one kiln
 * reads and nbytes matches it and the shape; the tensor exists under its mapped name; its shape is the
 * spec's; its dtype converts to the spec's (same dtype: copy; among f32/f16/bf16 and from GGUF q4_0,
 * q4_1, q8_0, q4_k, q6_k to any of f32/f16/bf16; a block dtype only from the same GGUF type); for a
 * GGUF, the architecture is llama or qwen2, and q/k rows that need un-permuting divide into heads.
 * Returns KILN_OK, or at the first failure a status and one line naming the file and the tensor, e.g.
 *   "m.gguf: tensor blk.3.attn_q.weight (model.layers.3.self_attn.q_proj.weight): shape [576,576] in the
 *    file, the package wants [576,640]"
 * KILN_ERR_ARG: NULL arguments, a missing tensor, a shape mismatch, a name with no GGUF mapping;
 * KILN_ERR_UNSUPPORTED: a conversion kiln does not do, an unknown architecture or package dtype, a q/k
 * tensor to un-permute whose rows are not whole blocks (a block-format bias);
 * KILN_ERR_CORRUPT: nbytes disagrees with dtype and shape, or q/k rows do not divide into the heads;
 * KILN_ERR_FORMAT: a GGUF llama file without the head counts needed to un-permute. */
KilnStatus rt_w_check(const RtWeights *w, const RtWeightSpec *specs, int n, char *err, int errlen);

/* The package dtype that takes tensor `name` (a checkpoint name) as the file stores it: its GGUF block
 * format (q4_0, q4_1, q8_0, q4_k, q6_k: copied as stored), or `fallback` for a float tensor (converted at
 * load), into out (outlen bytes). What a recipe compiled for a file of mixed formats (Q4_K_M: q4_k and
 * q6_k Linears) gives each weight (g:file_dtype, docs/RECIPES.md). KILN_ERR_ARG: a missing tensor or a
 * name with no GGUF mapping; KILN_ERR_UNSUPPORTED: a type kiln does not read (q5_k, ...) or an unknown
 * architecture; one line naming the file and the tensor. */
KilnStatus rt_w_stored_dtype(const RtWeights *w, const char *name, const char *fallback, char *out,
                             int outlen, char *err, int errlen);

/* Writes exactly spec->nbytes bytes at dst (any alignment): the tensor converted to spec->dtype, rows
 * un-permuted where needed. Float conversions round to nearest even (overflow to inf; NaN stays NaN,
 * quiet, sign and top payload bits kept); GGUF blocks dequantize exactly as rt_gguf_dequant (gguf-py's
 * f32) and then round; block dtypes are copied byte for byte. Checks the spec as rt_w_check does (same
 * statuses and messages); KILN_ERR_NOMEM when the scratch row cannot be allocated. On failure dst may
 * have been partly written. Safe to call from several threads at once. */
KilnStatus rt_w_read(const RtWeights *w, const RtWeightSpec *spec, void *dst, char *err, int errlen);

/* Random weights for spec (no file: a package run, or tuned, without its checkpoint), exactly
 * spec->nbytes bytes at dst, a pure function of (seed, spec->name): f32 / f16 / bf16 elements N(0, sd) with
 * sd = min(0.08, 1/sqrt(last dim)) for matrices, 0.08 otherwise (sums of four uniforms, 4096 levels),
 * those of a weight whose name contains "norm" 1 + N(0, 0.1); any other dtype (quantized blocks, planar
 * formats) bytes drawn so that every float field they hold is finite and small (each byte below 0x30,
 * with a random sign bit), integer codes anything. */
void rt_w_random(const RtWeightSpec *spec, uint64_t seed, void *dst);

/* Names. rt_w_gguf_name: the GGUF name of a Hugging Face name (model.norm.weight -> output_norm.weight);
 * rt_w_hf_name: the reverse. Each returns 1 and writes a NUL-terminated name to out (outlen bytes), or 0
 * when the name has no mapping or does not fit (out then ""). The table is in docs/WEIGHTS.md. */
int rt_w_gguf_name(const char *hf_name, char *out, int outlen);
int rt_w_hf_name(const char *gguf_name, char *out, int outlen);

/* The un-permutation of llama.cpp's q/k rows. Its HF-to-GGUF converter stores the rows of q_proj
 * (n_head = attention.head_count) and k_proj (attention.head_count_kv) in heads of D = n_rows / n_head
 * rows, each head permuted by w.reshape(n_head, 2, D/2, ...).swapaxes(1, 2): GGUF row h*D + 2*j + s
 * holds HF row h*D + s*D/2 + j (s in {0, 1}, j < D/2), so llama.cpp's interleaved RoPE sees the pairs
 * that HF's rotate-half RoPE uses. Returns the GGUF row that holds HF row hf_row, or -1 when n_rows does
 * not divide into n_head heads of an even size or hf_row is out of range. Rows are indices of the
 * outermost dimension (a matrix row in any format, whole blocks for a block format; a bias element), so
 * un-permuting is moving rows. */
int64_t rt_w_unpermute_row(int64_t hf_row, int64_t n_rows, int64_t n_head);

/* Checks weight data (spec's dtype, spec->nbytes bytes at data, as rt_w_read wrote it) for NaN and Inf:
 * full 0 looks at about 64 values spread over the tensor (for GGUF block formats the f16 scales of about
 * 64 blocks), full 1 at every one. Returns 1 when all it looked at are finite, else 0 with the first
 * bad element's index in *at. FP8 (f8e4m3, and f8g*'s codes then f32 scales: a scale's index counts
 * after the N * K codes) is checked the same way; w4g* counts as finite here (its repacker refuses
 * non-finite scales, rt_quant). */
int rt_w_finite(const RtWeightSpec *spec, const void *data, int full, int64_t *at);

#endif
