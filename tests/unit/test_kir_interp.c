/* test_kir_interp.c — the kernel-IR interpreter's semantics, op by op, on hand-built kernels: rounding
 * of casts to bf16 / f16 / f8e4m3 (nearest even, overflow, subnormals, saturation), integer wrap and C
 * division, errors that name the program, loop-carried values (a swap), reductions and broadcasts,
 * dot's f32 accumulation order, rand, masked loads, atomic_add across programs and the grid formula. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ir/kir_interp.h"
#include "kt.h"

typedef struct K {
    IrArena *a;
    KirKernel *k;
    KirBuilder b;
    IrDiag d;
} K;

static void k_begin(K *t, const char *name)
{
    memset(t, 0, sizeof *t);
    t->a = ir_arena_create();
    t->k = kir_kernel_create(t->a, name, "test", NULL);
    kir_builder_init(&t->b, t->k, &t->d);
}

static IrStatus k_run(K *t, void **args, int g0)
{
    kir_ret(&t->b);
    IrStatus s = kir_builder_done(&t->b);
    if (s == IR_OK) s = kir_verify(t->k, NULL, &t->d);
    KT_CHECK(s == IR_OK, "build %s: %s", t->k->name, t->d.msg);
    if (s != IR_OK) return s;
    int32_t grid[3] = {g0, 1, 1};
    return kir_interp_run(t->k, args, grid, &t->d);
}

static void k_end(K *t)
{
    ir_arena_destroy(t->a);
}

/* dst[i] = cast(src[i]) for n f32 values into dtype dt (raw bytes in dst). */
static void cast_to(KirDtype dt, const float *src, void *dst, int n)
{
    K t;
    k_begin(&t, "cast");
    KirValue *s = kir_param(&t.b, "src", kir_ptr(KIR_F32), 0), *d = kir_param(&t.b, "dst", kir_ptr(dt), 0);
    KirValue *i = kir_arange(&t.b, n);
    kir_store(&t.b, d, i, kir_cast(&t.b, kir_load(&t.b, s, i, NULL, NULL), dt), NULL);
    void *args[2] = {&src, &dst};
    KT_CHECK(k_run(&t, args, 1) == IR_OK, "%s", t.d.msg);
    k_end(&t);
}

static void cast_from(KirDtype dt, const void *src, float *dst, int n)
{
    K t;
    k_begin(&t, "uncast");
    KirValue *s = kir_param(&t.b, "src", kir_ptr(dt), 0), *d = kir_param(&t.b, "dst", kir_ptr(KIR_F32), 0);
    KirValue *i = kir_arange(&t.b, n);
    kir_store(&t.b, d, i, kir_cast(&t.b, kir_load(&t.b, s, i, NULL, NULL), KIR_F32), NULL);
    void *args[2] = {&src, &dst};
    KT_CHECK(k_run(&t, args, 1) == IR_OK, "%s", t.d.msg);
    k_end(&t);
}

static void test_rounding(void)
{
    const float in[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -0.0f,  3.4e38f, 65519.0f, 65520.0f, 0x1p-25f,
                        3 * 0x1p-25f,   1.0f / 3,           448.0f, 464.0f,  1000.0f,  INFINITY, NAN,
                        0x1p-9f,        0x1p-10f,           0.1f,   -480.0f};
    enum { N = sizeof in / sizeof in[0] };
    uint16_t bf[N], h[N];
    uint8_t f8[N];
    cast_to(KIR_BF16, in, bf, N);
    cast_to(KIR_F16, in, h, N);
    cast_to(KIR_F8E4M3, in, f8, N);
    KT_CHECK(bf[0] == 0x3f80 && bf[1] == 0x3f82 && bf[2] == 0x8000 && bf[3] == 0x7f80,
             "bf16 %04x %04x %04x %04x", bf[0], bf[1], bf[2], bf[3]);
    KT_CHECK((bf[13] & 0x7fc0) == 0x7fc0, "bf16 NaN %04x", bf[13]);
    KT_CHECK(h[4] == 0x7bff && h[5] == 0x7c00 && h[6] == 0x0000 && h[7] == 0x0002 && h[8] == 0x3555,
             "f16 %04x %04x %04x %04x %04x", h[4], h[5], h[6], h[7], h[8]);
    KT_CHECK(h[12] == 0x7c00 && (h[13] & 0x7e00) == 0x7e00 && h[2] == 0x8000, "f16 inf/NaN/-0 %04x %04x %04x",
             h[12], h[13], h[2]);
    KT_CHECK(f8[9] == 0x7e && f8[10] == 0x7e && f8[11] == 0x7e && f8[12] == 0x7e && f8[17] == 0xfe,
             "f8 saturation %02x %02x %02x %02x %02x", f8[9], f8[10], f8[11], f8[12], f8[17]);
    KT_CHECK(f8[13] == 0x7f && f8[14] == 0x01 && f8[15] == 0x00 && f8[16] == 0x1d && f8[0] == 0x38,
             "f8 NaN/subnormal/0.1/1 %02x %02x %02x %02x %02x", f8[13], f8[14], f8[15], f8[16], f8[0]);
    float back[N];
    cast_from(KIR_F8E4M3, f8, back, N);
    KT_CHECK(back[16] == 0.1015625f && back[14] == 0x1p-9f && back[9] == 448.0f && isnan(back[13]),
             "f8 decode %g %g %g", back[16], back[14], back[9]);
    cast_from(KIR_F16, h, back, N);
    KT_CHECK(back[4] == 65504.0f && back[7] == 0x1p-23f && isinf(back[5]) && back[8] == 0.333251953125f,
             "f16 decode %g %g %g", back[4], back[7], back[8]);
    cast_from(KIR_BF16, bf, back, N);
    KT_CHECK(back[1] == 1.0f + 0x1p-6f && isinf(back[3]), "bf16 decode %g", back[1]);
}

/* Scalar integer results into out[0..]: wrap, division, shifts, narrowing casts, float->int. */
static void test_integers(void)
{
    K t;
    k_begin(&t, "ints");
    KirBuilder *b = &t.b;
    KirValue *o = kir_param(b, "out", kir_ptr(KIR_I32), 0);
    KirValue *v[10];
    v[0] = kir_add(b, kir_const_i32(b, 2147483647), kir_const_i32(b, 1));
    v[1] = kir_div(b, kir_const_i32(b, -7), kir_const_i32(b, 2));
    v[2] = kir_binary(b, KIR_OP_REM, kir_const_i32(b, -7), kir_const_i32(b, 2));
    v[3] = kir_binary(b, KIR_OP_SHR, kir_const_i32(b, -8), kir_const_i32(b, 1));
    v[4] = kir_cast(b, kir_cast(b, kir_const_i32(b, 300), KIR_I8), KIR_I32);
    v[5] = kir_cast(b, kir_cast(b, kir_const_i32(b, -1), KIR_U8), KIR_I32);
    v[6] = kir_cast(b, kir_const_f(b, KIR_F32, 3e9), KIR_I32);
    v[7] = kir_cast(b, kir_const_f(b, KIR_F32, NAN), KIR_I32);
    v[8] = kir_cast(b, kir_const_f(b, KIR_F32, -2.7), KIR_I32);
    v[9] = kir_cast(b, kir_binary(b, KIR_OP_MUL, kir_const_i64(b, 1LL << 40), kir_const_i64(b, 3)), KIR_I32);
    for (int i = 0; i < 10; i++)
        kir_store(b, o, kir_const_i32(b, i), v[i], NULL);
    int32_t out[10];
    void *po = out, *args[1] = {&po};
    KT_CHECK(k_run(&t, args, 1) == IR_OK, "%s", t.d.msg);
    const int32_t want[10] = {INT32_MIN, -3, -1, -4, 44, 255, INT32_MAX, 0, -2, 0};
    for (int i = 0; i < 10; i++)
        KT_CHECK(out[i] == want[i], "int case %d: %d, want %d", i, out[i], want[i]);
    k_end(&t);

    k_begin(&t, "div0");
    b = &t.b;
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    KirValue *o2 = kir_param(b, "out", kir_ptr(KIR_I32), 0);
    kir_store(b, o2, kir_pid(b, 0), kir_div(b, kir_const_i32(b, 1), kir_sub(b, kir_pid(b, 0), n)), NULL);
    int32_t nv = 2;
    void *args2[2] = {&nv, &po};
    IrStatus s = k_run(&t, args2, 4);
    KT_CHECK(s == IR_ERR_INPUT && strstr(t.d.msg, "program (2,0,0)") && strstr(t.d.msg, "division by zero"),
             "%s", t.d.msg);
    k_end(&t);
}

/* (a, b) = (b, a + b) ten times from (0, 1): a = 55 — the yield swaps the loop's own arguments. */
static void test_loop(void)
{
    K t;
    k_begin(&t, "fib");
    KirBuilder *b = &t.b;
    KirValue *o = kir_param(b, "out", kir_ptr(KIR_I32), 0);
    KirValue *inits[2] = {kir_const_i32(b, 0), kir_const_i32(b, 1)};
    KirBlock *body =
        kir_for_begin(b, kir_const_i32(b, 0), kir_const_i32(b, 10), kir_const_i32(b, 1), inits, 2, 0);
    KirValue *y[2] = {body->args[2], kir_add(b, body->args[1], body->args[2])};
    KirInst *loop = kir_for_end(b, y, 2);
    kir_store(b, o, kir_const_i32(b, 0), loop->res[0], NULL);
    /* zero trips: results are the inits */
    KirBlock *empty =
        kir_for_begin(b, kir_const_i32(b, 5), kir_const_i32(b, 5), kir_const_i32(b, 1), inits, 1, 0);
    KirValue *inc = kir_add(b, empty->args[1], kir_const_i32(b, 100));
    KirInst *loop2 = kir_for_end(b, &inc, 1);
    kir_store(b, o, kir_const_i32(b, 1), loop2->res[0], NULL);
    int32_t out[2] = {-1, -1};
    void *po = out, *args[1] = {&po};
    KT_CHECK(k_run(&t, args, 1) == IR_OK, "%s", t.d.msg);
    KT_CHECK(out[0] == 55 && out[1] == 0, "fib %d, empty loop %d", out[0], out[1]);
    k_end(&t);
}

/* A [3,4] tile x[i,j] = 4i + j: sums along both axes, max / min, broadcast back, the argmax idiom. */
static void test_tiles(void)
{
    K t;
    k_begin(&t, "tiles");
    KirBuilder *b = &t.b;
    KirValue *o = kir_param(b, "out", kir_ptr(KIR_F32), 0);
    KirValue *rows = kir_mul(b, kir_arange(b, 3), kir_const_i32(b, 4));
    KirValue *x2 = kir_add(b, kir_broadcast(b, kir_expand(b, rows, 1), 3, 4),
                           kir_broadcast(b, kir_expand(b, kir_arange(b, 4), 0), 3, 4));
    KirValue *xf = kir_cast(b, x2, KIR_F32);
    kir_store(b, o, kir_arange(b, 3), kir_reduce(b, xf, KIR_RED_SUM, 1), NULL);
    kir_store(b, o, kir_add(b, kir_arange(b, 4), kir_const_i32(b, 3)), kir_reduce(b, xf, KIR_RED_SUM, 0),
              NULL);
    kir_store(b, o, kir_const_i32(b, 7), kir_reduce(b, kir_reduce(b, xf, KIR_RED_MAX, 1), KIR_RED_MIN, 0),
              NULL);
    /* f32 sums round after each add: 1 + 2^-24 + 2^-24 stays 1 */
    KirValue *tiny = kir_select(b, kir_binary(b, KIR_OP_EQ, kir_arange(b, 3), kir_const_i32(b, 0)),
                                kir_const_f(b, KIR_F32, 1.0), kir_const_f(b, KIR_F32, 0x1p-24));
    kir_store(b, o, kir_const_i32(b, 8), kir_reduce(b, tiny, KIR_RED_SUM, 0), NULL);
    float out[9];
    void *po = out, *args[1] = {&po};
    KT_CHECK(k_run(&t, args, 1) == IR_OK, "%s", t.d.msg);
    KT_CHECK(out[0] == 6 && out[1] == 22 && out[2] == 38, "row sums %g %g %g", out[0], out[1], out[2]);
    KT_CHECK(out[3] == 12 && out[6] == 21, "column sums %g %g", out[3], out[6]);
    KT_CHECK(out[7] == 3, "min of row maxima %g", out[7]);
    KT_CHECK(out[8] == 1.0f, "f32 sum order %a", out[8]);
    k_end(&t);
}

/* dot: [1,16] of (1, 2^-24, ...) against ones accumulates in f32 in k order: stays exactly 1; and an
 * i8 dot accumulates in i32. rand is kir_rand_ref lane by lane. */
static void test_dot_rand(void)
{
    K t;
    k_begin(&t, "dot");
    KirBuilder *b = &t.b;
    KirValue *o = kir_param(b, "out", kir_ptr(KIR_F32), 0);
    KirValue *oi = kir_param(b, "outi", kir_ptr(KIR_I32), 0);
    KirValue *k16 = kir_arange(b, 16);
    KirValue *av = kir_select(b, kir_binary(b, KIR_OP_EQ, k16, kir_const_i32(b, 0)),
                              kir_const_f(b, KIR_F32, 1.0), kir_const_f(b, KIR_F32, 0x1p-24));
    int s1[2] = {16, 1}, s11[2] = {1, 1};
    KirValue *ones = kir_splat(b, kir_const_f(b, KIR_F32, 1.0), 2, s1);
    KirValue *acc = kir_splat(b, kir_const_f(b, KIR_F32, 0.0), 2, s11);
    KirValue *d = kir_dot(b, kir_expand(b, av, 0), ones, acc);
    kir_store(b, o, kir_expand(b, kir_arange(b, 1), 0), d, NULL);
    KirValue *a8 = kir_expand(b, kir_cast(b, kir_sub(b, k16, kir_const_i32(b, 8)), KIR_I8), 0);
    KirValue *b8 = kir_splat(b, kir_cast(b, kir_const_i32(b, 100), KIR_I8), 2, s1);
    KirValue *di = kir_dot(b, a8, b8, kir_splat(b, kir_const_i32(b, 7), 2, s11));
    kir_store(b, oi, kir_expand(b, kir_arange(b, 1), 0), di, NULL);
    KirValue *r = kir_rand(b, kir_const_i64(b, 0x123456789LL), kir_mul(b, k16, kir_const_i32(b, 1000)));
    kir_store(b, o, kir_add(b, k16, kir_const_i32(b, 1)), r, NULL);
    float out[17];
    int32_t outi[1];
    void *po = out, *poi = outi, *args[2] = {&po, &poi};
    KT_CHECK(k_run(&t, args, 1) == IR_OK, "%s", t.d.msg);
    KT_CHECK(out[0] == 1.0f, "dot order %a", out[0]);
    KT_CHECK(outi[0] == 7 + 100 * (-8), "i8 dot %d", outi[0]);
    int same = 1;
    for (int i = 0; i < 16; i++)
        same &= out[1 + i] == kir_rand_ref(0x123456789LL, i * 1000);
    KT_CHECK(same, "rand matches kir_rand_ref");
    k_end(&t);
}

/* Masked lanes read `other` and touch no memory (a NULL pointer is fine while every lane is off);
 * atomic_add from 8 programs; the grid formula. */
static void test_memory(void)
{
    K t;
    k_begin(&t, "mem");
    KirBuilder *b = &t.b;
    KirValue *src = kir_param(b, "src", kir_ptr(KIR_F32), 0), *nul = kir_param(b, "nul", kir_ptr(KIR_F32), 0);
    KirValue *acc = kir_param(b, "acc", kir_ptr(KIR_F32), 0), *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, n, 3, 2);
    KirValue *i = kir_arange(b, 8);
    KirValue *m = kir_lt(b, i, kir_const_i32(b, 3));
    KirValue *v = kir_load(b, src, i, m, kir_const_f(b, KIR_F32, -5.0));
    KirValue *z = kir_load(b, nul, i, kir_binary(b, KIR_OP_GT, i, kir_const_i32(b, 100)), NULL);
    KirValue *pid = kir_cast(b, kir_add(b, kir_pid(b, 0), kir_const_i32(b, 1)), KIR_F32);
    kir_atomic_add(b, acc, i, kir_add(b, kir_add(b, v, z), pid), NULL);
    float s[3] = {10, 20, 30}, out[8] = {0};
    void *ps = s, *pn = NULL, *pa = out;
    int32_t nv = 5;
    void *args[4] = {&ps, &pn, &pa, &nv};
    int32_t grid[3];
    kir_grid_eval(t.k, args, grid);
    KT_CHECK(grid[0] == 8 && grid[1] == 1 && grid[2] == 1, "grid cdiv(5*3, 2) = %d", grid[0]);
    KT_CHECK(k_run(&t, args, grid[0]) == IR_OK, "%s", t.d.msg);
    KT_CHECK(out[0] == 8 * 10 + 36 && out[2] == 8 * 30 + 36 && out[5] == 8 * -5 + 36, "atomic sums %g %g %g",
             out[0], out[2], out[5]);
    k_end(&t);

    k_begin(&t, "null");
    b = &t.b;
    nul = kir_param(b, "nul", kir_ptr(KIR_F32), 0);
    kir_store(b, nul, kir_arange(b, 4), kir_splat(b, kir_const_f(b, KIR_F32, 1), 1, (int[]){4}), NULL);
    void *args2[1] = {&pn};
    KT_CHECK(k_run(&t, args2, 1) == IR_ERR_INPUT && strstr(t.d.msg, "NULL"), "%s", t.d.msg);
    k_end(&t);
}

/* select between two pointer params by a scalar (matmul's group epilogue): the load reads the chosen one;
 * a pointer condition and a loop-carried pointer are refused by the builder/verifier. */
static void test_pointer_select(void)
{
    K t;
    k_begin(&t, "psel");
    KirBuilder *b = &t.b;
    KirValue *pa = kir_param(b, "a", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *pb = kir_param(b, "b", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *o = kir_param(b, "out", kir_ptr(KIR_F32), 0);
    KirValue *which = kir_param(b, "which", kir_scalar(KIR_I32), 0);
    KirValue *p = kir_select(b, kir_binary(b, KIR_OP_GT, which, kir_const_i32(b, 0)), pb, pa);
    KirValue *i = kir_arange(b, 4);
    kir_store(b, o, i, kir_load(b, p, i, NULL, NULL), NULL);
    float A[4] = {1, 2, 3, 4}, B[4] = {10, 20, 30, 40}, out[4] = {-1, -1, -1, -1};
    void *va = A, *vb = B, *vo = out;
    int32_t w = 1;
    void *args[4] = {&va, &vb, &vo, &w};
    KT_CHECK(k_run(&t, args, 1) == IR_OK, "%s", t.d.msg);
    KT_CHECK(out[0] == 10 && out[3] == 40, "select(1 > 0, b, a) read %g %g", out[0], out[3]);
    w = 0;
    IrDiag d = {0};
    int32_t grid[3] = {1, 1, 1};
    KT_CHECK(kir_interp_run(t.k, args, grid, &d) == IR_OK && out[0] == 1 && out[3] == 4,
             "select(0 > 0, b, a) read %g", out[0]);
    k_end(&t);

    k_begin(&t, "pcond"); /* a pointer as the condition */
    b = &t.b;
    KirValue *pc = kir_param(b, "c", kir_ptr(KIR_I1), 0);
    pa = kir_param(b, "a", kir_ptr(KIR_F32), 0);
    pb = kir_param(b, "b", kir_ptr(KIR_F32), 0);
    kir_select(b, pc, pa, pb);
    KT_CHECK(t.d.status != IR_OK && strstr(t.d.msg, "condition"), "pointer condition: %s", t.d.msg);
    k_end(&t);

    k_begin(&t, "pcarry"); /* a loop carrying a pointer */
    b = &t.b;
    pa = kir_param(b, "a", kir_ptr(KIR_F32), 0);
    KirBlock *body =
        kir_for_begin(b, kir_const_i32(b, 0), kir_const_i32(b, 2), kir_const_i32(b, 1), &pa, 1, 0);
    KirValue *y = body->args[1];
    kir_for_end(b, &y, 1);
    KT_CHECK(t.d.status != IR_OK && strstr(t.d.msg, "cannot carry a pointer"), "carried pointer: %s",
             t.d.msg);
    k_end(&t);
}

/* kir_interp_run_checked: an access outside a param's buffer is an error naming it; masked lanes are not
 * accesses. */
static void test_bounds(void)
{
    K t;
    k_begin(&t, "bounds");
    KirBuilder *b = &t.b;
    KirValue *pa = kir_param(b, "a", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *o = kir_param(b, "out", kir_ptr(KIR_F32), 0);
    KirValue *off = kir_param(b, "off", kir_scalar(KIR_I32), 0);
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    KirValue *i = kir_arange(b, 4), *m = kir_lt(b, i, n);
    kir_store(b, o, i, kir_load(b, pa, kir_add(b, i, off), m, kir_const_f(b, KIR_F32, 0)), NULL);
    float A[4] = {1, 2, 3, 4}, out[4] = {-1, -1, -1, -1};
    void *va = A, *vo = out;
    int32_t shift = 0, lanes = 4;
    void *args[4] = {&va, &vo, &shift, &lanes};
    size_t bytes[4] = {sizeof A, sizeof out, 0, 0};
    int32_t grid[3] = {1, 1, 1};
    IrDiag d = {0};
    KT_CHECK(kir_interp_run_checked(t.k, args, bytes, grid, &d) == IR_OK && out[3] == 4, "in bounds: %s", d.msg);
    shift = 1;
    IrStatus st = kir_interp_run_checked(t.k, args, bytes, grid, &d);
    KT_CHECK(st != IR_OK && strstr(d.msg, "element 4 outside the 16-byte buffer of param a"),
             "one past the end: %s", d.msg);
    lanes = 3; /* the lane that would read element 4 is masked */
    d = (IrDiag){0};
    KT_CHECK(kir_interp_run_checked(t.k, args, bytes, grid, &d) == IR_OK && out[2] == 4 && out[3] == 0,
             "masked lane: %s", d.msg);
    k_end(&t);
}

int main(void)
{
    test_rounding();
    test_integers();
    test_loop();
    test_tiles();
    test_dot_rand();
    test_memory();
    test_pointer_select();
    test_bounds();
    return kt_done("test_kir_interp");
}
