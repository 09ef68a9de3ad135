/* test_kfam_attention.c — the attention family (FlashAttention-2 over a paged KV cache) on every
 * executor against kref_attention_paged: ragged batches mixing decode-like rows (q_len 1, long context),
 * whole prefills (q_len = seq_len) and chunked prefills (q_len < seq_len), odd lengths; page tables
 * shuffled (never contiguous), cache slots past a sequence's end and unused pages hold NaN (a kernel
 * that reads them fails); page sizes 8/16/32, GQA ratios 1/4/8, head dims 64/128/256 (and 80, which no
 * power-of-two tile covers), causal or not, sliding window on or off, bf16/f16/f32, several configs,
 * and a grid sized by a max_q larger than needed (programs past q_len must store nothing). The
 * interpreter gets small shapes only. The default kernels must also compile for sm_90a with NVRTC. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "codegen/cg_target.h"
#include "codegen/cuda/cg_cuda.h"
#include "kfacts.h"
#include "kref.h"
#include "ksweep.h"
#include "kt.h"

enum { MAX_SEQS = 8 };

typedef struct Case {
    KirDtype dt;
    int H, Hkv, D, S, causal, window;
    double scale; /* 0: the default 1/sqrt(D) */
    const char *mode;
    int B;
    int q_len[MAX_SEQS], seq_len[MAX_SEQS];
    int extra_q; /* added to max_q: a grid larger than needed */
    int splits;  /* > 0: split-KV (spec split=1) with this many splits, then attention_merge */
    int tree;    /* 1: random draft trees (spec tree=1); 2: chains given as trees */
} Case;

static KfamSpec spec_of(const Case *c)
{
    KfamSpec s = kfam_spec("attention");
    kfam_spec_str(&s, "mode", c->mode ? c->mode : "mixed");
    kfam_spec_int(&s, "H", c->H);
    kfam_spec_int(&s, "Hkv", c->Hkv);
    kfam_spec_int(&s, "D", c->D);
    kfam_spec_int(&s, "page_size", c->S);
    kfam_spec_int(&s, "causal", c->causal);
    kfam_spec_int(&s, "window", c->window);
    kfam_spec_str(&s, "dtype", kir_dtype_name(c->dt));
    if (c->scale > 0) kfam_spec_float(&s, "scale", c->scale);
    if (c->splits) kfam_spec_int(&s, "split", 1);
    if (c->tree) kfam_spec_int(&s, "tree", 1);
    return s;
}

static void shuffle(KrefRng *g, int32_t *x, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(kref_next(g) % (uint64_t)(i + 1));
        int32_t t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}

static void set_nan(void *p, KirDtype t, size_t i)
{
    kref_poison((char *)p + kref_bytes(t, i), (size_t)kir_dtype_bytes(t));
}

static void run_case(const KRunner *r, KrefRng *g, const Case *c, const KirConfig *cfgs, int n_cfgs)
{
    if (!ksweep_mine()) return; /* (KILN_TEST_SHARD) */
    KirDtype dt = c->dt;
    int B = c->B, H = c->H, Hkv = c->Hkv, D = c->D, S = c->S;
    int32_t cu_q[MAX_SEQS + 1], seq_lens[MAX_SEQS];
    int MP = 1, P = 0, max_q = 0;
    cu_q[0] = 0;
    for (int b = 0; b < B; b++) {
        cu_q[b + 1] = cu_q[b] + c->q_len[b];
        seq_lens[b] = c->seq_len[b];
        int np = (c->seq_len[b] + S - 1) / S;
        MP = np + 1 > MP ? np + 1 : MP;
        P += np;
        max_q = c->q_len[b] > max_q ? c->q_len[b] : max_q;
    }
    P += 3; /* unused pages */
    int T = cu_q[B];
    size_t qn = (size_t)T * H * D, row = (size_t)Hkv * D, cn = (size_t)P * S * row;

    /* pages: a shuffled permutation, handed out in order; unused table entries are -1 */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)P), *bt = malloc(sizeof(int32_t) * (size_t)B * MP);
    for (int i = 0; i < P; i++)
        perm[i] = i;
    shuffle(g, perm, P);
    void *q = kref_alloc(dt, qn), *kc = kref_alloc(dt, cn), *vc = kref_alloc(dt, cn),
         *out = kref_alloc(dt, qn);
    kref_fill(g, q, dt, qn, -2, 2);
    kref_fill(g, kc, dt, cn, -1, 1);
    kref_fill(g, vc, dt, cn, -1, 1);
    char *used = calloc((size_t)P * S, 1);
    int next = 0;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < MP; j++) {
            int32_t page = j * S < c->seq_len[b] ? perm[next++] : -1;
            bt[b * MP + j] = page;
            for (int o = 0; page >= 0 && o < S && j * S + o < c->seq_len[b]; o++)
                used[(size_t)page * S + o] = 1;
        }
    for (size_t sl = 0; sl < (size_t)P * S; sl++)
        for (size_t e = 0; !used[sl] && e < row; e++) {
            set_nan(kc, dt, sl * row + e);
            set_nan(vc, dt, sl * row + e);
        }
    /* draft trees: token j of a step's block has a parent p < j (a chain: j - 1); its mask holds its
     * ancestors and itself */
    int64_t *tree = c->tree ? calloc((size_t)(T > 0 ? T : 1), sizeof(int64_t)) : NULL;
    for (int b = 0; tree && b < B; b++)
        for (int j = 0; j < c->q_len[b]; j++) {
            int par = j == 0 ? -1 : c->tree == 2 ? j - 1 : (int)(kref_next(g) % (uint64_t)j);
            tree[cu_q[b] + j] = (par >= 0 ? tree[cu_q[b] + par] : 0) | (int64_t)((uint64_t)1 << j);
        }
    double *want = malloc(sizeof(double) * qn);
    double scale = c->scale > 0 ? c->scale : 1.0 / sqrt((double)D);
    kref_attention_paged(q, kc, vc, dt, bt, seq_lens, cu_q, B, MP, H, Hkv, D, S, c->causal, c->window, tree,
                         scale, want);

    KfamSpec s = spec_of(c);
    for (int i = 0; i < n_cfgs; i++) {
        IrArena *a = ir_arena_create();
        KirKernel *k = ksweep_build(r, a, &s, &cfgs[i]);
        if (k) {
            kref_poison(out, kref_bytes(dt, qn));
            size_t wrows = (size_t)T * H * (c->splits ? c->splits : 1);
            float *ws_o = c->splits ? malloc(sizeof(float) * wrows * D) : NULL;
            float *ws_lse = c->splits ? malloc(sizeof(float) * wrows) : NULL;
            if (c->splits) { /* every partial must be written: NaN where it is not */
                kref_poison(ws_o, sizeof(float) * wrows * D);
                kref_poison(ws_lse, sizeof(float) * wrows);
            }
            KRunArg args[15] = {
                {q, kref_bytes(dt, qn), 0, 0},
                {kc, kref_bytes(dt, cn), 0, 0},
                {vc, kref_bytes(dt, cn), 0, 0},
                {bt, sizeof(int32_t) * (size_t)B * MP, 0, 0},
                {seq_lens, sizeof(int32_t) * (size_t)B, 0, 0},
                {cu_q, sizeof(int32_t) * (size_t)(B + 1), 0, 0},
                {out, kref_bytes(dt, qn), 0, 0},
                {NULL, 0, T, 0},
                {NULL, 0, B, 0},
                {NULL, 0, MP, 0},
                {NULL, 0, max_q + c->extra_q, 0},
            };
            int na = 11;
            if (tree) args[na++] = (KRunArg){tree, sizeof(int64_t) * (size_t)T, 0, 0};
            if (c->splits) {
                args[na++] = (KRunArg){ws_o, sizeof(float) * wrows * D, 0, 0};
                args[na++] = (KRunArg){ws_lse, sizeof(float) * wrows, 0, 0};
                args[na++] = (KRunArg){NULL, 0, c->splits, 0};
            }
            int ran = ksweep_run(r, k, args) > 0;
            if (ran &&
                c->splits > 1) { /* the merge, on the same executor (1 split: out is written directly) */
                KfamSpec ms = kfam_spec("attention_merge");
                kfam_spec_int(&ms, "H", H);
                kfam_spec_int(&ms, "D", D);
                kfam_spec_str(&ms, "dtype", kir_dtype_name(dt));
                /* more splits than one merge trip holds: the merge's own online combination */
                KirConfig mc = c->splits > 8 ? ksweep_cfg(1, "SPLITS", 8) : ksweep_cfg(0);
                KirKernel *mk = ksweep_build_always(r, a, &ms, &mc);
                KRunArg margs[5] = {
                    {ws_o, sizeof(float) * wrows * D, 0, 0},
                    {ws_lse, sizeof(float) * wrows, 0, 0},
                    {out, kref_bytes(dt, qn), 0, 0},
                    {NULL, 0, T, 0},
                    {NULL, 0, c->splits, 0},
                };
                ran = mk && ksweep_run(r, mk, margs) > 0;
            }
            free(ws_o);
            free(ws_lse);
            if (ran) {
                double *got = kref_to_double(out, dt, qn);
                double err = kref_rel_l2(got, want, qn);
                ksweep_margin(r, err / kref_tol(dt));
                ksweep_check(
                    r, k, err < kref_tol(dt),
                    "attention %s H=%d Hkv=%d D=%d S=%d causal=%d window=%d B=%d T=%d splits=%d: rel-L2 %.3g",
                    kir_dtype_name(dt), H, Hkv, D, S, c->causal, c->window, B, T, c->splits, err);
                free(got);
            }
        }
        ir_arena_destroy(a);
    }
    free(perm);
    free(bt);
    free(q);
    free(kc);
    free(vc);
    free(out);
    free(used);
    free(want);
    free(tree);
}

static const KirDtype dtypes[] = {KIR_BF16, KIR_F16, KIR_F32};
static const int ratios[] = {1, 4, 8}, pages[] = {8, 16, 32};

/* (q_len, seq_len) per sequence: decode rows, a whole prefill, chunked prefills, odd lengths. */
static const int small_batch[][2] = {{1, 29}, {7, 7}, {5, 19}, {1, 1}};
static const int big_batch[][2] = {{1, 301}, {77, 77}, {45, 160}, {1, 1}, {130, 213}, {3, 70}};

static void fill_batch(Case *c, const int (*batch)[2], int n)
{
    c->B = n;
    for (int i = 0; i < n; i++) {
        c->q_len[i] = batch[i][0];
        c->seq_len[i] = batch[i][1];
    }
}

static void sweep(const KRunner *r, KrefRng *g)
{
    int big = ksweep_big(r);
    KirConfig cfgs[4];
    cfgs[0] = ksweep_cfg(0);
    cfgs[1] = ksweep_cfg(4, "BLOCK_M", 16, "BLOCK_N", 16, "WARPS", 1, "STAGES", 1);
    cfgs[2] = ksweep_cfg(4, "BLOCK_M", 32, "BLOCK_N", 64, "WARPS", 2, "STAGES", 3);
    cfgs[3] = ksweep_cfg(4, "BLOCK_M", 128, "BLOCK_N", 32, "WARPS", 8, "STAGES", 2);
    static const int dims[] = {64, 128, 256};
    int n = 0;
    for (int di = 0; di < 3; di++)
        for (int hd = 0; hd < 3; hd++)
            for (int mask = 0; mask < 4; mask++, n++) {
                Case c = {0};
                c.dt = dtypes[di];
                c.D = dims[hd];
                int ratio = ratios[(di + hd + mask) % 3];
                c.Hkv = 2;
                c.H = c.Hkv * ratio;
                c.S = pages[(di + 2 * hd + mask) % 3];
                c.causal = mask != 1;
                c.window = mask >= 2 ? (mask == 2 ? 13 : 40) : 0;
                c.extra_q = n % 5 == 0 ? 20 : 0;
                if (n % 7 == 3) c.scale = 0.3;
                if (n % 4 == 1) c.splits = 1 + n % 5; /* split-KV + merge; more splits than key blocks too */
                if (big) {
                    fill_batch(&c, big_batch, 6);
                    /* D = 256 keeps to the smaller batch: the float64 reference dominates the run */
                    if (c.D == 256) fill_batch(&c, small_batch, 4);
                    run_case(r, g, &c, cfgs, n % 3 == 0 ? 4 : 2);
                } else {
                    if (c.D == 256 && (hd + mask) % 4)
                        continue; /* the interpreter: one D = 256 case per dtype */
                    fill_batch(&c, small_batch, 4);
                    if (c.D == 256) c.B = 2;
                    run_case(r, g, &c, cfgs, n % 4 == 0 ? 2 : 1);
                }
            }
    /* decode mode: every sequence one query, long contexts, a window; and a head dim no power-of-two tile
     * covers */
    static const int decode[][2] = {{1, 100}, {1, 33}, {1, 257}, {1, 8}};
    Case c = {
        .dt = KIR_BF16, .H = 8, .Hkv = 2, .D = 128, .S = 16, .causal = 1, .window = 64, .mode = "decode"};
    fill_batch(&c, decode, big ? 4 : 2);
    run_case(r, g, &c, cfgs, big ? 2 : 1);
    c.splits = 3; /* flash-decoding: GQA-packed tiles, split contexts, then the merge */
    run_case(r, g, &c, cfgs, big ? 2 : 1);
    c.splits = 17;
    c.window = 0;
    run_case(r, g, &c, cfgs, 1);
    /* speculative verify: k + 1 query tokens per sequence over long contexts; random draft trees and
     * chains (which must equal plain causal), GQA-packed, split or not */
    static const int verify[][2] = {{5, 100}, {9, 41}, {1, 17}, {9, 9}, {17, 300}, {64, 90}};
    Case v = {.dt = KIR_BF16, .H = 8, .Hkv = 2, .D = 64, .S = 16, .causal = 1, .mode = "verify", .tree = 1};
    fill_batch(&v, verify, big ? 6 : 3);
    run_case(r, g, &v, cfgs, big ? 2 : 1);
    v.tree = 2;
    v.splits = 2;
    run_case(r, g, &v, cfgs, 1);
    v.tree = 1;
    v.dt = KIR_F32;
    v.H = v.Hkv = 4;
    v.D = 128;
    v.splits = 0;
    fill_batch(&v, verify, big ? 5 : 2);
    run_case(r, g, &v, cfgs, 1);
    Case e = {.dt = KIR_F32, .H = 4, .Hkv = 4, .D = 80, .S = 8, .causal = 1, .window = 9};
    fill_batch(&e, small_batch, big ? 4 : 2);
    run_case(r, g, &e, cfgs, big ? 3 : 1);
    /* the engine's f32 prefills (compiled executors only: the interpreter is too slow for them): causal,
     * no window, GQA 4 at D 128 (Llama-3) and GQA 3 at D 64 (SmolLM2), a whole 128-token prompt beside a
     * 64-token chunk over 64 cached tokens */
    static const int prefill[][2] = {{128, 128}, {64, 128}};
    Case f = {.dt = KIR_F32, .H = 32, .Hkv = 8, .D = 128, .S = 16, .causal = 1};
    fill_batch(&f, prefill, 2);
    if (big) run_case(r, g, &f, cfgs, 1);
    f.H = 9, f.Hkv = 3, f.D = 64;
    if (big) run_case(r, g, &f, cfgs, 1);
}

/* The default kernels lower to CUDA C and NVRTC accepts them for sm_90a (no GPU needed). */
static void cuda_compile(void)
{
    const CgTarget *t = cg_target_find("sm_90a");
    static const Case cases[] = {
        {.dt = KIR_BF16, .H = 32, .Hkv = 8, .D = 128, .S = 16, .causal = 1},
        {.dt = KIR_BF16, .H = 32, .Hkv = 8, .D = 128, .S = 16, .causal = 1, .mode = "decode"},
        {.dt = KIR_F16, .H = 32, .Hkv = 8, .D = 64, .S = 32, .causal = 1, .window = 4096},
        {.dt = KIR_BF16, .H = 8, .Hkv = 1, .D = 256, .S = 16, .causal = 0},
        {.dt = KIR_BF16, .H = 32, .Hkv = 8, .D = 128, .S = 16, .causal = 1, .mode = "decode", .splits = 1},
        {.dt = KIR_BF16, .H = 32, .Hkv = 8, .D = 128, .S = 16, .causal = 1, .mode = "verify", .tree = 1},
    };
    if (!t || !cg_backend_for(t, "cuda")) {
        printf("skip cuda compile: this build has no NVRTC\n");
        return;
    }
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!ksweep_mine()) continue; /* each case in one shard: NVRTC's compiles are the cost */
        IrArena *a = ir_arena_create();
        KfamSpec s = spec_of(&cases[i]);
        const KfamFamily *f = kfam_find("attention");
        KirConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        KirKernel *k = NULL;
        IrDiag d = {0};
        KT_CHECK(f && f->build(a, &s, kfacts_sm90(), &cfg, &k, &d) == IR_OK, "attention build: %s", d.msg);
        if (k) {
            KT_CHECK(kir_verify(k, cg_target_limits(t), &d) == IR_OK, "attention %s: sm_90a budgets: %s",
                     k->name, d.msg);
            KT_CHECK(kir_verify(k, cg_target_limits(cg_target_find("host")), &d) == IR_OK,
                     "attention %s: host budgets: %s", k->name, d.msg);
            /* the FlashAttention lowering (docs/BACKENDS.md): each part of the key loop (masked,
             * unmasked, masked again with a window) is a cp.async pipeline whose two dots read Q and P
             * from registers; the softmax statistics stay in registers, so the only barriers are the
             * pipelines' (one per trip, one after each loop). 64-row tiles of 4 warps (the default up
             * to D = 128, decode included) run the dots on wgmma (one m64 warpgroup); 32-row (D = 256)
             * and 16-row (D = 256 decode) tiles on mma.sync. */
            IrBuf src = {0};
            if (cg_cuda_source(k, t, &src, &d) == IR_OK && src.s) {
                int dots = 0, bars = 0, wg = 0, parts = cases[i].window ? 3 : 2;
                for (const char *p = src.s; (p = strstr(p, "A in registers, pipelined B")); p++)
                    dots++;
                for (const char *p = src.s; (p = strstr(p, "A in registers, pipelined B, wgmma")); p++)
                    wg++;
                for (const char *p = src.s; (p = strstr(p, "__syncthreads()")); p++)
                    bars++;
                KT_CHECK(dots == 2 * parts && bars <= 2 * parts,
                         "attention %s: %d register-A pipelined dots, %d barriers", k->name, dots, bars);
                int want_wg = cases[i].D <= 128;
                KT_CHECK(wg == (want_wg ? dots : 0), "attention %s: %d of %d dots on wgmma", k->name, wg,
                         dots);
            }
            ir_buf_free(&src);
            CgBinary cubin, ptx;
            double t0 = ir_now_ms();
            IrStatus st = cg_cuda_compile(k, t, &cubin, &ptx, &d);
            KT_CHECK(st == IR_OK, "attention %s: sm_90a: %s: %s", k->name, ir_status_name(st), d.msg);
            if (st == IR_OK) {
                printf("cuda sm_90a: %s compiled (%zu bytes cubin, %.1f s)\n", k->name, cubin.size,
                       (ir_now_ms() - t0) / 1000);
                cg_binary_free(&cubin);
                cg_binary_free(&ptx);
            }
        }
        ir_arena_destroy(a);
    }
}

/* Bad specs are IR_ERR_INPUT; configs that cannot be are INVALID. */
static void spec_errors(void)
{
    const KfamFamily *f = kfam_find("attention");
    Case c = {.dt = KIR_BF16, .H = 6, .Hkv = 4, .D = 64, .S = 16, .causal = 1};
    KfamSpec s = spec_of(&c);
    IrArena *a = ir_arena_create();
    KirKernel *k = NULL;
    IrDiag d = {0};
    KT_CHECK(f && f->build(a, &s, kfacts_sm90(), NULL, &k, &d) == IR_ERR_INPUT,
             "H %% Hkv != 0 is a bad spec");
    c.H = 8;
    c.D = 512;
    s = spec_of(&c);
    memset(&d, 0, sizeof d);
    KT_CHECK(f && f->build(a, &s, kfacts_sm90(), NULL, &k, &d) == IR_ERR_INPUT, "D > 256 is a bad spec");
    c.D = 64;
    s = spec_of(&c);
    memset(&d, 0, sizeof d);
    KirConfig bad = ksweep_cfg(1, "BLOCK_M", 24);
    KT_CHECK(f && f->build(a, &s, kfacts_sm90(), &bad, &k, &d) == IR_ERR_UNSUPPORTED,
             "BLOCK_M=24 is INVALID");
    ir_arena_destroy(a);
}

/* Every config of the space builds (OK) or is INVALID; a count of those that fit sm_90a. */
static void space_walk(void)
{
    const KfamFamily *f = kfam_find("attention");
    Case c = {.dt = KIR_BF16, .H = 32, .Hkv = 8, .D = 128, .S = 16, .causal = 1, .window = 4096};
    KfamSpec s = spec_of(&c);
    const KirLimits *sm90 = cg_target_limits(cg_target_find("sm_90a"));
    int total = 0, ok = 0, fits = 0;
    for (int i0 = 0; i0 < f->space[0].n; i0++)
        for (int i1 = 0; i1 < f->space[1].n; i1++)
            for (int i2 = 0; i2 < f->space[2].n; i2++)
                for (int i3 = 0; i3 < f->space[3].n; i3++) {
                    KirConfig cfg =
                        ksweep_cfg(4, f->space[0].key, (int)f->space[0].vals[i0], f->space[1].key,
                                   (int)f->space[1].vals[i1], f->space[2].key, (int)f->space[2].vals[i2],
                                   f->space[3].key, (int)f->space[3].vals[i3]);
                    IrArena *a = ir_arena_create();
                    KirKernel *k = NULL;
                    IrDiag d = {0};
                    IrStatus st = f->build(a, &s, kfacts_sm90(), &cfg, &k, &d);
                    total++;
                    KT_CHECK(st == IR_OK || st == IR_ERR_UNSUPPORTED || st == IR_ERR_LIMIT, "space: %s",
                             d.msg);
                    if (st == IR_OK) {
                        ok++;
                        IrDiag d2 = {0};
                        IrStatus v = kir_verify(k, sm90, &d2);
                        KT_CHECK(v == IR_OK || v == IR_ERR_LIMIT, "space: sm_90a verify: %s", d2.msg);
                        fits += v == IR_OK;
                    }
                    ir_arena_destroy(a);
                }
    printf("space attention: %d configs, %d build, %d fit sm_90a\n", total, ok, fits);
}

int main(void)
{
    if (ksweep_shard0()) { /* the parts outside the sweep: once, not in every shard */
        space_walk();
        spec_errors();
    }
    cuda_compile();
    const KRunner *rs[3];
    int n = ksweep_runners(rs, 3);
    KrefRng g = kref_rng(kref_seed());
    for (int i = 0; i < n; i++)
        sweep(rs[i], &g);
    ksweep_summary("kfam_attention");
    return kt_done("test_kfam_attention");
}
