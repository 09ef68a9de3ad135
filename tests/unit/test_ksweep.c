/* test_ksweep.c — the sweep driver's own rules (ksweep.h), on the interpreter and the rmsnorm family:
 *   - a sweep given only configs every build refuses is vacuous: ksweep_verdict flags it (as it flags one
 *     whose configs are >= 90% INVALID), while the same sweep with its defaults is not;
 *   - the reduced tier builds the spec's default config always (NULL, empty or naming default values),
 *     leaves out about three configs in four, counts those as sampled out (never INVALID), decides the
 *     same way for the same seed and differently for another seed (a child run per seed).
 * The verdicts are computed, never summed into this test's result: ksweep_summary is not called. */
#define _POSIX_C_SOURCE 200809L /* setenv, popen */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfacts.h"
#include "kref.h"
#include "ksweep.h"
#include "kt.h"

static KfamSpec spec_of(int C)
{
    KfamSpec s = kfam_spec("rmsnorm");
    kfam_spec_int(&s, "C", C);
    kfam_spec_float(&s, "eps", 1e-5);
    kfam_spec_str(&s, "dtype", "f32");
    kfam_spec_int(&s, "residual", 0);
    return s;
}

/* Builds rmsnorm C for cfg on the interpreter, runs it over 3 rows and checks it against kref_rmsnorm.
 * Returns 1 when it was built (run and checked), 0 when ksweep_build gave NULL. */
static int run_one(KrefRng *g, int C, const KirConfig *cfg)
{
    const KRunner *r = &krun_interp;
    IrArena *a = ir_arena_create();
    KfamSpec s = spec_of(C);
    KirKernel *k = ksweep_build(r, a, &s, cfg);
    if (k) {
        enum { ROWS = 3 };
        size_t n = (size_t)ROWS * C;
        float *x = kref_alloc(KIR_F32, n), *w = kref_alloc(KIR_F32, (size_t)C), *out = kref_alloc(KIR_F32, n);
        double *want = malloc(sizeof(double) * n);
        kref_fill(g, x, KIR_F32, n, -2, 2);
        kref_fill(g, w, KIR_F32, (size_t)C, 0.5, 1.5);
        kref_rmsnorm(x, NULL, w, KIR_F32, ROWS, C, 1e-5, want, NULL);
        KRunArg args[4] = {{x, sizeof(float) * n, 0, 0},
                           {w, sizeof(float) * (size_t)C, 0, 0},
                           {out, sizeof(float) * n, 0, 0},
                           {NULL, 0, ROWS, 0}};
        if (ksweep_run(r, k, args) > 0) {
            double *got = kref_to_double(out, KIR_F32, n);
            double err = kref_rel_l2(got, want, n);
            ksweep_check(r, k, err < kref_tol(KIR_F32), "rmsnorm C=%d: rel-L2 %.3g", C, err);
            free(got);
        }
        free(x), free(w), free(out), free(want);
    }
    ir_arena_destroy(a);
    return k != NULL;
}

/* Configs no rmsnorm build accepts: BLOCK and WARPS must be powers of two. */
static void vacuous(KrefRng *g)
{
    KirConfig bad[3] = {ksweep_cfg(1, "BLOCK", 3), ksweep_cfg(1, "BLOCK", 24), ksweep_cfg(2, "BLOCK", 64, "WARPS", 3)};
    setenv("KILN_TEST_TIER", "full", 1);
    ksweep_reset();
    int built = 0;
    for (int C = 1; C <= 100; C += 33)
        for (int i = 0; i < 3; i++)
            built += run_one(g, C, &bad[i]);
    KT_CHECK(built == 0, "%d refused configs built", built);
    KT_CHECK(ksweep_verdict("(expected) every config refused") == 1, "a sweep of refused configs is vacuous");

    /* 1 config in 10 valid: still vacuous (>= 90% INVALID), though checks passed */
    ksweep_reset();
    KirConfig dflt = ksweep_cfg(0);
    run_one(g, 64, &dflt);
    for (int i = 0; i < 9; i++)
        run_one(g, 64, &bad[i % 3]);
    KT_CHECK(ksweep_verdict("(expected) 9 of 10 configs INVALID") == 1, "a sweep of 90%% INVALID is vacuous");

    /* the same sweep with its defaults and a valid config beside the refused ones: not vacuous */
    ksweep_reset();
    KirConfig ok = ksweep_cfg(3, "BLOCK", 64, "ROWS", 1, "WARPS", 1);
    for (int C = 1; C <= 100; C += 33) {
        built += run_one(g, C, NULL) + run_one(g, C, &ok);
        run_one(g, C, &bad[C % 3]);
    }
    KT_CHECK(built == 8, "%d of 8 valid configs built", built);
    KT_CHECK(ksweep_verdict("test_ksweep") == 0, "a sweep that ran its defaults is not vacuous");
}

/* The reduced tier's decisions for specs C = 1..n and a few valid configs, as a string of 0/1. */
static void decisions(char *out, int n)
{
    static const int blocks[] = {16, 32, 64, 128};
    setenv("KILN_TEST_TIER", "reduced", 1);
    ksweep_reset();
    for (int C = 1; C <= n; C++) {
        IrArena *a = ir_arena_create();
        KfamSpec s = spec_of(C);
        KirConfig c = ksweep_cfg(3, "BLOCK", blocks[C % 4], "ROWS", 1 + C % 2, "WARPS", 1);
        out[C - 1] = ksweep_build(&krun_interp, a, &s, &c) ? '1' : '0';
        ir_arena_destroy(a);
    }
    out[n] = 0;
}

static void reduced(KrefRng *g, const char *self)
{
    setenv("KILN_TEST_TIER", "reduced", 1);
    ksweep_reset();
    KT_CHECK(ksweep_reduced(), "KILN_TEST_TIER=reduced is the reduced tier");
    int nulls = 0, tried = 0, def_missing = 0;
    for (int C = 1; C <= 120; C++) {
        /* the default, three ways: NULL, empty, and naming the default's own values */
        KirConfig def, empty = ksweep_cfg(0);
        memset(&def, 0, sizeof def);
        KfamSpec s = spec_of(C);
        kfam_find("rmsnorm")->defaults(&s, kfacts_sm90(), &def);
        def_missing += !run_one(g, C, NULL) + !run_one(g, C, &empty) + !run_one(g, C, &def);
        KirConfig c = ksweep_cfg(3, "BLOCK", 16 << (C % 3), "ROWS", 1, "WARPS", 1 + C % 2);
        if (kir_config_get(&c, "BLOCK", 0) == kir_config_get(&def, "BLOCK", 0)) continue; /* a default */
        tried++;
        nulls += !run_one(g, C, &c);
    }
    KT_CHECK(def_missing == 0, "%d default configs were left out", def_missing);
    KT_CHECK(ksweep_sampled_out(&krun_interp) == nulls, "sampled out %d, NULL builds of valid configs %d",
             ksweep_sampled_out(&krun_interp), nulls);
    KT_CHECK(nulls * 100 >= tried * 55 && nulls * 100 <= tried * 92, "%d of %d configs sampled out (~3/4)",
             nulls, tried);
    KT_CHECK(ksweep_verdict("test_ksweep reduced") == 0, "sampled-out configs are not INVALID");

    /* the sample: the same for one seed, another for another seed (children with KILN_TEST_SEED) */
    char cmd[1200], got[3][256];
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "KILN_TEST_SEED=%d '%s' --decisions", i == 2 ? 12345 : 777, self);
        FILE *p = popen(cmd, "r");
        got[i][0] = 0;
        char line[512];
        while (p && fgets(line, sizeof line, p))
            if (!strncmp(line, "decisions ", 10)) sscanf(line + 10, "%255s", got[i]);
        KT_CHECK(p && pclose(p) == 0 && strlen(got[i]) == 200, "%s: '%s'", cmd, got[i]);
    }
    KT_CHECK(!strcmp(got[0], got[1]), "the same seed, the same sample");
    KT_CHECK(strcmp(got[0], got[2]) != 0, "another seed, another sample");
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--decisions")) {
        char d[201];
        decisions(d, 200);
        printf("decisions %s\n", d);
        return 0;
    }
    KrefRng g = kref_rng(kref_seed());
    vacuous(&g);
    reduced(&g, argv[0]);
    return kt_done("test_ksweep");
}
