/* kfam_impl.h — shared by the kernel-family files only (kfam.c, kfam_<name>.c): spec checks, config
 * merging and the few tile idioms every family uses (outer sums and masks over two 1-D tiles). */
#ifndef KILN_IR_KFAM_IMPL_H
#define KILN_IR_KFAM_IMPL_H

#include "kfam.h"

/* Largest offset any family computes in i32 (offsets are i32; larger tensors are UNSUPPORTED). */
#define KFAM_MAX_I32_OFFSET 2147483647LL

/* The spec's "dtype" (bf16, f16 or f32) into *t; IR_ERR_INPUT otherwise. */
IrStatus kfam_spec_dtype(const KfamSpec *s, KirDtype *t, IrDiag *d);
/* A required integer attribute in [lo, hi] into *v; IR_ERR_INPUT when missing or out of range. */
IrStatus kfam_spec_need(const KfamSpec *s, const char *key, int64_t lo, int64_t hi, int64_t *v, IrDiag *d);

/* The config a kernel is built with: the family's defaults for s at facts t, overridden by every key of
 * cfg (cfg may be NULL). Unknown keys are kept (they print in the kernel's header). */
void kfam_config_merge(const KfamFamily *f, const KfamSpec *s, const KfamFacts *t, const KirConfig *cfg,
                       KirConfig *out);
/* IR_ERR_UNSUPPORTED (INVALID config) when cfg's key is not a positive power of two <= max. */
IrStatus kfam_config_pow2(const KfamSpec *s, const KirConfig *cfg, const char *key, int64_t max, IrDiag *d);

/* Creates the kernel (named by kfam_spec_name) and starts a builder on it. */
IrStatus kfam_kernel_begin(IrArena *a, const KfamSpec *s, const KirConfig *cfg, KirKernel **k, KirBuilder *b,
                           IrDiag *d);
/* Ends the body with ret, checks the builder and verifies the kernel (no target budgets). */
IrStatus kfam_kernel_end(KirBuilder *b, KirKernel **out);

int64_t kfam_pow2_ceil(int64_t x); /* smallest power of two >= x (1 for x <= 1) */
int64_t kfam_clamp(int64_t x, int64_t lo, int64_t hi);
/* The BLOCK of a kernel walking rows of C elements: pow2(C) in [64, 8192] (one pass with the row in
 * registers), 4096-element chunks past 8192 (rmsnorm, quant_rows). */
int64_t kfam_row_block(int64_t C);
int64_t kfam_cdiv(int64_t a, int64_t b);

/* [M] x [N] -> [M,N]: op(x[:,None], y[None,:]). */
KirValue *kfam_outer(KirBuilder *b, KirOp op, KirValue *x, KirValue *y);
KirValue *kfam_rows(KirBuilder *b, KirValue *x, int n); /* [M] -> [M,N], x[:,None] */
KirValue *kfam_cols(KirBuilder *b, KirValue *y, int m); /* [N] -> [M,N], y[None,:] */
/* [M,N] mask from a row mask [M] and a column mask [N], either NULL ("all"); NULL when both are. */
KirValue *kfam_outer_mask(KirBuilder *b, KirValue *mrow, KirValue *mcol, int m, int n);
/* Mask conjunction where NULL means "all lanes": NULL when both are NULL. Shapes must combine. */
KirValue *kfam_and(KirBuilder *b, KirValue *m1, KirValue *m2);

/* ---- linear-layer epilogues, shared by matmul, its split-K epilogue and qmatmul (kfam_matmul.c) ---- */
enum { KFAM_EPI_NONE, KFAM_EPI_BIAS, KFAM_EPI_RESIDUAL, KFAM_EPI_SILU_MUL, KFAM_EPI_PAIR, KFAM_EPI_GROUP };
/* The spec's `epilogue` (none | bias | residual | silu_mul | pair | group; default none) as KFAM_EPI_*, -1 if
 * unknown. */
int kfam_epilogue_of(const KfamSpec *s);
/* 1 for the epilogues with a second weight and a second accumulator (silu_mul, pair). */
int kfam_epilogue_two_weights(int epi);
/* Stores epilogue(acc) for one [rows, cols] f32 tile, rounding to odt (dtype dt for the residual's
 * re-rounding, as HF does): acc2 the second weight's product (silu_mul: up; pair: stored to dst2), bias
 * [N] read at cols/nmask, r, dst and dst2 addressed by offs/mask. trans: acc is the transposed tile
 * [cols, rows] (qmatmul SWAP=1; offs and mask are too). The math is in kfam_matmul.c's note. */
void kfam_matmul_epilogue(KirBuilder *b, int epi, KirDtype dt, KirDtype odt, KirValue *acc, KirValue *acc2,
                          KirValue *bias, KirValue *r, KirValue *dst, KirValue *dst2, KirValue *cols,
                          KirValue *nmask, KirValue *offs, KirValue *mask, int trans);

/* The tiling of a linear layer out[M,N] = x[M,K] @ w[N,K]^T (matmul, qmatmul): grid (cdiv(M, BM),
 * cdiv(N, BN), split); program rows rm [BM] and columns rn [BN] with their masks (nmask NULL when BN
 * divides N), k lanes rk [BK], and the K slice [lo, hi) of the program (split-K: slice pid 2 of ks
 * elements). Emits the same instructions, in the same order, for every family that uses it. */
typedef struct KfamMmTiles {
    KirValue *cK, *cN, *rm, *rn, *rk, *mmask, *nmask;
} KfamMmTiles;
void kfam_mm_tiles(KirBuilder *b, KirValue *M, int64_t N, int64_t K, int bm, int bn, int bk, int split,
                   KfamMmTiles *t);
void kfam_mm_k_range(KirBuilder *b, const KfamMmTiles *t, int split, int64_t ks, KirValue **lo,
                     KirValue **hi);
/* The limits of split-K reduced in the launch (spec ws=1) for `family`'s message: N within the i32
 * workspace; when split, min_bm <= BM <= KFAM_SPLITK_ROWS, BN >= 16, the tiles of M <= KFAM_SPLITK_ROWS
 * rows within the KFAM_SPLITK_SEMS(N) counters, and n_acc * SPLIT_K slices. */
IrStatus kfam_mm_splitk_check(const char *family, int64_t N, int inl, int split, int bm, int min_bm, int bn,
                              int n_acc, IrDiag *d);
/* Split-K reduced in the launch (spec ws=1, kfam.h KFAM_SPLITK_*): stores program z's partial tiles
 * accs[j] (f32 [BM,BN] at c_offs, masked by *c_mask) into slice z + j * split of ws (n_acc * split <=
 * KFAM_SPLITK_MAX), counts the tile's arrivals in sem, and replaces each accs[j] by the sum of its SPLIT_K
 * slices in z order (deterministic); *c_mask is narrowed to the last program to arrive, which owns the
 * epilogue and leaves the counter zero. */
void kfam_mm_splitk_sum(KirBuilder *b, KirValue **accs, int n_acc, KirValue *ws, KirValue *sem, int64_t N,
                        int bn, int split, KirValue *c_offs, KirValue **c_mask);
/* Inside the K loop at kk: when BK does not divide K, ands the k-tail mask into the A mask *am [BM,BK]
 * and the B mask *bmk [BK,BN] (NULL: all); trans: into their transposes [BK,BM] and [BN,BK] (qmatmul
 * SWAP=1). */
void kfam_mm_k_tail(KirBuilder *b, const KfamMmTiles *t, int64_t K, int bm, int bn, int bk, KirValue *kk,
                    KirValue **am, KirValue **bmk, int trans);

/* ---- RoPE (HF rotate_half), shared by rope and kv_write: the math is in kfam_rope.c's note ---- */
/* Checks the spec's rope keys (theta, scaling none|linear|llama3, factor, low_freq_factor,
 * high_freq_factor, original_max_pos) for head dim D; IR_ERR_INPUT with a message otherwise. */
IrStatus kfam_rope_check(const KfamSpec *s, int64_t D, IrDiag *d);
/* cos and sin of pos * inv_freq_i (f32) for pair indices i (i32 [hp], from arange), as [rows, hp] f32
 * tiles into *c and *sn; pos is an f32 scalar. */
void kfam_rope_cos_sin(KirBuilder *b, const KfamSpec *s, KirValue *pos, KirValue *i, int64_t D, int rows,
                       KirValue **c, KirValue **sn);
/* The rotation of the pair halves x1, x2 (f32 tiles): *y1 = x1 c - x2 sn, *y2 = x2 c + x1 sn. The one
 * expression rope and kv_write share, so their results are bit-identical. */
void kfam_rope_rotate(KirBuilder *b, KirValue *x1, KirValue *x2, KirValue *c, KirValue *sn, KirValue **y1,
                      KirValue **y2);

#endif
