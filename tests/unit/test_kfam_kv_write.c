/* test_kfam_kv_write.c — kv_write on every executor against kref_kv_write: page sizes 8/16/32, kv heads
 * 1/2/8 (and 3, 5: not powers of two), head dims 64/128/256 (and 80, 6), odd token counts, distinct
 * random slots over random pages with some padding tokens (slot -1), caches pre-filled with random data
 * so every cell not written must come back unchanged, all dtypes, rope off (a bitwise-exact copy) and
 * on (none / linear / llama3; K within the dtype's rel-L2 tolerance, V still exact), several configs;
 * rope on is also compared bit for bit with the unfused pair it replaces (fuse-rope-kv-write): the rope
 * family on K (default config, output poisoned), then kv_write rope=0 at the same config into copies of
 * the caches. With query heads (H > 0, fuse-rope-q-kv-write) q_out (poisoned first) must equal, bit for
 * bit, the rope family's launch on q. Also: the cache offsets are i64 in the IR. */
#include <stdlib.h>
#include <string.h>

#include "kfacts.h"
#include "kref.h"
#include "ksweep.h"
#include "kt.h"

static const KirDtype dtypes[] = {KIR_BF16, KIR_F16, KIR_F32};

typedef struct Case {
    KirDtype dt;
    int S, H, D, T;
    const KrefRope *rope; /* NULL: rope=0 */
    int Hq;               /* query heads rotated too (needs rope); 0: none */
} Case;

static void rope_keys(KfamSpec *s, const KrefRope *rope)
{
    kfam_spec_float(s, "theta", rope->theta);
    kfam_spec_str(s, "scaling", rope->scaling);
    kfam_spec_float(s, "factor", rope->factor);
    kfam_spec_float(s, "low_freq_factor", rope->low_freq_factor);
    kfam_spec_float(s, "high_freq_factor", rope->high_freq_factor);
    kfam_spec_float(s, "original_max_pos", rope->original_max_pos);
}

/* kv_write for c, with rope=1 when c->rope and with_rope. */
static KfamSpec case_spec(const Case *c, int with_rope)
{
    KfamSpec s = kfam_spec("kv_write");
    kfam_spec_int(&s, "Hkv", c->H);
    kfam_spec_int(&s, "D", c->D);
    kfam_spec_int(&s, "page_size", c->S);
    kfam_spec_str(&s, "dtype", kir_dtype_name(c->dt));
    if (c->rope && with_rope) {
        kfam_spec_int(&s, "rope", 1);
        rope_keys(&s, c->rope);
        if (c->Hq) kfam_spec_int(&s, "H", c->Hq);
    }
    return s;
}

/* q_out of the fused launch against the rope family (default config) on q, bit for bit. */
static void check_q(const KRunner *r, IrArena *a, const Case *c, const KirKernel *fused, void *q,
                    const void *q_out, int32_t *pos)
{
    KfamSpec rs = kfam_spec("rope");
    kfam_spec_int(&rs, "H", c->Hq);
    kfam_spec_int(&rs, "D", c->D);
    rope_keys(&rs, c->rope);
    kfam_spec_str(&rs, "dtype", kir_dtype_name(c->dt));
    KirKernel *rk = ksweep_build(r, a, &rs, NULL);
    size_t nq = (size_t)c->T * c->Hq * c->D, qb = kref_bytes(c->dt, nq);
    void *want = kref_alloc(c->dt, nq);
    kref_poison(want, qb);
    KRunArg ra[4] = {
        {q, qb, 0, 0}, {pos, kref_bytes(KIR_I32, (size_t)c->T), 0, 0}, {want, qb, 0, 0}, {NULL, 0, c->T, 0}};
    if (rk && ksweep_run(r, rk, ra) > 0)
        ksweep_check(r, fused, !memcmp(want, q_out, qb),
                     "kv_write %s Hkv=%d H=%d D=%d T=%d: q_out differs from the rope family's",
                     kir_dtype_name(c->dt), c->H, c->Hq, c->D, c->T);
    free(want);
}

/* The buffers of one run: inputs [T, Hkv*D], caches [n_slots, Hkv*D], slots and positions [T]. */
typedef struct Bufs {
    void *k, *v, *kc, *vc;
    int32_t *slots, *pos;
    size_t n, nc;
} Bufs;

/* The unfused pair: rope (H = Hkv) on b->k, then kv_write rope=0 at cfg into copies of the caches kc0,
 * vc0 as they were before the fused launch; the caches must equal the fused ones (b) bit for bit. */
static void check_unfused(const KRunner *r, IrArena *a, const Case *c, const KirKernel *fused,
                          const KirConfig *cfg, const Bufs *b, const void *kc0, const void *vc0)
{
    KfamSpec rs = kfam_spec("rope"), ws = case_spec(c, 0);
    kfam_spec_int(&rs, "H", c->H);
    kfam_spec_int(&rs, "D", c->D);
    rope_keys(&rs, c->rope);
    kfam_spec_str(&rs, "dtype", kir_dtype_name(c->dt));
    KirKernel *rk = ksweep_build(r, a, &rs, NULL), *wk = ksweep_build_always(r, a, &ws, cfg);
    if (!rk || !wk) return;
    size_t in_bytes = kref_bytes(c->dt, b->n), c_bytes = kref_bytes(c->dt, b->nc);
    size_t t_bytes = kref_bytes(KIR_I32, (size_t)c->T);
    void *kr = kref_alloc(c->dt, b->n), *kc = malloc(c_bytes), *vc = malloc(c_bytes);
    if (!kc || !vc) abort();
    memcpy(kc, kc0, c_bytes);
    memcpy(vc, vc0, c_bytes);
    KRunArg ra[4] = {
        {b->k, in_bytes, 0, 0}, {b->pos, t_bytes, 0, 0}, {kr, in_bytes, 0, 0}, {NULL, 0, c->T, 0}};
    KRunArg wa[6] = {{kr, in_bytes, 0, 0}, {b->v, in_bytes, 0, 0},    {kc, c_bytes, 0, 0},
                     {vc, c_bytes, 0, 0},  {b->slots, t_bytes, 0, 0}, {NULL, 0, c->T, 0}};
    if (ksweep_run(r, rk, ra) > 0 && ksweep_run(r, wk, wa) > 0)
        ksweep_check(r, fused, !memcmp(kc, b->kc, c_bytes) && !memcmp(vc, b->vc, c_bytes),
                     "kv_write %s S=%d Hkv=%d D=%d T=%d rope=%s: caches differ from rope + kv_write rope=0",
                     kir_dtype_name(c->dt), c->S, c->H, c->D, c->T, c->rope->scaling);
    free(kr);
    free(kc);
    free(vc);
}

/* T distinct slots over P pages of S (a random permutation's prefix); about one in five is -1. */
static void pick_slots(KrefRng *g, int32_t *slots, int T, int n_slots)
{
    int32_t *all = malloc(sizeof(int32_t) * (size_t)n_slots);
    for (int i = 0; i < n_slots; i++)
        all[i] = i;
    for (int i = n_slots - 1; i > 0; i--) {
        int j = (int)(kref_next(g) % (uint64_t)(i + 1));
        int32_t x = all[i];
        all[i] = all[j];
        all[j] = x;
    }
    for (int i = 0; i < T; i++)
        slots[i] = kref_next(g) % 5 == 0 ? -1 : all[i];
    if (T > 2) slots[T / 2] = -1;
    free(all);
}

static void run_case(const KRunner *r, KrefRng *g, const Case *c, const KirConfig *cfg)
{
    if (!ksweep_mine()) return; /* (KILN_TEST_SHARD) */
    IrArena *a = ir_arena_create();
    KfamSpec s = case_spec(c, 1);
    KirKernel *k = ksweep_build(r, a, &s, cfg);
    if (!k) goto done;
    KirDtype dt = c->dt;
    int P = (c->T + c->S - 1) / c->S + 1 + (int)(kref_next(g) % 4), n_slots = P * c->S;
    size_t row = (size_t)c->H * c->D, n = (size_t)c->T * row, nc = (size_t)n_slots * row;
    void *kx = kref_alloc(dt, n), *vx = kref_alloc(dt, n), *kc = kref_alloc(dt, nc), *vc = kref_alloc(dt, nc);
    int32_t *slots = kref_alloc(KIR_I32, (size_t)c->T), *pos = kref_alloc(KIR_I32, (size_t)c->T);
    kref_fill(g, kx, dt, n, -2, 2);
    kref_fill(g, vx, dt, n, -2, 2);
    kref_fill(g, kc, dt, nc, -3, 3);
    kref_fill(g, vc, dt, nc, -3, 3);
    pick_slots(g, slots, c->T, n_slots);
    int max_pos = dt == KIR_F32 ? 2048 : 16384; /* as test_kfam_rope: f32's budget vs exp2f/cosf ulps */
    for (int i = 0; i < c->T; i++)
        pos[i] = (int32_t)(kref_next(g) % (uint64_t)max_pos);
    double *kwant = kref_to_double(kc, dt, nc), *vwant = kref_to_double(vc, dt, nc);
    KrefRope rp;
    if (c->rope) {
        rp = *c->rope;
        rp.H = c->H;
        rp.D = c->D;
    }
    kref_kv_write(kx, vx, slots, pos, dt, c->T, c->H, c->D, c->rope ? &rp : NULL, kwant, vwant);
    void *kc0 = kref_alloc(dt, nc), *vc0 = kref_alloc(dt, nc); /* the caches before the launch */
    memcpy(kc0, kc, kref_bytes(dt, nc));
    memcpy(vc0, vc, kref_bytes(dt, nc));
    KRunArg args[8] = {{kx, kref_bytes(dt, n), 0, 0},
                       {vx, kref_bytes(dt, n), 0, 0},
                       {kc, kref_bytes(dt, nc), 0, 0},
                       {vc, kref_bytes(dt, nc), 0, 0},
                       {slots, kref_bytes(KIR_I32, (size_t)c->T), 0, 0}};
    KRunArg more[3];
    int na = 5;
    size_t nq = (size_t)c->T * c->Hq * c->D;
    void *q = c->Hq ? kref_alloc(dt, nq) : NULL, *q_out = c->Hq ? kref_alloc(dt, nq) : NULL;
    if (q) {
        kref_fill(g, q, dt, nq, -2, 2);
        kref_poison(q_out, kref_bytes(dt, nq));
    }
    if (c->rope) more[0] = (KRunArg){pos, kref_bytes(KIR_I32, (size_t)c->T), 0, 0};
    if (q)
        more[1] = (KRunArg){q, kref_bytes(dt, nq), 0, 0},
        more[2] = (KRunArg){q_out, kref_bytes(dt, nq), 0, 0};
    for (int i = 0; c->rope && i < (q ? 3 : 1); i++)
        args[na++] = more[i];
    KRunArg all[9];
    memcpy(all, args, sizeof(KRunArg) * (size_t)na);
    all[na] = (KRunArg){NULL, 0, c->T, 0};
    if (ksweep_run(r, k, all) > 0) {
        double *kgot = kref_to_double(kc, dt, nc), *vgot = kref_to_double(vc, dt, nc);
        /* Exact everywhere but rope's K rows, which are collected for rel-L2. */
        double *rg = malloc(sizeof(double) * (n + 1)), *rw = malloc(sizeof(double) * (n + 1));
        size_t n_rot = 0, bad_v = 0, bad_k = 0;
        char *written = calloc((size_t)n_slots, 1);
        for (int t = 0; c->rope && t < c->T; t++)
            if (slots[t] >= 0) written[slots[t]] = 1;
        for (size_t e = 0; e < nc; e++) {
            bad_v += vgot[e] != vwant[e];
            if (written[e / row]) {
                rg[n_rot] = kgot[e];
                rw[n_rot++] = kwant[e];
            } else {
                bad_k += kgot[e] != kwant[e];
            }
        }
        double err = n_rot ? kref_rel_l2(rg, rw, n_rot) : 0;
        if (c->rope) ksweep_margin(r, err / kref_tol(dt));
        ksweep_check(r, k, bad_v == 0 && bad_k == 0 && err < kref_tol(dt),
                     "kv_write %s S=%d Hkv=%d D=%d T=%d P=%d rope=%s: %zu v cells and %zu exact k cells "
                     "differ, rope rel-L2 %.3g",
                     kir_dtype_name(dt), c->S, c->H, c->D, c->T, P, c->rope ? c->rope->scaling : "off", bad_v,
                     bad_k, err);
        free(kgot);
        free(vgot);
        free(rg);
        free(rw);
        free(written);
        Bufs b = {kx, vx, kc, vc, slots, pos, n, nc};
        if (c->rope) check_unfused(r, a, c, k, cfg, &b, kc0, vc0);
        if (q) check_q(r, a, c, k, q, q_out, pos);
    }
    free(q);
    free(q_out);
    free(kc0);
    free(vc0);
    free(kx);
    free(vx);
    free(kc);
    free(vc);
    free(slots);
    free(pos);
    free(kwant);
    free(vwant);
done:
    ir_arena_destroy(a);
}

static void sweep(const KRunner *r, KrefRng *g)
{
    static const int pages[] = {8, 16, 32}, heads[] = {1, 2, 8}, dims[] = {64, 128, 256};
    static const int tokens[] = {1, 3, 7, 13, 33};
    static const KrefRope ropes[3] = {{0, 0, 10000.0, "none", 1, 1, 4, 8192},
                                      {0, 0, 10000.0, "linear", 4.0, 1, 4, 8192},
                                      {0, 0, 500000.0, "llama3", 8.0, 1.0, 4.0, 8192}};
    KirConfig cfgs[4];
    cfgs[0] = ksweep_cfg(0);
    cfgs[1] = ksweep_cfg(2, "BH", 1, "WARPS", 1);
    cfgs[2] = ksweep_cfg(2, "BH", 4, "WARPS", 2);
    cfgs[3] = ksweep_cfg(2, "BH", 32, "WARPS", 8);
    int nt = ksweep_big(r) ? 5 : 4, idx = 0;
    for (int d = 0; d < 3; d++)
        for (int p = 0; p < 3; p++)
            for (int h = 0; h < 3; h++)
                for (int x = 0; x < 3; x++, idx++) {
                    Case c = {dtypes[d], pages[p], heads[h], dims[x], tokens[idx % nt], NULL, 0};
                    run_case(r, g, &c, &cfgs[idx % 4]);
                    c.rope = &ropes[idx % 3];
                    c.T = tokens[(idx + 1) % nt];
                    run_case(r, g, &c, &cfgs[(idx + 1) % 4]);
                    c.Hq = heads[h] * (idx % 2 ? 4 : 1); /* GQA 4 and MHA: Q rotated in the same launch */
                    run_case(r, g, &c, &cfgs[(idx + 2) % 4]);
                }
    /* Heads and dims that are not powers of two: both masks, every config. */
    static const int odd[][2] = {{3, 80}, {5, 6}};
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < 2; i++)
            for (int cf = 0; cf < 4; cf++) {
                Case c = {dtypes[d], 16, odd[i][0], odd[i][1], 7, cf % 2 ? &ropes[2] : NULL, 0};
                run_case(r, g, &c, &cfgs[cf]);
                if (c.rope) c.Hq = 7, run_case(r, g, &c, &cfgs[cf]); /* 7 query heads: partial head tiles */
            }
}

/* The cache offsets are i64 (a pool may exceed 2^31 elements); k/v offsets need not be. */
static void test_i64_offsets(void)
{
    static const KrefRope rope = {0, 0, 10000.0, "none", 1, 1, 4, 8192};
    for (int with_rope = 0; with_rope < 2; with_rope++) {
        IrArena *a = ir_arena_create();
        Case c = {KIR_BF16, 16, 8, 128, 1, with_rope ? &rope : NULL, 0};
        KfamSpec s = case_spec(&c, 1);
        KirKernel *k = NULL;
        IrDiag d = {0};
        KirConfig none = {0};
        KT_CHECK(kfam_find("kv_write")->build(a, &s, kfacts_sm90(), &none, &k, &d) == IR_OK, "build: %s",
                 d.msg);
        int stores = 0, wide = 0;
        for (int i = 0; k && i < k->body->n_insts; i++) {
            const KirInst *in = k->body->insts[i];
            if (in->op != KIR_OP_STORE) continue;
            stores++;
            wide += in->ops[1]->type.dtype == KIR_I64;
        }
        KT_CHECK(stores == 2 + with_rope && wide == stores, "rope=%d: %d stores, %d with i64 offsets",
                 with_rope, stores, wide);
        KT_CHECK(!k || k->n_params == 6 + with_rope, "rope=%d: %d params", with_rope, k ? k->n_params : -1);
        ir_arena_destroy(a);
    }
}

int main(void)
{
    test_i64_offsets();
    const KRunner *rs[3];
    int n = ksweep_runners(rs, 3);
    KrefRng g = kref_rng(kref_seed());
    for (int i = 0; i < n; i++)
        sweep(rs[i], &g);
    ksweep_summary("kfam_kv_write");
    return kt_done("test_kfam_kv_write");
}
