/* test_kfam_matmul.c — matmul (every epilogue) and split-K (matmul into a zeroed f32 workspace, then
 * matmul_splitk_epilogue) on every executor against kref_matmul: M, N, K that no tile divides, all
 * dtypes, configs across tile sizes, warps, stages and split-K; silu_mul and pair with SPLIT_K > 1 must
 * be INVALID. Epilogue pair's two outputs (both poisoned first) are also compared bit for bit with two
 * epilogue-none launches of the same config, one per weight; epilogue group (two or three products of
 * different widths in one grid) likewise, each output against its own product. Split-K inside the launch
 * (spec ws=1): partial slices poisoned, tile counters zero; each config runs twice, both against the
 * reference, bit-identical to each other (fixed summation order), counters zero after each run. Inputs and
 * the reference are made once per case and shared by its configs. The host target's own tiles (BM 1, 16,
 * 128: a package's host binaries) on every dtype and epilogue. */
#include <stdlib.h>
#include <string.h>

#include "kfacts.h"
#include "kref.h"
#include "ksweep.h"
#include "kt.h"

static const KirDtype dtypes[] = {KIR_BF16, KIR_F16, KIR_F32};
static const char *const epilogues[] = {"none", "bias", "residual", "silu_mul", "pair"};
enum { N_EPI = sizeof epilogues / sizeof epilogues[0] };

typedef struct Case {
    KirDtype dt;
    int M, N, K;
    const char *epi;
    void *x, *w, *w2, *bias, *res, *out, *out2, *sep; /* sep: a separate epilogue-none output */
    float *ws;
    double *want, *want2; /* want2: pair's second output */
    int host;             /* the configs are the host target's own tiles: built with its facts */
} Case;

/* always: never sampled out (a kernel that a check of an already built config needs) */
static KirKernel *build(const KRunner *r, IrArena *a, const Case *c, const char *family, const char *epi,
                        const KirConfig *cfg, int always)
{
    KfamSpec s = kfam_spec(family);
    kfam_spec_int(&s, "N", c->N);
    if (cfg) kfam_spec_int(&s, "K", c->K);
    kfam_spec_str(&s, "dtype", kir_dtype_name(c->dt));
    kfam_spec_str(&s, "epilogue", epi);
    if (c->host) return ksweep_build_host(r, a, &s, cfg);
    return always ? ksweep_build_always(r, a, &s, cfg) : ksweep_build(r, a, &s, cfg);
}

/* Epilogue pair: each output equals, bit for bit, an epilogue-none launch of k's config with its weight. */
static void check_pair_bits(const KRunner *r, IrArena *a, const Case *c, const KirKernel *k)
{
    KirKernel *nk = build(r, a, c, "matmul", "none", &k->cfg, 1);
    size_t mk = (size_t)c->M * c->K, wn = (size_t)c->N * c->K, mn = kref_bytes(c->dt, (size_t)c->M * c->N);
    for (int i = 0; nk && i < 2; i++) {
        kref_poison(c->sep, mn);
        KRunArg args[4] = {{c->x, kref_bytes(c->dt, mk), 0, 0},
                           {i ? c->w2 : c->w, kref_bytes(c->dt, wn), 0, 0},
                           {c->sep, mn, 0, 0},
                           {NULL, 0, c->M, 0}};
        if (ksweep_run(r, nk, args) > 0)
            ksweep_check(r, k, !memcmp(c->sep, i ? c->out2 : c->out, mn),
                         "matmul pair %s M=%d N=%d K=%d: out%s differs from epilogue none's bits",
                         kir_dtype_name(c->dt), c->M, c->N, c->K, i ? "2" : "");
    }
}

static void run_config(const KRunner *r, const Case *c, const KirConfig *cfg)
{
    IrArena *a = ir_arena_create();
    KirKernel *k = build(r, a, c, "matmul", c->epi, cfg, 0), *ek = NULL;
    int split = (int)kir_config_get(cfg, "SPLIT_K", 1), pair = !strcmp(c->epi, "pair");
    int two = pair || !strcmp(c->epi, "silu_mul");
    int bias = !strcmp(c->epi, "bias"), resid = !strcmp(c->epi, "residual");
    KirDtype dt = c->dt;
    size_t mk = (size_t)c->M * c->K, nk = (size_t)c->N * c->K, mn = (size_t)c->M * c->N;
    ksweep_check(r, k, !(two && split > 1 && k), "matmul %s SPLIT_K=%d built", c->epi, split);
    if (!k || (split > 1 && !(ek = build(r, a, c, "matmul_splitk_epilogue", c->epi, NULL, 1)))) goto done;
    kref_poison(c->out, kref_bytes(dt, mn));
    kref_poison(c->out2, kref_bytes(dt, mn));
    memset(c->ws, 0, sizeof(float) * mn);
    KRunArg args[8];
    int n = 0, ran;
    args[n++] = (KRunArg){c->x, kref_bytes(dt, mk), 0, 0};
    args[n++] = (KRunArg){c->w, kref_bytes(dt, nk), 0, 0};
    if (split > 1) {
        args[n++] = (KRunArg){c->ws, sizeof(float) * mn, 0, 0};
    } else {
        if (two) args[n++] = (KRunArg){c->w2, kref_bytes(dt, nk), 0, 0};
        if (bias) args[n++] = (KRunArg){c->bias, kref_bytes(dt, (size_t)c->N), 0, 0};
        if (resid) args[n++] = (KRunArg){c->res, kref_bytes(dt, mn), 0, 0};
        args[n++] = (KRunArg){c->out, kref_bytes(dt, mn), 0, 0};
        if (pair) args[n++] = (KRunArg){c->out2, kref_bytes(dt, mn), 0, 0};
    }
    args[n++] = (KRunArg){NULL, 0, c->M, 0};
    ran = ksweep_run(r, k, args);
    if (ran > 0 && ek) {
        n = 0;
        args[n++] = (KRunArg){c->ws, sizeof(float) * mn, 0, 0};
        if (bias) args[n++] = (KRunArg){c->bias, kref_bytes(dt, (size_t)c->N), 0, 0};
        if (resid) args[n++] = (KRunArg){c->res, kref_bytes(dt, mn), 0, 0};
        args[n++] = (KRunArg){c->out, kref_bytes(dt, mn), 0, 0};
        args[n++] = (KRunArg){NULL, 0, c->M, 0};
        ran = ksweep_run(r, ek, args);
    }
    for (int o = 0; ran > 0 && o < 1 + pair; o++) {
        double *got = kref_to_double(o ? c->out2 : c->out, dt, mn);
        double err = kref_rel_l2(got, o ? c->want2 : c->want, mn);
        ksweep_margin(r, err / kref_tol(dt));
        ksweep_check(r, k, err < kref_tol(dt), "matmul %s M=%d N=%d K=%d epilogue=%s: out%s rel-L2 %.3g",
                     kir_dtype_name(dt), c->M, c->N, c->K, c->epi, o ? "2" : "", err);
        free(got);
    }
    if (ran > 0 && pair) check_pair_bits(r, a, c, k);
done:
    ir_arena_destroy(a);
}

static void run_case(const KRunner *r, KrefRng *g, Case c, const KirConfig *cfgs, int n_cfgs)
{
    if (!ksweep_mine()) return; /* (KILN_TEST_SHARD) */
    KirDtype dt = c.dt;
    size_t mk = (size_t)c.M * c.K, nk = (size_t)c.N * c.K, mn = (size_t)c.M * c.N;
    c.x = kref_alloc(dt, mk);
    c.w = kref_alloc(dt, nk);
    c.w2 = kref_alloc(dt, nk);
    c.bias = kref_alloc(dt, (size_t)c.N);
    c.res = kref_alloc(dt, mn);
    c.out = kref_alloc(dt, mn);
    c.out2 = kref_alloc(dt, mn);
    c.sep = kref_alloc(dt, mn);
    c.ws = kref_alloc(KIR_F32, mn);
    c.want = malloc(sizeof(double) * mn);
    c.want2 = malloc(sizeof(double) * mn);
    kref_fill(g, c.x, dt, mk, -1, 1);
    kref_fill(g, c.w, dt, nk, -1, 1);
    kref_fill(g, c.w2, dt, nk, -1, 1);
    kref_fill(g, c.bias, dt, (size_t)c.N, -1, 1);
    kref_fill(g, c.res, dt, mn, -2, 2);
    int pair = !strcmp(c.epi, "pair");
    /* pair: two epilogue-none products */
    kref_matmul(c.x, c.w, c.w2, c.bias, c.res, dt, c.M, c.N, c.K, pair ? "none" : c.epi, c.want);
    if (pair) kref_matmul(c.x, c.w2, NULL, NULL, NULL, dt, c.M, c.N, c.K, "none", c.want2);
    for (int i = 0; i < n_cfgs; i++)
        run_config(r, &c, &cfgs[i]);
    free(c.x);
    free(c.w);
    free(c.w2);
    free(c.bias);
    free(c.res);
    free(c.out);
    free(c.out2);
    free(c.sep);
    free(c.ws);
    free(c.want);
    free(c.want2);
}

static void sweep(const KRunner *r, KrefRng *g)
{
    static const int small[][3] = {{1, 33, 17}, {3, 64, 64}, {17, 97, 143}, {130, 50, 40}};
    static const int large[][3] = {{1, 1000, 515}, {130, 257, 1031}, {64, 4096, 256}};
    KirConfig cfgs[6];
    cfgs[0] = ksweep_cfg(0);
    cfgs[1] = ksweep_cfg(6, "BM", 16, "BN", 32, "BK", 16, "WARPS", 4, "STAGES", 1, "SPLIT_K", 1);
    cfgs[2] = ksweep_cfg(6, "BM", 32, "BN", 64, "BK", 32, "WARPS", 4, "STAGES", 2, "SPLIT_K", 2);
    cfgs[3] = ksweep_cfg(6, "BM", 64, "BN", 16, "BK", 64, "WARPS", 2, "STAGES", 3, "SPLIT_K", 4);
    cfgs[4] = ksweep_cfg(6, "BM", 128, "BN", 128, "BK", 32, "WARPS", 8, "STAGES", 4, "SPLIT_K", 1);
    cfgs[5] = ksweep_cfg(6, "BM", 16, "BN", 256, "BK", 128, "WARPS", 8, "STAGES", 2, "SPLIT_K", 8);
    int big = ksweep_big(r);
    for (int d = 0; d < 3; d++)
        for (int e = 0; e < N_EPI; e++) {
            for (int i = 0; i < 4; i++) {
                Case c = {.dt = dtypes[d],
                          .M = small[i][0],
                          .N = small[i][1],
                          .K = small[i][2],
                          .epi = epilogues[e]};
                run_case(r, g, c, cfgs, 6);
            }
            /* the large shapes: one dtype each, so compiled executors see them without a long run */
            for (int i = 0; big && i < 3; i++)
                if (i == d) {
                    Case c = {.dt = dtypes[d],
                              .M = large[i][0],
                              .N = large[i][1],
                              .K = large[i][2],
                              .epi = epilogues[e]};
                    run_case(r, g, c, cfgs, 3);
                }
        }
}

/* Epilogue group: products of N, N2 and N3 (0: two) columns side by side in one grid. Each output against
 * its own float64 product and bit for bit against an epilogue-none launch of the same config. */
static void run_group(const KRunner *r, KrefRng *g, KirDtype dt, int M, const int n[3], int K,
                      const KirConfig *cfgs, int n_cfgs)
{
    if (!ksweep_mine()) return; /* (KILN_TEST_SHARD) */
    int n_out = n[2] ? 3 : 2;
    size_t mk = (size_t)M * K;
    int n_max = n[0] > n[1] ? n[0] : n[1];
    n_max = n[2] > n_max ? n[2] : n_max;
    void *x = kref_alloc(dt, mk), *w[3] = {0}, *out[3] = {0}, *sep = kref_alloc(dt, (size_t)M * n_max);
    double *want[3] = {0};
    kref_fill(g, x, dt, mk, -1, 1);
    for (int i = 0; i < n_out; i++) {
        w[i] = kref_alloc(dt, (size_t)n[i] * K);
        out[i] = kref_alloc(dt, (size_t)M * n[i]);
        want[i] = malloc(sizeof(double) * (size_t)M * n[i]);
        kref_fill(g, w[i], dt, (size_t)n[i] * K, -1, 1);
        kref_matmul(x, w[i], NULL, NULL, NULL, dt, M, n[i], K, "none", want[i]);
    }
    for (int c = 0; c < n_cfgs; c++) {
        IrArena *a = ir_arena_create();
        KfamSpec s = kfam_spec("matmul");
        kfam_spec_int(&s, "N", n[0]);
        kfam_spec_int(&s, "N2", n[1]);
        if (n[2]) kfam_spec_int(&s, "N3", n[2]);
        kfam_spec_int(&s, "K", K);
        kfam_spec_str(&s, "dtype", kir_dtype_name(dt));
        kfam_spec_str(&s, "epilogue", "group");
        KirKernel *k = ksweep_build(r, a, &s, &cfgs[c]);
        KRunArg args[8];
        int na = 0;
        args[na++] = (KRunArg){x, kref_bytes(dt, mk), 0, 0};
        for (int i = 0; i < n_out; i++)
            args[na++] = (KRunArg){w[i], kref_bytes(dt, (size_t)n[i] * K), 0, 0};
        for (int i = 0; i < n_out; i++) {
            kref_poison(out[i], kref_bytes(dt, (size_t)M * n[i]));
            args[na++] = (KRunArg){out[i], kref_bytes(dt, (size_t)M * n[i]), 0, 0};
        }
        args[na++] = (KRunArg){NULL, 0, M, 0};
        if (!k || ksweep_run(r, k, args) <= 0) goto next;
        for (int i = 0; i < n_out; i++) {
            size_t mn = (size_t)M * n[i];
            double *got = kref_to_double(out[i], dt, mn);
            double err = kref_rel_l2(got, want[i], mn);
            free(got);
            ksweep_margin(r, err / kref_tol(dt));
            ksweep_check(r, k, err < kref_tol(dt), "matmul group %s M=%d N=%d/%d/%d K=%d: out%d rel-L2 %.3g",
                         kir_dtype_name(dt), M, n[0], n[1], n[2], K, i + 1, err);
            Case c1 = {.dt = dt, .M = M, .N = n[i], .K = K};
            KirKernel *nk = build(r, a, &c1, "matmul", "none", &k->cfg, 1);
            kref_poison(sep, kref_bytes(dt, mn));
            KRunArg sa[4] = {{x, kref_bytes(dt, mk), 0, 0},
                             {w[i], kref_bytes(dt, (size_t)n[i] * K), 0, 0},
                             {sep, kref_bytes(dt, mn), 0, 0},
                             {NULL, 0, M, 0}};
            if (nk && ksweep_run(r, nk, sa) > 0)
                ksweep_check(r, k, !memcmp(sep, out[i], kref_bytes(dt, mn)),
                             "matmul group M=%d: out%d differs from epilogue none's bits", M, i + 1);
        }
    next:
        ir_arena_destroy(a);
    }
    for (int i = 0; i < n_out; i++) {
        free(w[i]);
        free(out[i]);
        free(want[i]);
    }
    free(x);
    free(sep);
}

static void sweep_group(const KRunner *r, KrefRng *g)
{
    /* M, N, N2, N3, K: N3 not a multiple of BN (the last product ends mid-tile), two products, Llama-like */
    static const int shapes[][5] = {{1, 64, 32, 40, 48},
                                    {17, 128, 32, 32, 143},
                                    {3, 96, 48, 0, 64},
                                    {130, 64, 64, 64, 40},
                                    {16, 512, 128, 128, 512}};
    KirConfig cfgs[4];
    cfgs[0] = ksweep_cfg(0);
    cfgs[1] = ksweep_cfg(6, "BM", 16, "BN", 16, "BK", 64, "WARPS", 2, "STAGES", 3, "SPLIT_K", 1);
    cfgs[2] = ksweep_cfg(6, "BM", 64, "BN", 32, "BK", 32, "WARPS", 4, "STAGES", 2, "SPLIT_K", 1);
    cfgs[3] =
        ksweep_cfg(6, "BM", 16, "BN", 32, "BK", 16, "WARPS", 1, "STAGES", 1, "SPLIT_K", 2); /* INVALID */
    int n_shapes = ksweep_big(r) ? 5 : 4;
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < n_shapes; i++)
            run_group(r, g, dtypes[d], shapes[i][0], &shapes[i][1], shapes[i][4], cfgs, 4);
}

/* Split-K reduced inside the launch (spec ws=1; M <= KFAM_SPLITK_ROWS). */
static void run_inline(const KRunner *r, KrefRng *g, KirDtype dt, int M, int N, int K, const char *epi,
                       const KirConfig *cfgs, int n_cfgs)
{
    if (!ksweep_mine()) return; /* (KILN_TEST_SHARD) */
    int bias = !strcmp(epi, "bias"), resid = !strcmp(epi, "residual");
    size_t mk = (size_t)M * K, nk = (size_t)N * K, mn = (size_t)M * N, ob = kref_bytes(dt, mn);
    size_t wsn = (size_t)KFAM_SPLITK_WS(N), semn = (size_t)KFAM_SPLITK_SEMS(N);
    void *x = kref_alloc(dt, mk), *w = kref_alloc(dt, nk), *b = kref_alloc(dt, (size_t)N);
    void *res = kref_alloc(dt, mn), *out = kref_alloc(dt, mn), *first = kref_alloc(dt, mn);
    float *ws = kref_alloc(KIR_F32, wsn);
    int32_t *sem = kref_alloc(KIR_I32, semn);
    double *want = malloc(sizeof(double) * mn);
    kref_fill(g, x, dt, mk, -1, 1);
    kref_fill(g, w, dt, nk, -1, 1);
    kref_fill(g, b, dt, (size_t)N, -1, 1);
    kref_fill(g, res, dt, mn, -2, 2);
    kref_matmul(x, w, NULL, b, res, dt, M, N, K, epi, want);
    for (int c = 0; c < n_cfgs; c++) {
        IrArena *a = ir_arena_create();
        KfamSpec s = kfam_spec("matmul");
        kfam_spec_int(&s, "N", N);
        kfam_spec_int(&s, "K", K);
        kfam_spec_str(&s, "dtype", kir_dtype_name(dt));
        kfam_spec_str(&s, "epilogue", epi);
        kfam_spec_int(&s, "ws", 1);
        KirKernel *k = ksweep_build(r, a, &s, &cfgs[c]);
        memset(sem, 0, sizeof(int32_t) * semn);
        kref_poison(ws, sizeof(float) * wsn); /* a slice read before its program wrote it gives NaN */
        for (int run = 0; k && run < 2; run++) {
            KRunArg args[8];
            int na = 0;
            kref_poison(out, ob);
            args[na++] = (KRunArg){x, kref_bytes(dt, mk), 0, 0};
            args[na++] = (KRunArg){w, kref_bytes(dt, nk), 0, 0};
            if (bias) args[na++] = (KRunArg){b, kref_bytes(dt, (size_t)N), 0, 0};
            if (resid) args[na++] = (KRunArg){res, ob, 0, 0};
            args[na++] = (KRunArg){out, ob, 0, 0};
            args[na++] = (KRunArg){ws, sizeof(float) * wsn, 0, 0};
            args[na++] = (KRunArg){sem, sizeof(int32_t) * semn, 0, 0};
            args[na++] = (KRunArg){NULL, 0, M, 0};
            if (ksweep_run(r, k, args) <= 0) break;
            double *got = kref_to_double(out, dt, mn);
            double err = kref_rel_l2(got, want, mn);
            free(got);
            int zero = 1;
            for (size_t i = 0; i < semn; i++)
                zero &= sem[i] == 0;
            ksweep_margin(r, err / kref_tol(dt));
            ksweep_check(r, k, err < kref_tol(dt) && zero,
                         "matmul ws=1 %s M=%d N=%d K=%d epilogue=%s run %d: rel-L2 %.3g, counters %s",
                         kir_dtype_name(dt), M, N, K, epi, run, err, zero ? "zero" : "NOT zero");
            if (run)
                ksweep_check(r, k, !memcmp(out, first, ob), "matmul ws=1 M=%d N=%d K=%d: runs differ", M, N,
                             K);
            else
                memcpy(first, out, ob);
        }
        ir_arena_destroy(a);
    }
    free(x), free(w), free(b), free(res), free(out), free(first), free(ws), free(sem), free(want);
}

static void sweep_inline(const KRunner *r, KrefRng *g)
{
    static const int shapes[][3] = {
        {1, 33, 143}, {5, 100, 600}, {16, 64, 1031}, {33, 256, 517}, {64, 130, 2048}};
    static const char *const epis[] = {"none", "bias", "residual"};
    KirConfig cfgs[7];
    cfgs[0] = ksweep_cfg(0);
    cfgs[1] = ksweep_cfg(6, "BM", 16, "BN", 16, "BK", 16, "WARPS", 1, "STAGES", 1, "SPLIT_K", 2);
    cfgs[2] = ksweep_cfg(6, "BM", 32, "BN", 32, "BK", 32, "WARPS", 2, "STAGES", 2, "SPLIT_K", 4);
    cfgs[3] = ksweep_cfg(6, "BM", 64, "BN", 64, "BK", 64, "WARPS", 4, "STAGES", 3, "SPLIT_K", 8);
    cfgs[4] = ksweep_cfg(6, "BM", 16, "BN", 64, "BK", 128, "WARPS", 4, "STAGES", 2, "SPLIT_K", 2);
    cfgs[5] =
        ksweep_cfg(6, "BM", 128, "BN", 32, "BK", 32, "WARPS", 8, "STAGES", 2, "SPLIT_K", 2);     /* INVALID */
    cfgs[6] = ksweep_cfg(6, "BM", 16, "BN", 8, "BK", 16, "WARPS", 1, "STAGES", 1, "SPLIT_K", 2); /* INVALID */
    int n_shapes = ksweep_big(r) ? 5 : 4;
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < n_shapes; i++)
            run_inline(r, g, dtypes[d], shapes[i][0], shapes[i][1], shapes[i][2], epis[(d + i) % 3], cfgs, 7);
    /* the contract's edges: not with silu_mul, not past KFAM_SPLITK_MAX slices */
    if (!ksweep_shard0()) return;
    IrArena *a = ir_arena_create();
    KfamSpec s = kfam_spec("matmul");
    kfam_spec_int(&s, "N", 64);
    kfam_spec_int(&s, "K", 4096);
    kfam_spec_str(&s, "dtype", "bf16");
    kfam_spec_str(&s, "epilogue", "silu_mul");
    kfam_spec_int(&s, "ws", 1);
    KirConfig c16 = ksweep_cfg(6, "BM", 16, "BN", 16, "BK", 16, "WARPS", 1, "STAGES", 1, "SPLIT_K", 16);
    IrDiag d = {0};
    KirKernel *k = NULL;
    const KfamFamily *mm = kfam_find("matmul");
    KT_CHECK(mm->build(a, &s, kfacts_sm90(), &cfgs[0], &k, &d) == IR_ERR_UNSUPPORTED,
             "ws=1 silu_mul refused");
    kfam_spec_str(&s, "epilogue", "none");
    KT_CHECK(mm->build(a, &s, kfacts_sm90(), &c16, &k, &d) == IR_ERR_UNSUPPORTED, "ws=1 SPLIT_K=16 refused");
    ir_arena_destroy(a);
}

/* The host target's own tiles (its facts: BM 1 for a decode step, 16, 128), as a package's host binaries
 * run them: every launch size against each, M, N and K that no tile divides, every dtype and epilogue;
 * and epilogue group (BN dividing N and N2). */
static void host_tiles(const KRunner *r, KrefRng *g)
{
    static const int hints[3] = {1, 16, 0}, shapes[][3] = {{1, 37, 70}, {5, 40, 100}, {19, 97, 143}};
    for (int d = 0; d < 3; d++)
        for (int e = 0; e < N_EPI; e++) {
            int sh = (d + e) % 3;
            Case c = {.dt = dtypes[d],
                      .M = shapes[sh][0],
                      .N = shapes[sh][1],
                      .K = shapes[sh][2],
                      .epi = epilogues[e],
                      .host = 1};
            KfamSpec s = kfam_spec("matmul");
            kfam_spec_int(&s, "N", c.N);
            kfam_spec_int(&s, "K", c.K);
            kfam_spec_str(&s, "epilogue", c.epi);
            KirConfig cfgs[3];
            for (int h = 0; h < 3; h++)
                cfgs[h] = ksweep_host_cfg(&s, hints[h]);
            ksweep_check(
                r, NULL, kir_config_get(&cfgs[0], "BM", 0) == 1 && kir_config_get(&cfgs[2], "BM", 0) > 16,
                "matmul host tiles: BM %lld for a decode step, %lld for prefill",
                (long long)kir_config_get(&cfgs[0], "BM", 0), (long long)kir_config_get(&cfgs[2], "BM", 0));
            run_case(r, g, c, cfgs, 3);
        }
    static const int group[3] = {576, 192, 192};
    KfamSpec s = kfam_spec("matmul");
    kfam_spec_int(&s, "N", group[0]);
    kfam_spec_int(&s, "N2", group[1]);
    kfam_spec_int(&s, "N3", group[2]);
    kfam_spec_int(&s, "K", 96);
    kfam_spec_str(&s, "epilogue", "group");
    KirConfig cfgs[3];
    for (int h = 0; h < 3; h++)
        cfgs[h] = ksweep_host_cfg(&s, hints[h]);
    run_group(r, g, KIR_F32, 3, group, 96, cfgs, 3);
}

int main(void)
{
    const KRunner *rs[3];
    int n = ksweep_runners(rs, 3);
    KrefRng g = kref_rng(kref_seed());
    for (int i = 0; i < n; i++)
        sweep(rs[i], &g), sweep_group(rs[i], &g), sweep_inline(rs[i], &g), host_tiles(rs[i], &g);
    ksweep_summary("kfam_matmul");
    return kt_done("test_kfam_matmul");
}
