/* test_kfam_logits.c — the matmul family's logits form (gather=1, out_dtype=f32): out[m, :] =
 * f32(x[rows[m], :] @ w^T), for the rows of the tokens that need logits, against a float64 reference on
 * every available executor, and the form's spec rules (epilogue none only; quantized weights refused). */
#include <stdlib.h>
#include <string.h>

#include "ir/kfam.h"
#include "kfacts.h"
#include "kref.h"
#include "krun.h"
#include "kt.h"

static void check(const KRunner *ex, KrefRng *rng, KirDtype dt, int T, int R, int N, int K,
                  const KirConfig *cfg)
{
    const KfamFamily *f = kfam_find("matmul");
    KfamSpec s = kfam_spec("matmul");
    kfam_spec_int(&s, "N", N);
    kfam_spec_int(&s, "K", K);
    kfam_spec_str(&s, "dtype", kir_dtype_name(dt));
    kfam_spec_str(&s, "epilogue", "none");
    kfam_spec_str(&s, "out_dtype", "f32");
    kfam_spec_int(&s, "gather", 1);
    IrArena *a = ir_arena_create();
    KirKernel *k = NULL;
    IrDiag d = {0};
    if (f->build(a, &s, kfacts_sm90(), cfg, &k, &d) != IR_OK) {
        KT_CHECK(d.status == IR_ERR_LIMIT || d.status == IR_ERR_UNSUPPORTED, "build: %s", d.msg);
        ir_arena_destroy(a);
        return;
    }
    void *x = kref_alloc(dt, (size_t)T * K), *w = kref_alloc(dt, (size_t)N * K);
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)R);
    float *out = malloc(sizeof(float) * (size_t)R * N);
    double *want = malloc(sizeof(double) * (size_t)R * N), *got = malloc(sizeof(double) * (size_t)R * N);
    kref_fill(rng, x, dt, (size_t)T * K, -1, 1);
    kref_fill(rng, w, dt, (size_t)N * K, -1, 1);
    for (int m = 0; m < R; m++)
        rows[m] = (int32_t)(kref_next(rng) % (uint64_t)T);
    kref_poison(out, sizeof(float) * (size_t)R * N);
    /* reference: gather the rows, then the plain matmul reference */
    void *xg = kref_alloc(dt, (size_t)R * K);
    for (int m = 0; m < R; m++)
        memcpy((char *)xg + kref_bytes(dt, (size_t)m * K), (char *)x + kref_bytes(dt, (size_t)rows[m] * K),
               kref_bytes(dt, (size_t)K));
    kref_matmul(xg, w, NULL, NULL, NULL, dt, R, N, K, "none", want);
    KRunArg args[] = {{.data = x, .bytes = kref_bytes(dt, (size_t)T * K)},
                      {.data = w, .bytes = kref_bytes(dt, (size_t)N * K)},
                      {.data = rows, .bytes = sizeof(int32_t) * (size_t)R},
                      {.data = out, .bytes = sizeof(float) * (size_t)R * N},
                      {.i = R}};
    KT_CHECK(k->n_params == 5, "params x, w, rows, out, M: %d", k->n_params);
    if (ex->run(k, args, &d) != IR_OK) {
        KT_CHECK(0, "%s: run: %s", ex->name, d.msg);
    } else {
        for (size_t i = 0; i < (size_t)R * N; i++)
            got[i] = out[i];
        double err = kref_rel_l2(got, want, (size_t)R * N);
        KT_CHECK(err < kref_tol(dt), "%s %s T=%d R=%d N=%d K=%d: rel L2 %.3g", ex->name, kir_dtype_name(dt),
                 T, R, N, K, err);
    }
    free(x), free(w), free(xg), free(rows), free(out), free(want), free(got);
    ir_arena_destroy(a);
}

static void spec_rules(void)
{
    const KfamFamily *f = kfam_find("matmul");
    IrArena *a = ir_arena_create();
    KirKernel *k;
    IrDiag d = {0};
    KfamSpec s = kfam_spec("matmul");
    kfam_spec_int(&s, "N", 64);
    kfam_spec_int(&s, "K", 64);
    kfam_spec_str(&s, "dtype", "bf16");
    kfam_spec_str(&s, "epilogue", "bias");
    kfam_spec_int(&s, "gather", 1);
    KT_CHECK(f->build(a, &s, kfacts_sm90(), NULL, &k, &d) == IR_ERR_INPUT, "gather with a bias epilogue: %s",
             d.msg);
    ir_diag_clear(&d);
    KfamSpec q = kfam_spec("matmul");
    kfam_spec_int(&q, "N", 64);
    kfam_spec_int(&q, "K", 64);
    kfam_spec_str(&q, "dtype", "bf16");
    kfam_spec_str(&q, "wdtype", "q4_0");
    KT_CHECK(f->build(a, &q, kfacts_sm90(), NULL, &k, &d) == IR_ERR_UNSUPPORTED,
             "quantized weights refused: %s", d.msg);
    ir_arena_destroy(a);
}

int main(void)
{
    KrefRng rng = kref_rng(kref_seed());
    const KRunner *ex[] = {&krun_interp, &krun_host, &krun_cuda};
    spec_rules();
    for (unsigned e = 0; e < sizeof ex / sizeof ex[0]; e++) {
        char why[256];
        if (!ex[e]->available(why, sizeof why)) {
            printf("skip %s: %s\n", ex[e]->name, why);
            continue;
        }
        KirConfig small = {0};
        kir_config_set(&small, "BM", 16);
        kir_config_set(&small, "BN", 32);
        kir_config_set(&small, "BK", 32);
        kir_config_set(&small, "WARPS", 4);
        check(ex[e], &rng, KIR_BF16, 7, 3, 40, 33, &small);
        check(ex[e], &rng, KIR_F32, 19, 5, 70, 64, &small);
        check(ex[e], &rng, KIR_F16, 1, 1, 17, 24, NULL);
    }
    return kt_done("test_kfam_logits");
}
