/* test_kfam_quant_rows.c — per-row activation quantization (W8A8's first half) on every executor against a
 * plain C reference in the family's own f32 arithmetic: the row scales bit for bit, and every code exactly
 * (fp8: the e4m3 value; int8: the integer). Rows of random magnitudes, an all-zero row, a row with one
 * element 1000x the rest (which round to tiny codes or zero), odd lengths, one-pass (BLOCK >= C) and
 * two-pass configs, all dtypes; outputs poisoned first. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kref.h"
#include "ksweep.h"
#include "kt.h"

static const KirDtype dtypes[] = {KIR_BF16, KIR_F16, KIR_F32};

/* f32 -> e4m3fn value: nearest even on the format's grid (subnormal step 2^-9), saturating to +-448. */
static float to_e4m3(float v)
{
    float a = fabsf(v);
    if (a >= 448.0f) return v < 0 ? -448.0f : 448.0f;
    int e;
    frexpf(a, &e); /* a = f * 2^e, f in [0.5, 1) */
    double step = a < ldexp(1, -6) ? ldexp(1, -9) : ldexp(1, e - 4);
    double q = rint(a / step) * step; /* rint: ties to even */
    if (q > 448) q = 448;
    return (float)(v < 0 ? -q : q);
}

/* The reference: scales[m] and the codes' values want[m*C + k]. */
static void reference(const void *x, KirDtype dt, int rows, int C, int fp8, float *scales, double *want)
{
    for (int m = 0; m < rows; m++) {
        float amax = 0;
        for (int k = 0; k < C; k++)
            amax = fmaxf(amax, fabsf((float)kref_get(x, dt, (size_t)m * C + k)));
        float s = amax > 0 ? amax / (fp8 ? 448.0f : 127.0f) : 1.0f;
        scales[m] = s;
        for (int k = 0; k < C; k++) {
            float v = (float)kref_get(x, dt, (size_t)m * C + k) / s;
            want[(size_t)m * C + k] = fp8 ? to_e4m3(v) : fminf(fmaxf(rintf(v), -127.0f), 127.0f);
        }
    }
}

static void run_case(const KRunner *r, KrefRng *g, KirDtype dt, int C, int rows, int fp8,
                     const KirConfig *cfg)
{
    IrArena *a = ir_arena_create();
    KfamSpec s = kfam_spec("quant_rows");
    kfam_spec_int(&s, "C", C);
    kfam_spec_str(&s, "dtype", kir_dtype_name(dt));
    kfam_spec_str(&s, "fmt", fp8 ? "fp8" : "int8");
    KirKernel *k = ksweep_build(r, a, &s, cfg);
    if (!k) goto done;
    size_t n = (size_t)rows * C;
    KirDtype qt = fp8 ? KIR_F8E4M3 : KIR_I8;
    void *x = kref_alloc(dt, n), *q = malloc(n);
    float *sc = malloc(sizeof(float) * (size_t)rows), *want_s = malloc(sizeof(float) * (size_t)rows);
    double *want = malloc(sizeof(double) * n);
    if (!q || !sc || !want_s || !want) abort();
    for (int m = 0; m < rows; m++) { /* row magnitudes 1e-3 .. 10 (spikes stay finite in f16); row 1 zero;
                                      * row 2 one spike */
        double mag = m == 1 ? 0 : pow(10, kref_uniform(g, -3, 1));
        for (int c = 0; c < C; c++)
            kref_set(x, dt, (size_t)m * C + c, mag * kref_uniform(g, -1, 1));
        if (m == 2) kref_set(x, dt, (size_t)m * C + (size_t)(kref_next(g) % (unsigned)C), 1000 * mag);
    }
    reference(x, dt, rows, C, fp8, want_s, want);
    memset(q, 0xff, n); /* poison: NaN codes / -1 */
    memset(sc, 0xff, sizeof(float) * (size_t)rows);
    KRunArg args[4] = {
        {x, kref_bytes(dt, n), 0, 0},
        {q, n, 0, 0},
        {sc, sizeof(float) * (size_t)rows, 0, 0},
        {NULL, 0, rows, 0},
    };
    if (ksweep_run(r, k, args) > 0) {
        int bad_s = 0, bad_q = 0;
        for (int m = 0; m < rows; m++)
            bad_s += memcmp(&sc[m], &want_s[m], sizeof(float)) != 0;
        for (size_t i = 0; i < n; i++)
            if (!(kref_get(q, qt, i) == want[i]) && bad_q++ < 3)
                fprintf(stderr, "  code %zu: got %.9g want %.9g\n", i, kref_get(q, qt, i), want[i]);
        ksweep_check(r, k, bad_s == 0 && bad_q == 0,
                     "quant_rows %s %s C=%d rows=%d: %d scales and %d codes differ", fp8 ? "fp8" : "int8",
                     kir_dtype_name(dt), C, rows, bad_s, bad_q);
    }
    free(x);
    free(q);
    free(sc);
    free(want_s);
    free(want);
done:
    ir_arena_destroy(a);
}

static void sweep(const KRunner *r, KrefRng *g)
{
    static const int lens[] = {7, 64, 1000, 4096, 5003};
    KirConfig cfgs[3] = {ksweep_cfg(0), ksweep_cfg(2, "BLOCK", 256, "WARPS", 2),
                         ksweep_cfg(2, "BLOCK", 8192, "WARPS", 8)};
    for (int fp8 = 0; fp8 < 2; fp8++)
        for (int di = 0; di < 3; di++)
            for (unsigned li = 0; li < sizeof lens / sizeof lens[0]; li++)
                for (int c = 0; c < 3; c++)
                    if ((c + (int)li + di) % 2 == 0 || c == 0)
                        run_case(r, g, dtypes[di], lens[li], 5 + (int)li, fp8, &cfgs[c]);
}

int main(void)
{
    const KRunner *rs[3];
    int n = ksweep_runners(rs, 3);
    KrefRng g = kref_rng(kref_seed());
    for (int i = 0; i < n; i++)
        sweep(rs[i], &g);
    ksweep_summary("kfam_quant_rows");
    return kt_done("test_kfam_quant_rows");
}
