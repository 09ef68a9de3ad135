/* test_engine_spec.c — speculative decoding in the engine (docs/RUNTIME.md, "Speculative decoding"), on
 * the host with the llama recipe's tiny config and random weights from the printed seed. The reference
 * for every speculating run is the same request without speculation: a draft is kept only where the
 * target drew the same token, so the tokens must be identical, whatever the proposer guessed.
 *   - the n-gram proposer and the acceptance rule on their own (longest suffix first, latest occurrence,
 *     k cap; the adaptive draft length backs off and pauses);
 *   - greedy and sampled requests (top-p, a seed) alone, draft lengths 1, 4 and 32, prompts random and
 *     repetitive (the tiny model's greedy text loops, so drafts are accepted and rejected: both counted);
 *   - a batch mixing speculating and plain requests, some joining mid-way; chunked prefill (4 tokens a
 *     step, so drafts meet the step's room); a KV pool small enough to preempt;
 *   - max_tokens 1..3, a stop token inside accepted drafts, a request that fills the context;
 *   - after every step rt_engine_check: each page's references are its holders, no sequence keeps a
 *     rejected draft; at the end every page is free (sharing off) or held by a cached prefix;
 *   - per-request counters add up to the engine's; refused settings (spec_k 0 and 33, an unknown spec).
 *   - a draft model (KILN_SPEC_DRAFT): the target itself as its draft keeps every draft (the host computes
 *     rows independently, so the draft's greedy tokens are the target's); a 1-layer draft keeps some, with
 *     the same tokens as plain decoding, greedy and sampled, mixed in a batch with n-gram and plain
 *     requests under KV pressure (the draft pool checked after every step too); a draft of another
 *     vocabulary is refused at open; KILN_SPEC_DRAFT without a draft model is refused at submit.
 *   - draft trees (spec_branches > 1; test_tree): a target compiled with tree=true decodes plainly as the
 *     plain package does; trees of 4 and 8 x 8 (capped at the 64-token mask) keep the plain tokens, greedy
 *     and sampled, alone and in a batch with chains, n-gram and plain requests under KV pressure, and
 *     keep some siblings (not all); the plain package verifies the chain; spec_branches 0 and 9 refused.
 *   - the distribution of sampled speculation: 3072 seeds, chi-square of the joint of three tokens against
 *     the target's probabilities (kiln_engine_score), with the power to reject the draft's and another
 *     temperature's (test_distribution).
 * Needs the kiln CLI (KILN_BIN, to compile the package) and the LLVM host backend.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/llvm/cg_host.h"
#include "kfile.h"
#include "kiln.h"
#include "kref.h"
#include "krun.h"
#include "kt.h"
#include "runtime/rt_engine.h"
#include "runtime/rt_spec.h"

enum { MAXT = 512, NP = 8, NEW = 40 };

typedef struct Out {
    int32_t tok[MAXT];
    int n;
    KilnFinish finish;
    KilnEngine *e;
    KilnRequestStats rs; /* this request's counters, asked for at its last token */
} Out;

static char pkg_path[512], draft_path[512]; /* draft_path "": engines open without a draft model */
static uint64_t weights_seed;
static int64_t spec_proposed, spec_accepted; /* over every speculating run: both must move */

static int on_token(void *user, int64_t req, int32_t tok, KilnFinish fin)
{
    Out *o = user;
    if (tok >= 0 && o->n < MAXT) o->tok[o->n++] = tok;
    if (fin != KILN_FINISH_NONE) {
        o->finish = fin;
        o->rs.size = (int)sizeof o->rs;
        if (tok >= 0) KT_CHECK(kiln_engine_request_stats(o->e, req, &o->rs) == KILN_OK, "request stats");
    }
    return 0;
}

static KilnEngine *open_engine(int step_tokens, int64_t kv_bytes, int no_share)
{
    KilnEngineOptions o;
    kiln_engine_options_init(&o);
    o.device = -2;
    o.max_step_tokens = step_tokens;
    o.kv_cache_bytes = kv_bytes;
    o.no_prefix_sharing = no_share;
    o.draft_package = draft_path; /* random weights from the same seed: the same values for the same shapes */
    KilnEngine *e = NULL;
    char err[512];
    KT_CHECK(rt_engine_open(pkg_path, NULL, weights_seed, &o, &e, err, sizeof err) == KILN_OK, "open: %s",
             err);
    return e;
}

/* Steps until idle, checking the engine's bookkeeping after every step. */
static void drain(KilnEngine *e)
{
    int pending = 1, steps = 0;
    char err[256];
    while (pending && steps++ < 20000) {
        if (kiln_engine_step(e, &pending) != KILN_OK) {
            KT_CHECK(0, "step: %s", kiln_engine_errmsg(e));
            return;
        }
        if (rt_engine_check(e, err, sizeof err)) {
            KT_CHECK(0, "after step %d: %s", steps, err);
            return;
        }
    }
}

static void submit(KilnEngine *e, const int32_t *p, int n, const KilnSampling *s, Out *o)
{
    memset(o, 0, sizeof *o);
    o->e = e;
    KT_CHECK(kiln_engine_submit(e, p, n, s, on_token, o, NULL) == KILN_OK, "submit: %s",
             kiln_engine_errmsg(e));
}

static void run_alone(const int32_t *p, int n, const KilnSampling *s, Out *o)
{
    KilnEngine *e = open_engine(0, 0, 1);
    if (!e) return;
    submit(e, p, n, s, o);
    drain(e);
    kiln_engine_close(e);
}

static int same(const Out *a, const Out *b)
{
    return a->n == b->n && !memcmp(a->tok, b->tok, (size_t)a->n * sizeof a->tok[0]) && a->finish == b->finish;
}

static void count(const Out *o)
{
    spec_proposed += o->rs.spec_proposed, spec_accepted += o->rs.spec_accepted;
}

static void test_proposer(void)
{
    int32_t out[8];
    const int32_t t[] = {5, 6, 7, 8, 1, 6, 7, 9, 2, 6, 7};
    /* suffix 6 7 recurs at 5 (latest, before the end) and 1: what followed the latest, 9 2 6 7, then the
     * copy continues from its own output (the period 9 2 6 7 repeats) */
    int n = rt_spec_ngram(t, 11, 8, out);
    const int32_t want[8] = {9, 2, 6, 7, 9, 2, 6, 7};
    KT_CHECK(n == 8 && !memcmp(out, want, sizeof want), "ngram: %d, %d %d %d %d %d", n, out[0], out[1],
             out[2], out[3], out[4]);
    KT_CHECK(rt_spec_ngram(t, 11, 2, out) == 2 && out[1] == 2, "ngram k cap");
    /* a prediction: the suffix 3 occurs at 2, 6 and 10; the aligned occurrence (its next at position 7)
     * wins over the latest, and near -1 takes the latest */
    const int32_t pred[] = {1, 2, 3, 4, 5, 6, 3, 7, 8, 9, 3, 10, 11}, so_far[] = {0, 3};
    KT_CHECK(rt_spec_lookup(so_far, 2, pred, 13, 7, 2, out) == 2 && out[0] == 7 && out[1] == 8,
             "lookup near 7: %d %d", out[0], out[1]);
    KT_CHECK(rt_spec_lookup(so_far, 2, pred, 13, -1, 2, out) == 2 && out[0] == 10, "lookup, the latest: %d",
             out[0]);
    KT_CHECK(rt_spec_lookup(so_far, 2, pred, 13, 0, 3, out) == 3 && out[0] == 4, "lookup near 0: %d", out[0]);
    const int32_t u[] = {1, 2, 3, 4, 9, 3, 4, 5, 1, 2, 3, 4};
    /* the 4-gram 1 2 3 4 beats the later 2-gram 3 4: 9 follows it */
    KT_CHECK(rt_spec_ngram(u, 12, 1, out) == 1 && out[0] == 9, "ngram: longest first, got %d", out[0]);
    const int32_t v[] = {1, 2, 3};
    KT_CHECK(rt_spec_ngram(v, 3, 4, out) == 0 && rt_spec_ngram(v, 1, 4, out) == 0, "ngram: no recurrence");
    const int32_t w[] = {4, 4, 4};
    KT_CHECK(rt_spec_ngram(w, 3, 4, out) == 4 && out[0] == 4 && out[3] == 4,
             "ngram: a repeated token, k of it");
    const int32_t x[] = {8, 1, 2, 3, 1, 2};
    n = rt_spec_ngram(x, 6, 5, out);
    KT_CHECK(n == 5 && out[0] == 3 && out[1] == 1 && out[2] == 2 && out[3] == 3 && out[4] == 1,
             "ngram: period 3 continued: %d, %d %d %d %d %d", n, out[0], out[1], out[2], out[3], out[4]);
    const int32_t d[] = {1, 2, 3}, g[] = {1, 2, 5, 7};
    KT_CHECK(rt_spec_accept(d, g, 3) == 2 && rt_spec_accept(d, g + 1, 3) == 0 && rt_spec_accept(d, d, 3) == 3,
             "accept");
    RtSpecState s;
    rt_spec_init(&s, 4);
    rt_spec_record(&s, 4, 1);
    KT_CHECK(s.k_cur == 2, "k after 1 of 4: %d", s.k_cur);
    rt_spec_record(&s, 2, 2);
    KT_CHECK(s.k_cur == 3, "k after all: %d", s.k_cur);
    for (int i = 0; i < 4; i++)
        rt_spec_record(&s, 1, 0);
    KT_CHECK(s.k_cur == 1 && s.pause == 1 && rt_spec_budget(&s) == 0 && rt_spec_budget(&s) == 1,
             "a bad draft pauses: k %d pause %d", s.k_cur, s.pause);
    for (int i = 0; i < 3; i++)
        rt_spec_record(&s, 1, 0);
    KT_CHECK(s.pause == 2, "pauses double: %d", s.pause);
    KT_CHECK(s.verifies == 9 && s.proposed == 13 && s.accepted == 3, "counters");
}

/* The draft model's cases (see the top); prompts, lens and ref (plain greedy tokens) are main's. */
static void test_draft(const char *src, const char *kiln, int32_t prompts[][64], const int *lens,
                       const Out *ref, const KilnSampling *plain, int S)
{
    char cmd[4096], cache[1200], one[512], v128[512];
    snprintf(one, sizeof one, "%s", kf_at("tiny1.kiln"));
    snprintf(v128, sizeof v128, "%s", kf_at("tiny_v128.kiln"));
    snprintf(cmd, sizeof cmd,
             "'%s' compile '%s/recipes/llama.lua' --model tiny --set n_layers=1 --target host %s -o '%s' && "
             "'%s' compile '%s/recipes/llama.lua' --model tiny --set vocab_size=128 --target host %s -o '%s'",
             kiln, src, krun_compile_cache_flag(cache, sizeof cache), one, kiln, src, cache, v128);
    KT_CHECK(system(cmd) == 0, "%s", cmd);
    KilnSampling draft = *plain, ngram = *plain;
    draft.spec = KILN_SPEC_DRAFT, ngram.spec = KILN_SPEC_NGRAM;
    Out o[NP];
    /* KILN_SPEC_DRAFT without a draft model */
    KilnEngine *e = open_engine(0, 0, 0);
    if (e) {
        KT_CHECK(kiln_engine_submit(e, prompts[1], lens[1], &draft, NULL, NULL, NULL) == KILN_ERR_ARG &&
                     strstr(kiln_engine_errmsg(e), "the engine has no draft model"),
                 "draft without a draft model: %s", kiln_engine_errmsg(e));
        kiln_engine_close(e);
    }
    /* the target as its own draft: every draft kept */
    snprintf(draft_path, sizeof draft_path, "%s", pkg_path);
    for (int i = 0; i < NP; i++) {
        run_alone(prompts[i], lens[i], &draft, &o[i]);
        KT_CHECK(same(&o[i], &ref[i]) && o[i].rs.spec_proposed > 0 &&
                     o[i].rs.spec_accepted == o[i].rs.spec_proposed,
                 "self-draft, prompt %d: %d tokens, %lld of %lld kept", i, o[i].n,
                 (long long)o[i].rs.spec_accepted, (long long)o[i].rs.spec_proposed);
        count(&o[i]);
    }
    /* sampled, the target as its own draft: drafts are drawn with the target's seeds (the same noise), so
     * every draft is kept here too (greedy drafts would keep only the target's argmax draws) */
    KilnSampling hot = *plain, hot_draft;
    hot.temperature = 0.8f, hot.top_k = 40, hot.seed = 99;
    hot_draft = hot, hot_draft.spec = KILN_SPEC_DRAFT, hot_draft.spec_k = 6;
    for (int i = 0; i < NP; i += 3) {
        Out a, b;
        run_alone(prompts[i], lens[i], &hot, &a);
        run_alone(prompts[i], lens[i], &hot_draft, &b);
        KT_CHECK(same(&a, &b) && b.rs.spec_proposed > 0 && b.rs.spec_accepted == b.rs.spec_proposed,
                 "sampled self-draft, prompt %d: %lld of %lld kept", i, (long long)b.rs.spec_accepted,
                 (long long)b.rs.spec_proposed);
    }
    /* a 1-layer draft: alone (greedy and sampled), then a mixed batch under KV pressure */
    snprintf(draft_path, sizeof draft_path, "%s", one);
    for (int i = 0; i < NP; i += 2) {
        Out a, b;
        run_alone(prompts[i], lens[i], &draft, &o[i]);
        KT_CHECK(same(&o[i], &ref[i]), "1-layer draft, prompt %d differs", i);
        count(&o[i]);
        run_alone(prompts[i], lens[i], &hot, &a);
        run_alone(prompts[i], lens[i], &hot_draft, &b);
        KT_CHECK(same(&a, &b), "1-layer draft, sampled prompt %d differs", i);
    }
    int64_t page_bytes = 2LL * 2 * S * 2 * 16 * 2;
    e = open_engine(0, page_bytes * 12, 1);
    if (e) {
        for (int i = 0; i < NP; i++)
            submit(e, prompts[i], lens[i], i % 3 == 0 ? &draft : i % 3 == 1 ? &ngram : plain, &o[i]);
        drain(e);
        KilnEngineStats st;
        kiln_engine_stats(e, &st, sizeof st);
        for (int i = 0; i < NP; i++)
            KT_CHECK(same(&o[i], &ref[i]), "mixed batch with a draft model: request %d differs", i);
        KT_CHECK(st.preemptions > 0 && st.kv_pages_free == st.kv_pages,
                 "mixed batch: %lld preemptions, %d of %d free", (long long)st.preemptions, st.kv_pages_free,
                 st.kv_pages);
        kiln_engine_close(e);
    }
    /* a draft of another vocabulary */
    KilnEngineOptions opt;
    kiln_engine_options_init(&opt);
    opt.device = -2, opt.draft_package = v128;
    char err[512] = "";
    e = NULL;
    KT_CHECK(rt_engine_open(pkg_path, NULL, weights_seed, &opt, &e, err, sizeof err) == KILN_ERR_ARG && !e &&
                 strstr(err, "vocabulary of 128 tokens, the target's is 256"),
             "draft of another vocabulary: %s", err);
    kiln_engine_close(e);
    draft_path[0] = 0;
}

/* One request alone on a fresh engine; *st gets the engine's counters at the end. */
static void run_stats(const int32_t *p, int n, const KilnSampling *s, Out *o, KilnEngineStats *st)
{
    memset(st, 0, sizeof *st);
    KilnEngine *e = open_engine(0, 0, 1);
    if (!e) return;
    submit(e, p, n, s, o);
    drain(e);
    kiln_engine_stats(e, st, sizeof *st);
    kiln_engine_close(e);
}

/* Draft trees (spec_branches > 1): a target compiled with tree=true, the 1-layer draft of test_draft.
 * The tree package decodes plainly as the plain one does (its attention with every mask -1); with
 * trees, greedy and sampled requests keep their tokens while siblings are kept (the draft's second
 * choices where its first was wrong), alone and in a batch with chains, n-gram and plain requests under
 * KV pressure; 8 branches of 8 drafts stay within the 64-token mask; the plain package verifies the chain
 * alone; spec_branches 0 and 9 are refused. */
static void test_tree(const char *src, const char *kiln, int32_t prompts[][64], const int *lens,
                      const Out *ref, const KilnSampling *plain, int S)
{
    char cmd[2048], cache[1200], tree_pkg[512], plain_pkg[512];
    snprintf(tree_pkg, sizeof tree_pkg, "%s", kf_at("tiny_tree.kiln"));
    snprintf(cmd, sizeof cmd,
             "'%s' compile '%s/recipes/llama.lua' --model tiny --set tree=true --target host %s -o '%s'",
             kiln, src, krun_compile_cache_flag(cache, sizeof cache), tree_pkg);
    KT_CHECK(system(cmd) == 0, "%s", cmd);
    snprintf(plain_pkg, sizeof plain_pkg, "%s", pkg_path);
    snprintf(pkg_path, sizeof pkg_path, "%s", tree_pkg);
    snprintf(draft_path, sizeof draft_path, "%s", kf_at("tiny1.kiln"));
    KilnSampling tree = *plain, chain = *plain, ngram = *plain, hot = *plain, hot_tree;
    tree.spec = chain.spec = KILN_SPEC_DRAFT, ngram.spec = KILN_SPEC_NGRAM;
    tree.spec_branches = 4;
    hot.temperature = 0.8f, hot.top_k = 40, hot.seed = 7;
    hot_tree = hot, hot_tree.spec = KILN_SPEC_DRAFT, hot_tree.spec_branches = 3, hot_tree.spec_k = 5;
    int64_t sib = 0, hits = 0;
    KilnEngineStats st;
    for (int i = 0; i < NP; i++) {
        Out a, b;
        run_stats(prompts[i], lens[i], plain, &a, &st);
        KT_CHECK(same(&a, &ref[i]), "tree package, plain decoding, prompt %d: differs from the plain package",
                 i);
        run_stats(prompts[i], lens[i], &tree, &b, &st);
        KT_CHECK(same(&b, &ref[i]), "tree, prompt %d: %d tokens differ from plain", i, b.n);
        KT_CHECK(st.spec_sibling_hits <= st.spec_verifies && st.spec_accepted <= st.spec_proposed,
                 "tree, prompt %d: counters", i);
        sib += st.spec_siblings, hits += st.spec_sibling_hits;
        count(&b);
        if (i % 2) continue;
        run_alone(prompts[i], lens[i], &hot, &a);
        run_stats(prompts[i], lens[i], &hot_tree, &b, &st);
        KT_CHECK(same(&a, &b), "sampled tree, prompt %d: the tokens changed", i);
        sib += st.spec_siblings, hits += st.spec_sibling_hits;
    }
    /* the widest tree: 8 drafts, 7 siblings each would be 65 tokens; the mask holds 64 */
    KilnSampling wide = tree;
    wide.spec_k = 8, wide.spec_branches = 8;
    for (int i = 3; i < NP; i += 2) {
        Out o;
        run_stats(prompts[i], lens[i], &wide, &o, &st);
        KT_CHECK(same(&o, &ref[i]), "8 x 8 tree, prompt %d differs", i);
        KT_CHECK(st.spec_siblings > 0 && st.spec_siblings <= st.spec_verifies * 49,
                 "8 x 8 tree, prompt %d: %lld siblings in %lld verifies", i, (long long)st.spec_siblings,
                 (long long)st.spec_verifies);
        sib += st.spec_siblings, hits += st.spec_sibling_hits;
    }
    /* near the end of the context (512 tokens) the siblings' slots stay within it: LENGTH at the same token
     */
    int32_t *p = malloc(500 * sizeof *p);
    if (p) {
        KilnSampling a = *plain, t = wide;
        a.max_tokens = t.max_tokens = 0;
        snprintf(draft_path, sizeof draft_path, "%s", tree_pkg); /* keeps every draft: k stays 8 */
        for (int j = 0; j < 500; j++)
            p[j] = prompts[7][j % lens[7]];
        Out oa, ot;
        run_alone(p, 500, &a, &oa);
        run_stats(p, 500, &t, &ot, &st);
        KT_CHECK(same(&oa, &ot) && ot.n == 12 && ot.finish == KILN_FINISH_LENGTH,
                 "tree at the end of the context: %d tokens", ot.n);
        free(p);
        snprintf(draft_path, sizeof draft_path, "%s", kf_at("tiny1.kiln"));
    }
    printf("draft trees: %lld of %lld siblings kept\n", (long long)hits, (long long)sib);
    KT_CHECK(hits > 0 && hits < sib, "draft trees: %lld of %lld siblings kept", (long long)hits,
             (long long)sib);
    /* a batch under KV pressure: trees, chains, n-gram and plain requests */
    int64_t page_bytes = 2LL * 2 * S * 2 * 16 * 2;
    KilnEngine *e = open_engine(0, page_bytes * 12, 1);
    if (e) {
        Out o[NP];
        for (int i = 0; i < NP; i++)
            submit(e, prompts[i], lens[i],
                   i % 4 == 0   ? &tree
                   : i % 4 == 1 ? &chain
                   : i % 4 == 2 ? &ngram
                                : plain,
                   &o[i]);
        drain(e);
        kiln_engine_stats(e, &st, sizeof st);
        for (int i = 0; i < NP; i++)
            KT_CHECK(same(&o[i], &ref[i]), "mixed batch with trees: request %d differs", i);
        KT_CHECK(st.preemptions > 0 && st.kv_pages_free == st.kv_pages && st.spec_siblings > 0,
                 "mixed batch with trees: %lld preemptions, %d of %d free, %lld siblings",
                 (long long)st.preemptions, st.kv_pages_free, st.kv_pages, (long long)st.spec_siblings);
        KilnSampling b = tree;
        b.spec_branches = 0;
        KT_CHECK(kiln_engine_submit(e, prompts[1], lens[1], &b, NULL, NULL, NULL) == KILN_ERR_ARG &&
                     strstr(kiln_engine_errmsg(e), "sampling.spec_branches 0: want 1..8"),
                 "spec_branches 0: %s", kiln_engine_errmsg(e));
        b.spec_branches = KILN_MAX_SPEC_BRANCHES + 1;
        KT_CHECK(kiln_engine_submit(e, prompts[1], lens[1], &b, NULL, NULL, NULL) == KILN_ERR_ARG,
                 "spec_branches 9");
        kiln_engine_close(e);
    }
    /* a package without the tree mask verifies the chain */
    snprintf(pkg_path, sizeof pkg_path, "%s", plain_pkg);
    Out o;
    run_stats(prompts[4], lens[4], &tree, &o, &st);
    KT_CHECK(same(&o, &ref[4]) && st.spec_verifies > 0 && st.spec_siblings == 0,
             "trees on a package without tree_mask: %lld siblings", (long long)st.spec_siblings);
    draft_path[0] = 0;
}

/* Logprobs (sampling.logprobs): each token's log-probability and top alternatives, read in its callback,
 * against the log-softmax (float64) of kiln_engine_score's logits for the same sequence; greedy, so the
 * chosen token is the top one; with n-gram speculation (verify rows) the same values as without. */
typedef struct Lp {
    KilnEngine *e;
    int n, bad;
    int32_t tok[NEW];
    KilnLogprob chosen[NEW], top[NEW][3];
} Lp;

static int on_lp(void *user, int64_t req, int32_t tok, KilnFinish fin)
{
    Lp *l = user;
    (void)req, (void)fin;
    if (tok < 0 || l->n == NEW) return 0;
    l->tok[l->n] = tok;
    if (kiln_engine_logprobs(l->e, &l->chosen[l->n], l->top[l->n], 3) != 3 || l->chosen[l->n].token != tok)
        l->bad++;
    l->n++;
    return 0;
}

static void test_logprobs(const int32_t *prompt, int n)
{
    static Lp runs[2];
    for (int r = 0; r < 2; r++) {
        KilnEngine *e = open_engine(0, 0, 1);
        if (!e) return;
        KilnSampling s;
        kiln_sampling_init(&s);
        s.max_tokens = NEW, s.ignore_eos = 1, s.logprobs = 3, s.spec = r ? KILN_SPEC_NGRAM : KILN_SPEC_NONE;
        memset(&runs[r], 0, sizeof runs[r]);
        runs[r].e = e;
        KT_CHECK(kiln_engine_submit(e, prompt, n, &s, on_lp, &runs[r], NULL) == KILN_OK, "submit: %s",
                 kiln_engine_errmsg(e));
        drain(e);
        KT_CHECK(kiln_engine_logprobs(e, NULL, NULL, 0) == -1, "logprobs outside a callback: -1");
        kiln_engine_close(e);
        KT_CHECK(runs[r].n == NEW && !runs[r].bad, "logprobs run %d: %d tokens, %d bad callbacks", r,
                 runs[r].n, runs[r].bad);
    }
    /* the reference: the prompt and the tokens before each, scored at once */
    KilnEngine *e = open_engine(0, 0, 1);
    int V = e ? kiln_engine_vocab(e) : 0, T = n + NEW - 1;
    int32_t *t = malloc((size_t)T * sizeof *t);
    float *lg = malloc((size_t)T * (size_t)V * sizeof *lg);
    if (e && t && lg) {
        memcpy(t, prompt, (size_t)n * sizeof *t), memcpy(t + n, runs[0].tok, (NEW - 1) * sizeof *t);
        KT_CHECK(kiln_engine_score(e, t, T, lg) == KILN_OK, "score: %s", kiln_engine_errmsg(e));
        double worst = 0;
        int order = 1;
        for (int i = 0; i < NEW; i++) {
            const float *x = lg + (size_t)(n - 1 + i) * (size_t)V;
            double mx = -INFINITY, sum = 0;
            for (int v = 0; v < V; v++)
                mx = x[v] > mx ? x[v] : mx;
            for (int v = 0; v < V; v++)
                sum += exp(x[v] - mx);
            double want = x[runs[0].tok[i]] - mx - log(sum), d = fabs(want - runs[0].chosen[i].logprob);
            worst = d > worst ? d : worst;
            order &= runs[0].top[i][0].token == runs[0].tok[i] &&
                     runs[0].top[i][0].logprob >= runs[0].top[i][1].logprob &&
                     runs[0].top[i][1].logprob >= runs[0].top[i][2].logprob;
            for (int k = 0; k < 3; k++)
                order &= runs[1].top[i][k].token == runs[0].top[i][k].token &&
                         fabsf(runs[1].top[i][k].logprob - runs[0].top[i][k].logprob) < 1e-5f;
        }
        KT_CHECK(worst < 1e-4, "logprobs against score: off by %g", worst);
        KT_CHECK(order,
                 "logprobs: greedy picks the top one, the top is descending, speculation changes nothing");
    }
    free(t), free(lg);
    if (e) {
        KilnSampling b;
        kiln_sampling_init(&b);
        b.logprobs = KILN_MAX_LOGPROBS + 1;
        KT_CHECK(kiln_engine_submit(e, prompt, n, &b, NULL, NULL, NULL) == KILN_ERR_ARG &&
                     strstr(kiln_engine_errmsg(e), "sampling.logprobs 21: want -1 (off) or 0..20"),
                 "logprobs 21: %s", kiln_engine_errmsg(e));
    }
    kiln_engine_close(e);
}

/* Sampled speculation draws from the target's distribution. DN requests with seeds base + i, T 0.3 and
 * top-k DK, three tokens each (the first from the prompt's step, the next two from verify steps of k 2):
 * the joint of the three, binned by each token's rank in its allowed set (DK^3 bins), against the
 * target's own probabilities from kiln_engine_score (kref_sample_probs over the same allowed sets), by
 * chi-square (the 1e-4 tail bound). Plain requests, the n-gram proposer, a 1-layer draft model and the
 * target as its own draft run the same seeds and must draw the same tokens; the self-draft keeps every
 * draft, the 1-layer draft rejects some. The test's power is checked on the same counts: against the
 * draft model's joint and the target's at T 0.5 the statistic must exceed the bound. */
enum { DN = 3072, DK = 4, DB = DK * DK * DK };

typedef struct Draw {
    int32_t t[3];
    int n;
    KilnRequestStats rs;
    KilnEngine *e;
} Draw;

static int on_draw(void *user, int64_t req, int32_t tok, KilnFinish fin)
{
    Draw *d = user;
    if (tok >= 0 && d->n < 3) d->t[d->n++] = tok;
    if (fin != KILN_FINISH_NONE && tok >= 0) {
        d->rs.size = (int)sizeof d->rs;
        KT_CHECK(kiln_engine_request_stats(d->e, req, &d->rs) == KILN_OK, "request stats");
    }
    return 0;
}

/* The allowed set of logit row x under s, ranked (most likely first) into set[], and its tokens'
 * probabilities into pr[]; with fix, set[] is given (another model's set) and pr[] gets this row's
 * probabilities of those tokens (0 outside its own allowed set). */
static void allowed(const float *x, int V, const KilnSampling *s, int fix, int32_t set[DK], double pr[DK])
{
    double *p = malloc(sizeof(double) * (size_t)V);
    KT_CHECK(p != NULL, "out of memory");
    if (!p) return;
    kref_sample_probs(x, V, s->temperature, kref_sample_threshold(x, V, s->temperature, s->top_k, 1, 0), p);
    for (int r = 0; r < DK; r++) {
        int best = -1;
        for (int j = 0; !fix && j < V; j++) {
            int taken = 0;
            for (int q = 0; q < r; q++)
                taken |= set[q] == j;
            if (p[j] > 0 && !taken && (best < 0 || p[j] > p[best])) best = j;
        }
        if (!fix) set[r] = best;
        pr[r] = set[r] >= 0 ? p[set[r]] : 0;
    }
    free(p);
}

static int rank_of(const int32_t set[DK], int32_t t)
{
    for (int r = 0; r < DK; r++)
        if (set[r] == t) return r;
    return -1;
}

/* The joint over bins (r0 * DK + r1) * DK + r2 of the engine at path (the target, or a draft model) for
 * prompt p; the sets are each position's allowed set per prefix (s0, s1[r0], s2[r0][r1]): this engine's
 * own (written), or with fix another's (read; the draft's probabilities of the target's bins). */
static void joint(const char *path, const int32_t *p, int n, const KilnSampling *s, int fix, double *pj,
                  int32_t s0[DK], int32_t s1[DK][DK], int32_t s2[DK][DK][DK])
{
    char save[512], want[512];
    snprintf(save, sizeof save, "%s", pkg_path);
    snprintf(want, sizeof want, "%s", path); /* path may be pkg_path */
    snprintf(pkg_path, sizeof pkg_path, "%s", want);
    KilnEngine *e = open_engine(0, 0, 1);
    snprintf(pkg_path, sizeof pkg_path, "%s", save);
    if (!e) return;
    int V = kiln_engine_vocab(e);
    float *lg = malloc(sizeof(float) * (size_t)(n + 2) * (size_t)V);
    int32_t *t = malloc(sizeof(int32_t) * (size_t)(n + 2));
    KT_CHECK(lg && t, "out of memory");
    double p0[DK], p1[DK], p2[DK];
    memcpy(t, p, (size_t)n * sizeof *t);
    KT_CHECK(lg && t && kiln_engine_score(e, t, n, lg) == KILN_OK, "score: %s", kiln_engine_errmsg(e));
    allowed(lg + (size_t)(n - 1) * V, V, s, fix, s0, p0);
    for (int a = 0; a < DK; a++) {
        t[n] = s0[a];
        KT_CHECK(kiln_engine_score(e, t, n + 1, lg) == KILN_OK, "score: %s", kiln_engine_errmsg(e));
        allowed(lg + (size_t)n * V, V, s, fix, s1[a], p1);
        for (int b = 0; b < DK; b++) {
            t[n + 1] = s1[a][b];
            KT_CHECK(kiln_engine_score(e, t, n + 2, lg) == KILN_OK, "score: %s", kiln_engine_errmsg(e));
            allowed(lg + (size_t)(n + 1) * V, V, s, fix, s2[a][b], p2);
            for (int c = 0; c < DK; c++)
                pj[(a * DK + b) * DK + c] = p0[a] * p1[b] * p2[c];
        }
    }
    free(lg), free(t);
    kiln_engine_close(e);
}

/* Pearson's statistic of counts against N * pj. The mass outside the bins (1 - sum pj, observed 0: a
 * distribution that puts mass elsewhere) is a bin of its own; bins are pooled from the least expected up
 * until the pool expects 5 or more and no bin left alone expects fewer. *df receives the degrees of
 * freedom. */
static double chi2(const int *counts, const double *pj, int N, int *df)
{
    int order[DB], pool_o = 0, bins = 0;
    double sum = 0, pool_e = 0, stat = 0;
    for (int i = 0; i < DB; i++) {
        sum += pj[i], order[i] = i;
        for (int j = i; j > 0 && pj[order[j]] < pj[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    }
    double out = sum < 1 ? N * (1 - sum) : 0;
    if (out >= 5)
        stat += out, bins++;
    else
        pool_e = out;
    for (int k = 0; k < DB; k++) {
        int i = order[k];
        double ex = N * pj[i];
        if (ex < 5 || pool_e < 5) {
            pool_e += ex, pool_o += counts[i];
            continue;
        }
        stat += (counts[i] - ex) * (counts[i] - ex) / ex, bins++;
    }
    if (pool_e > 0)
        stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e, bins++;
    else if (pool_o > 0)
        stat = INFINITY; /* drawn where the distribution puts nothing */
    *df = bins > 1 ? bins - 1 : 1;
    return stat;
}

static void test_distribution(const int32_t *prompt, int n, const char *draft, uint64_t base)
{
    char one[512];
    snprintf(one, sizeof one, "%s", draft);
    KilnSampling s;
    kiln_sampling_init(&s);
    s.max_tokens = 3, s.ignore_eos = 1, s.temperature = 0.3f, s.top_k = DK;
    static double pt[DB], pq[DB], pc[DB];
    static int32_t s0[DK], s1[DK][DK], s2[DK][DK][DK];
    joint(pkg_path, prompt, n, &s, 0, pt, s0, s1, s2);
    joint(one, prompt, n, &s, 1, pq, s0, s1, s2);
    KilnSampling cold = s;
    cold.temperature = 0.5f;
    joint(pkg_path, prompt, n, &cold, 1, pc, s0, s1, s2);
    snprintf(draft_path, sizeof draft_path, "%s", one);
    static Draw d[4][DN];
    static const int modes[4] = {KILN_SPEC_NONE, KILN_SPEC_NGRAM, KILN_SPEC_DRAFT, KILN_SPEC_DRAFT};
    KilnEngine *e = open_engine(0, 0, 1);
    if (!e) return;
    for (int m = 0; m < 4; m++) {
        if (m == 3) { /* the target as its own draft: every draft kept */
            kiln_engine_close(e);
            snprintf(draft_path, sizeof draft_path, "%s", pkg_path);
            if (!(e = open_engine(0, 0, 1))) return;
        }
        for (int i0 = 0; i0 < DN; i0 += 64) {
            for (int i = i0; i < i0 + 64 && i < DN; i++) {
                KilnSampling r = s;
                r.seed = base + (uint64_t)i, r.spec = modes[m], r.spec_k = 2;
                memset(&d[m][i], 0, sizeof d[m][i]);
                d[m][i].e = e;
                KT_CHECK(kiln_engine_submit(e, prompt, n, &r, on_draw, &d[m][i], NULL) == KILN_OK,
                         "submit: %s", kiln_engine_errmsg(e));
            }
            drain(e);
        }
    }
    kiln_engine_close(e);
    draft_path[0] = 0;
    static int counts[DB];
    int64_t prop[4] = {0}, acc[4] = {0};
    for (int i = 0; i < DN; i++) {
        for (int m = 1; m < 4; m++) {
            KT_CHECK(d[0][i].n == 3 && !memcmp(d[0][i].t, d[m][i].t, sizeof d[0][i].t),
                     "seed %llu: speculation (mode %d) drew other tokens", (unsigned long long)(base + i), m);
            prop[m] += d[m][i].rs.spec_proposed, acc[m] += d[m][i].rs.spec_accepted;
        }
        int a = rank_of(s0, d[2][i].t[0]), b = a < 0 ? -1 : rank_of(s1[a], d[2][i].t[1]),
            c = b < 0 ? -1 : rank_of(s2[a][b], d[2][i].t[2]);
        KT_CHECK(c >= 0, "seed %llu: a token outside the top-%d set", (unsigned long long)(base + i), DK);
        if (c >= 0) counts[(a * DK + b) * DK + c]++;
    }
    int df, dfq, dfc;
    double x = chi2(counts, pt, DN, &df), xq = chi2(counts, pq, DN, &dfq), xc = chi2(counts, pc, DN, &dfc);
    printf("distribution: chi-square %.1f (df %d, bound %.1f) against the target, %.1f (df %d) against the "
           "draft, %.1f (df %d) against the target at T 0.5; drafts kept: n-gram %lld of %lld, 1-layer draft "
           "%lld of %lld, self-draft %lld of %lld\n",
           x, df, kref_chi2_bound(df), xq, dfq, xc, dfc, (long long)acc[1], (long long)prop[1],
           (long long)acc[2], (long long)prop[2], (long long)acc[3], (long long)prop[3]);
    KT_CHECK(df > 0 && x < kref_chi2_bound(df), "sampled speculation: chi-square %.1f > %.1f (df %d)", x,
             kref_chi2_bound(df), df);
    KT_CHECK(xq > kref_chi2_bound(dfq), "the test cannot tell the target from its draft (%.1f, df %d)", xq,
             dfq);
    KT_CHECK(xc > kref_chi2_bound(dfc), "the test cannot tell T 0.3 from T 0.5 (%.1f, df %d)", xc, dfc);
    KT_CHECK(acc[3] == prop[3] && prop[3] > 0 && acc[2] < prop[2],
             "self-draft %lld of %lld kept (want all), 1-layer draft %lld of %lld (want a rejection)",
             (long long)acc[3], (long long)prop[3], (long long)acc[2], (long long)prop[2]);
}

int main(void)
{
    const char *kiln = getenv("KILN_BIN"), *src = getenv("KILN_SOURCE_DIR");
    test_proposer();
    if (!cg_host_jit_available())
        return kt_skip_toolkit("test_engine_spec", "this build has no LLVM host backend");
    if (!kiln || !src) {
        printf("SKIP: needs KILN_BIN and KILN_SOURCE_DIR (run through ctest)\n");
        return 77;
    }
    if (!kf_scratch_open("engine-spec")) return 1;
    snprintf(pkg_path, sizeof pkg_path, "%s", kf_at("tiny.kiln"));
    char cmd[2048], cache[1200];
    snprintf(cmd, sizeof cmd, "'%s' compile '%s/recipes/llama.lua' --model tiny --target host %s -o '%s'",
             kiln, src, krun_compile_cache_flag(cache, sizeof cache), pkg_path);
    KT_CHECK(system(cmd) == 0, "%s", cmd);
    KrefRng g = kref_rng(kref_seed()); /* printed; KILN_TEST_SEED replays it */
    weights_seed = kref_next(&g);
    KilnEngine *e = open_engine(0, 0, 0);
    if (!e) return kt_done("test_engine_spec");
    KilnEngineStats st;
    kiln_engine_stats(e, &st, sizeof st);
    int V = kiln_engine_vocab(e), S = st.page_size;
    kiln_engine_close(e);

    /* prompts: random ones across page boundaries, and repetitive ones (a phrase said three times) */
    static const int lens[NP] = {1, 7, 9, 23, 40, 24, 30, 33};
    int32_t prompts[NP][64];
    for (int i = 0; i < NP; i++)
        for (int j = 0; j < lens[i]; j++)
            prompts[i][j] = i < 5 || j < lens[i] / 3 ? (int32_t)(kref_next(&g) % (uint64_t)V)
                                                     : prompts[i][j % (lens[i] / 3)];
    KilnSampling plain, spec;
    kiln_sampling_init(&plain);
    plain.max_tokens = NEW, plain.ignore_eos = 1;
    spec = plain, spec.spec = KILN_SPEC_NGRAM;
    Out ref[NP], got[NP];
    for (int i = 0; i < NP; i++)
        run_alone(prompts[i], lens[i], &plain, &ref[i]);

    /* alone, draft lengths 1, 4 and 32 */
    static const int ks[] = {1, 4, 32};
    for (int ki = 0; ki < 3; ki++)
        for (int i = 0; i < NP; i++) {
            spec.spec_k = ks[ki];
            run_alone(prompts[i], lens[i], &spec, &got[i]);
            KT_CHECK(same(&got[i], &ref[i]) && got[i].n == NEW,
                     "k %d, prompt %d: %d tokens differ from plain", ks[ki], i, got[i].n);
            KT_CHECK(got[i].rs.generated_tokens == NEW && got[i].rs.spec_accepted <= got[i].rs.spec_proposed,
                     "k %d, prompt %d: counters", ks[ki], i);
            count(&got[i]);
        }
    spec.spec_k = 4;

    /* sampling: the same seed gives the same tokens with and without speculation */
    KilnSampling hot = plain, hot_spec;
    hot.temperature = 0.7f, hot.top_p = 0.9f, hot.seed = kref_next(&g);
    hot_spec = hot, hot_spec.spec = KILN_SPEC_NGRAM, hot_spec.spec_k = 6;
    for (int i = 3; i < NP; i++) {
        Out a, b;
        run_alone(prompts[i], lens[i], &hot, &a);
        run_alone(prompts[i], lens[i], &hot_spec, &b);
        KT_CHECK(same(&a, &b), "sampled prompt %d: speculation changed the tokens", i);
        count(&b);
    }

    /* a prediction (sampling.prediction, read by the n-gram proposer): the request's own continuation is
     * kept whole; one that parts from it for 5 tokens, then follows again (the lookup finds its way back),
     * and a random one leave the tokens as they are */
    for (int i = 1; i < NP; i += 2) {
        int32_t pred[NEW];
        KilnSampling b = spec;
        b.prediction = pred, b.n_prediction = NEW;
        for (int variant = 0; variant < 3; variant++) {
            for (int j = 0; j < NEW; j++)
                pred[j] = variant == 2                       ? (int32_t)(kref_next(&g) % (uint64_t)V)
                          : variant == 1 && j >= 5 && j < 10 ? (ref[i].tok[j] + 1) % V
                                                             : ref[i].tok[j];
            Out o;
            run_alone(prompts[i], lens[i], &b, &o);
            KT_CHECK(same(&o, &ref[i]), "prediction %d, prompt %d: the tokens changed", variant, i);
            KT_CHECK(variant || (o.rs.spec_accepted == o.rs.spec_proposed && o.rs.spec_proposed >= NEW / 2),
                     "exact prediction, prompt %d: %lld of %lld kept", i, (long long)o.rs.spec_accepted,
                     (long long)o.rs.spec_proposed);
            /* before it parts, 4 drafts at most can be kept (tokens 1..4): more means it was found again */
            KT_CHECK(variant != 1 || o.rs.spec_accepted > 4, "prediction that parts, prompt %d: %lld kept", i,
                     (long long)o.rs.spec_accepted);
            count(&o);
        }
        char why[256];
        pred[3] = V;
        KT_CHECK(kiln_sampling_check(&b, V, why, sizeof why) == KILN_ERR_ARG &&
                     strstr(why, "sampling.prediction[3]"),
                 "a prediction outside the vocabulary: %s", why);
    }

    /* a batch: even requests speculate, odd ones do not; the last three join after 5 steps; then the
     * same with 4 tokens per step (chunked prefill; drafts within the step's room) */
    for (int step_tokens = 0; step_tokens <= 4; step_tokens += 4) {
        e = open_engine(step_tokens, 0, 0);
        if (!e) break;
        for (int i = 0; i < NP - 3; i++)
            submit(e, prompts[i], lens[i], i % 2 ? &plain : &spec, &got[i]);
        for (int s = 0; s < 5; s++)
            kiln_engine_step(e, NULL);
        for (int i = NP - 3; i < NP; i++)
            submit(e, prompts[i], lens[i], i % 2 ? &plain : &spec, &got[i]);
        drain(e);
        int64_t prop = 0, acc = 0;
        for (int i = 0; i < NP; i++) {
            KT_CHECK(same(&got[i], &ref[i]), "batch (step tokens %d): request %d differs", step_tokens, i);
            prop += got[i].rs.spec_proposed, acc += got[i].rs.spec_accepted;
            count(&got[i]);
        }
        kiln_engine_stats(e, &st, sizeof st);
        KT_CHECK(st.spec_proposed == prop && st.spec_accepted == acc,
                 "engine counters %lld/%lld, requests %lld/%lld", (long long)st.spec_accepted,
                 (long long)st.spec_proposed, (long long)acc, (long long)prop);
        KT_CHECK(st.running == 0 && st.waiting == 0, "not idle: %d running, %d waiting", st.running,
                 st.waiting);
        kiln_engine_close(e);
    }

    /* KV pressure: a pool of 12 pages (one long request and a bit) preempts and recomputes; sharing off, so
     * every page is free at the end */
    int64_t page_bytes = 2LL * 2 /* layers */ * S * 2 /* kv heads */ * 16 /* head dim */ * 2 /* bf16 */;
    e = open_engine(0, page_bytes * 12, 1);
    if (e) {
        for (int i = 2; i < NP; i++)
            submit(e, prompts[i], lens[i], i % 3 ? &spec : &plain, &got[i]);
        drain(e);
        kiln_engine_stats(e, &st, sizeof st);
        for (int i = 2; i < NP; i++)
            KT_CHECK(same(&got[i], &ref[i]), "KV pressure: request %d differs", i);
        KT_CHECK(st.preemptions > 0, "no preemption with %d pages", st.kv_pages);
        KT_CHECK(st.kv_pages_free == st.kv_pages, "pages leaked: %d of %d free", st.kv_pages_free,
                 st.kv_pages);
        kiln_engine_close(e);
    }

    /* max_tokens 1..3, and a stop token inside what the drafts would give */
    for (int m = 1; m <= 3; m++) {
        KilnSampling a = plain, b = spec;
        a.max_tokens = b.max_tokens = m;
        Out oa, ob;
        run_alone(prompts[6], lens[6], &a, &oa);
        run_alone(prompts[6], lens[6], &b, &ob);
        KT_CHECK(same(&oa, &ob) && ob.n == m && ob.finish == KILN_FINISH_LENGTH, "max_tokens %d: %d tokens",
                 m, ob.n);
    }
    for (int at = 1; at < 12; at += 5) {
        KilnSampling a = plain, b = spec;
        int32_t stop_tok = ref[6].tok[at];
        a.stop_tokens = b.stop_tokens = &stop_tok, a.n_stop = b.n_stop = 1;
        Out oa, ob;
        run_alone(prompts[6], lens[6], &a, &oa);
        run_alone(prompts[6], lens[6], &b, &ob);
        KT_CHECK(same(&oa, &ob) && ob.finish == KILN_FINISH_STOP && ob.n <= at + 1, "stop at %d: %d tokens",
                 at, ob.n);
    }
    /* the context (512 tokens) fills: LENGTH at the same token */
    {
        int32_t *p = malloc(500 * sizeof *p);
        KilnSampling a = plain, b = spec;
        a.max_tokens = b.max_tokens = 0, b.spec_k = 32;
        for (int j = 0; p && j < 500; j++)
            p[j] = prompts[7][j % lens[7]];
        Out oa, ob;
        if (p) run_alone(p, 500, &a, &oa), run_alone(p, 500, &b, &ob);
        KT_CHECK(p && same(&oa, &ob) && ob.n == 12 && ob.finish == KILN_FINISH_LENGTH,
                 "full context: %d tokens", p ? ob.n : -1);
        free(p);
    }

    /* refused settings queue nothing */
    e = open_engine(0, 0, 0);
    if (e) {
        KilnSampling b = spec;
        b.spec_k = 0;
        KT_CHECK(kiln_engine_submit(e, prompts[1], lens[1], &b, NULL, NULL, NULL) == KILN_ERR_ARG &&
                     strstr(kiln_engine_errmsg(e), "sampling.spec_k 0: want 1..32"),
                 "spec_k 0: %s", kiln_engine_errmsg(e));
        b.spec_k = KILN_MAX_SPEC_K + 1;
        KT_CHECK(kiln_engine_submit(e, prompts[1], lens[1], &b, NULL, NULL, NULL) == KILN_ERR_ARG,
                 "spec_k 33");
        b = spec, b.spec = 7;
        KT_CHECK(kiln_engine_submit(e, prompts[1], lens[1], &b, NULL, NULL, NULL) == KILN_ERR_ARG &&
                     strstr(kiln_engine_errmsg(e), "sampling.spec 7"),
                 "spec 7: %s", kiln_engine_errmsg(e));
        b = plain, b.spec_k = 0; /* read only when speculation is on */
        KT_CHECK(kiln_engine_submit(e, prompts[1], lens[1], &b, NULL, NULL, NULL) == KILN_OK,
                 "spec off, k 0");
        KilnRequestStats rs = {.size = (int)sizeof rs};
        KT_CHECK(kiln_engine_request_stats(e, 12345, &rs) == KILN_ERR_ARG, "stats of no request");
        kiln_engine_stats(e, &st, sizeof st);
        KT_CHECK(st.waiting == 1, "refused requests queued: %d waiting", st.waiting);
        kiln_engine_close(e);
    }
    test_draft(src, kiln, prompts, lens, ref, &plain, S);
    test_tree(src, kiln, prompts, lens, ref, &plain, S);
    test_logprobs(prompts[6], lens[6]);
    test_distribution(prompts[6], lens[6], kf_at("tiny1.kiln"), kref_next(&g));
    printf("speculation: %lld of %lld draft tokens accepted over the runs\n", (long long)spec_accepted,
           (long long)spec_proposed);
    KT_CHECK(spec_accepted > 0 && spec_accepted < spec_proposed,
             "the runs never exercised both acceptance and rejection (%lld of %lld)",
             (long long)spec_accepted, (long long)spec_proposed);
    kf_scratch_close();
    return kt_done("test_engine_spec");
}
