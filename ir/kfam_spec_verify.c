/* kfam_spec_verify.c — speculative-decoding acceptance: which of a sequence's k draft tokens the target
 * model accepts, and the token that follows them. One program per sequence.
 *
 * Inputs of sequence b: target logits for k+1 positions, rows b*(k+1) + j of `logits` (row j is the
 * distribution after draft token j-1: it predicts draft token j for j < k, the bonus token for j = k),
 * and the draft tokens draft[b*k + j]. Outputs: accepted[b] = n in [0, k] (draft tokens 0..n-1 are kept)
 * and bonus[b], the token emitted after them (the correction at the first rejection, or the extra token
 * when all k are accepted). A step emits n + 1 tokens.
 *
 * mode "greedy": n = length of the longest prefix with argmax(row j) == draft[j]; bonus = argmax(row n).
 *   argmax as in the sample family: ties to the smallest index, a row of all -inf gives 0. Exact.
 * mode "sample" (rejection sampling, Leviathan et al. 2023 / Chen et al. 2023): per sequence
 *   params[b] = (T, top_k, top_p, seed), the sample family's layout (f32; seed integral, exact below 2^24,
 *   truncated to i64); top_k and top_p are NOT applied (the target is softmax(x / T) unfiltered).
 *   draft_probs row b*(k+1) + j (j < k) is q_j, the distribution the draft token j was drawn from (row
 *   b*(k+1) + k is never read). For j = 0, 1, ... in order, with x = row j of the logits:
 *     m = max x, Z = sum exp((x - m) / T) (f32, online over BLOCK chunks), p_j(t) = exp((x_t - m) / T) / Z;
 *     draft token d = draft[b*k + j] is accepted iff 0 <= d < V and u_j * q_j(d) < p_j(d) (f32), i.e.
 *     u_j < min(1, p_j(d) / q_j(d)), with u_j = rand(seed, -1 - j);
 *     at the first rejection (j < k): n = j, bonus ~ norm(max(0, p_j - q_j)); if all k are accepted:
 *     n = k, bonus ~ p_k.
 *   Drawing uses Gumbel-max as the sample family does: token = argmax_t (log w(t) + g_t) with
 *   g_t = -log(-log(max(rand(seed, (j+1)*V + t), 2^-25))), w = max(0, p_j - q_j) (as f32, log(0) = -inf:
 *   never drawn) or, at j = k, log w(t) = (x_t - m) / T. When the residual has no positive entry (p_j <= q_j
 *   everywhere in f32: only when p_j ~ q_j, where a rejection is itself rounding noise) the bonus is drawn
 *   from p_j the same way. Then the emitted tokens are distributed exactly as T-sampling from the
 *   target (up to f32 rounding and the 2^-25 clamp).
 *   Counters: u_j uses -1 - j (negative) and the noise of position j uses [(j+1)*V, (j+2)*V); the sample
 *   family uses [0, V). So a seed may be shared with the sample draws that made the draft without
 *   correlating them. Noise depends on (seed, j, t) only, not on b: a request's outcome does not depend on
 *   its slot in the batch, and sequences that share a seed share their noise (callers derive a
 *   per-request, per-step seed, as for sample).
 *   T <= 0 (or NaN), or a row of all -inf: that position is decided greedily (exactly as mode greedy).
 *   NaN or +inf logits, negative or NaN q give unspecified (in-range) results.
 *
 * Spec: V (vocabulary), k (draft length, 1..64), mode ("greedy" | "sample"). (k+2)*V must fit i32.
 * Params, in order (the graph op spec_verify's inputs, outputs, then sym B; ir/sched.c):
 *   logits       ptr<f32> [B*(k+1), V]  rdonly
 *   draft        ptr<i32> [B, k]        rdonly
 *   [draft_probs ptr<f32> [B*(k+1), V]  rdonly]   mode "sample"
 *   [params      ptr<f32> [B, 4]        rdonly]   mode "sample"
 *   accepted     ptr<i32> [B]
 *   bonus        ptr<i32> [B]
 *   n_seqs       i32 (B)
 * Grid (n_seqs, 1, 1). Config: BLOCK (columns per tile of every pass over a row), WARPS.
 * Cost: rows 0..n are read once each (greedy: argmax; sample: max, Z and argmax in one online pass), and
 * in sample mode row n once more (draft_probs row n too) to draw the bonus; passes past the decision run
 * zero trips. B*(k+1)*V must fit i32 offsets.
 */
#include "kfam_impl.h"

#include <math.h>
#include <string.h>

extern const KfamFamily kfam_spec_verify;

enum { SPEC_MAX_K = 64 };

static void spec_verify_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    int64_t block = kfam_clamp(kfam_pow2_ceil(kfam_spec_i(s, "V", 32000)), 32, 2048);
    kir_config_set(cfg, "BLOCK", block);
    kir_config_set(cfg, "WARPS", kfam_clamp(block / 256, 1, 8));
}

typedef struct Seq {
    int64_t V;
    int block, sampling;
    KirValue *logits, *probs, *lanes, *cV, *ninf, *inv_t;
} Seq;

/* A loop over the columns [0, hi) of one row (offsets from base) in BLOCK steps. */
typedef struct Tile {
    KirBlock *body;
    KirValue *cols, *mask, *offs, *x; /* columns; mask (NULL when BLOCK divides V); offsets; logits */
} Tile;

static Tile row_loop(KirBuilder *b, const Seq *q, KirValue *hi, KirValue *base, KirValue *const *inits, int n)
{
    Tile t;
    t.body = kir_for_begin(b, kir_const_i32(b, 0), hi, kir_const_i32(b, q->block), inits, n, 0);
    t.cols = kir_add(b, t.body->args[0], q->lanes);
    t.mask = q->V % q->block ? kir_lt(b, t.cols, q->cV) : NULL;
    t.offs = kir_add(b, base, t.cols);
    t.x = kir_load(b, q->logits, t.offs, t.mask, t.mask ? q->ninf : NULL); /* masked lanes: -inf */
    return t;
}

/* One step of a running argmax over tiles: the key's maximum and its smallest column (masked lanes
 * excluded) replace (best, idx) when strictly greater. Returns that condition. */
static KirValue *argmax_step(KirBuilder *b, KirValue *key, KirValue *cols, KirValue *mask, KirValue *best,
                             KirValue *idx, KirValue **nbest, KirValue **nidx)
{
    KirValue *tmax = kir_reduce(b, key, KIR_RED_MAX, 0);
    KirValue *at = kfam_and(b, kir_binary(b, KIR_OP_EQ, key, tmax), mask);
    KirValue *tidx = kir_reduce(b, kir_select(b, at, cols, kir_const_i32(b, 2147483647)), KIR_RED_MIN, 0);
    KirValue *better = kir_binary(b, KIR_OP_GT, tmax, best);
    *nbest = kir_select(b, better, tmax, best);
    *nidx = kir_select(b, better, tidx, idx);
    return better;
}

/* Pass over a row (hi: V, or 0 to skip): its maximum *m, the argmax *am and, when sampling, the online
 * sum *z = sum exp((x - m) * inv_t) (0 when the row is all -inf). */
static void row_stats(KirBuilder *b, const Seq *q, KirValue *base, KirValue *hi, KirValue **m, KirValue **am,
                      KirValue **z)
{
    KirValue *fzero = kir_const_f(b, KIR_F32, 0);
    KirValue *inits[3] = {q->ninf, kir_const_i32(b, 0), fzero};
    int n = q->sampling ? 3 : 2;
    Tile t = row_loop(b, q, hi, base, inits, n);
    KirValue *m_in = t.body->args[1], *next[3];
    KirValue *grew = argmax_step(b, t.x, t.cols, t.mask, m_in, t.body->args[2], &next[0], &next[1]);
    if (q->sampling) {
        KirValue *m_out = next[0];
        KirValue *rescale = kir_unary(b, KIR_OP_EXP, kir_mul(b, kir_sub(b, m_in, m_out), q->inv_t));
        KirValue *scale = kir_select(b, grew, rescale, kir_const_f(b, KIR_F32, 1.0));
        KirValue *e = kir_unary(b, KIR_OP_EXP, kir_mul(b, kir_sub(b, t.x, m_out), q->inv_t));
        KirValue *sum = kir_add(b, kir_mul(b, t.body->args[3], scale), kir_reduce(b, e, KIR_RED_SUM, 0));
        next[2] = kir_select(b, kir_binary(b, KIR_OP_GT, m_out, q->ninf), sum, fzero);
    }
    KirInst *loop = kir_for_end(b, next, n);
    *m = loop->res[0];
    *am = loop->res[1];
    *z = q->sampling ? loop->res[2] : NULL;
}

/* Pass over row j (hi: V, or 0 to skip) drawing the bonus token by Gumbel-max: from max(0, p - q) when
 * is_draft (falling back to p when that has no positive entry), else from p. */
static KirValue *draw_bonus(KirBuilder *b, const Seq *q, KirValue *base, KirValue *hi, KirValue *m,
                            KirValue *z, KirValue *is_draft, KirValue *seed, KirValue *ctr0)
{
    KirValue *izero = kir_const_i32(b, 0), *fzero = kir_const_f(b, KIR_F32, 0);
    KirValue *inits[4] = {q->ninf, izero, q->ninf, izero};
    Tile t = row_loop(b, q, hi, base, inits, 4);
    KirValue *lx = kir_mul(b, kir_sub(b, t.x, m), q->inv_t);
    KirValue *p = kir_div(b, kir_unary(b, KIR_OP_EXP, lx), z);
    KirValue *qv = kir_load(b, q->probs, t.offs, kfam_and(b, t.mask, is_draft), fzero);
    KirValue *r = kir_binary(b, KIR_OP_MAX, kir_sub(b, p, qv), fzero);
    KirValue *u = kir_binary(b, KIR_OP_MAX, kir_rand(b, seed, kir_add(b, t.cols, ctr0)),
                             kir_const_f(b, KIR_F32, ldexp(1.0, -25)));
    KirValue *g = kir_unary(b, KIR_OP_NEG,
                            kir_unary(b, KIR_OP_LOG, kir_unary(b, KIR_OP_NEG, kir_unary(b, KIR_OP_LOG, u))));
    KirValue *rkey = kir_add(b, kir_unary(b, KIR_OP_LOG, r), g), *pkey = kir_add(b, lx, g);
    if (t.mask) {
        rkey = kir_select(b, t.mask, rkey, q->ninf);
        pkey = kir_select(b, t.mask, pkey, q->ninf);
    }
    KirValue *next[4];
    argmax_step(b, rkey, t.cols, t.mask, t.body->args[1], t.body->args[2], &next[0], &next[1]);
    argmax_step(b, pkey, t.cols, t.mask, t.body->args[3], t.body->args[4], &next[2], &next[3]);
    KirInst *loop = kir_for_end(b, next, 4);
    KirValue *use_r = kir_binary(b, KIR_OP_AND, is_draft, kir_binary(b, KIR_OP_GT, loop->res[0], q->ninf));
    return kir_select(b, use_r, loop->res[1], loop->res[3]);
}

static IrStatus spec_verify_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts,
                                  const KirConfig *given, KirKernel **out, IrDiag *d)
{
    Seq q = {0};
    int64_t K;
    KirConfig cfg;
    if (kfam_spec_need(s, "V", 1, KFAM_MAX_I32_OFFSET / 2, &q.V, d) ||
        kfam_spec_need(s, "k", 1, SPEC_MAX_K, &K, d))
        return d->status;
    const char *mode = kfam_spec_s(s, "mode", "greedy");
    q.sampling = !strcmp(mode, "sample");
    if (!q.sampling && strcmp(mode, "greedy"))
        return ir_diag_set(d, IR_ERR_INPUT, "spec_verify: mode must be greedy or sample (got %s)", mode);
    if ((K + 2) * q.V > KFAM_MAX_I32_OFFSET)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED,
                           "spec_verify: rand counters up to (k+2)*V = %lld exceed i32",
                           (long long)((K + 2) * q.V));
    kfam_config_merge(&kfam_spec_verify, s, facts, given, &cfg);
    if (kfam_config_pow2(s, &cfg, "BLOCK", 1 << 16, d) || kfam_config_pow2(s, &cfg, "WARPS", 32, d))
        return d->status;
    q.block = (int)kir_config_get(&cfg, "BLOCK", 0);

    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    q.logits = kir_param(&b, "logits", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *draft = kir_param(&b, "draft", kir_ptr(KIR_I32), KIR_PARAM_RDONLY);
    KirValue *params = NULL;
    if (q.sampling) {
        q.probs = kir_param(&b, "draft_probs", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
        params = kir_param(&b, "params", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    }
    KirValue *acc_out = kir_param(&b, "accepted", kir_ptr(KIR_I32), 0);
    KirValue *bonus_out = kir_param(&b, "bonus", kir_ptr(KIR_I32), 0);
    KirValue *n_seqs = kir_param(&b, "n_seqs", kir_scalar(KIR_I32), 0);
    kir_grid(&b, 0, n_seqs, 1, 1);

    KirValue *seq = kir_pid(&b, 0), *cK = kir_const_i32(&b, K);
    q.cV = kir_const_i32(&b, q.V);
    q.lanes = kir_arange(&b, q.block);
    q.ninf = kir_const_f(&b, KIR_F32, -INFINITY);
    q.inv_t = kir_const_f(&b, KIR_F32, 1.0);
    KirValue *row0 = kir_mul(&b, seq, kir_const_i32(&b, K + 1)), *dbase = kir_mul(&b, seq, cK);
    KirValue *izero = kir_const_i32(&b, 0), *ione = kir_const_i32(&b, 1);
    KirValue *hot = NULL, *seed = NULL;
    if (q.sampling) {
        KirValue *p4 = kir_mul(&b, seq, kir_const_i32(&b, 4));
        KirValue *T = kir_load(&b, params, p4, NULL, NULL);
        seed = kir_cast(&b, kir_load(&b, params, kir_add(&b, p4, kir_const_i32(&b, 3)), NULL, NULL), KIR_I64);
        hot = kir_binary(&b, KIR_OP_GT, T, kir_const_f(&b, KIR_F32, 0));
        q.inv_t = kir_select(&b, hot, kir_div(&b, kir_const_f(&b, KIR_F32, 1.0), T), q.inv_t);
    }

    /* positions j = 0..k, carrying (done, n, bonus); once done, the passes over V run zero trips */
    KirValue *inits[3] = {izero, izero, izero};
    KirBlock *pos = kir_for_begin(&b, izero, kir_const_i32(&b, K + 1), ione, inits, 3, 0);
    KirValue *j = pos->args[0], *done = pos->args[1], *n = pos->args[2], *tok = pos->args[3];
    KirValue *active = kir_binary(&b, KIR_OP_EQ, done, izero);
    KirValue *base = kir_mul(&b, kir_add(&b, row0, j), q.cV);
    KirValue *is_draft = kir_lt(&b, j, cK);
    KirValue *dtok = kir_load(&b, draft, kir_add(&b, dbase, j), is_draft, kir_const_i32(&b, -1));
    KirValue *m, *am, *z;
    row_stats(&b, &q, base, kir_select(&b, active, q.cV, izero), &m, &am, &z);
    KirValue *match = kir_binary(&b, KIR_OP_AND, is_draft, kir_binary(&b, KIR_OP_EQ, am, dtok));
    KirValue *emit = am;
    if (q.sampling) {
        KirValue *live = kir_binary(&b, KIR_OP_AND, hot, kir_binary(&b, KIR_OP_GT, m, q.ninf));
        KirValue *dvalid = kir_binary(
            &b, KIR_OP_AND, is_draft,
            kir_binary(&b, KIR_OP_AND, kir_binary(&b, KIR_OP_GE, dtok, izero), kir_lt(&b, dtok, q.cV)));
        KirValue *doff = kir_add(&b, base, dtok);
        KirValue *xd = kir_load(&b, q.logits, doff, dvalid, q.ninf);
        KirValue *qd = kir_load(&b, q.probs, doff, dvalid, kir_const_f(&b, KIR_F32, 0));
        KirValue *pd = kir_div(&b, kir_unary(&b, KIR_OP_EXP, kir_mul(&b, kir_sub(&b, xd, m), q.inv_t)), z);
        KirValue *u = kir_rand(&b, seed, kir_sub(&b, kir_const_i32(&b, -1), j));
        KirValue *ok = kir_binary(&b, KIR_OP_AND, dvalid, kir_lt(&b, kir_mul(&b, u, qd), pd));
        match = kir_select(&b, live, ok, match);
        KirValue *go = kir_binary(&b, KIR_OP_AND, active, live);
        KirValue *draw =
            kir_binary(&b, KIR_OP_NE, go, kir_binary(&b, KIR_OP_AND, go, match)); /* go && !match */
        KirValue *ctr0 = kir_mul(&b, kir_add(&b, j, ione), q.cV);
        KirValue *drawn =
            draw_bonus(&b, &q, base, kir_select(&b, draw, q.cV, izero), m, z, is_draft, seed, ctr0);
        emit = kir_select(&b, live, drawn, am);
    }
    KirValue *keep = kir_binary(&b, KIR_OP_AND, active, match);
    KirValue *stop = kir_binary(&b, KIR_OP_NE, active, keep); /* active && !match */
    KirValue *next[3] = {kir_select(&b, stop, ione, done), kir_select(&b, keep, kir_add(&b, j, ione), n),
                         kir_select(&b, stop, emit, tok)};
    KirInst *loop = kir_for_end(&b, next, 3);
    kir_store(&b, acc_out, seq, loop->res[1], NULL);
    kir_store(&b, bonus_out, seq, loop->res[2], NULL);
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_spec_verify = {
    .name = "spec_verify",
    .n_space = 2,
    .space = {{"BLOCK", 8, {32, 64, 128, 256, 512, 1024, 2048, 4096}}, {"WARPS", 5, {1, 2, 4, 8, 16}}},
    .defaults = spec_verify_defaults,
    .build = spec_verify_build,
};
