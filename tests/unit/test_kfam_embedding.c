/* test_kfam_embedding.c — the embedding family on every executor against kref_embedding: hidden sizes
 * that no tile divides, out-of-range ids (must give zero rows), all dtypes, several configs. The copy
 * is exact, so the check is bitwise. */
#include <stdlib.h>
#include <string.h>

#include "kref.h"
#include "ksweep.h"
#include "kt.h"

static const KirDtype dtypes[] = {KIR_BF16, KIR_F16, KIR_F32};

static void run_case(const KRunner *r, KrefRng *g, KirDtype dt, int C, int V, int T, const KirConfig *cfg)
{
    IrArena *a = ir_arena_create();
    KfamSpec s = kfam_spec("embedding");
    kfam_spec_int(&s, "C", C);
    kfam_spec_int(&s, "V", V);
    kfam_spec_str(&s, "dtype", kir_dtype_name(dt));
    KirKernel *k = ksweep_build(r, a, &s, cfg);
    if (!k) goto done;
    int32_t *ids = kref_alloc(KIR_I32, (size_t)T);
    void *table = kref_alloc(dt, (size_t)V * C), *out = kref_alloc(dt, (size_t)T * C);
    double *want = malloc(sizeof(double) * (size_t)T * C);
    for (int i = 0; i < T; i++)
        ids[i] = (int32_t)(kref_next(g) % (uint64_t)V);
    if (T > 1) ids[1] = -1; /* out of range: zeros */
    if (T > 2) ids[2] = V;
    if (T > 3) ids[3] = V + 1000;
    kref_fill(g, table, dt, (size_t)V * C, -2, 2);
    KRunArg args[4] = {{ids, kref_bytes(KIR_I32, (size_t)T), 0, 0},
                       {table, kref_bytes(dt, (size_t)V * C), 0, 0},
                       {out, kref_bytes(dt, (size_t)T * C), 0, 0},
                       {NULL, 0, T, 0}};
    if (ksweep_run(r, k, args) > 0) {
        kref_embedding(ids, table, dt, T, V, C, want);
        size_t bad = 0;
        for (size_t i = 0; i < (size_t)T * C; i++)
            bad += kref_get(out, dt, i) != want[i];
        ksweep_check(r, k, bad == 0, "embedding %s C=%d V=%d T=%d: %zu of %zu elements differ",
                     kir_dtype_name(dt), C, V, T, bad, (size_t)T * C);
    }
    free(ids);
    free(table);
    free(out);
    free(want);
done:
    ir_arena_destroy(a);
}

static void sweep(const KRunner *r, KrefRng *g)
{
    static const int shapes[][3] = {{1, 5, 3}, {7, 50, 4}, {100, 33, 5}, {4099, 10, 2}, {4096, 1000, 64}};
    KirConfig cfgs[4];
    cfgs[0] = ksweep_cfg(0);
    cfgs[1] = ksweep_cfg(2, "BLOCK", 32, "WARPS", 1);
    cfgs[2] = ksweep_cfg(2, "BLOCK", 256, "WARPS", 2);
    cfgs[3] = ksweep_cfg(2, "BLOCK", 1024, "WARPS", 4);
    int n_shapes = ksweep_big(r) ? 5 : 4;
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < n_shapes; i++)
            for (int c = 0; c < 4; c++)
                run_case(r, g, dtypes[d], shapes[i][0], shapes[i][1], shapes[i][2], &cfgs[c]);
}

int main(void)
{
    const KRunner *rs[3];
    int n = ksweep_runners(rs, 3);
    KrefRng g = kref_rng(kref_seed());
    for (int i = 0; i < n; i++)
        sweep(rs[i], &g);
    ksweep_summary("kfam_embedding");
    return kt_done("test_kfam_embedding");
}
