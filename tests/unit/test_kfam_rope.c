/* test_kfam_rope.c — rope on every executor against kref_rope: head counts and sizes 4x64, 9x64
 * (GQA-like, not a power of two), 2x128, 1x256 and 3x6 (D/2 not a power of two), every scaling, all
 * dtypes, several heads-per-program configs; in place on the interpreter, which shares buffers. */
#include <stdlib.h>
#include <string.h>

#include "kref.h"
#include "ksweep.h"
#include "kt.h"

static const KirDtype dtypes[] = {KIR_BF16, KIR_F16, KIR_F32};

static void run_case(const KRunner *r, KrefRng *g, KirDtype dt, const KrefRope *p, int T, int in_place,
                     const KirConfig *cfg)
{
    IrArena *a = ir_arena_create();
    KfamSpec s = kfam_spec("rope");
    kfam_spec_int(&s, "H", p->H);
    kfam_spec_int(&s, "D", p->D);
    kfam_spec_float(&s, "theta", p->theta);
    kfam_spec_str(&s, "scaling", p->scaling);
    kfam_spec_float(&s, "factor", p->factor);
    kfam_spec_float(&s, "low_freq_factor", p->low_freq_factor);
    kfam_spec_float(&s, "high_freq_factor", p->high_freq_factor);
    kfam_spec_float(&s, "original_max_pos", p->original_max_pos);
    kfam_spec_str(&s, "dtype", kir_dtype_name(dt));
    KirKernel *k = ksweep_build(r, a, &s, cfg);
    if (!k) goto done;
    size_t n = (size_t)T * p->H * p->D, bytes = kref_bytes(dt, n);
    void *x = kref_alloc(dt, n), *out = kref_alloc(dt, n);
    int32_t *pos = kref_alloc(KIR_I32, (size_t)T);
    double *want = malloc(sizeof(double) * n);
    int max_pos = dt == KIR_F32 ? 2048 : 16384; /* f32's 1e-4 budget vs a backend's exp2f/cosf ulps */
    for (int i = 0; i < T; i++)
        pos[i] = (int32_t)(kref_next(g) % (uint64_t)max_pos);
    if (T > 1) pos[0] = 0;
    kref_fill(g, x, dt, n, -2, 2);
    kref_rope(x, pos, dt, T, p, want);
    void *dst = in_place ? x : out;
    KRunArg args[4] = {
        {x, bytes, 0, 0}, {pos, kref_bytes(KIR_I32, (size_t)T), 0, 0}, {dst, bytes, 0, 0}, {NULL, 0, T, 0}};
    if (ksweep_run(r, k, args) > 0) {
        double *got = kref_to_double(dst, dt, n);
        double err = kref_rel_l2(got, want, n);
        ksweep_margin(r, err / kref_tol(dt));
        ksweep_check(r, k, err < kref_tol(dt), "rope %s H=%d D=%d T=%d scaling=%s in_place=%d: rel-L2 %.3g",
                     kir_dtype_name(dt), p->H, p->D, T, p->scaling, in_place, err);
        free(got);
    }
    free(x);
    free(out);
    free(pos);
    free(want);
done:
    ir_arena_destroy(a);
}

static void sweep(const KRunner *r, KrefRng *g)
{
    static const int hd[][2] = {{4, 64}, {9, 64}, {2, 128}, {1, 256}, {3, 6}, {32, 128}};
    static const int tokens[] = {1, 3, 7, 64};
    KrefRope ropes[3] = {{0, 0, 10000.0, "none", 1, 1, 4, 8192},
                         {0, 0, 10000.0, "linear", 4.0, 1, 4, 8192},
                         {0, 0, 500000.0, "llama3", 8.0, 1.0, 4.0, 8192}};
    KirConfig cfgs[4];
    cfgs[0] = ksweep_cfg(0);
    cfgs[1] = ksweep_cfg(2, "BH", 1, "WARPS", 1);
    cfgs[2] = ksweep_cfg(2, "BH", 4, "WARPS", 2);
    cfgs[3] = ksweep_cfg(2, "BH", 32, "WARPS", 4);
    int big = ksweep_big(r), n_hd = big ? 6 : 5;
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < n_hd; i++)
            for (int sc = 0; sc < 3; sc++)
                for (int c = 0; c < 4; c++) {
                    KrefRope p = ropes[sc];
                    p.H = hd[i][0];
                    p.D = hd[i][1];
                    run_case(r, g, dtypes[d], &p, tokens[(i + c) % (big ? 4 : 3)], 0, &cfgs[c]);
                }
    if (!big)
        for (int c = 0; c < 4; c++) {
            KrefRope p = ropes[2];
            p.H = 9;
            p.D = 64;
            run_case(r, g, KIR_BF16, &p, 5, 1, &cfgs[c]);
        }
}

int main(void)
{
    const KRunner *rs[3];
    int n = ksweep_runners(rs, 3);
    KrefRng g = kref_rng(kref_seed());
    for (int i = 0; i < n; i++)
        sweep(rs[i], &g);
    ksweep_summary("kfam_rope");
    return kt_done("test_kfam_rope");
}
