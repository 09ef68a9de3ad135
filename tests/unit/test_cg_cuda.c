/* test_cg_cuda.c — the CUDA backend on hand-built kernels that cover every kernel-IR op.
 *
 * Everywhere: the generated CUDA C is deterministic (two generations are byte-identical), NVRTC
 * compiles it for sm_80, sm_90a and sm_100a (cubin + PTX; PTX bytes identical across two compiles),
 * and ptxas (when the toolkit's is found) assembles each PTX for its architecture. With a GPU (the
 * cuda executor available): every kernel runs on fresh random inputs with poisoned outputs and every
 * buffer is compared with the interpreter's run on the same inputs (bit-exact, or within a relative L2
 * bound where float evaluation order or library math may differ); the matmul kernels are also checked
 * against a float64 C reference. A failing kernel's source is written to cg_cuda_fail_<name>.cu in the
 * working directory; KILN_CG_CUDA_DUMP=<dir> writes every kernel's IR and source there. Without a GPU the
 * run part is skipped (the compile part still runs); without NVRTC only the source checks run.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg_driver.h"
#include "cuda/cg_cuda.h"
#include "ir/kfam.h"
#include "ir/kir_interp.h"
#include "kfacts.h"
#include "krun.h"
#include "ksweep.h"
#include "kt.h"

/* ---- cases ---- */

/* One kernel argument: buffers have n elements drawn uniformly from [lo, hi] (rounded to the dtype),
 * or poisoned (all bytes 0xff) when out; scalars take i (integers) or lo (f32). */
typedef struct Arg {
    int64_t n;
    double lo, hi;
    int64_t i;
    int out;
} Arg;

typedef struct Case {
    char name[96];
    KirKernel *k;
    Arg arg[KIR_MAX_PARAMS];
    double tol;     /* relative L2 bound for float buffers that differ bitwise; 0: bit-exact */
    int ref_matmul; /* also check out = A @ B against float64: params (A, B, out, M) + spec below */
    int mm_m, mm_n, mm_k, mm_bt;
} Case;

enum { MAX_CASES = 160 };
static Case cases[MAX_CASES];
static int n_cases;
static IrArena *arena;

static Case *add_case(KirKernel *k, const char *name)
{
    KILN_ASSERT(n_cases < MAX_CASES);
    if (!k) {
        KT_CHECK(0, "%s: builder failed", name);
        return NULL;
    }
    Case *c = &cases[n_cases++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->k = k;
    return c;
}

/* ---- builders ---- */

typedef struct B {
    KirBuilder b;
    IrDiag d;
    KirKernel *k;
} B;

static KirBuilder *begin(B *x, const char *name, int warps)
{
    KirConfig cfg = {0};
    kir_config_set(&cfg, "WARPS", warps);
    memset(&x->d, 0, sizeof x->d);
    x->k = kir_kernel_create(arena, name, "test", &cfg);
    kir_builder_init(&x->b, x->k, &x->d);
    return &x->b;
}

static KirKernel *end(B *x)
{
    kir_ret(&x->b);
    if (kir_builder_done(&x->b) != IR_OK) {
        fprintf(stderr, "%s: %s\n", x->k->name, x->d.msg);
        return NULL;
    }
    return x->k;
}

static KirValue *ci(KirBuilder *b, int64_t v)
{
    return kir_const_i32(b, v);
}

static int shape1[1];

static KirValue *splat1(KirBuilder *b, KirValue *s, int n)
{
    shape1[0] = n;
    return kir_splat(b, s, 1, shape1);
}

/* offs = pid * BLOCK + arange(BLOCK), mask = offs < n */
static KirValue *lanes(KirBuilder *b, int block, KirValue *n, KirValue **mask)
{
    KirValue *offs = kir_add(b, kir_mul(b, kir_pid(b, 0), ci(b, block)), kir_arange(b, block));
    *mask = kir_lt(b, offs, n);
    return offs;
}

static KirValue *zero_of(KirBuilder *b, KirDtype t)
{
    if (kir_dtype_is_float(t)) return kir_const_f(b, t, 0);
    KirValue *z = kir_const_i32(b, 0);
    return t == KIR_I32 ? z : kir_cast(b, z, t);
}

enum { N1 = 1000, BLOCK1 = 256 };

/* out = op(x, y) element-wise over n elements. */
static void case_binary(KirOp op, KirDtype t, double lo, double hi, double ylo, double yhi)
{
    B x;
    char name[64];
    snprintf(name, sizeof name, "binary_%s_%s", kir_op_name(op), kir_dtype_name(t));
    KirBuilder *b = begin(&x, name, 2);
    int cmp = op >= KIR_OP_LT && op <= KIR_OP_NE;
    KirValue *px = kir_param(b, "x", kir_ptr(t), KIR_PARAM_RDONLY);
    KirValue *py = kir_param(b, "y", kir_ptr(t), KIR_PARAM_RDONLY);
    KirValue *po = kir_param(b, "out", kir_ptr(cmp ? KIR_I1 : t), 0);
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, n, 1, BLOCK1);
    KirValue *mask, *offs = lanes(b, BLOCK1, n, &mask);
    KirValue *vx = kir_load(b, px, offs, mask, zero_of(b, t));
    KirValue *one = kir_dtype_is_float(t) ? kir_const_f(b, t, 1)
                    : t == KIR_I32        ? ci(b, 1)
                                          : kir_cast(b, ci(b, 1), t);
    KirValue *vy = kir_load(b, py, offs, mask, one); /* masked-off lanes divide by one */
    kir_store(b, po, offs, kir_binary(b, op, vx, vy), mask);
    Case *c = add_case(end(&x), name);
    if (!c) return;
    c->arg[0] = (Arg){N1, lo, hi, 0, 0};
    c->arg[1] = (Arg){N1, ylo, yhi, 0, 0};
    c->arg[2] = (Arg){N1, 0, 0, 0, 1};
    c->arg[3] = (Arg){0, 0, 0, N1, 0};
}

static void case_unary(KirOp op, KirDtype t, double lo, double hi, double tol)
{
    B x;
    char name[64];
    snprintf(name, sizeof name, "unary_%s_%s", kir_op_name(op), kir_dtype_name(t));
    KirBuilder *b = begin(&x, name, 4);
    KirValue *px = kir_param(b, "x", kir_ptr(t), KIR_PARAM_RDONLY | KIR_PARAM_NOALIAS);
    KirValue *po = kir_param(b, "out", kir_ptr(t), KIR_PARAM_NOALIAS);
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, n, 1, 512);
    KirValue *mask, *offs = lanes(b, 512, n, &mask);
    kir_store(b, po, offs, kir_unary(b, op, kir_load(b, px, offs, mask, NULL)), mask);
    Case *c = add_case(end(&x), name);
    if (!c) return;
    c->arg[0] = (Arg){N1, lo, hi, 0, 0};
    c->arg[1] = (Arg){N1, 0, 0, 0, 1};
    c->arg[2] = (Arg){0, 0, 0, N1, 0};
    c->tol = tol;
}

static void case_cast(KirDtype from, KirDtype to, double lo, double hi)
{
    B x;
    char name[64];
    snprintf(name, sizeof name, "cast_%s_%s", kir_dtype_name(from), kir_dtype_name(to));
    KirBuilder *b = begin(&x, name, 1);
    KirValue *px = kir_param(b, "x", kir_ptr(from), KIR_PARAM_RDONLY);
    KirValue *po = kir_param(b, "out", kir_ptr(to), 0);
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, n, 1, 128);
    KirValue *mask, *offs = lanes(b, 128, n, &mask);
    kir_store(b, po, offs, kir_cast(b, kir_load(b, px, offs, mask, NULL), to), mask);
    Case *c = add_case(end(&x), name);
    if (!c) return;
    c->arg[0] = (Arg){N1, lo, hi, 0, 0};
    c->arg[1] = (Arg){N1, 0, 0, 0, 1};
    c->arg[2] = (Arg){0, 0, 0, N1, 0};
}

/* select, splat of a scalar param, rand, float constants of narrow types */
static void case_select_rand(void)
{
    B x;
    KirBuilder *b = begin(&x, "select_rand", 2);
    KirValue *px = kir_param(b, "x", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *py = kir_param(b, "y", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *po = kir_param(b, "out", kir_ptr(KIR_F32), 0);
    KirValue *pr = kir_param(b, "rnd", kir_ptr(KIR_F32), 0);
    KirValue *ph = kir_param(b, "half", kir_ptr(KIR_BF16), 0);
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    KirValue *seed = kir_param(b, "seed", kir_scalar(KIR_I64), 0);
    KirValue *scale = kir_param(b, "scale", kir_scalar(KIR_F32), 0);
    kir_grid(b, 0, n, 1, BLOCK1);
    KirValue *mask, *offs = lanes(b, BLOCK1, n, &mask);
    KirValue *vx = kir_load(b, px, offs, mask, NULL), *vy = kir_load(b, py, offs, mask, NULL);
    KirValue *big = kir_select(b, kir_binary(b, KIR_OP_GT, vx, vy), vx, splat1(b, scale, BLOCK1));
    kir_store(b, po, offs, big, mask);
    kir_store(b, pr, offs, kir_rand(b, seed, offs), mask);
    KirValue *third = kir_const_f(b, KIR_BF16, 1.0 / 3.0);
    kir_store(b, ph, offs, kir_add(b, kir_cast(b, vx, KIR_BF16), third), mask);
    Case *c = add_case(end(&x), "select_rand");
    if (!c) return;
    c->arg[0] = (Arg){N1, -1, 1, 0, 0};
    c->arg[1] = (Arg){N1, -1, 1, 0, 0};
    c->arg[2] = (Arg){N1, 0, 0, 0, 1};
    c->arg[3] = (Arg){N1, 0, 0, 0, 1};
    c->arg[4] = (Arg){N1, 0, 0, 0, 1};
    c->arg[5] = (Arg){0, 0, 0, N1, 0};
    c->arg[6] = (Arg){0, 0, 0, 0x123456789ll, 0};
    c->arg[7] = (Arg){0, 0.25, 0, 0, 0};
}

/* 2-D grid: pid, nprog, scalar stores by one thread, scalar loads, scalar math */
static void case_scalars(void)
{
    B x;
    KirBuilder *b = begin(&x, "scalars_2d_grid", 1);
    KirValue *pin = kir_param(b, "in", kir_ptr(KIR_I32), KIR_PARAM_RDONLY);
    KirValue *po = kir_param(b, "out", kir_ptr(KIR_I32), 0);
    KirValue *pf = kir_param(b, "fout", kir_ptr(KIR_F32), 0);
    KirValue *gx = kir_param(b, "gx", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, gx, 1, 1);
    kir_grid_const(b, 1, 3);
    KirValue *p0 = kir_pid(b, 0), *p1 = kir_pid(b, 1), *n0 = kir_nprog(b, 0), *n1 = kir_nprog(b, 1);
    KirValue *idx = kir_add(b, kir_mul(b, p1, n0), p0);
    KirValue *v = kir_load(b, pin, idx, NULL, NULL);
    KirValue *r = kir_add(b, kir_mul(b, v, ci(b, 1000)), kir_add(b, kir_mul(b, p1, ci(b, 10)), n1));
    r = kir_binary(b, KIR_OP_XOR, r, kir_binary(b, KIR_OP_SHL, ci(b, 1), ci(b, 20)));
    kir_store(b, po, idx, r, NULL);
    KirValue *f = kir_cast(b, r, KIR_F32);
    f = kir_unary(b, KIR_OP_SQRT, kir_unary(b, KIR_OP_ABS, f));
    kir_store(b, pf, idx, f, kir_binary(b, KIR_OP_NE, p0, ci(b, 1)));
    Case *c = add_case(end(&x), "scalars_2d_grid");
    if (!c) return;
    c->arg[0] = (Arg){5 * 3, -100, 100, 0, 0};
    c->arg[1] = (Arg){5 * 3, 0, 0, 0, 1};
    c->arg[2] = (Arg){5 * 3, 0, 0, 0, 1};
    c->arg[3] = (Arg){0, 0, 0, 5, 0};
    c->tol = 1e-6;
}

/* reduce kind along axis of a [m, n] tile (n only when m == 0: a 1-D tile to a scalar) */
static void case_reduce(int m, int n, int axis, KirReduce kind, KirDtype t, int warps)
{
    B x;
    char name[96];
    static const char *const kn[] = {"sum", "max", "min"};
    snprintf(name, sizeof name, "reduce_%s_%s_%dx%d_axis%d_w%d", kn[kind], kir_dtype_name(t), m, n, axis,
             warps);
    KirBuilder *b = begin(&x, name, warps);
    KirValue *px = kir_param(b, "x", kir_ptr(t), KIR_PARAM_RDONLY);
    KirDtype rt = kir_dtype_is_float(t) ? KIR_F32 : (kind == KIR_RED_SUM ? KIR_I32 : t);
    KirValue *po = kir_param(b, "out", kir_ptr(rt), 0);
    KirValue *base = kir_mul(b, kir_pid(b, 0), ci(b, (m ? m : 1) * n));
    int outs;
    if (!m) {
        KirValue *v = kir_load(b, px, kir_add(b, base, kir_arange(b, n)), NULL, NULL);
        kir_store(b, po, kir_pid(b, 0), kir_reduce(b, v, kind, 0), NULL);
        outs = 1;
    } else {
        KirValue *rows = kir_arange(b, m), *cols = kir_arange(b, n);
        KirValue *offs =
            kir_add(b, kir_broadcast(b, kir_expand(b, kir_mul(b, rows, splat1(b, ci(b, n), m)), 1), m, n),
                    kir_broadcast(b, kir_expand(b, cols, 0), m, n));
        offs = kir_add(b, offs, kir_splat(b, base, 2, (int[]){m, n}));
        KirValue *v = kir_load(b, px, offs, NULL, NULL);
        KirValue *r = kir_reduce(b, v, kind, axis);
        outs = axis ? m : n;
        KirValue *oo =
            kir_add(b, kir_arange(b, outs), splat1(b, kir_mul(b, kir_pid(b, 0), ci(b, outs)), outs));
        kir_store(b, po, oo, r, NULL);
    }
    kir_grid_const(b, 0, 3);
    Case *c = add_case(end(&x), name);
    if (!c) return;
    int64_t numel = (int64_t)(m ? m : 1) * n * 3;
    c->arg[0] = (Arg){numel, t == KIR_I8 ? -100 : -50, t == KIR_I8 ? 100 : 50, 0, 0};
    c->arg[1] = (Arg){outs * 3, 0, 0, 0, 1};
    c->tol = kir_dtype_is_float(t) && kind == KIR_RED_SUM ? 1e-5 : 0;
}

/* REG broadcasts both ways, a layout conversion (a column-major load), REG expand */
static void case_broadcast(void)
{
    enum { M = 16, N = 64 };
    B x;
    KirBuilder *b = begin(&x, "broadcast_convert", 4);
    KirValue *px = kir_param(b, "x", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *pw = kir_param(b, "w", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *pv = kir_param(b, "v", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *pt = kir_param(b, "xt", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *po = kir_param(b, "out", kir_ptr(KIR_F32), 0);
    KirValue *rows = kir_arange(b, M), *cols = kir_arange(b, N);
    KirValue *r2 = kir_broadcast(b, kir_expand(b, rows, 1), M, N),
             *c2 = kir_broadcast(b, kir_expand(b, cols, 0), M, N);
    KirValue *offs = kir_add(b, kir_mul(b, r2, kir_splat(b, ci(b, N), 2, (int[]){M, N})), c2);
    KirValue *offt =
        kir_add(b, kir_mul(b, c2, kir_splat(b, ci(b, M), 2, (int[]){M, N})), r2); /* x^T, column-major */
    KirValue *vx = kir_load(b, px, offs, NULL, NULL);
    KirValue *vt = kir_load(b, pt, offt, NULL, NULL);
    KirValue *w = kir_load(b, pw, cols, NULL, NULL), *v = kir_load(b, pv, rows, NULL, NULL);
    KirValue *y = kir_mul(b, vx, kir_broadcast(b, kir_expand(b, w, 0), M, N));
    y = kir_add(b, y, kir_broadcast(b, kir_expand(b, v, 1), M, N));
    y = kir_sub(b, y, vt);
    kir_store(b, po, offs, y, NULL);
    kir_grid_const(b, 0, 1);
    Case *c = add_case(end(&x), "broadcast_convert");
    if (!c) return;
    c->arg[0] = (Arg){M * N, -2, 2, 0, 0};
    c->arg[1] = (Arg){N, -2, 2, 0, 0};
    c->arg[2] = (Arg){M, -2, 2, 0, 0};
    c->arg[3] = (Arg){M * N, -2, 2, 0, 0};
    c->arg[4] = (Arg){M * N, 0, 0, 0, 1};
}

/* gather rows through loaded indices (offsets in registers), masked loads with `other` */
static void case_gather(void)
{
    enum { R = 8, C = 32, V = 50 };
    B x;
    KirBuilder *b = begin(&x, "gather_rows", 2);
    KirValue *pidx = kir_param(b, "idx", kir_ptr(KIR_I32), KIR_PARAM_RDONLY);
    KirValue *ptab = kir_param(b, "table", kir_ptr(KIR_BF16), KIR_PARAM_RDONLY);
    KirValue *po = kir_param(b, "out", kir_ptr(KIR_BF16), 0);
    KirValue *idx = kir_load(b, pidx, kir_arange(b, R), NULL, NULL);
    KirValue *ok = kir_lt(b, idx, splat1(b, ci(b, V), R));
    KirValue *rows = kir_broadcast(b, kir_expand(b, kir_mul(b, idx, splat1(b, ci(b, C), R)), 1), R, C);
    KirValue *okb = kir_broadcast(b, kir_expand(b, ok, 1), R, C);
    KirValue *cols = kir_broadcast(b, kir_expand(b, kir_arange(b, C), 0), R, C);
    KirValue *v = kir_load(b, ptab, kir_add(b, rows, cols), okb, kir_const_f(b, KIR_BF16, -1.5));
    KirValue *oo = kir_add(
        b, kir_broadcast(b, kir_expand(b, kir_mul(b, kir_arange(b, R), splat1(b, ci(b, C), R)), 1), R, C),
        cols);
    kir_store(b, po, oo, v, NULL);
    kir_grid_const(b, 0, 1);
    Case *c = add_case(end(&x), "gather_rows");
    if (!c) return;
    c->arg[0] = (Arg){R, 0, V + 10, 0, 0};
    c->arg[1] = (Arg){V * C, -3, 3, 0, 0};
    c->arg[2] = (Arg){R * C, 0, 0, 0, 1};
}

/* atomics: tile f32 and i32 with colliding addresses, scalar atomic by one thread */
static void case_atomic(void)
{
    B x;
    KirBuilder *b = begin(&x, "atomic_add", 2);
    KirValue *px = kir_param(b, "x", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *pf = kir_param(b, "facc", kir_ptr(KIR_F32), 0);
    KirValue *pi = kir_param(b, "iacc", kir_ptr(KIR_I32), 0);
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, n, 1, BLOCK1);
    KirValue *mask, *offs = lanes(b, BLOCK1, n, &mask);
    KirValue *slot = kir_binary(b, KIR_OP_REM, offs, splat1(b, ci(b, 16), BLOCK1));
    KirValue *v = kir_unary(b, KIR_OP_FLOOR, kir_load(b, px, offs, mask, NULL));
    kir_atomic_add(b, pf, slot, v, mask);
    kir_atomic_add(b, pi, slot, kir_cast(b, v, KIR_I32), mask);
    kir_atomic_add(b, pi, ci(b, 16), ci(b, 1), NULL);
    Case *c = add_case(end(&x), "atomic_add");
    if (!c) return;
    c->arg[0] = (Arg){N1, -20, 20, 0, 0};
    c->arg[1] = (Arg){16, 0, 0, 0, 0};
    c->arg[2] = (Arg){17, 0, 0, 0, 0};
    c->arg[3] = (Arg){0, 0, 0, N1, 0};
}

/* loops: a tile and a scalar carried, a swap of two carried tiles, a store then a load of the same
 * buffer by other threads */
static void case_loops(void)
{
    enum { BLK = 128, C = 1000 };
    B x;
    KirBuilder *b = begin(&x, "loops_store_load", 4);
    KirValue *px = kir_param(b, "x", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *pbuf = kir_param(b, "buf", kir_ptr(KIR_F32), 0);
    KirValue *po = kir_param(b, "out", kir_ptr(KIR_F32), 0);
    KirValue *lane = kir_arange(b, BLK), *cC = ci(b, C);
    KirValue *acc0 = splat1(b, kir_const_f(b, KIR_F32, 0), BLK), *cnt0 = ci(b, 0);
    KirValue *inits[4] = {acc0, cnt0, acc0, splat1(b, kir_const_f(b, KIR_F32, 1), BLK)};
    KirBlock *body = kir_for_begin(b, ci(b, 0), cC, ci(b, BLK), inits, 4, 0);
    KirValue *cols = kir_add(b, body->args[0], lane);
    KirValue *m = kir_lt(b, cols, splat1(b, cC, BLK));
    KirValue *v = kir_load(b, px, cols, m, NULL);
    KirValue *ys[4] = {kir_add(b, body->args[1], v), kir_add(b, body->args[2], ci(b, 1)), body->args[4],
                       body->args[3]};
    kir_store(b, pbuf, cols, kir_mul(b, v, kir_const_f(b, KIR_F32, 2)), m);
    KirInst *loop = kir_for_end(b, ys, 4);
    /* read the buffer back reversed: elements written by other threads */
    KirValue *rev = kir_sub(b, splat1(b, ci(b, C - 1), BLK), lane);
    KirValue *back = kir_load(b, pbuf, rev, NULL, NULL);
    KirValue *s = kir_reduce(b, loop->res[0], KIR_RED_SUM, 0);
    KirValue *res = kir_add(b, kir_add(b, back, splat1(b, s, BLK)), kir_sub(b, loop->res[2], loop->res[3]));
    res = kir_add(b, res, splat1(b, kir_cast(b, loop->res[1], KIR_F32), BLK));
    kir_store(b, po, lane, res, NULL);
    kir_grid_const(b, 0, 1);
    Case *c = add_case(end(&x), "loops_store_load");
    if (!c) return;
    c->arg[0] = (Arg){C, -1, 1, 0, 0};
    c->arg[1] = (Arg){C, 0, 0, 0, 1};
    c->arg[2] = (Arg){BLK, 0, 0, 0, 1};
    c->tol = 1e-5;
}

/* out[M,N] (f32) = a[M,K] @ b[K,N] with one dot of tiles loaded whole (the generic path) */
static void case_dot(KirDtype t, int M, int N, int K, int warps, int bt)
{
    B x;
    char name[96];
    snprintf(name, sizeof name, "dot_%s_%dx%dx%d_w%d%s", kir_dtype_name(t), M, N, K, warps, bt ? "_bt" : "");
    KirBuilder *b = begin(&x, name, warps);
    KirDtype at = t == KIR_I8 ? KIR_I32 : KIR_F32;
    KirValue *pa = kir_param(b, "a", kir_ptr(t), KIR_PARAM_RDONLY);
    KirValue *pb = kir_param(b, "b", kir_ptr(t), KIR_PARAM_RDONLY);
    KirValue *pc = kir_param(b, "c", kir_ptr(at), KIR_PARAM_RDONLY);
    KirValue *po = kir_param(b, "out", kir_ptr(at), 0);
    KirValue *rm = kir_arange(b, M), *rk = kir_arange(b, K), *rn = kir_arange(b, N);
    KirValue *offa =
        kir_add(b, kir_broadcast(b, kir_expand(b, kir_mul(b, rm, splat1(b, ci(b, K), M)), 1), M, K),
                kir_broadcast(b, kir_expand(b, rk, 0), M, K));
    KirValue *offb =
        bt ? kir_add(b, kir_broadcast(b, kir_expand(b, rk, 1), K, N),
                     kir_broadcast(b, kir_expand(b, kir_mul(b, rn, splat1(b, ci(b, K), N)), 0), K, N))
           : kir_add(b, kir_broadcast(b, kir_expand(b, kir_mul(b, rk, splat1(b, ci(b, N), K)), 1), K, N),
                     kir_broadcast(b, kir_expand(b, rn, 0), K, N));
    KirValue *offc =
        kir_add(b, kir_broadcast(b, kir_expand(b, kir_mul(b, rm, splat1(b, ci(b, N), M)), 1), M, N),
                kir_broadcast(b, kir_expand(b, rn, 0), M, N));
    KirValue *va = kir_load(b, pa, offa, NULL, NULL), *vb = kir_load(b, pb, offb, NULL, NULL);
    KirValue *acc = kir_load(b, pc, offc, NULL, NULL);
    kir_store(b, po, offc, kir_dot(b, va, vb, acc), NULL);
    kir_grid_const(b, 0, 1);
    Case *c = add_case(end(&x), name);
    if (!c) return;
    double r = t == KIR_I8 ? 100 : t == KIR_F8E4M3 ? 4 : 1;
    c->arg[0] = (Arg){M * K, -r, r, 0, 0};
    c->arg[1] = (Arg){K * N, -r, r, 0, 0};
    c->arg[2] = (Arg){M * N, t == KIR_I8 ? -1000 : -1, t == KIR_I8 ? 1000 : 1, 0, 0};
    c->arg[3] = (Arg){M * N, 0, 0, 0, 1};
    c->tol = t == KIR_I8 ? 0 : t == KIR_F32 ? 1e-6 : 1e-5;
}

/* The canonical matmul: out[M,N] (bf16) = A[M,K] @ B, B [K,N] row-major or (bt) weights [N,K]; grid
 * over (M, N) tiles; the k loop carries an f32 accumulator; rows past M masked. */
static void case_matmul(KirDtype t, int bm, int bn, int bk, int warps, int stages, int bt, int M, int N,
                        int K)
{
    B x;
    char name[96];
    snprintf(name, sizeof name, "matmul_%s_%dx%dx%d_w%d_s%d%s", kir_dtype_name(t), bm, bn, bk, warps, stages,
             bt ? "_bt" : "");
    KirBuilder *b = begin(&x, name, warps);
    KirValue *pa = kir_param(b, "A", kir_ptr(t), KIR_PARAM_RDONLY | KIR_PARAM_NOALIAS);
    KirValue *pb = kir_param(b, "B", kir_ptr(t), KIR_PARAM_RDONLY | KIR_PARAM_NOALIAS);
    KirValue *po = kir_param(b, "out", kir_ptr(t), KIR_PARAM_NOALIAS);
    KirValue *pm = kir_param(b, "M", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, pm, 1, bm);
    kir_grid_const(b, 1, N / bn);
    KirValue *rows = kir_add(b, splat1(b, kir_mul(b, kir_pid(b, 0), ci(b, bm)), bm), kir_arange(b, bm));
    KirValue *cols = kir_add(b, splat1(b, kir_mul(b, kir_pid(b, 1), ci(b, bn)), bn), kir_arange(b, bn));
    KirValue *rk = kir_arange(b, bk);
    KirValue *rmask = kir_broadcast(b, kir_expand(b, kir_lt(b, rows, splat1(b, pm, bm)), 1), bm, bk);
    int accs[2] = {bm, bn};
    KirValue *acc0 = kir_splat(b, kir_const_f(b, KIR_F32, 0), 2, accs);
    KirBlock *body = kir_for_begin(b, ci(b, 0), ci(b, K), ci(b, bk), &acc0, 1, stages);
    KirValue *kk = kir_add(b, splat1(b, body->args[0], bk), rk);
    KirValue *offa =
        kir_add(b, kir_broadcast(b, kir_expand(b, kir_mul(b, rows, splat1(b, ci(b, K), bm)), 1), bm, bk),
                kir_broadcast(b, kir_expand(b, kk, 0), bm, bk));
    KirValue *offb =
        bt ? kir_add(b, kir_broadcast(b, kir_expand(b, kk, 1), bk, bn),
                     kir_broadcast(b, kir_expand(b, kir_mul(b, cols, splat1(b, ci(b, K), bn)), 0), bk, bn))
           : kir_add(b, kir_broadcast(b, kir_expand(b, kir_mul(b, kk, splat1(b, ci(b, N), bk)), 1), bk, bn),
                     kir_broadcast(b, kir_expand(b, cols, 0), bk, bn));
    KirValue *va = kir_load(b, pa, offa, rmask, kir_const_f(b, t, 0));
    KirValue *vb = kir_load(b, pb, offb, NULL, NULL);
    KirValue *acc = kir_dot(b, va, vb, body->args[1]);
    KirInst *loop = kir_for_end(b, &acc, 1);
    KirValue *offc =
        kir_add(b, kir_broadcast(b, kir_expand(b, kir_mul(b, rows, splat1(b, ci(b, N), bm)), 1), bm, bn),
                kir_broadcast(b, kir_expand(b, cols, 0), bm, bn));
    KirValue *cmask = kir_broadcast(b, kir_expand(b, kir_lt(b, rows, splat1(b, pm, bm)), 1), bm, bn);
    kir_store(b, po, offc, kir_cast(b, loop->res[0], t), cmask);
    Case *c = add_case(end(&x), name);
    if (!c) return;
    c->arg[0] = (Arg){(int64_t)M * K, -1, 1, 0, 0};
    c->arg[1] = (Arg){(int64_t)K * N, -1, 1, 0, 0};
    c->arg[2] = (Arg){(int64_t)M * N, 0, 0, 0, 1};
    c->arg[3] = (Arg){0, 0, 0, M, 0};
    c->tol = 1e-2;
    c->ref_matmul = 1;
    c->mm_m = M;
    c->mm_n = N;
    c->mm_k = K;
    c->mm_bt = bt;
}

/* Attention-shaped: s = q @ k^T (MMA layout), row max and sum (reduce of an MMA tile), p = exp(s - max)
 * (element-wise on the MMA layout with a REG broadcast converted into it), o = p @ v / sum (a dot whose
 * operand is an MMA-layout tile), plus a bias loaded in a BLOCKED layout added to s. */
static void case_attention(void)
{
    enum { M = 16, N = 32, D = 64 };
    B x;
    KirBuilder *b = begin(&x, "attention_tile", 4);
    KirValue *pq = kir_param(b, "q", kir_ptr(KIR_BF16), KIR_PARAM_RDONLY);
    KirValue *pk = kir_param(b, "k", kir_ptr(KIR_BF16), KIR_PARAM_RDONLY);
    KirValue *pv = kir_param(b, "v", kir_ptr(KIR_BF16), KIR_PARAM_RDONLY);
    KirValue *pbias = kir_param(b, "bias", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *po = kir_param(b, "out", kir_ptr(KIR_F32), 0);
    KirValue *rm = kir_arange(b, M), *rn = kir_arange(b, N), *rd = kir_arange(b, D);
    KirValue *oq =
        kir_add(b, kir_broadcast(b, kir_expand(b, kir_mul(b, rm, splat1(b, ci(b, D), M)), 1), M, D),
                kir_broadcast(b, kir_expand(b, rd, 0), M, D));
    KirValue *okt = kir_add(b, kir_broadcast(b, kir_expand(b, rd, 1), D, N), /* k is [N, D]: k^T [D, N] */
                            kir_broadcast(b, kir_expand(b, kir_mul(b, rn, splat1(b, ci(b, D), N)), 0), D, N));
    KirValue *ov =
        kir_add(b, kir_broadcast(b, kir_expand(b, kir_mul(b, rn, splat1(b, ci(b, D), N)), 1), N, D),
                kir_broadcast(b, kir_expand(b, rd, 0), N, D));
    KirValue *ob =
        kir_add(b, kir_broadcast(b, kir_expand(b, kir_mul(b, rm, splat1(b, ci(b, N), M)), 1), M, N),
                kir_broadcast(b, kir_expand(b, rn, 0), M, N));
    int sh[2] = {M, N}, shd[2] = {M, D};
    KirValue *sc = kir_dot(b, kir_load(b, pq, oq, NULL, NULL), kir_load(b, pk, okt, NULL, NULL),
                           kir_splat(b, kir_const_f(b, KIR_F32, 0), 2, sh));
    sc = kir_add(b, sc, kir_load(b, pbias, ob, NULL, NULL));
    KirValue *mx = kir_reduce(b, sc, KIR_RED_MAX, 1);
    KirValue *pexp = kir_unary(b, KIR_OP_EXP, kir_sub(b, sc, kir_broadcast(b, kir_expand(b, mx, 1), M, N)));
    KirValue *l = kir_reduce(b, pexp, KIR_RED_SUM, 1);
    KirValue *o = kir_dot(b, kir_cast(b, pexp, KIR_BF16), kir_load(b, pv, ov, NULL, NULL),
                          kir_splat(b, kir_const_f(b, KIR_F32, 0), 2, shd));
    o = kir_div(b, o, kir_broadcast(b, kir_expand(b, l, 1), M, D));
    kir_store(b, po, oq, o, NULL);
    kir_grid_const(b, 0, 1);
    Case *c = add_case(end(&x), "attention_tile");
    if (!c) return;
    c->arg[0] = (Arg){M * D, -1, 1, 0, 0};
    c->arg[1] = (Arg){N * D, -1, 1, 0, 0};
    c->arg[2] = (Arg){N * D, -1, 1, 0, 0};
    c->arg[3] = (Arg){M * N, -1, 1, 0, 0};
    c->arg[4] = (Arg){M * D, 0, 0, 0, 1};
    c->tol = 1e-2;
}

/* Stores of virtual tiles (iota, a constant) as vectors, and scalar params of narrow types. */
static void case_virt_store(void)
{
    B x;
    KirBuilder *b = begin(&x, "virt_store_params", 2);
    KirValue *pi = kir_param(b, "iota", kir_ptr(KIR_I32), 0);
    KirValue *ph = kir_param(b, "h", kir_ptr(KIR_BF16), 0);
    KirValue *scale = kir_param(b, "scale", kir_scalar(KIR_BF16), 0);
    KirValue *flag = kir_param(b, "flag", kir_scalar(KIR_I1), 0);
    KirValue *lane = kir_arange(b, 256);
    KirValue *offs = kir_add(b, splat1(b, kir_mul(b, kir_pid(b, 0), ci(b, 256)), 256), lane);
    kir_store(b, pi, offs, kir_mul(b, offs, splat1(b, ci(b, 3), 256)), NULL);
    KirValue *v = kir_select(b, flag, kir_cast(b, lane, KIR_BF16), splat1(b, scale, 256));
    kir_store(b, ph, offs, kir_add(b, v, splat1(b, scale, 256)), NULL);
    kir_grid_const(b, 0, 2);
    Case *c = add_case(end(&x), "virt_store_params");
    if (!c) return;
    c->arg[0] = (Arg){512, 0, 0, 0, 1};
    c->arg[1] = (Arg){512, 0, 0, 0, 1};
    c->arg[2] = (Arg){0, 0, 0, 0x3fc0, 0}; /* bf16 1.5 */
    c->arg[3] = (Arg){0, 0, 0, 1, 0};
}

/* kernel families, when their builders are in this build */
static Case *case_family_cfg(const char *fam, KfamSpec s, const Arg *args, int n_args, double tol,
                             const KirConfig *over)
{
    const KfamFamily *f = kfam_find(fam);
    if (!f) return NULL;
    KirConfig cfg = {0};
    f->defaults(&s, kfacts_sm90(), &cfg);
    for (int i = 0; over && i < over->n; i++)
        kir_config_set(&cfg, over->key[i], over->val[i]);
    KirKernel *k = NULL;
    IrDiag d = {0};
    if (f->build(arena, &s, kfacts_sm90(), &cfg, &k, &d) != IR_OK) {
        KT_CHECK(0, "%s: %s", fam, d.msg);
        return NULL;
    }
    IrBuf cn = {0};
    kir_config_print(&cfg, &cn);
    char name[96];
    snprintf(name, sizeof name, "%.40s_%.50s", k->name, cn.s ? cn.s : "");
    ir_buf_free(&cn);
    for (char *p = name; *p; p++)
        if (*p == ' ' || *p == '=') *p = '_';
    Case *c = add_case(k, name);
    if (!c) return NULL;
    for (int i = 0; i < n_args; i++)
        c->arg[i] = args[i];
    c->tol = tol;
    return c;
}

static void case_family(const char *fam, KfamSpec s, const Arg *args, int n_args, double tol)
{
    case_family_cfg(fam, s, args, n_args, tol, NULL);
}

/* The matmul family's K loop must be the canonical dot loop the backend pipelines (wgmma on sm_90a when
 * the tiles allow). */
static void case_matmul_family(const char *epi, int N, int K, int M, int bm, int bn, int bk, int warps,
                               int split, const char *expect)
{
    KfamSpec s = kfam_spec("matmul");
    kfam_spec_int(&s, "N", N);
    kfam_spec_int(&s, "K", K);
    kfam_spec_str(&s, "dtype", "bf16");
    kfam_spec_str(&s, "epilogue", epi);
    KirConfig over = {0};
    if (bm) {
        kir_config_set(&over, "BM", bm);
        kir_config_set(&over, "BN", bn);
        kir_config_set(&over, "BK", bk);
        kir_config_set(&over, "WARPS", warps);
        kir_config_set(&over, "STAGES", 3);
    }
    kir_config_set(&over, "SPLIT_K", split);
    Arg a[6];
    int n = 0, pair = !strcmp(epi, "pair"), two = pair || !strcmp(epi, "silu_mul");
    a[n++] = (Arg){(int64_t)M * K, -1, 1, 0, 0};
    a[n++] = (Arg){(int64_t)N * K, -1, 1, 0, 0};
    if (two) a[n++] = (Arg){(int64_t)N * K, -1, 1, 0, 0};
    if (split > 1)
        a[n++] = (Arg){(int64_t)M * N, 0, 0, 0, 0}; /* ws, zeroed */
    else
        a[n++] = (Arg){(int64_t)M * N, 0, 0, 0, 1};
    if (pair) a[n++] = (Arg){(int64_t)M * N, 0, 0, 0, 1};
    a[n++] = (Arg){0, 0, 0, M, 0};
    Case *c = case_family_cfg("matmul", s, a, n, 1e-2, &over);
    if (!c) return;
    IrBuf src = {0};
    IrDiag d = {0};
    cg_cuda_source(c->k, cg_target_find("sm_90a"), &src, &d);
    KT_CHECK(src.s && strstr(src.s, expect), "%s: the K loop is not lowered as \"%s\"", c->name, expect);
    ir_buf_free(&src);
}

static void build_cases(void)
{
    static const KirOp fops[] = {KIR_OP_ADD, KIR_OP_SUB, KIR_OP_MUL, KIR_OP_DIV, KIR_OP_MIN, KIR_OP_MAX};
    for (unsigned i = 0; i < sizeof fops / sizeof fops[0]; i++) {
        case_binary(fops[i], KIR_F32, -10, 10, 0.5, 10);
        case_binary(fops[i], KIR_BF16, -10, 10, 0.5, 10);
    }
    case_binary(KIR_OP_ADD, KIR_F16, -10, 10, -10, 10);
    case_binary(KIR_OP_MUL, KIR_F16, -10, 10, -10, 10);
    static const KirOp iops[] = {KIR_OP_ADD, KIR_OP_SUB, KIR_OP_MUL, KIR_OP_DIV, KIR_OP_REM, KIR_OP_MIN,
                                 KIR_OP_MAX, KIR_OP_AND, KIR_OP_OR,  KIR_OP_XOR, KIR_OP_SHL, KIR_OP_SHR};
    for (unsigned i = 0; i < sizeof iops / sizeof iops[0]; i++) {
        int sh = iops[i] == KIR_OP_SHL || iops[i] == KIR_OP_SHR,
            dv = iops[i] == KIR_OP_DIV || iops[i] == KIR_OP_REM;
        case_binary(iops[i], KIR_I32, -100000, 100000, sh ? 0 : dv ? 1 : -100000, sh ? 31 : 100000);
    }
    case_binary(KIR_OP_ADD, KIR_I8, -128, 127, -128, 127);
    case_binary(KIR_OP_MUL, KIR_I8, -128, 127, -128, 127);
    case_binary(KIR_OP_SHR, KIR_I8, -128, 127, 0, 7);
    case_binary(KIR_OP_SHR, KIR_U8, 0, 255, 0, 7);
    case_binary(KIR_OP_ADD, KIR_I64, -1e15, 1e15, -1e15, 1e15);
    static const KirOp cops[] = {KIR_OP_LT, KIR_OP_LE, KIR_OP_GT, KIR_OP_GE, KIR_OP_EQ, KIR_OP_NE};
    for (unsigned i = 0; i < sizeof cops / sizeof cops[0]; i++) {
        case_binary(cops[i], KIR_F32, -3, 3, -3, 3);
        case_binary(cops[i], KIR_I32, -3, 3, -3, 3);
    }
    case_binary(KIR_OP_AND, KIR_I1, 0, 1, 0, 1);
    case_binary(KIR_OP_XOR, KIR_I1, 0, 1, 0, 1);
    case_unary(KIR_OP_NEG, KIR_F32, -10, 10, 0);
    case_unary(KIR_OP_ABS, KIR_BF16, -10, 10, 0);
    case_unary(KIR_OP_NEG, KIR_I32, -1000, 1000, 0);
    case_unary(KIR_OP_ABS, KIR_I32, -1000, 1000, 0);
    case_unary(KIR_OP_EXP, KIR_F32, -10, 10, 1e-6);
    case_unary(KIR_OP_EXP2, KIR_F32, -10, 10, 1e-6);
    case_unary(KIR_OP_LOG, KIR_F32, 0.01, 100, 1e-6);
    case_unary(KIR_OP_SQRT, KIR_F32, 0, 100, 1e-7);
    case_unary(KIR_OP_RSQRT, KIR_F32, 0.01, 100, 1e-6);
    case_unary(KIR_OP_SIN, KIR_F32, -10, 10, 1e-6);
    case_unary(KIR_OP_COS, KIR_F32, -10, 10, 1e-6);
    case_unary(KIR_OP_FLOOR, KIR_F32, -10, 10, 0);
    case_cast(KIR_F32, KIR_BF16, -100, 100);
    case_cast(KIR_F32, KIR_F16, -100, 100);
    case_cast(KIR_F32, KIR_F8E4M3, -600, 600);
    case_cast(KIR_BF16, KIR_F32, -100, 100);
    case_cast(KIR_F8E4M3, KIR_F32, -448, 448);
    case_cast(KIR_F16, KIR_BF16, -100, 100);
    case_cast(KIR_F32, KIR_I32, -1e5, 1e5);
    case_cast(KIR_F32, KIR_I8, -300, 300);
    case_cast(KIR_F32, KIR_U8, -300, 300);
    case_cast(KIR_F32, KIR_I1, -1, 1);
    case_cast(KIR_I32, KIR_F32, -1e7, 1e7);
    case_cast(KIR_I32, KIR_BF16, -1000, 1000);
    case_cast(KIR_I32, KIR_I64, -1e9, 1e9);
    case_cast(KIR_I64, KIR_I32, -1e12, 1e12);
    case_cast(KIR_I32, KIR_I8, -1000, 1000);
    case_cast(KIR_U8, KIR_I32, 0, 255);
    case_select_rand();
    case_scalars();
    case_reduce(8, 64, 1, KIR_RED_SUM, KIR_F32, 2);    /* lane groups */
    case_reduce(8, 64, 0, KIR_RED_SUM, KIR_F32, 2);    /* column partials */
    case_reduce(4, 1024, 1, KIR_RED_MAX, KIR_F32, 4);  /* per-warp partials */
    case_reduce(4, 1024, 0, KIR_RED_MIN, KIR_BF16, 4); /* one partial per column */
    case_reduce(6, 96, 1, KIR_RED_SUM, KIR_F32, 4);    /* one word per chunk */
    case_reduce(6, 96, 0, KIR_RED_SUM, KIR_I32, 4);    /* one word per element */
    case_reduce(0, 100, 0, KIR_RED_SUM, KIR_F32, 1);   /* 1-D to a scalar */
    case_reduce(0, 4096, 0, KIR_RED_MAX, KIR_I32, 8);
    case_reduce(0, 256, 0, KIR_RED_SUM, KIR_I8, 2);
    case_broadcast();
    case_gather();
    case_atomic();
    case_loops();
    case_attention();
    case_virt_store();
    case_dot(KIR_BF16, 32, 32, 32, 4, 0);
    case_dot(KIR_BF16, 20, 12, 24, 2, 1); /* padded to whole fragments */
    case_dot(KIR_F16, 64, 32, 32, 4, 1);
    case_dot(KIR_F8E4M3, 16, 16, 32, 1, 0);
    case_dot(KIR_F32, 16, 8, 12, 2, 0);
    case_dot(KIR_I8, 8, 16, 20, 2, 0);
    case_matmul(KIR_BF16, 64, 64, 32, 4, 3, 0, 100, 128, 256);
    case_matmul(KIR_BF16, 64, 64, 32, 4, 3, 1, 100, 128, 256);
    case_matmul(KIR_F16, 32, 64, 32, 4, 1, 1, 33, 64, 96);
    case_matmul(KIR_BF16, 128, 128, 32, 8, 4, 1, 256, 256, 512);
    case_matmul(KIR_BF16, 16, 64, 64, 4, 4, 1, 5, 128, 256); /* decode-shaped */
    /* wgmma on sm_90a (K-major A and B, BK % 64 == 0, BM = 16 * warps); mma.sync elsewhere */
    case_matmul(KIR_BF16, 128, 128, 64, 8, 3, 1, 200, 256, 512);
    case_matmul(KIR_BF16, 64, 64, 64, 4, 1, 1, 70, 128, 192);
    case_matmul(KIR_F16, 64, 256, 128, 4, 2, 1, 64, 256, 384);
    {
        KfamSpec s = kfam_spec("rmsnorm");
        kfam_spec_int(&s, "C", 4096);
        kfam_spec_str(&s, "dtype", "bf16");
        kfam_spec_float(&s, "eps", 1e-5);
        Arg a[4] = {{5 * 4096, -2, 2, 0, 0}, {4096, -1, 1, 0, 0}, {5 * 4096, 0, 0, 0, 1}, {0, 0, 0, 5, 0}};
        case_family("rmsnorm", s, a, 4, 1e-2);
    }
    if (kfam_find("matmul")) {
        case_matmul_family("silu_mul", 256, 320, 50, 0, 0, 0, 0, 1, "pipelined dot loop");
        case_matmul_family("pair", 256, 320, 50, 0, 0, 0, 0, 1, "pipelined dot loop");
        case_matmul_family("none", 256, 512, 100, 64, 128, 64, 4, 1, "wgmma m64nNk16");
        case_matmul_family("none", 192, 256, 37, 32, 64, 32, 4, 2, "pipelined dot loop");
    }
    {
        KfamSpec s = kfam_spec("embedding");
        kfam_spec_int(&s, "C", 320);
        kfam_spec_int(&s, "V", 100);
        kfam_spec_str(&s, "dtype", "bf16");
        Arg a[4] = {{7, -5, 110, 0, 0}, {100 * 320, -2, 2, 0, 0}, {7 * 320, 0, 0, 0, 1}, {0, 0, 0, 7, 0}};
        case_family("embedding", s, a, 4, 0);
    }
}

/* ---- checks without a GPU ---- */

static void save_source(const Case *c, const CgTarget *t, const char *dir)
{
    IrBuf src = {0};
    IrDiag d = {0};
    char path[512];
    if (dir)
        snprintf(path, sizeof path, "%s/%s_%s.cu", dir, c->name, t->name);
    else
        snprintf(path, sizeof path, "cg_cuda_fail_%s_%s.cu", c->name, t->name);
    cg_cuda_source(c->k, t, &src, &d);
    FILE *f = fopen(path, "w");
    if (f) {
        IrBuf ir = {0};
        kir_print(c->k, &ir);
        fprintf(f, "/* kernel IR:\n%s*/\n%s", ir.s ? ir.s : "", src.s ? src.s : d.msg);
        ir_buf_free(&ir);
        fclose(f);
        if (!dir) fprintf(stderr, "  generated source kept in %s\n", path);
    }
    ir_buf_free(&src);
}

static const char *find_ptxas(void)
{
    static const char *const paths[] = {"/usr/local/cuda/bin/ptxas", "/usr/local/cuda-13.0/bin/ptxas"};
    for (unsigned i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (access(paths[i], X_OK) == 0) return paths[i];
    return NULL;
}

static int ptxas_ok(const char *ptxas, const CgBinary *ptx, const char *arch)
{
    char in[] = "/tmp/kiln_cg_cuda_XXXXXX";
    int fd = mkstemp(in);
    if (fd < 0) return 1;
    FILE *f = fdopen(fd, "w");
    int ok = f && fwrite(ptx->data, 1, ptx->size, f) == ptx->size;
    if (f) fclose(f);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s -arch=%s %s -o /dev/null 2>&1", ptxas, arch, in);
    ok = ok && system(cmd) == 0;
    unlink(in);
    return ok;
}

/* The reduced tier (the sanitized build, ksweep.h) compiles for sm_90a only, once: NVRTC is the same
 * library in both builds, and the Release build compiles every target and checks determinism. */
static void check_compile(const Case *c, const char *ptxas, int nvrtc)
{
    static const char *const all[] = {"sm_80", "sm_90a", "sm_100a"}, *const reduced[] = {"sm_90a"};
    const char *const *targets = ksweep_reduced() ? reduced : all;
    unsigned n_targets = ksweep_reduced() ? 1 : 3;
    IrBuf s1 = {0}, s2 = {0};
    IrDiag d = {0};
    const CgTarget *t90 = cg_target_find("sm_90a");
    IrStatus st = cg_cuda_source(c->k, t90, &s1, &d);
    KT_CHECK(st == IR_OK, "%s: source: %s", c->name, d.msg);
    cg_cuda_source(c->k, t90, &s2, &d);
    KT_CHECK(s1.len == s2.len && s1.s && s2.s && !memcmp(s1.s, s2.s, s1.len),
             "%s: source is not deterministic", c->name);
    ir_buf_free(&s1);
    ir_buf_free(&s2);
    for (unsigned i = 0; nvrtc && i < n_targets; i++) {
        const CgTarget *t = cg_target_find(targets[i]);
        CgBinary cubin, ptx;
        memset(&d, 0, sizeof d);
        st = cg_cuda_compile(c->k, t, &cubin, &ptx, &d);
        KT_CHECK(st == IR_OK, "%s: %s: %s", c->name, t->name, d.msg);
        if (st != IR_OK) {
            save_source(c, t, NULL);
            continue;
        }
        KT_CHECK(cubin.size > 0 && !strcmp(cubin.format, "cubin") && !strcmp(ptx.format, "ptx"),
                 "%s: outputs", c->name);
        if (ptxas)
            KT_CHECK(ptxas_ok(ptxas, &ptx, t->name), "%s: ptxas -arch=%s rejects the PTX", c->name, t->name);
        if (t == t90 && !ksweep_reduced()) {
            CgBinary again;
            st = cg_cuda_compile(c->k, t, NULL, &again, &d);
            KT_CHECK(st == IR_OK && again.size == ptx.size && !memcmp(again.data, ptx.data, ptx.size),
                     "%s: PTX is not deterministic", c->name);
            cg_binary_free(&again);
        }
        cg_binary_free(&cubin);
        cg_binary_free(&ptx);
    }
}

/* ---- runs on the GPU ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_f16(float f) /* finite |f| < 65504 */
{
    double a = fabs(f);
    unsigned s = f < 0 ? 0x8000 : 0, h;
    if (a < ldexp(1, -14))
        h = (unsigned)rint(a * ldexp(1, 24));
    else {
        int e;
        double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
        unsigned mant = (unsigned)rint((2 * m - 1) * 1024);
        if (mant == 1024) mant = 0, e++;
        h = ((unsigned)(e - 1 + 15) << 10) | mant;
    }
    return (uint16_t)(h | s);
}

static double f16_to_f64(uint16_t h)
{
    unsigned e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, (int)e - 25) : ldexp(m, -24);
    return h >> 15 ? -v : v;
}

static double f8_to_f64(uint8_t b)
{
    unsigned e = (b >> 3) & 15, m = b & 7;
    double v = e ? ldexp(8 + m, (int)e - 10) : ldexp(m, -9);
    return b >> 7 ? -v : v;
}

static uint8_t f64_to_f8(double x) /* nearest of the 254 finite codes, by search: test data only */
{
    uint8_t best = 0;
    double bd = INFINITY;
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7f) == 0x7f) continue;
        double d = fabs(f8_to_f64((uint8_t)c) - x);
        if (d < bd) bd = d, best = (uint8_t)c;
    }
    return best;
}

static void fill(KirDtype t, void *p, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++) {
        double x = lo + (hi - lo) * urand();
        switch (t) {
        case KIR_F32: ((float *)p)[i] = (float)x; break;
        case KIR_BF16: ((uint16_t *)p)[i] = f32_to_bf16((float)x); break;
        case KIR_F16: ((uint16_t *)p)[i] = f32_to_f16((float)x); break;
        case KIR_F8E4M3: ((uint8_t *)p)[i] = f64_to_f8(x); break;
        case KIR_I1: ((uint8_t *)p)[i] = x > 0.5; break;
        case KIR_I8: ((int8_t *)p)[i] = (int8_t)floor(x); break;
        case KIR_U8: ((uint8_t *)p)[i] = (uint8_t)floor(x); break;
        case KIR_I32: ((int32_t *)p)[i] = (int32_t)floor(x); break;
        case KIR_I64: ((int64_t *)p)[i] = (int64_t)floor(x); break;
        default: break;
        }
    }
}

static double elem(KirDtype t, const void *p, int64_t i)
{
    switch (t) {
    case KIR_F32: return ((const float *)p)[i];
    case KIR_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case KIR_F16: return f16_to_f64(((const uint16_t *)p)[i]);
    case KIR_F8E4M3: return f8_to_f64(((const uint8_t *)p)[i]);
    case KIR_I1:
    case KIR_U8: return ((const uint8_t *)p)[i];
    case KIR_I8: return ((const int8_t *)p)[i];
    case KIR_I32: return ((const int32_t *)p)[i];
    default: return (double)((const int64_t *)p)[i];
    }
}

/* Compares buffer `got` with `want` (n elements of t): bit-exact, or within relative L2 tol for floats. */
static int compare(const char *what, KirDtype t, const void *want, const void *got, int64_t n, double tol)
{
    size_t bytes = (size_t)n * (size_t)kir_dtype_bytes(t);
    if (!memcmp(want, got, bytes)) return 1;
    double num = 0, den = 0;
    int64_t bad = -1;
    for (int64_t i = 0; i < n; i++) {
        double a = elem(t, want, i), b = elem(t, got, i);
        if (a != b && (!kir_dtype_is_float(t) || tol == 0 || a != a || b != b || isinf(a) || isinf(b))) {
            if (bad < 0 && !(a != a && b != b)) bad = i;
            continue;
        }
        num += (a - b) * (a - b);
        den += a * a;
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    if (bad >= 0 || rel > tol) {
        int64_t i = bad >= 0 ? bad : 0;
        fprintf(stderr, "  %s: element %lld: want %.9g got %.9g (rel L2 %.3g, tol %.3g)\n", what,
                (long long)i, elem(t, want, i), elem(t, got, i), rel, tol);
        return 0;
    }
    return 1;
}

/* float64 A @ B against out (bf16/f16), rows < M */
static int check_matmul(const Case *c, void *const *buf)
{
    KirDtype t = c->k->params[0].type.dtype;
    int M = c->mm_m, N = c->mm_n, K = c->mm_k;
    double num = 0, den = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += elem(t, buf[0], (int64_t)i * K + k) *
                     elem(t, buf[1], c->mm_bt ? (int64_t)j * K + k : (int64_t)k * N + j);
            double g = elem(t, buf[2], (int64_t)i * N + j);
            if (g != g) return 0;
            num += (g - s) * (g - s);
            den += s * s;
        }
    double rel = sqrt(num / den);
    if (rel > 1e-2) fprintf(stderr, "  %s: rel L2 %.3g vs float64\n", c->name, rel);
    return rel <= 1e-2;
}

/* Runs c on the interpreter and, with gpu, on the GPU; compares. Without a GPU this still checks the
 * case itself (its inputs are valid for the kernel, the matmul reference agrees with the interpreter). */
static void run_case(const Case *c, int gpu)
{
    const KirKernel *k = c->k;
    KRunArg ai[KIR_MAX_PARAMS], ac[KIR_MAX_PARAMS];
    void *orig[KIR_MAX_PARAMS] = {0};
    memset(ai, 0, sizeof ai);
    memset(ac, 0, sizeof ac);
    for (int i = 0; i < k->n_params; i++) {
        const KirType *pt = &k->params[i].type;
        const Arg *a = &c->arg[i];
        if (!pt->is_ptr) {
            ai[i].i = ac[i].i = a->i;
            ai[i].f = ac[i].f = a->lo;
            continue;
        }
        size_t bytes = (size_t)(a->n ? a->n : 1) * (size_t)kir_dtype_bytes(pt->dtype);
        orig[i] = malloc(bytes);
        ai[i].data = malloc(bytes);
        ac[i].data = malloc(bytes);
        if (!orig[i] || !ai[i].data || !ac[i].data) {
            KT_CHECK(0, "out of memory");
            goto done;
        }
        if (a->out)
            memset(orig[i], 0xff, bytes);
        else if (a->hi > a->lo)
            fill(pt->dtype, orig[i], a->n, a->lo, a->hi);
        else
            memset(orig[i], 0, bytes);
        memcpy(ai[i].data, orig[i], bytes);
        memcpy(ac[i].data, orig[i], bytes);
        ai[i].bytes = ac[i].bytes = bytes;
    }
    IrDiag d = {0};
    IrStatus s = krun_interp.run(k, ai, &d);
    KT_CHECK(s == IR_OK, "%s: interpreter: %s", c->name, d.msg);
    if (!gpu) {
        if (s == IR_OK && c->ref_matmul) {
            void *bufs[3] = {ai[0].data, ai[1].data, ai[2].data};
            KT_CHECK(check_matmul(c, bufs), "%s: the float64 reference disagrees with the interpreter",
                     c->name);
        }
        goto done;
    }
    memset(&d, 0, sizeof d);
    IrStatus sc = krun_cuda.run(k, ac, &d);
    KT_CHECK(sc == IR_OK, "%s: cuda: %s", c->name, d.msg);
    if (s != IR_OK || sc != IR_OK) goto done;
    int ok = 1;
    for (int i = 0; i < k->n_params; i++) {
        if (!k->params[i].type.is_ptr) continue;
        char what[160];
        snprintf(what, sizeof what, "%.96s: param %.40s", c->name, k->params[i].name);
        ok &= compare(what, k->params[i].type.dtype, ai[i].data, ac[i].data, c->arg[i].n ? c->arg[i].n : 1,
                      c->tol);
    }
    if (c->ref_matmul) {
        void *bufs[3] = {ac[0].data, ac[1].data, ac[2].data};
        ok &= check_matmul(c, bufs);
    }
    KT_CHECK(ok, "%s: the GPU disagrees with the interpreter", c->name);
    if (!ok) save_source(c, cg_target_find("sm_90a"), NULL);
done:
    for (int i = 0; i < k->n_params; i++) {
        free(orig[i]);
        free(ai[i].data);
        free(ac[i].data);
    }
}

/* The sm_90a CUDA source of qmatmul spec s at config cfg (NULL: the defaults) into *src (src->s NULL when
 * it does not build). */
/* The qmatmul kernel of s at cfg (NULL: the default), or NULL (a failed check). */
static KirKernel *qmatmul_build(const KfamSpec *s, const KirConfig *cfg)
{
    KirKernel *k = NULL;
    IrDiag d = {0};
    KirConfig dflt = {0};
    KT_CHECK(kfam_find("qmatmul")->build(arena, s, kfacts_sm90(), cfg ? cfg : &dflt, &k, &d) == IR_OK,
             "qmatmul build: %s", d.msg);
    return k;
}

static void qmatmul_source_at(const KfamSpec *s, const KirConfig *cfg, IrBuf *src)
{
    KirKernel *k = qmatmul_build(s, cfg);
    IrDiag d = {0};
    if (k) cg_cuda_source(k, cg_target_find("sm_90a"), src, &d);
}

static void qmatmul_source(const KfamSpec *s, IrBuf *src)
{
    qmatmul_source_at(s, NULL, src);
}

/* The first constant of value `from` that is operand `at` of a `op` in blk (or a loop in it), or NULL. */
static KirInst *find_const_operand(KirBlock *blk, KirOp op, int at, int64_t from)
{
    for (int i = 0; i < blk->n_insts; i++) {
        KirInst *in = blk->insts[i], *c;
        if (in->op == KIR_OP_FOR && (c = find_const_operand(in->body, op, at, from))) return c;
        if (in->op == op && in->n_ops > at && in->ops[at]->def && in->ops[at]->def->op == KIR_OP_CONST &&
            in->ops[at]->def->i == from)
            return in->ops[at]->def;
    }
    return NULL;
}

/* The default qmatmul kernel of s with one constant changed (operand `at` of the first `op` whose operand
 * it is, from `from` to `to`), as CUDA source: what the b16-pair matcher must refuse. */
static void qmatmul_source_changed(const KfamSpec *s, KirOp op, int at, int64_t from, int64_t to, IrBuf *src)
{
    KirKernel *k = qmatmul_build(s, NULL);
    IrDiag d = {0};
    KirInst *c = k ? find_const_operand(k->body, op, at, from) : NULL;
    KT_CHECK(c != NULL, "qmatmul: no constant %lld in operand %d of a %s", (long long)from, at,
             kir_op_name(op));
    if (!c) return;
    c->i = to;
    cg_cuda_source(k, cg_target_find("sm_90a"), src, &d);
}

/* Packed weights. SWAP=0 (the generic dot; w4a16's defaults are SWAP=1): each group scale loads once per
 * chunk of 8 slots along k, found by axis info on k >> log2(G) (constant over aligned runs); the words,
 * in the fragment order (kfam_qmatmul.c), load once per element. SWAP=1: the words are a window
 * (cg_cuda_dot.c mma_window): each thread's 8 codes of a 32-k block are one word, read once. */
static void check_packed_loads(void)
{
    KfamSpec s = kfam_spec("qmatmul");
    kfam_spec_int(&s, "N", 4096), kfam_spec_int(&s, "K", 14336), kfam_spec_str(&s, "dtype", "bf16");
    kfam_spec_str(&s, "wfmt", "w4a16"), kfam_spec_int(&s, "group", 128), kfam_spec_int(&s, "m_hint", 1);
    KirConfig b_tile = {0};
    kir_config_set(&b_tile, "BM", 16), kir_config_set(&b_tile, "BN", 32), kir_config_set(&b_tile, "BK", 128);
    kir_config_set(&b_tile, "WARPS", 8), kir_config_set(&b_tile, "STAGES", 1),
        kir_config_set(&b_tile, "SWAP", 0);
    IrBuf src = {0};
    qmatmul_source_at(&s, &b_tile, &src);
    KT_CHECK(src.s && strstr(src.s, "[128,32] blocked: chunks of 8 along dim 0"),
             "w4a16: the dequantized B tile is chunked along k");
    KT_CHECK(src.s && strstr(src.s, "[s] = ok ? p_w[") && !strstr(src.s, "const int x = ok ? p_w["),
             "w4a16: the fragment-ordered words loaded once per element");
    KT_CHECK(src.s && strstr(src.s, "const float x = ok ? kd_bf16_to_f32(__ldg(p_scales + "),
             "w4a16: one scale load per chunk");
    ir_buf_free(&src);
    /* the same B tile with STAGES 4: the words and the x tile stream into per-thread rings (each thread
     * reads back only its own copies: no barrier for them) */
    kir_config_set(&b_tile, "STAGES", 4);
    IrBuf ring = {0};
    qmatmul_source_at(&s, &b_tile, &ring);
    KT_CHECK(ring.s && strstr(ring.s, "the loads streamed beside the dot") &&
                 strstr(ring.s,
                        "kd_cp_async<4>(kd_smem + 0 + wr * 16384 + ((s / 1) * 256 + (int)threadIdx.x) * 4") &&
                 strstr(ring.s, "const int *const t = (const int *)(kd_smem + 0 + rd * 16384)") &&
                 !strstr(ring.s, "/* ... for every thread"),
             "w4a16 STAGES=4: packed words in per-thread cp.async rings");
    ir_buf_free(&ring);
    /* the decode default with K split in the launch, SWAP=1, BK 256: the dequantized weights are wgmma's A
     * operand in registers (no shared image of them), their packed words are copied once per trip into a
     * shared image (rows of 32 words padded to 36, 16-byte copies) three trips ahead, each thread reading
     * the word of its lane % 4 in each 32-k block, the 2-byte group scales stream too (each the aligned
     * word holding it, copied up to the scale only) and each thread reads one per row half and group, and
     * the nibbles become bf16 pairs at constant shifts (cg_cuda_nib.c: the scales are bf16, the dtype) */
    kfam_spec_int(&s, "ws", 1);
    /* at m_hint <= 8 the default is BM 8: 64 weight rows on one warpgroup (wgmma m64n8, A in registers),
     * K split 8 ways in the launch */
    IrBuf b8 = {0};
    qmatmul_source(&s, &b8);
    KT_CHECK(b8.s && strstr(b8.s, "config BM=8 BN=64 BK=256 WARPS=4 STAGES=3 SPLIT_K=8 SWAP=1") &&
                 strstr(b8.s, "(A in registers, pipelined B, wgmma)") &&
                 strstr(b8.s, "[64,256] mma.sync m16n8 accumulators: 4x1 warps, 1x32 fragments per warp"),
             "w4a16 m_hint 1: the BM-8 decode form");
    ir_buf_free(&b8);
    kfam_spec_int(&s, "m_hint", 16); /* the BM-16 decode form below */
    IrBuf sw = {0};
    qmatmul_source(&s, &sw);
    KT_CHECK(sw.s && strstr(sw.s, "SWAP=1") && strstr(sw.s, "(A in registers, pipelined B, wgmma)") &&
                 strstr(sw.s, "[128,256] mma.sync m16n8 accumulators: 8x1 warps, 1x32 fragments per warp"),
             "w4a16 SWAP=1: the weights dequantized in the A fragments' layout");
    KT_CHECK(sw.s && strstr(sw.s, "kd_cp_async<16>(kb + ") &&
                 strstr(sw.s, " * 18432 + (r * 36 + (q % 8) * 4) * 4, m ? p_w + ") &&
                 strstr(sw.s, "[ok ? r * 36 + (u % 8) * 4 + (int)threadIdx.x % 4 : 0]") &&
                 strstr(sw.s, "for (int u = 0; u < 16; u++)"),
             "w4a16 SWAP=1: the packed words streamed into a shared image, one read per word");
    KT_CHECK(sw.s &&
                 strstr(sw.s,
                        "_sh[32] = {0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, "
                        "8, 12, 0, 4, 8, 12, 0, 4, 8, 12};") &&
                 strstr(sw.s, "_pr[s / 2] = kd_mul_bf16x2(kd_sub_bf16x2(kd_nib_pair_lanes(") &&
                 strstr(sw.s, "af[s][3] = v") && strstr(sw.s, "_pr[s * 4 + 3];"),
             "w4a16 SWAP=1: bf16 pairs dequantized in b16 arithmetic (z = 8: one subtraction)");
    const char *sc = sw.s ? strstr(sw.s, "(unsigned)(size_t)p_scales + ") : NULL, *loop = NULL;
    for (const char *u = sw.s ? strstr(sw.s, "for (int ") : NULL; u && u < sc; u = strstr(u + 1, "for (int "))
        loop = u; /* the loop the scale's read is in */
    KT_CHECK(sw.s && strstr(sw.s, "kd_cp_async_sub<2>(kb + ") && !strstr(sw.s, "__ldg(p_scales") && loop &&
                 !strncmp(loop, "for (int u = 0; u < 4; u++)", 27),
             "w4a16 SWAP=1: the scales streamed by sub-word copies, one read per row half and group");
    ir_buf_free(&sw);
    /* f16 scales with bf16 activations: the IR rounds each scale to bf16 first, so the pairs multiply
     * in bf16 by the scale rounded and splat in integer ops from the f16 value */
    kfam_spec_str(&s, "sdtype", "f16");
    IrBuf f16s = {0};
    qmatmul_source(&s, &f16s);
    KT_CHECK(f16s.s && strstr(f16s.s, "(A in registers, pipelined B, wgmma)") &&
                 strstr(f16s.s, "_pr[s / 2] = kd_mul_bf16x2(kd_sub_bf16x2(kd_nib_pair_lanes(") &&
                 strstr(f16s.s, "kd_f32_to_bf16_bits(") && !strstr(f16s.s, "kd_scale_bf16x2("),
             "w4a16 SWAP=1, f16 scales: rounded to bf16, bf16 pairs");
    ir_buf_free(&f16s);
    /* the matcher refuses what is not a pair of nibbles: a 3-bit mask; shifts (k / 8 % 4 + 4 (k % 4)) * 4,
     * whose pairs are 16 bits apart only for k % 4 = 0 */
    kfam_spec_str(&s, "sdtype", "bf16");
    IrBuf m7 = {0}, sh3 = {0};
    qmatmul_source_changed(&s, KIR_OP_AND, 1, 15, 7, &m7);
    qmatmul_source_changed(&s, KIR_OP_AND, 1, 1, 3, &sh3);
    KT_CHECK(m7.s && strstr(m7.s, "(A in registers, pipelined B, wgmma)") && !strstr(m7.s, "kd_nib_pair") &&
                 strstr(m7.s, "& s"),
             "w4a16 SWAP=1 with the mask 7: no b16 pairs");
    KT_CHECK(sh3.s && strstr(sh3.s, "(A in registers, pipelined B, wgmma)") && !strstr(sh3.s, "kd_nib_pair"),
             "w4a16 SWAP=1 with pairs' shifts 32 bits apart: no b16 pairs");
    ir_buf_free(&m7);
    ir_buf_free(&sh3);
}

/* W8A8 FP8 at large M: both e4m3 operands piped K-major into 128-byte-swizzled rings and multiplied by
 * wgmma k32 (no staging through f16); the row and channel scales are read in the accumulator's layout,
 * not moved there through shared memory. */
static void check_fp8_wgmma(void)
{
    KfamSpec s = kfam_spec("qmatmul");
    kfam_spec_int(&s, "N", 8192), kfam_spec_int(&s, "K", 8192), kfam_spec_str(&s, "dtype", "bf16");
    kfam_spec_str(&s, "wfmt", "fp8"), kfam_spec_str(&s, "act", "fp8");
    IrBuf src = {0};
    qmatmul_source(&s, &src);
    KT_CHECK(src.s && strstr(src.s, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"),
             "w8a8 fp8: wgmma k32 on e4m3 codes");
    KT_CHECK(src.s && strstr(src.s, "kd_cp_async<16>(kp1 + "),
             "w8a8 fp8: 16-byte copies of the weight codes");
    KT_CHECK(src.s && !strstr(src.s, "kt = (float *)kd_scratch"), "w8a8 fp8: no layout change of the scales");
    /* one wgmma group left in flight across trips: copies two trips ahead (4 stages), the slot refilled
     * read two trips back, and the last group waited for after the loop */
    const char *w1 = src.s ? strstr(src.s, "kd_wgmma_wait<1>();") : NULL;
    KT_CHECK(w1 && strstr(src.s, "kd_cp_async_wait<1>();") && strstr(src.s, "int rd = 0, wr = 2;") &&
                 strstr(w1, "kd_wgmma_wait<0>();") && !strstr(src.s, "kd_cp_async_wait<2>();"),
             "w8a8 fp8: wgmma overlapped with the next trip");
    ir_buf_free(&src);
    /* int8 (SmoothQuant): the same rings, wgmma s8 into s32 accumulators, n at most 224 */
    KfamSpec si = kfam_spec("qmatmul");
    kfam_spec_int(&si, "N", 8192), kfam_spec_int(&si, "K", 8192), kfam_spec_str(&si, "dtype", "bf16");
    kfam_spec_str(&si, "wfmt", "w8a16"), kfam_spec_str(&si, "act", "int8");
    IrBuf srci = {0};
    qmatmul_source(&si, &srci);
    KT_CHECK(srci.s && strstr(srci.s, "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8") &&
                 strstr(srci.s, "\"+r\"(v"),
             "w8a8 int8: wgmma s8 with s32 accumulators");
    ir_buf_free(&srci);
}

int main(void)
{
    int nvrtc = cg_backend_for(cg_target_find("sm_90a"), "cuda") != NULL;
    arena = ir_arena_create();
    build_cases();
    check_packed_loads();
    check_fp8_wgmma();
    const char *ptxas = find_ptxas();
    if (!ptxas) printf("test_cg_cuda: no ptxas found; PTX assembly not checked\n");
    if (!nvrtc)
        printf("test_cg_cuda: this build has no NVRTC: generated sources checked, nothing compiled\n");
    KT_CHECK(nvrtc || !kt_ci(), "CI=true: this build has no NVRTC");
    for (int i = 0; i < n_cases; i++)
        check_compile(&cases[i], ptxas, nvrtc);
    /* thread safety: the same kernels compiled in parallel (the driver's threads) give the same cubins */
    if (nvrtc) {
        enum { NJ = 8 };
        CgJob jobs[NJ];
        memset(jobs, 0, sizeof jobs);
        int nj = n_cases < NJ ? n_cases : NJ;
        for (int i = 0; i < nj; i++) {
            jobs[i].k = cases[i * (n_cases / nj)].k;
            jobs[i].target = cg_target_find(i % 2 ? "sm_90a" : "sm_80");
            jobs[i].prefer = "cuda";
        }
        CgDriverOptions o = {.threads = 4, .cache_dir = NULL, .salt = NULL};
        cg_compile_jobs(jobs, nj, &o);
        for (int i = 0; i < nj; i++) {
            CgBinary one;
            IrDiag d = {0};
            IrStatus st = cg_cuda_compile(jobs[i].k, jobs[i].target, &one, NULL, &d);
            KT_CHECK(jobs[i].status == IR_OK && st == IR_OK && one.size == jobs[i].bin.size &&
                         !memcmp(one.data, jobs[i].bin.data, one.size),
                     "%s: parallel compile differs (%s)", jobs[i].k->name, jobs[i].msg);
            cg_binary_free(&one);
            cg_binary_free(&jobs[i].bin);
        }
    }
    const char *dump = getenv("KILN_CG_CUDA_DUMP");
    for (int i = 0; dump && i < n_cases; i++)
        save_source(&cases[i], cg_target_find("sm_90a"), dump);
    /* limits: too much shared memory is INVALID (IR_ERR_LIMIT), not an internal error */
    {
        B x;
        KirBuilder *b = begin(&x, "too_big", 4);
        KirValue *pa = kir_param(b, "a", kir_ptr(KIR_F32), 0);
        int sh[2] = {256, 512};
        KirValue *offs = kir_add(
            b,
            kir_broadcast(b, kir_expand(b, kir_mul(b, kir_arange(b, 256), splat1(b, ci(b, 512), 256)), 1),
                          256, 512),
            kir_broadcast(b, kir_expand(b, kir_arange(b, 512), 0), 256, 512));
        KirValue *v = kir_load(b, pa, offs, NULL, NULL);
        KirValue *colsum =
            kir_reduce(b, kir_mul(b, v, kir_splat(b, kir_const_f(b, KIR_F32, 2), 2, sh)), KIR_RED_SUM, 0);
        (void)colsum;
        kir_store(b, pa, kir_arange(b, 512), colsum, NULL);
        KirKernel *k = end(&x);
        IrDiag d = {0};
        CgCudaLaunch l;
        IrStatus st = k ? cg_cuda_launch_info(k, cg_target_find("sm_80"), &l, &d) : IR_ERR_INTERNAL;
        KT_CHECK(st == IR_OK || st == IR_ERR_LIMIT, "too_big: %s", d.msg);
    }
    char why[512] = "no NVRTC";
    int gpu = nvrtc && krun_cuda.available(why, sizeof why);
    if (!gpu) printf("test_cg_cuda: %d kernels; GPU runs skipped: %s\n", n_cases, why);
    for (int i = 0; i < n_cases; i++)
        run_case(&cases[i], gpu);
    ir_arena_destroy(arena);
    return kt_done("test_cg_cuda");
}
