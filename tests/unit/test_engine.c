/* test_engine.c — the engine of kiln.h on the host backend, with the llama recipe's tiny config and fresh
 * random bf16 weights written as safetensors. The reference for every batched, chunked, shared or
 * preempted run is the same request run alone: on the host every output row is computed independently
 * of the others in its step, so the tokens must be identical.
 *   - batching: 6 requests of different lengths together == each alone (greedy);
 *   - chunked prefill (4 tokens per step) == whole prompts;
 *   - prefix sharing: a request whose prompt starts like a running one forks its pages (stats count
 *     them) and gets the tokens it gets alone; so does one that starts like a finished one (prefix
 *     cache); sharing off computes everything;
 *   - preemption: a KV pool too small for all requests at once preempts and recomputes, same tokens;
 *   - sampling: the same seed gives the same tokens, batched or alone; another seed other tokens;
 *   - stop tokens, max_tokens (finish reasons), abort from the callback and by id;
 *   - kiln_engine_score's last row argmax is the first greedy token;
 *   - bad requests: empty prompt, a token outside the vocabulary.
 * Needs the kiln CLI (KILN_BIN, to compile the package) and the LLVM host backend; skips without them.
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/llvm/cg_host.h"
#include "kfile.h"
#include "kiln.h"
#include "kref.h"
#include "kt.h"
#include "runtime/rt_package.h"

#include <sqlite3.h>

enum { MAXR = 16, MAXT = 256 };

typedef struct Out {
    int32_t tok[MAXT];
    int n, finish_calls, abort_after;
    KilnFinish finish;
} Out;

static char pkg_path[512], weights_path[512];

/* Re-entrancy: a callback that, when its request finishes, submits more requests (enough to move the
 * engine's request array) and tries to step from inside (refused). */
static int on_token(void *user, int64_t req, int32_t tok, KilnFinish fin);
#define on_token_cb on_token

typedef struct Chain {
    KilnEngine *e;
    const int32_t *prompt;
    int n, spawned, step_refused;
    Out outs[24];
} Chain;

static int on_chain(void *user, int64_t req, int32_t tok, KilnFinish fin)
{
    Chain *c = user;
    (void)req, (void)tok;
    if (fin == KILN_FINISH_NONE || c->spawned) return 0;
    KilnSampling s;
    kiln_sampling_init(&s);
    s.max_tokens = 6;
    for (int i = 0; i < 24; i++)
        c->spawned +=
            kiln_engine_submit(c->e, c->prompt, c->n, &s, on_token_cb, &c->outs[i], NULL) == KILN_OK;
    c->step_refused = kiln_engine_step(c->e, NULL) == KILN_ERR_ARG;
    return 0;
}

static int on_token(void *user, int64_t req, int32_t tok, KilnFinish fin)
{
    Out *o = user;
    (void)req;
    if (tok >= 0 && o->n < MAXT) o->tok[o->n++] = tok;
    if (fin != KILN_FINISH_NONE) o->finish = fin, o->finish_calls++;
    return o->abort_after && o->n >= o->abort_after;
}

static KilnEngine *open_engine(int step_tokens, int64_t kv_bytes, int no_share)
{
    KilnEngineOptions o;
    kiln_engine_options_init(&o);
    o.device = -2;
    o.max_step_tokens = step_tokens;
    o.kv_cache_bytes = kv_bytes;
    o.no_prefix_sharing = no_share;
    KilnEngine *e = NULL;
    char err[512];
    KilnStatus s = kiln_engine_open(pkg_path, weights_path, &o, &e, err, sizeof err);
    KT_CHECK(s == KILN_OK, "open: %s", err);
    return e;
}

static void drain(KilnEngine *e)
{
    int pending = 1, steps = 0;
    while (pending && steps++ < 10000)
        if (kiln_engine_step(e, &pending) != KILN_OK) {
            KT_CHECK(0, "step: %s", kiln_engine_errmsg(e));
            return;
        }
}

/* Runs one request alone on a fresh engine. */
static void run_alone(const int32_t *p, int n, const KilnSampling *s, Out *o)
{
    memset(o, 0, sizeof *o);
    KilnEngine *e = open_engine(0, 0, 1);
    int64_t id;
    if (!e) return;
    KT_CHECK(kiln_engine_submit(e, p, n, s, on_token, o, &id) == KILN_OK, "submit: %s",
             kiln_engine_errmsg(e));
    drain(e);
    kiln_engine_close(e);
}

static int same(const Out *a, const Out *b)
{
    return a->n == b->n && !memcmp(a->tok, b->tok, (size_t)a->n * sizeof a->tok[0]) && a->finish == b->finish;
}

/* The package's weights as random bf16 safetensors (norm weights around 1, the rest N(0, 0.08)). */
static int write_weights(KrefRng *g)
{
    KilnPackage *pkg;
    char err[512];
    if (kiln_package_open(pkg_path, &pkg, err, sizeof err) != KILN_OK) {
        KT_CHECK(0, "%s", err);
        return 0;
    }
    sqlite3_stmt *st;
    KfStTensor t[64];
    int n = 0;
    sqlite3_prepare_v2(rt_pkg_db(pkg), "SELECT name, shape FROM weights ORDER BY name", -1, &st, NULL);
    while (sqlite3_step(st) == SQLITE_ROW && n < 64) {
        KfStTensor *w = &t[n++];
        memset(w, 0, sizeof *w);
        w->name = strdup((const char *)sqlite3_column_text(st, 0));
        w->dtype = "BF16";
        size_t elems = 1;
        char *p = (char *)sqlite3_column_text(st, 1); /* "[a,b]" */
        while (*p == '[' || *p == ',') {
            w->shape[w->n_dims] = strtoll(p + 1, &p, 10);
            elems *= (size_t)w->shape[w->n_dims++];
        }
        uint16_t *d = malloc(elems * 2);
        int norm = strstr(w->name, "norm") != NULL;
        for (size_t i = 0; i < elems; i++) {
            float f = (float)(norm ? 1.0 + 0.1 * kref_normal(g) : 0.08 * kref_normal(g));
            uint32_t u;
            memcpy(&u, &f, 4);
            d[i] = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
        }
        w->data = d, w->nbytes = elems * 2;
    }
    sqlite3_finalize(st);
    kiln_package_close(pkg);
    kf_st_write_tensors(weights_path, t, n);
    for (int i = 0; i < n; i++)
        free((void *)t[i].name), free((void *)t[i].data);
    return n > 0;
}

static void random_prompt(KrefRng *g, int32_t *p, int n, int vocab)
{
    for (int i = 0; i < n; i++)
        p[i] = (int32_t)(kref_next(g) % (uint64_t)vocab);
}

int main(void)
{
    const char *kiln = getenv("KILN_BIN"), *src = getenv("KILN_SOURCE_DIR");
    if (!cg_host_jit_available() || !kiln || !src) {
        printf("SKIP: needs the LLVM host backend and KILN_BIN/KILN_SOURCE_DIR (run through ctest)\n");
        return 77;
    }
    if (!kf_scratch_open("engine")) return 1;
    snprintf(pkg_path, sizeof pkg_path, "%s", kf_at("tiny.kiln"));
    snprintf(weights_path, sizeof weights_path, "%s", kf_at("tiny.safetensors"));
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s' compile '%s/recipes/llama.lua' --model tiny --target host --no-cache -o '%s'", kiln, src,
             pkg_path);
    KT_CHECK(system(cmd) == 0, "%s", cmd);
    uint64_t seed = (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)seed);
    KrefRng g = kref_rng(seed);
    if (!write_weights(&g)) return kt_done("test_engine");
    KilnEngine *e = open_engine(0, 0, 0);
    if (!e) return kt_done("test_engine");
    KilnEngineStats st;
    kiln_engine_stats(e, &st, sizeof st);
    int V = kiln_engine_vocab(e), S = st.page_size;

    /* prompts of lengths across page boundaries */
    static const int lens[] = {1, 7, 8, 9, 23, 40};
    enum { NR = sizeof lens / sizeof lens[0] };
    int32_t prompts[NR][64];
    for (int i = 0; i < NR; i++)
        random_prompt(&g, prompts[i], lens[i], V);
    KilnSampling greedy;
    kiln_sampling_init(&greedy);
    greedy.max_tokens = 24;
    Out alone[NR], together[NR];
    for (int i = 0; i < NR; i++)
        run_alone(prompts[i], lens[i], &greedy, &alone[i]);

    /* batching */
    memset(together, 0, sizeof together);
    for (int i = 0; i < NR; i++)
        KT_CHECK(kiln_engine_submit(e, prompts[i], lens[i], &greedy, on_token, &together[i], NULL) == KILN_OK,
                 "submit");
    drain(e);
    for (int i = 0; i < NR; i++)
        KT_CHECK(same(&alone[i], &together[i]) && alone[i].n == 24 && alone[i].finish == KILN_FINISH_LENGTH &&
                     together[i].finish_calls == 1,
                 "batched request %d (%d tokens): %d tokens, differs from alone (%d)", i, lens[i],
                 together[i].n, alone[i].n);
    kiln_engine_close(e);

    /* chunked prefill */
    e = open_engine(4, 0, 1);
    memset(together, 0, sizeof together);
    for (int i = 0; e && i < NR; i++)
        kiln_engine_submit(e, prompts[i], lens[i], &greedy, on_token, &together[i], NULL);
    if (e) drain(e);
    for (int i = 0; e && i < NR; i++)
        KT_CHECK(same(&alone[i], &together[i]), "chunked prefill: request %d differs", i);
    kiln_engine_close(e);

    /* prefix sharing: B starts with A's first 2 pages + 3 tokens, then differs */
    for (int share = 0; share < 2; share++) {
        e = open_engine(0, 0, !share);
        if (!e) break;
        int32_t b[64];
        int nb = 2 * S + 3 + 6;
        memcpy(b, prompts[NR - 1], (size_t)(2 * S + 3) * 4);
        random_prompt(&g, b + 2 * S + 3, 6, V);
        Out oa = {0}, ob = {0}, ref;
        run_alone(b, nb, &greedy, &ref);
        kiln_engine_submit(e, prompts[NR - 1], lens[NR - 1], &greedy, on_token, &oa, NULL);
        kiln_engine_step(e, NULL); /* A's prompt is in the cache now */
        kiln_engine_submit(e, b, nb, &greedy, on_token, &ob, NULL);
        drain(e);
        kiln_engine_stats(e, &st, sizeof st);
        KT_CHECK(same(&ob, &ref) && same(&oa, &alone[NR - 1]), "prefix sharing %d: tokens differ from alone",
                 share);
        KT_CHECK(st.prefix_tokens == (share ? 2 * S : 0), "prefix sharing %d: %lld shared tokens", share,
                 (long long)st.prefix_tokens);
        KT_CHECK(st.cached_prefixes == (share ? 2 : 0), "%d cached prefixes", st.cached_prefixes);
        /* prefix caching: both have finished; C starts with 4 pages of B's computed tokens (its prompt and
         * its first generated tokens) */
        int32_t c[64];
        int nc = 4 * S + 5;
        memcpy(c, b, (size_t)nb * 4);
        memcpy(c + nb, ob.tok, (size_t)(4 * S - nb) * 4);
        random_prompt(&g, c + 4 * S, 5, V);
        Out oc = {0}, refc;
        run_alone(c, nc, &greedy, &refc);
        kiln_engine_submit(e, c, nc, &greedy, on_token, &oc, NULL);
        drain(e);
        KilnEngineStats st2;
        kiln_engine_stats(e, &st2, sizeof st2);
        KT_CHECK(same(&oc, &refc), "prefix caching %d: tokens differ from alone", share);
        KT_CHECK(st2.prefix_tokens - st.prefix_tokens == (share ? 4 * S : 0),
                 "prefix caching %d: %lld cached tokens", share,
                 (long long)(st2.prefix_tokens - st.prefix_tokens));
        kiln_engine_close(e);
    }

    /* preemption: room for about two full requests (with sharing on, finished requests' cached pages
     * must be given back for the later ones) */
    int64_t page_bytes = 2LL * 2 /* layers */ * S * 2 /* kv heads */ * 16 /* head dim */ * 2 /* bf16 */;
    for (int share = 0; share < 2; share++) {
        e = open_engine(0, page_bytes * 9, !share);
        memset(together, 0, sizeof together);
        for (int i = 3; e && i < NR; i++)
            kiln_engine_submit(e, prompts[i], lens[i], &greedy, on_token, &together[i], NULL);
        if (e) drain(e);
        if (e) kiln_engine_stats(e, &st, sizeof st);
        for (int i = 3; e && i < NR; i++)
            KT_CHECK(same(&alone[i], &together[i]), "preemption (sharing %d): request %d differs", share, i);
        KT_CHECK(!e || st.preemptions > 0, "no preemption with %lld pages", (long long)st.kv_pages);
        /* prompt tokens count once however often a preempted request recomputes them (shared prefix
         * tokens are not computed at all); recomputed ones are counted apart */
        int64_t prompt_sum = 0;
        for (int i = 3; i < NR; i++)
            prompt_sum += lens[i];
        KT_CHECK(
            !e || (share ? st.prompt_tokens + st.prefix_tokens >= prompt_sum && st.prompt_tokens <= prompt_sum
                         : st.prompt_tokens == prompt_sum),
            "sharing %d: %lld prompt tokens (+%lld shared) for %lld", share, (long long)st.prompt_tokens,
            (long long)st.prefix_tokens, (long long)prompt_sum);
        KT_CHECK(!e || st.recomputed_tokens > 0, "sharing %d: %lld preemptions but nothing recomputed", share,
                 (long long)st.preemptions);
        kiln_engine_close(e);
    }

    /* sampling: seeds */
    KilnSampling hot = greedy;
    hot.temperature = 1.0f, hot.top_p = 0.95f, hot.seed = 7;
    Out h1, h2, h3 = {0}, h4;
    run_alone(prompts[4], lens[4], &hot, &h1);
    run_alone(prompts[4], lens[4], &hot, &h2);
    e = open_engine(0, 0, 0);
    if (e) {
        Out other = {0};
        kiln_engine_submit(e, prompts[2], lens[2], &hot, on_token, &other, NULL);
        kiln_engine_submit(e, prompts[4], lens[4], &hot, on_token, &h3, NULL);
        drain(e);
    }
    kiln_engine_close(e);
    hot.seed = 8;
    run_alone(prompts[4], lens[4], &hot, &h4);
    KT_CHECK(same(&h1, &h2) && same(&h1, &h3), "sampling with one seed is not reproducible");
    KT_CHECK(!same(&h1, &h4), "seeds 7 and 8 gave the same %d tokens", h1.n);

    /* stop tokens, max_tokens, abort */
    KilnSampling stop = greedy;
    int32_t stop_tok = alone[5].tok[5];
    stop.stop_tokens = &stop_tok, stop.n_stop = 1;
    Out os;
    run_alone(prompts[5], lens[5], &stop, &os);
    int first = 0;
    while (alone[5].tok[first] != stop_tok)
        first++;
    KT_CHECK(os.n == first + 1 && os.finish == KILN_FINISH_STOP, "stop token: %d tokens, finish %d", os.n,
             os.finish);
    e = open_engine(0, 0, 0);
    if (e) {
        Out a1 = {.abort_after = 3}, a2 = {0}, a3 = {0};
        int64_t id3;
        kiln_engine_submit(e, prompts[1], lens[1], &greedy, on_token, &a1, NULL);
        kiln_engine_submit(e, prompts[2], lens[2], &greedy, on_token, &a2, NULL);
        kiln_engine_submit(e, prompts[3], lens[3], &greedy, on_token, &a3, &id3);
        kiln_engine_step(e, NULL);
        KT_CHECK(kiln_engine_abort(e, id3) == KILN_OK, "abort");
        drain(e);
        KT_CHECK(a1.n == 3 && a1.finish == KILN_FINISH_ABORT && a1.finish_calls == 1,
                 "callback abort: %d, %d", a1.n, a1.finish);
        KT_CHECK(a3.finish == KILN_FINISH_ABORT && a3.n == 1, "abort by id: %d tokens, finish %d", a3.n,
                 a3.finish);
        KT_CHECK(same(&a2, &alone[2]), "a neighbour of aborted requests changed");
        KT_CHECK(kiln_engine_abort(e, 999) == KILN_ERR_ARG, "abort of no request");
        /* bad requests */
        int32_t bad = V;
        KT_CHECK(kiln_engine_submit(e, &bad, 1, &greedy, NULL, NULL, NULL) == KILN_ERR_ARG,
                 "token %d accepted", V);
        KT_CHECK(kiln_engine_submit(e, prompts[0], 0, &greedy, NULL, NULL, NULL) == KILN_ERR_ARG,
                 "empty prompt");
        /* callbacks that submit (the request array moves) and try to step */
        Chain ch = {.e = e, .prompt = prompts[3], .n = lens[3]};
        KilnSampling six = greedy;
        six.max_tokens = 6;
        Out ref6;
        run_alone(prompts[3], lens[3], &six, &ref6);
        KT_CHECK(kiln_engine_submit(e, prompts[1], lens[1], &six, on_chain, &ch, NULL) == KILN_OK, "chain");
        drain(e);
        int chain_ok = ch.spawned == 24 && ch.step_refused;
        for (int i = 0; i < 24; i++)
            chain_ok &= same(&ch.outs[i], &ref6);
        KT_CHECK(chain_ok, "requests submitted from a callback: %d spawned, step refused %d", ch.spawned,
                 ch.step_refused);
        /* option structs from an older kiln.h (shorter) still work; an unset size is refused */
        KilnSampling short_s = greedy;
        short_s.size = (int)offsetof(KilnSampling, stop_tokens);
        Out o1 = {0};
        KT_CHECK(kiln_engine_submit(e, prompts[2], lens[2], &short_s, on_token, &o1, NULL) == KILN_OK,
                 "short sampling");
        drain(e);
        KT_CHECK(same(&o1, &alone[2]), "a short sampling struct changed the tokens");
        short_s.size = 0;
        KT_CHECK(kiln_engine_submit(e, prompts[2], lens[2], &short_s, NULL, NULL, NULL) == KILN_ERR_ARG,
                 "size 0");
        KilnEngineOptions old;
        kiln_engine_options_init(&old);
        old.device = -2, old.size = (int)offsetof(KilnEngineOptions, no_cuda_graphs);
        KilnEngine *e2 = NULL;
        char err[512];
        KT_CHECK(kiln_engine_open(pkg_path, weights_path, &old, &e2, err, sizeof err) == KILN_OK,
                 "short options: %s", err);
        kiln_engine_close(e2);
        old.size = 0;
        KT_CHECK(kiln_engine_open(pkg_path, weights_path, &old, &e2, err, sizeof err) == KILN_ERR_ARG && !e2,
                 "options size 0");
        /* scoring */
        float *logits = malloc((size_t)lens[5] * (size_t)V * sizeof *logits);
        KT_CHECK(logits && kiln_engine_score(e, prompts[5], lens[5], logits) == KILN_OK, "score: %s",
                 kiln_engine_errmsg(e));
        if (logits) {
            const float *last = logits + (size_t)(lens[5] - 1) * (size_t)V;
            int best = 0;
            for (int j = 1; j < V; j++)
                if (last[j] > last[best]) best = j;
            KT_CHECK(best == alone[5].tok[0], "score argmax %d, greedy %d", best, alone[5].tok[0]);
        }
        free(logits);
        kiln_engine_close(e);
    }
    /* a KV cache of 3 pages: a prompt larger than it is refused; a request that outgrows it ends with
     * LENGTH when its tokens fill it (no endless waiting) */
    e = open_engine(0, page_bytes * 3, 0);
    if (e) {
        KilnSampling lng = greedy;
        lng.max_tokens = 100;
        lng.ignore_eos = 1;
        Out o = {0};
        KT_CHECK(kiln_engine_submit(e, prompts[5], 3 * S, &lng, NULL, NULL, NULL) == KILN_ERR_ARG,
                 "a prompt filling the whole cache was accepted");
        KT_CHECK(kiln_engine_submit(e, prompts[2], lens[2], &lng, on_token, &o, NULL) == KILN_OK,
                 "small pool");
        drain(e);
        KT_CHECK(o.finish == KILN_FINISH_LENGTH && lens[2] + o.n == 3 * S, "small pool: %d tokens, finish %d",
                 o.n, o.finish);
        kiln_engine_close(e);
    }
    kf_scratch_close();
    return kt_done("test_engine");
}
