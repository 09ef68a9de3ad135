/* cg_cuda_impl.h — shared by the CUDA backend's files only (cg_cuda*.c). docs/BACKENDS.md ("CUDA
 * backend") describes the lowering; this header holds its data model.
 *
 * Pipeline: cg_cuda_analyze (cg_cuda_layout.c: value numbering, axis info, value forms and layouts,
 * dot-loop plans) -> cg_cuda_emit_kernel (cg_cuda_emit.c, with cg_cuda_mem.c, cg_cuda_reduce.c and
 * cg_cuda_dot.c) -> NVRTC (cg_cuda.c).
 *
 * Conventions: a 1-D tile [N] is handled as [1, N] everywhere (dimension 0 of size 1), so coordinates
 * are always (r, c). Every program is one thread block of 32 * warps threads, and every scalar is
 * uniform: all threads compute it.
 */
#ifndef KILN_CG_CUDA_IMPL_H
#define KILN_CG_CUDA_IMPL_H

#include "cg_cuda.h"

enum { CG_CUDA_BIG = 1 << 20, CG_CUDA_MAX_PIPES = 8, CG_CUDA_PIPE_LOADS = 8 };

/* Axis info of a value along each dimension (all powers of two, at most CG_CUDA_BIG): the values come
 * in aligned runs of `contig` consecutive integers (v, v+1, ...) and in aligned runs of `cnst` equal
 * values; `div` divides the first value of every contiguous run (every value when contig is 1). For a
 * scalar: contig 1, cnst BIG, div its divisibility. Used to vectorize memory accesses. */
typedef struct CgCudaAxis {
    int contig[2], cnst[2], div[2];
} CgCudaAxis;

/* Where a value lives. */
typedef enum CgCudaForm {
    CG_CUDA_NONE,   /* no result */
    CG_CUDA_PTR,    /* a pointer (a param, or a loop-carried copy of one) */
    CG_CUDA_SCALAR, /* a uniform scalar: one C variable */
    CG_CUDA_VIRT,   /* a tile that is a pure function of its coordinates (arange, splat and element-wise
                       ops of those): never stored, evaluated where it is used */
    CG_CUDA_REG,    /* a tile in registers, distributed over threads by a layout */
    CG_CUDA_PIPE,   /* a tile load that a pipelined dot loop copies into shared memory (cp.async) */
} CgCudaForm;

typedef enum CgCudaLayoutKind {
    CG_CUDA_BLOCKED, /* chunks of `vec` elements contiguous along dimension `order`, round-robin over threads
                      */
    CG_CUDA_MMA,     /* mma.sync m16n8 accumulator fragments: warps wm x wn, fm x fn fragments per warp */
    CG_CUDA_ROWS,    /* the rows of an MMA layout (wm, wn, fm): a [1, M] (order 1) or [M, 1] (order 0) tile
                        whose element i sits with MMA row i: slot 2f + h holds row (warp / wn) * 16fm + 16f +
                        lane / 4 + 8h, replicated over the 4 lanes of a quad and the wn warps of a row. Row
                        reductions of an MMA tile land here (shuffles only), and broadcasting it back over
                        the columns is register-local: the softmax statistics of attention. */
} CgCudaLayoutKind;

/* A distribution of an [m, n] tile over the threads. Each thread holds `slots` elements; consecutive
 * slots come in chunks of `vec` elements that are consecutive along the chunk dimension (BLOCKED:
 * `order`, MMA: 1). Emitted as `bool L<i>_at(int s, int &r, int &c)` (slot -> coordinates, valid). */
typedef struct CgCudaLayout {
    CgCudaLayoutKind kind;
    int m, n;
    int order, vec, slots, chunks; /* BLOCKED; for MMA vec = 2, order = 1; for ROWS vec = 1 */
    int wm, wn, fm, fn;            /* MMA; ROWS: wm, wn, fm of its MMA layout */
} CgCudaLayout;

typedef struct CgCudaVal {
    CgCudaForm form;
    int lay; /* REG: layout index */
    CgCudaAxis ax;
    int num;             /* the number kir_print gives the value */
    const char *name;    /* C name: "p_x" (param), "s12" (scalar), "v12" (REG tile) */
    const KirInst *def;  /* defining instruction, NULL for block arguments */
    const KirBlock *blk; /* block the value is defined in */
    int uses;
    int dot_a_uses;  /* uses as the A operand of a dot */
    int afeed_uses;  /* uses that reach only dots' A operands through element-wise ops of its shape */
    int expand_uses; /* uses as the operand of an expand (a 1-D tile broadcast along a new dim) */
    int pipe;        /* PIPE: index of its CgCudaPipe + 1 */
} CgCudaVal;

/* One tile load fed through shared memory by a pipelined dot loop. */
typedef struct CgCudaPipeLoad {
    const KirInst *ld;
    int role;       /* 0: A operand [M,K]; 1: B operand [K,N] */
    int cdim;       /* dimension of the tile that is contiguous in global memory (the copy direction) */
    int vw;         /* elements per cp.async (2, 4 or 8: 4, 8 or 16 bytes) */
    int lines, len; /* shared-memory image: `lines` rows of `len` elements along cdim, row pitch len + 8 */
    int trans;      /* operand stored transposed to its mma fragment order: ldmatrix .trans */
    int offset;     /* byte offset of stage 0 in the dynamic shared memory */
    int stage_bytes;
} CgCudaPipeLoad;

/* A load of a pipelined loop's body read where it stands rather than as a piped dot operand (the packed
 * words of a dequantized weight tile, the A tile the generic dot stages), streamed by cp.async into a
 * ring in shared memory: each thread copies the accesses it will read into a ring of its own (access a of
 * thread t at (a * threads + t) * bytes in a stage: no barrier guards it), or (run > 0) the threads copy
 * the distinct elements once, cooperatively, into a shared image. */
typedef struct CgCudaPipeLeaf {
    const KirInst *ld;
    int lay;     /* the result's layout: the slot loop of the copies and of the read */
    int step, w; /* slots per access; elements read per access (1 with step > 1: a run of slots) */
    int run;     /* > 0: a cg_cuda_mma_run load, copied once per run into a shared image of `lines`
                  * rows of `pitch` elements (element (r, c) at r * pitch + c / run), read by
                  * every thread that holds a slot of the run (after the trip's barrier) */
    int lines, pitch;
    int vec;   /* run > 0: distinct elements per copy and per read (consecutive in memory; rows padded by
                * vec elements, by one when vec is 1) */
    int bytes; /* per access: 4, 8 or 16 */
    int sub;   /* run > 0, elements of 1 or 2 bytes (below cp.async's 4): each image element is the
                * aligned 4-byte word holding it, copied only up to the element (never past it: the
                * buffer may end there), and read back shifted by the element's byte in the word */
    int win;   /* 32: a window load (cg_cuda_dot.c mma_window): rows of n / 8 words (pitch n / 8 + 4), 4
                * per copy, copy j taken at column 32j; read once per 32 columns at
                * r * pitch + 4j + lane % 4 */
    int offset, stage_bytes;
} CgCudaPipeLeaf;

/* A canonical dot loop lowered to a software pipeline: `stages` ring buffers per load, cp.async copies
 * for trip i + stages - 1 (overlap: i + stages - 2) issued while trip i computes. */
typedef struct CgCudaPipe {
    const KirInst *loop;
    int stages;
    int wgmma;   /* sm_90a: 128-byte-swizzled images read by wgmma (else padded rows, mma.sync) */
    int overlap; /* 1: a trip's wgmma group is left in flight while the next trip issues (wait_group 1);
                  * copies run stages - 2 trips ahead, so the slot refilled was read two trips back */
    int n_loads;
    CgCudaPipeLoad loads[CG_CUDA_PIPE_LOADS];
    int n_leaves; /* loads streamed beside the piped operands (plan_leaves) */
    CgCudaPipeLeaf leaves[CG_CUDA_PIPE_LOADS];
    int bytes; /* all rings */
} CgCudaPipe;

/* A conversion of a REG value into another layout, valid while its C scope is open. */
typedef struct CgCudaConv {
    int vid, lay, scope;
    const char *name;
} CgCudaConv;

/* A memoized evaluation of a VIRT value (or a recomputed scalar) inside the current element loop. */
typedef struct CgCudaMemo {
    int vid, rsrc, csrc, subst, scope;
    const char *name;
} CgCudaMemo;

/* Coordinate sources for evaluating a VIRT value: its row / column come from r, c or 0. */
enum { CG_CUDA_SRC_R, CG_CUDA_SRC_C, CG_CUDA_SRC_0 };

typedef struct CgCudaGen {
    const KirKernel *k;
    const CgTarget *t;
    IrDiag *d;
    IrArena *a; /* everything below lives here */
    int threads, warps;
    CgCudaVal *v; /* by value id */
    CgCudaLayout *lay;
    int n_lay, cap_lay;
    CgCudaPipe pipes[CG_CUDA_MAX_PIPES];
    int n_pipes;
    const KirInst *forced_dot[CG_CUDA_MAX_PIPES * 4]; /* dots whose result layout a wgmma pipe fixes */
    int forced_lay[CG_CUDA_MAX_PIPES * 4], n_forced;
    int mma_rows; /* a row reduction consumes a dot's result: MMA layouts split rows over warps (wn 1) */
    const KirValue *apk[8];  /* register A operands packed to b16 pairs before a pipelined loop, */
    int apk_scope[8], n_apk; /* valid while the scope they were packed in is open */
    int pipe_bytes;          /* shared memory of the pipelines (at offset 0), rounded to 128 */
    int scratch_bytes;       /* the scratch region after it: conversions, reductions, dot staging */
    /* emission */
    IrBuf body;
    int ind;
    int scope, scope_stack[64], depth;
    CgCudaConv *conv;
    int n_conv, cap_conv;
    CgCudaMemo *memo;
    int n_memo, cap_memo, memo_floor; /* lookups see entries from memo_floor on */
    const KirValue *subst_iv;         /* while emitting cp.async issues: this iv is replaced by subst_name */
    const char *subst_name;
    const KirBlock *subst_body; /* values defined in this body are recomputed under substitution */
    const CgCudaPipe *cur_pipe; /* while emitting a pipelined loop's body: dots read stage `rd` */
    const char *inflight;       /* an overlapped wgmma's accumulator (na registers) still in flight */
    int inflight_n;
    const char **pname; /* declared C names of the params */
    int nc_ok;          /* every store goes through a noalias param */
    int pending_store;  /* a global store may precede the next load: a barrier is due */
    int tmp;            /* counter for fresh names */
    int oom;
} CgCudaGen;

/* ---- cg_cuda_mem.c ---- */
/* How load `in` runs over its result layout's slots: returns the elements read per access, with *step
 * slots per access (more than that when one element fills a run of slots whose offsets are equal);
 * *dyn = 1 when the mask may vary within an access (see access_width). */
int cg_cuda_load_access(CgCudaGen *g, const KirInst *in, int *step, int *dyn);
/* An MMA-layout load whose offsets and mask are constant over aligned runs of R >= 8 along dim 1 (packed
 * words, group scales of a dequantized A operand): R, each thread reading one element per row half and
 * run of each row fragment; else 0. */
int cg_cuda_mma_run(CgCudaGen *g, const KirInst *in);
/* Opens the loop over such a load's accesses in layout lay (u; its first slot s, r, c, ok); returns their
 * number. cg_cuda_mma_run_fill copies `x` to the run's slots of array name. */
int cg_cuda_mma_run_loop(CgCudaGen *g, int lay, int R);
void cg_cuda_mma_run_fill(CgCudaGen *g, const char *name, int R);
/* The C literal of a zero of dtype t (a masked-off load's value). */
const char *cg_cuda_zero_of(KirDtype t);

/* ---- cg_cuda_layout.c ---- */
/* Compile-time facts about an integer tile along its columns (offsets and shifts built from arange,
 * constants, expands, broadcasts and i32 arithmetic). cg_cuda_col_value: the value at column c of a tile
 * that depends on its column only (0 when v is not such a tile); cg_cuda_col_div: a power of two dividing
 * v(r, c) for every row r and every run-time value (1 when unknown); cg_cuda_col_delta: v(r, c2) -
 * v(r, c1), the same for every row (0 when unknown). */
int cg_cuda_col_value(const KirValue *v, int64_t c, int64_t *out);
int64_t cg_cuda_col_div(const CgCudaGen *g, const KirValue *v, int64_t c);
int cg_cuda_col_delta(const KirValue *v, int64_t c1, int64_t c2, int64_t *out);
/* Numbers values, computes axis info, forms and layouts, and plans pipelined dot loops. */
IrStatus cg_cuda_analyze(CgCudaGen *g);
/* Interns a layout, returning its index (-1 on allocation failure, with g->oom set). */
int cg_cuda_layout_intern(CgCudaGen *g, const CgCudaLayout *l);
/* The natural BLOCKED layout of an [m, n] tile: chunks along dim 1, or dim 0 when n == 1 or when the
 * axis info (may be NULL) says the values are contiguous along dim 0 only. */
int cg_cuda_layout_blocked(CgCudaGen *g, int m, int n, const CgCudaAxis *ax);
/* The mma.sync accumulator layout of an [m, n] f32/i32 tile. */
int cg_cuda_layout_mma(CgCudaGen *g, int m, int n);
/* The ROWS layout of MMA layout `mma` ([1, M] when order is 1, [M, 1] when 0), and back: the MMA layout
 * of an [M, n] tile whose rows are those of ROWS layout `rows`. */
int cg_cuda_layout_rows(CgCudaGen *g, int mma, int order);
int cg_cuda_layout_mma_of_rows(CgCudaGen *g, int rows, int n);
/* Tile shape as [m, n] (1-D [N] is [1, N]); scalars are [1, 1]. */
void cg_cuda_shape(const KirType *t, int *m, int *n);
/* 1 when a dot of this operand dtype runs on tensor cores (f16, bf16, f8e4m3 through f16). */
int cg_cuda_dot_is_mma(KirDtype t);

/* ---- cg_cuda_emit.c ---- */
/* Generates the whole program text (header, layouts, kernel) into out and the launch info. */
IrStatus cg_cuda_emit_kernel(CgCudaGen *g, IrBuf *out, CgCudaLaunch *launch);
void cg_cuda_line(CgCudaGen *g, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
const char *cg_cuda_fmt(CgCudaGen *g, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void cg_cuda_open(CgCudaGen *g, const char *fmt, ...) /* prints "<line> {" and opens a scope */
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void cg_cuda_begin(CgCudaGen *g); /* a bare "{" scope */
void cg_cuda_close(CgCudaGen *g); /* "}" */
/* C types of a dtype: in registers (float for every float dtype) and in memory. */
const char *cg_cuda_reg_type(KirDtype t);
const char *cg_cuda_mem_type(KirDtype t);
/* Memory encoding -> register value, and back. */
const char *cg_cuda_from_mem(CgCudaGen *g, KirDtype t, const char *x);
const char *cg_cuda_to_mem(CgCudaGen *g, KirDtype t, const char *x);
/* Opens `for (int s ...)` over the slots of layout `lay` with `r`, `c` and `ok` (coordinates of slot s,
 * valid) declared, resetting the VIRT memo; step is the slot stride (1, or a vector width). */
void cg_cuda_slot_loop(CgCudaGen *g, int lay, int step);
/* The C expression of value v at slot s of layout lay inside an open slot loop (scalars by name, VIRT
 * evaluated at (r, c), REG read from the register array, converted first when in another layout:
 * call cg_cuda_prepare before opening the loop). */
const char *cg_cuda_at(CgCudaGen *g, const KirValue *v, int lay);
/* Evaluates, once in the current scope, the parts of VIRT value v that depend only on the tile's row
 * (line_dim 0: "r" is declared) or column (line_dim 1: "c"), so that later cg_cuda_at calls reuse them. */
void cg_cuda_at_line(CgCudaGen *g, const KirValue *v, int line_dim);
/* Does VIRT value v read memory (a gather through a read-only table)? */
int cg_cuda_has_gather(const CgCudaGen *g, const KirValue *v, int depth);
/* Makes a REG value available in layout lay (a shared-memory conversion, emitted once per scope). */
void cg_cuda_prepare(CgCudaGen *g, const KirValue *v, int lay);
/* A scalar's C expression (recomputed under the cp.async issue substitution when needed). */
const char *cg_cuda_scalar(CgCudaGen *g, const KirValue *v);
/* Evaluates VIRT value v into a register array "v<N>_L<lay>" in layout lay (declared here, one slot
 * loop) and returns its name. */
const char *cg_cuda_materialize(CgCudaGen *g, const KirValue *v, int lay);
/* Declares the register array of a REG value: "<type> vN[slots];". */
void cg_cuda_declare(CgCudaGen *g, const KirValue *v);
/* Emits a block's instructions (not its yield), and a loop's yield. */
void cg_cuda_emit_block(CgCudaGen *g, const KirBlock *blk);
void cg_cuda_emit_yield(CgCudaGen *g, const KirInst *loop);
/* Assigns value x (any form) to `dst`, a variable shaped like `like` (REG array or scalar). */
void cg_cuda_assign(CgCudaGen *g, const char *dst, const KirValue *x, const KirValue *like);
/* 1 when blk (or a loop in it) stores or atomically adds to global memory. */
int cg_cuda_has_store(const KirBlock *blk);
/* Marks that the scratch region is needed up to `bytes` and emits the barrier that precedes writing it. */
void cg_cuda_scratch(CgCudaGen *g, int64_t bytes);

/* The array holding REG value vid converted to layout lay in an open scope, or NULL. */
const char *cg_cuda_conv_find(CgCudaGen *g, int vid, int lay);

/* ---- cg_cuda_mem.c ---- */
void cg_cuda_emit_load(CgCudaGen *g, const KirInst *in, int nc_ok);
void cg_cuda_emit_store(CgCudaGen *g, const KirInst *in); /* store and atomic_add */
/* 1 when every store/atomic in blk goes through a noalias param (rdonly params may use __ldg). */
int cg_cuda_stores_noalias(const CgCudaGen *g, const KirBlock *blk);

/* ---- cg_cuda_reduce.c ---- */
void cg_cuda_emit_reduce(CgCudaGen *g, const KirInst *in);
void cg_cuda_emit_broadcast(CgCudaGen *g, const KirInst *in);
/* Emits the conversion of REG value v into layout lay as array `name` (declared here). */
void cg_cuda_emit_convert(CgCudaGen *g, const KirValue *v, int lay, const char *name);

/* ---- cg_cuda_nib.c ---- */
/* When register A operand x is a dequantized 4-bit tile that can be built in b16 pairs, emits them
 * (`unsigned <name>_pr[slots / 2]`, pair i = slots 2i, 2i + 1, in the current scope) and returns the
 * array's name; else NULL. */
const char *cg_cuda_nib_pairs(CgCudaGen *g, const KirValue *x);

/* ---- cg_cuda_dot.c ---- */
/* Finds the canonical dot loops in k and plans their pipelines (after forms and layouts); a wgmma plan
 * fixes its dots' result layouts (g->forced_*), after which forms and layouts are recomputed and
 * cg_cuda_mark_pipes marks the piped loads again. */
void cg_cuda_plan_pipes(CgCudaGen *g);
void cg_cuda_mark_pipes(CgCudaGen *g);
void cg_cuda_emit_dot(CgCudaGen *g, const KirInst *in);
/* Emits a `for` that has a pipeline plan. */
void cg_cuda_emit_pipelined_for(CgCudaGen *g, const KirInst *in, const CgCudaPipe *p);
const CgCudaPipe *cg_cuda_pipe_of(const CgCudaGen *g, const KirInst *loop);
/* A pipelined loop's leaf load (cur_pipe) read from its ring or image; 0 when `in` is not one. */
int cg_cuda_emit_leaf_load(CgCudaGen *g, const KirInst *in);

#endif
