/* test_kir_verify.c — kir_verify's tile-register estimate on hand-built kernels: a loaded [16, 64] i32 tile
 * at offsets rows + col(k) counts its distinct columns (at least one per 8 columns: each thread keeps its own
 * copy), but every element when col depends on a program id or its mask changes inside a run; element-wise
 * results count by their operands' shortest run. */
#include <string.h>

#include "ir/kir.h"
#include "kt.h"

enum { ROWS = 16, COLS = 64, FULL = ROWS * COLS * 4, EIGHTH = FULL / 8 };

/* How the column part of the load's offsets is made, and what consumes the load. */
typedef enum { COL_K, COL_K_SHR3, COL_K_SHR5, COL_K_SHR3_PID } ColForm;
typedef enum { USE_CAST, USE_MASKED, USE_TIMES_K } UseForm;

/* kir_estimate_tile_bytes of: x = load(w, rows + col); store(o, rows + k, consumer(x)). */
static int64_t estimate(ColForm cf, UseForm uf)
{
    IrArena *a = ir_arena_create();
    KirKernel *k = kir_kernel_create(a, "estimate", "test", NULL);
    KirBuilder bb, *b = &bb;
    IrDiag d;
    memset(&d, 0, sizeof d);
    kir_builder_init(b, k, &d);
    KirValue *w = kir_param(b, "w", kir_ptr(KIR_I32), KIR_PARAM_RDONLY);
    KirValue *o = kir_param(b, "o", kir_ptr(KIR_F32), 0);
    KirValue *m = kir_param(b, "M", kir_scalar(KIR_I32), 0);
    KirValue *rn = kir_arange(b, ROWS), *rk = kir_arange(b, COLS);
    KirValue *rows = kir_broadcast(b, kir_expand(b, kir_mul(b, rn, kir_const_i32(b, COLS)), 1), ROWS, COLS);
    KirValue *col = cf == COL_K        ? rk
                    : cf == COL_K_SHR3 ? kir_binary(b, KIR_OP_SHR, rk, kir_const_i32(b, 3))
                    : cf == COL_K_SHR5 ? kir_binary(b, KIR_OP_SHR, rk, kir_const_i32(b, 5))
                                       : kir_add(b, kir_binary(b, KIR_OP_SHR, rk, kir_const_i32(b, 3)),
                                                 kir_mul(b, kir_pid(b, 0), kir_const_i32(b, COLS)));
    KirValue *offs = kir_add(b, rows, kir_broadcast(b, kir_expand(b, col, 0), ROWS, COLS));
    KirValue *mask =
        uf == USE_MASKED ? kir_lt(b, kir_broadcast(b, kir_expand(b, rk, 0), ROWS, COLS), m) : NULL;
    KirValue *y = kir_cast(b, kir_load(b, w, offs, mask, mask ? kir_const_i32(b, 0) : NULL), KIR_F32);
    if (uf == USE_TIMES_K) /* an operand that changes every column: the product does too */
        y = kir_mul(b, y, kir_broadcast(b, kir_expand(b, kir_cast(b, rk, KIR_F32), 0), ROWS, COLS));
    kir_store(b, o, kir_add(b, rows, kir_broadcast(b, kir_expand(b, rk, 0), ROWS, COLS)), y, NULL);
    kir_ret(b);
    int ok = kir_builder_done(b) == IR_OK && kir_verify(k, NULL, &d) == IR_OK;
    KT_CHECK(ok, "build: %s", d.msg);
    int64_t e = ok ? kir_estimate_tile_bytes(k) : -1;
    ir_arena_destroy(a);
    return e;
}

int main(void)
{
    static const struct {
        ColForm cf;
        UseForm uf;
        int64_t want;
        const char *what;
    } cases[] = {
        {COL_K, USE_CAST, FULL, "offsets rows + k: every element"},
        {COL_K_SHR3, USE_CAST, EIGHTH, "rows + (k >> 3): 8 distinct columns of 64"},
        {COL_K_SHR5, USE_CAST, EIGHTH, "rows + (k >> 5): 2 distinct, but one copy per 8 columns"},
        {COL_K_SHR3_PID, USE_CAST, FULL, "rows + (k >> 3) + 64 pid: not known at compile time"},
        {COL_K_SHR3, USE_MASKED, FULL, "a mask k < M that changes inside the runs"},
        {COL_K_SHR5, USE_TIMES_K, FULL, "times f32(k): the product's run is the shortest"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t got = estimate(cases[i].cf, cases[i].uf);
        KT_CHECK(got == cases[i].want, "%s: estimate %lld, want %lld", cases[i].what, (long long)got,
                 (long long)cases[i].want);
    }
    return kt_done("test_kir_verify");
}
