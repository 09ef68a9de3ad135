/* test_kfam_rmsnorm.c — rmsnorm (plain and fused with the residual add) on every executor against
 * kref_rmsnorm: odd row lengths, one-pass (BLOCK >= C) and two-pass (BLOCK < C) configs, several rows
 * per program, all dtypes; in place (out == x, sum_out == r) on the interpreter, which shares buffers. */
#include <stdlib.h>
#include <string.h>

#include "kref.h"
#include "ksweep.h"
#include "kt.h"

static const KirDtype dtypes[] = {KIR_BF16, KIR_F16, KIR_F32};

static void run_case(const KRunner *r, KrefRng *g, KirDtype dt, int C, int rows, int residual, int in_place,
                     const KirConfig *cfg)
{
    IrArena *a = ir_arena_create();
    double eps = C % 2 ? 1e-5 : 1e-6;
    KfamSpec s = kfam_spec("rmsnorm");
    kfam_spec_int(&s, "C", C);
    kfam_spec_float(&s, "eps", eps);
    kfam_spec_str(&s, "dtype", kir_dtype_name(dt));
    kfam_spec_int(&s, "residual", residual);
    KirKernel *k = ksweep_build(r, a, &s, cfg);
    if (!k) goto done;
    size_t n = (size_t)rows * C, bytes = kref_bytes(dt, n);
    void *x = kref_alloc(dt, n), *res = kref_alloc(dt, n), *w = kref_alloc(dt, (size_t)C);
    void *out = kref_alloc(dt, n), *sum = kref_alloc(dt, n);
    double *want = malloc(sizeof(double) * n), *want_sum = malloc(sizeof(double) * n);
    kref_fill(g, x, dt, n, -3, 3);
    kref_fill(g, res, dt, n, -1, 1);
    kref_fill(g, w, dt, (size_t)C, 0.5, 1.5);
    kref_rmsnorm(x, residual ? res : NULL, w, dt, rows, C, eps, want, want_sum);
    void *out_buf = in_place ? x : out, *sum_buf = in_place ? res : sum;
    KRunArg args[6];
    int i = 0;
    args[i++] = (KRunArg){x, bytes, 0, 0};
    if (residual) args[i++] = (KRunArg){res, bytes, 0, 0};
    args[i++] = (KRunArg){w, kref_bytes(dt, (size_t)C), 0, 0};
    args[i++] = (KRunArg){out_buf, bytes, 0, 0};
    if (residual) args[i++] = (KRunArg){sum_buf, bytes, 0, 0};
    args[i++] = (KRunArg){NULL, 0, rows, 0};
    if (ksweep_run(r, k, args) > 0) {
        double *got = kref_to_double(out_buf, dt, n), *got_sum = kref_to_double(sum_buf, dt, n);
        double err = kref_rel_l2(got, want, n), err_sum = residual ? kref_rel_l2(got_sum, want_sum, n) : 0;
        ksweep_margin(r, (err > err_sum ? err : err_sum) / kref_tol(dt));
        ksweep_check(r, k, err < kref_tol(dt) && err_sum < kref_tol(dt),
                     "rmsnorm %s C=%d rows=%d residual=%d in_place=%d: rel-L2 %.3g (sum_out %.3g)",
                     kir_dtype_name(dt), C, rows, residual, in_place, err, err_sum);
        free(got);
        free(got_sum);
    }
    free(x);
    free(res);
    free(w);
    free(out);
    free(sum);
    free(want);
    free(want_sum);
done:
    ir_arena_destroy(a);
}

static void sweep(const KRunner *r, KrefRng *g)
{
    static const int shapes[][2] = {{1, 3}, {7, 5}, {100, 3}, {4099, 2}, {4096, 33}, {8192, 7}};
    KirConfig cfgs[6];
    cfgs[0] = ksweep_cfg(0);
    cfgs[1] = ksweep_cfg(3, "BLOCK", 64, "ROWS", 1, "WARPS", 1);
    cfgs[2] = ksweep_cfg(3, "BLOCK", 256, "ROWS", 2, "WARPS", 2);
    cfgs[3] = ksweep_cfg(3, "BLOCK", 1024, "ROWS", 4, "WARPS", 4);
    cfgs[4] = ksweep_cfg(3, "BLOCK", 8192, "ROWS", 1, "WARPS", 16);
    cfgs[5] = ksweep_cfg(3, "BLOCK", 4096, "ROWS", 4, "WARPS", 8); /* pipelined rows at Llama's width */
    int n_shapes = ksweep_big(r) ? 6 : 4, interp = !ksweep_big(r);
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < n_shapes; i++)
            for (int c = 0; c < 6; c++)
                for (int residual = 0; residual < 2; residual++)
                    run_case(r, g, dtypes[d], shapes[i][0], shapes[i][1], residual, 0, &cfgs[c]);
    if (interp)
        for (int c = 0; c < 6; c++) {
            run_case(r, g, KIR_BF16, 100, 3, 1, 1, &cfgs[c]);
            run_case(r, g, KIR_F32, 4099, 2, 0, 1, &cfgs[c]);
        }
}

int main(void)
{
    const KRunner *rs[3];
    int n = ksweep_runners(rs, 3);
    KrefRng g = kref_rng(kref_seed());
    for (int i = 0; i < n; i++)
        sweep(rs[i], &g);
    ksweep_summary("kfam_rmsnorm");
    return kt_done("test_kfam_rmsnorm");
}
