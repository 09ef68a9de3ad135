/* rt_engine.c — the engine of kiln.h, running: a package's launch plan over batches of sequences with a
 * paged KV cache. Design and data flow: docs/RUNTIME.md; the state is rt_engine_impl.h's, opened by
 * rt_engine_open.c.
 *
 * Step: schedule (running sequences first, each decoding one token, or verifying its drafts, or
 * prefilling a chunk of its prompt; then waiting requests while tokens, sequences and pages last) -> step
 * arrays (rt_kv_step_build) -> inputs uploaded -> every launch of the plan (or a captured graph) ->
 * next_tokens read back -> drafts kept or rolled back -> callbacks, finished requests release their pages.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln.h"
#include "rt_engine.h"
#include "rt_engine_impl.h"
#include "rt_exec.h"
#include "rt_file.h"
#include "rt_gguf.h"
#include "rt_kvcache.h"
#include "rt_package.h"
#include "rt_plan.h"
#include "rt_sample.h"
#include "rt_spec.h"
#include "rt_tokenizer.h"
#include "rt_tune.h"
#include "rt_weights.h"

/* ---- small helpers ---- */

KilnStatus rt_engine_fail(KilnEngine *e, KilnStatus s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rt_file_verrf(e->err, sizeof e->err, s, fmt, ap);
    va_end(ap);
    return s;
}

void rt_engine_log(KilnEngine *e, const char *fmt, ...)
{
    if (!e->log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    e->log(e->log_user, line);
}

int rt_engine_dtype_bytes(const char *dt)
{
    if (!strcmp(dt, "f32") || !strcmp(dt, "i32")) return 4;
    if (!strcmp(dt, "bf16") || !strcmp(dt, "f16")) return 2;
    if (!strcmp(dt, "i64")) return 8;
    if (!strcmp(dt, "i8") || !strcmp(dt, "u8") || !strcmp(dt, "f8e4m3")) return 1;
    return 0;
}

int64_t rt_engine_shape_elems(const char *shape, const int64_t sym[RT_SYM_COUNT], int *starts_p)
{
    static const char *const names[] = {"T", "B", "MP", "R", "P"};
    int64_t n = 1;
    const char *s = shape;
    if (starts_p) *starts_p = !strncmp(shape, "[P,", 3) || !strcmp(shape, "[P]");
    if (*s++ != '[') return -1;
    while (*s && *s != ']') {
        size_t len = strcspn(s, ",]");
        int64_t d = -1;
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s + len && len) d = v;
        if (len == 3 && !strncmp(s, "B+1", 3)) d = sym[RT_SYM_B] + 1;
        for (int i = 0; i < RT_SYM_COUNT && d < 0; i++)
            if (strlen(names[i]) == len && !strncmp(s, names[i], len)) d = sym[i];
        if (d < 0 || (d && n > INT64_MAX / d)) return -1;
        n *= d;
        s += len;
        if (*s == ',') s++;
    }
    return *s == ']' ? n : -1;
}

/* ---- requests ---- */

void kiln_sampling_init(KilnSampling *s)
{
    memset(s, 0, sizeof *s);
    s->size = (int)sizeof *s;
    s->top_p = 1.0f;
    s->max_tokens = 256;
    s->spec_k = 4;
    s->spec_branches = 1;
    s->logprobs = -1;
    s->repetition_penalty = 1.0f;
}

KilnStatus kiln_engine_submit(KilnEngine *e, const int32_t *prompt, int n, const KilnSampling *s,
                              KilnTokenCallback cb, void *user, int64_t *request)
{
    KilnSampling given;
    kiln_sampling_init(&given);
    if (request) *request = 0;
    char why[256];
    if (kiln_sampling_check(s, e->vocab, why, sizeof why) != KILN_OK)
        return rt_engine_fail(e, KILN_ERR_ARG, "submit: %s", why);
    if (s) memcpy(&given, s, (size_t)s->size < sizeof given ? (size_t)s->size : sizeof given);
    given.size = (int)sizeof given;
    s = &given;
    if (s->spec == KILN_SPEC_DRAFT && !e->draft)
        return rt_engine_fail(
            e, KILN_ERR_ARG,
            "submit: sampling.spec 2 (draft): the engine has no draft model (options.draft_package)");
    if (!prompt || n < 1) return rt_engine_fail(e, KILN_ERR_ARG, "submit: empty prompt");
    int64_t pages = ((int64_t)n + 1 + e->page_size - 1) / e->page_size;
    if (pages > e->n_pages)
        return rt_engine_fail(e, KILN_ERR_ARG,
                              "submit: a prompt of %d tokens needs %lld KV pages; the cache has %d", n,
                              (long long)pages, e->n_pages);
    if (n >= e->max_ctx)
        return rt_engine_fail(e, KILN_ERR_ARG, "submit: prompt of %d tokens; the context holds %d", n,
                              e->max_ctx);
    for (int i = 0; i < n; i++)
        if (prompt[i] < 0 || prompt[i] >= e->vocab)
            return rt_engine_fail(e, KILN_ERR_ARG, "submit: token %d at %d is outside the vocabulary (%d)",
                                  prompt[i], i, e->vocab);
    if (e->n_reqs == e->cap_reqs) {
        int cap = e->cap_reqs ? 2 * e->cap_reqs : 16;
        Req *r = realloc(e->reqs, (size_t)cap * sizeof *r);
        if (!r) return rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory");
        e->reqs = r, e->cap_reqs = cap;
    }
    Req *r = &e->reqs[e->n_reqs];
    memset(r, 0, sizeof *r);
    r->cap = n + 64;
    r->tokens = malloc((size_t)r->cap * sizeof *r->tokens);
    r->stop = s->n_stop ? malloc((size_t)s->n_stop * sizeof *r->stop) : NULL;
    r->pred = s->n_prediction ? malloc((size_t)s->n_prediction * sizeof *r->pred) : NULL;
    r->bias = s->n_logit_bias ? malloc((size_t)s->n_logit_bias * sizeof *r->bias) : NULL;
    r->host_sample = rt_sample_on_host(s);
    if (r->host_sample && !e->hs_row) {
        e->hs_row = malloc(3 * (size_t)e->vocab * sizeof *e->hs_row);
        e->hs_count = calloc((size_t)e->vocab, sizeof *e->hs_count);
    }
    if (!r->tokens || (s->n_stop && !r->stop) || (s->n_prediction && !r->pred) ||
        (s->n_logit_bias && !r->bias) || (r->host_sample && (!e->hs_row || !e->hs_count))) {
        free(r->tokens), free(r->stop), free(r->pred), free(r->bias);
        return rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory");
    }
    if (r->host_sample && e->buf_logits < 0) {
        free(r->tokens), free(r->stop), free(r->pred), free(r->bias);
        return rt_engine_fail(e, KILN_ERR_UNSUPPORTED,
                              "submit: penalties, logit_bias and min_p need the package's logits output");
    }
    if (s->n_logit_bias) memcpy(r->bias, s->logit_bias, (size_t)s->n_logit_bias * sizeof *r->bias);
    memcpy(r->tokens, prompt, (size_t)n * sizeof *prompt);
    if (s->n_stop) memcpy(r->stop, s->stop_tokens, (size_t)s->n_stop * sizeof *r->stop);
    if (s->n_prediction) memcpy(r->pred, s->prediction, (size_t)s->n_prediction * sizeof *r->pred);
    r->n_pred = s->n_prediction;
    r->n_tokens = r->n_prompt = n;
    r->seq = r->dseq = -1;
    r->state = REQ_WAITING;
    r->s = *s;
    r->s.stop_tokens = r->stop, r->s.prediction = r->pred, r->s.logit_bias = r->bias;
    if (r->host_sample) r->s.spec = KILN_SPEC_NONE; /* a draft's token would need the host's draw too */
    if (r->s.spec) rt_spec_init(&r->spec, s->spec_k);
    r->cb = cb, r->user = user;
    r->id = e->next_id++;
    e->n_reqs++;
    if (request) *request = r->id;
    return KILN_OK;
}

KilnStatus kiln_engine_abort(KilnEngine *e, int64_t request)
{
    for (int i = 0; i < e->n_reqs; i++)
        if (e->reqs[i].id == request && e->reqs[i].state != REQ_DONE) {
            e->reqs[i].state = REQ_DONE;
            e->reqs[i].finish = KILN_FINISH_ABORT;
            return KILN_OK;
        }
    return rt_engine_fail(e, KILN_ERR_ARG, "abort: no request %lld", (long long)request);
}

/* Gives a running request's pages back; it will prefill everything again when readmitted. */
static void preempt(KilnEngine *e, Req *r)
{
    rt_kv_seq_free(e->kv, r->seq);
    r->seq = -1, r->n_done = 0, r->state = REQ_WAITING;
    e->stats.preemptions++;
    rt_engine_log(e, "request %lld preempted (out of KV pages); it will be recomputed", (long long)r->id);
}

/* Gives back the least recently used cached prefix's pages. Returns 0 when there is none. */
static int evict_cached(KilnEngine *e)
{
    if (!e->n_cache) return 0;
    int lru = 0;
    for (int i = 1; i < e->n_cache; i++)
        if (e->cache[i].used < e->cache[lru].used) lru = i;
    rt_kv_seq_free(e->kv, e->cache[lru].seq);
    free(e->cache[lru].tokens);
    e->cache[lru] = e->cache[--e->n_cache];
    return 1;
}

/* Keeps a finished request's sequence as a cached prefix (at least one computed page). Returns 1 when
 * the cache took it. */
static int keep_prefix(KilnEngine *e, const Req *r)
{
    if (!e->share_prefixes || r->finish == KILN_FINISH_ERROR || r->n_done < e->page_size) return 0;
    if (e->n_cache == MAX_CACHED) evict_cached(e);
    int32_t *t = malloc((size_t)r->n_done * sizeof *t);
    if (!t) return 0;
    memcpy(t, r->tokens, (size_t)r->n_done * sizeof *t);
    e->cache[e->n_cache++] = (Cached){r->seq, t, r->n_done, ++e->clock};
    return 1;
}

/* Ends finished requests (callbacks already told them, except aborts) and compacts the list. */
static void reap(KilnEngine *e)
{
    enum { BATCH = 64 };
    struct {
        KilnTokenCallback cb;
        void *user;
        int64_t id;
        KilnFinish finish;
    } told[BATCH];
    int j = 0, n_told = 0, more = 0;
    for (int i = 0; i < e->n_reqs; i++) {
        Req *r = &e->reqs[i];
        if (r->state != REQ_DONE) {
            e->reqs[j++] = *r;
            continue;
        }
        if ((r->finish == KILN_FINISH_ABORT || r->finish == KILN_FINISH_ERROR) && r->cb) {
            if (n_told == BATCH) { /* told at the next reap */
                e->reqs[j++] = *r;
                more = 1;
                continue;
            }
            told[n_told++].cb = r->cb, told[n_told - 1].user = r->user, told[n_told - 1].id = r->id;
            told[n_told - 1].finish = r->finish;
        }
        if (r->seq >= 0 && !keep_prefix(e, r)) rt_kv_seq_free(e->kv, r->seq);
        if (r->dseq >= 0) rt_kv_seq_free(e->draft->kv, r->dseq);
        free(r->tokens), free(r->stop), free(r->pred), free(r->bias);
    }
    e->n_reqs = j;
    /* callbacks last: they may submit requests (e->reqs may move) */
    e->in_callback++;
    for (int i = 0; i < n_told; i++)
        told[i].cb(told[i].user, told[i].id, -1, told[i].finish);
    e->in_callback--;
    if (more) reap(e);
}

/* Copies rows [0, n) of page src to page dst in every paged input (copy-on-write of a shared page). */
static KilnStatus copy_page(KilnEngine *e, const RtKvCopy *c)
{
    for (int i = 0; i < e->plan->n_bufs; i++) {
        const RtPlanBuf *b = &e->plan->bufs[i];
        if (b->kind != RT_BUF_INPUT || strncmp(b->shape, "[P,", 3)) continue;
        int64_t page = e->input_cap[i] / e->n_pages, row = page / e->page_size;
        KilnStatus s = rt_exec_copy(e->x, e->inputs[i] + (uint64_t)(c->dst * page),
                                    e->inputs[i] + (uint64_t)(c->src * page), (size_t)(row * c->n_tokens),
                                    e->err, sizeof e->err);
        if (s != KILN_OK) return s;
    }
    return KILN_OK;
}

/* Copies the K/V of sequence seq's token slot `from` to slot `to` in every paged input (a draft tree's
 * kept sibling, computed after the chain, to the place of the draft it replaces). */
static KilnStatus copy_slot(KilnEngine *e, int32_t seq, int from, int to)
{
    const int32_t *pg = NULL;
    int32_t np = rt_kv_seq_pages(e->kv, seq, &pg);
    if (from / e->page_size >= np || to / e->page_size >= np)
        return rt_engine_fail(e, KILN_ERR_ARG, "slot %d or %d past sequence %d's %d pages", from, to, seq,
                              np);
    for (int i = 0; i < e->plan->n_bufs; i++) {
        const RtPlanBuf *b = &e->plan->bufs[i];
        if (b->kind != RT_BUF_INPUT || strncmp(b->shape, "[P,", 3)) continue;
        uint64_t page = (uint64_t)(e->input_cap[i] / e->n_pages), row = page / (uint64_t)e->page_size;
        uint64_t src = (uint64_t)pg[from / e->page_size] * page + (uint64_t)(from % e->page_size) * row;
        uint64_t dst = (uint64_t)pg[to / e->page_size] * page + (uint64_t)(to % e->page_size) * row;
        KilnStatus s =
            rt_exec_copy(e->x, e->inputs[i] + dst, e->inputs[i] + src, (size_t)row, e->err, sizeof e->err);
        if (s != KILN_OK) return s;
    }
    return KILN_OK;
}

/* Adds up to `room` tokens of request r to the step. Returns the tokens added (0: none fit), or -1 when
 * the KV pool is full for it. */
/* Prefix sharing: a request without a sequence starts as a fork of the live or cached sequence whose
 * computed tokens share the longest page-aligned prefix with its tokens (at least one page; its last token
 * is always computed, for the logits), so those pages are read, not recomputed. Returns 1 when it forked. */
/* The page-aligned length of the prefix that computed tokens t[0..n) share with r's tokens, leaving r's
 * last token to compute. */
static int shared_len(const KilnEngine *e, const int32_t *t, int n, const Req *r)
{
    int lim = n < r->n_tokens - 1 ? n : r->n_tokens - 1, l = 0;
    while (l < lim && t[l] == r->tokens[l])
        l++;
    return l - l % e->page_size;
}

static int share_prefix(KilnEngine *e, Req *r)
{
    int best = -1, best_len = 0, best_cached = -1;
    for (int i = 0; i < e->n_reqs; i++) {
        const Req *q = &e->reqs[i];
        if (q == r || q->seq < 0 || q->state == REQ_DONE) continue;
        int l = shared_len(e, q->tokens, q->n_done, r);
        if (l > best_len) best = i, best_len = l;
    }
    for (int i = 0; i < e->n_cache; i++) {
        int l = shared_len(e, e->cache[i].tokens, e->cache[i].n, r);
        if (l > best_len) best_cached = i, best_len = l;
    }
    if (best < 0 && best_cached < 0) return 0;
    int32_t parent = best_cached >= 0 ? e->cache[best_cached].seq : e->reqs[best].seq;
    RtKvCopy cow;
    if (rt_kv_seq_fork(e->kv, parent, best_len, &r->seq, &cow) != KILN_OK) return 0;
    if (best_cached >= 0) e->cache[best_cached].used = ++e->clock;
    r->n_done = best_len; /* page-aligned: cow is never needed */
    e->stats.prefix_tokens += best_len;
    return 1;
}

/* How many of sequence seq's pages nobody else holds (what freeing it gives back). */
static int32_t own_pages(const KilnEngine *e, int32_t seq)
{
    const int32_t *pages = NULL;
    int32_t n = rt_kv_seq_pages(e->kv, seq, &pages), own = 0;
    for (int32_t i = 0; i < n; i++)
        own += rt_kv_page_refs(e->kv, pages[i]) == 1;
    return own;
}

static int schedule_one(KilnEngine *e, Req *r, int room, KilnStatus *s)
{
    if (r->seq < 0 && e->share_prefixes) share_prefix(e, r);
    int chunk = r->n_tokens - r->n_done;
    if (chunk > room) chunk = room;
    if (chunk == 1 && r->n_draft) chunk += r->n_draft + r->n_sib; /* a verify: room was checked */
    if (chunk <= 0) return 0;
    if (r->seq < 0 && rt_kv_seq_create(e->kv, &r->seq) != KILN_OK) return -1;
    RtKvCopy cow;
    KilnStatus a = rt_kv_seq_append(e->kv, r->seq, chunk, &cow);
    while (a == KILN_ERR_FULL && evict_cached(e)) /* cached prefixes go before running requests */
        a = rt_kv_seq_append(e->kv, r->seq, chunk, &cow);
    if (a == KILN_ERR_FULL) return -1;
    if (a != KILN_OK) {
        *s = rt_engine_fail(e, a, "KV cache: %s", rt_kv_errmsg(e->kv));
        return 0;
    }
    if (cow.src >= 0 && (*s = copy_page(e, &cow)) != KILN_OK) return 0;
    return chunk;
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Speculative decoding: the drafts a decoding request r verifies this step (into r->draft, r->n_draft),
 * within the step's room for tokens and logit rows, its max_tokens, its context and the KV pool. */
/* The sampling row (T, top_k, top_p, seed) that draws request r's token generated + j: a fresh seed per
 * request and token, exact in f32 (< 2^24). The target's rows and the draft model's use the same. */
static void row_sampling(const Req *r, int j, float sp[4])
{
    sp[0] = r->s.temperature, sp[1] = (float)r->s.top_k, sp[2] = r->s.top_p;
    sp[3] = (float)(mix64(r->s.seed ^ mix64((uint64_t)(r->generated + j))) & 0xffffff);
}

/* The most drafts request r may verify now, from k: at most k + 1 new tokens come out of a verify, so
 * within its max_tokens, and its positions stay below the context and the pool. */
/* The tokens a sequence may hold: the context, and the whole KV pool. */
static int64_t spec_ctx(const KilnEngine *e)
{
    return e->max_ctx < (int64_t)e->n_pages * e->page_size ? e->max_ctx : (int64_t)e->n_pages * e->page_size;
}

static int spec_cap(const KilnEngine *e, const Req *r, int k)
{
    if (r->s.max_tokens > 0 && k > r->s.max_tokens - r->generated - 1) k = r->s.max_tokens - r->generated - 1;
    if (k > spec_ctx(e) - 1 - r->n_tokens) k = (int)(spec_ctx(e) - 1 - r->n_tokens);
    return k;
}

/* A request decoding this step (one uncomputed token, a sequence) that speculates. */
static int spec_ready(const Req *r)
{
    return r->s.spec && r->seq >= 0 && r->n_done == r->n_tokens - 1;
}

/* Draft trees: the siblings request r verifies beside its n_draft drafts, within the tokens and rows
 * left (lim counts the last token and the drafts too) and the attention's 64-token tree mask. */
static void propose_siblings(const KilnEngine *e, Req *r, int lim)
{
    r->n_sib = r->sib_w = 0;
    int w = r->s.spec_branches - 1 < e->vocab - 1 ? r->s.spec_branches - 1 : e->vocab - 1;
    if (e->in_tree_mask < 0 || w <= 0 || r->n_draft <= 0) return;
    if (lim > RT_SPEC_TREE_MAX) lim = RT_SPEC_TREE_MAX;
    /* the siblings' slots too stay within the context and the pool (spec_cap kept the chain's) */
    if (lim > spec_ctx(e) - r->n_tokens) lim = (int)(spec_ctx(e) - r->n_tokens);
    int depths = (lim - 1 - r->n_draft) / w;
    if (depths > r->n_draft) depths = r->n_draft;
    if (depths > 0) r->n_sib = depths * w, r->sib_w = w;
}

static void propose(KilnEngine *e, Req *r, int room, int rows_left)
{
    r->n_draft = r->n_sib = r->sib_w = 0;
    if (!spec_ready(r)) return;
    /* the draft model's tokens were made before the step (draft_propose); n-gram ones are made here */
    int k = spec_cap(e, r, r->s.spec == KILN_SPEC_DRAFT ? r->n_pre : rt_spec_budget(&r->spec));
    /* k drafts and the last token: k + 1 tokens and rows */
    if (k > room - 1) k = room - 1;
    if (k > rows_left - 1) k = rows_left - 1;
    if (k <= 0) return;
    if (r->s.spec == KILN_SPEC_DRAFT) {
        r->n_draft = k;
        propose_siblings(e, r, room < rows_left ? room : rows_left);
        return;
    }
    /* n-gram: the prediction while the output follows it, else a lookup in it, else in the tokens */
    int g = r->n_tokens - r->n_prompt;
    const int32_t *out = r->tokens + r->n_prompt;
    while (r->pred_at < g && r->pred_at < r->n_pred && out[r->pred_at] == r->pred[r->pred_at])
        r->pred_at++;
    int n = 0;
    if (r->pred_at == g && g < r->n_pred) {
        n = r->n_pred - g < k ? r->n_pred - g : k;
        memcpy(r->draft, r->pred + g, (size_t)n * sizeof *r->draft);
    }
    if (!n && r->n_pred) n = rt_spec_lookup(r->tokens, r->n_tokens, r->pred, r->n_pred, g, k, r->draft);
    r->n_draft = n ? n : rt_spec_ngram(r->tokens, r->n_tokens, k, r->draft);
}

/* Picks this step's sequences and chunks into e->in. Returns the number of items. */
static int schedule(KilnEngine *e, int *n_rows, KilnStatus *s)
{
    StepIn *in = &e->in;
    int n = 0, T = 0, rows = 0, live = 0, seen = 0;
    for (int i = 0; i < e->n_reqs; i++) {
        e->reqs[i].n_draft = e->reqs[i].n_sib = 0;
        live += e->reqs[i].state != REQ_DONE;
    }
    for (int pass = 0; pass < 2 && *s == KILN_OK; pass++) {
        for (int i = 0; i < e->n_reqs && *s == KILN_OK; i++) {
            Req *r = &e->reqs[i];
            if (r->state != (pass ? REQ_WAITING : REQ_RUNNING)) continue;
            if (n == e->max_seqs || T == e->max_step_tokens) break;
            /* drafts leave a logit row for each request that may still join this step */
            int later = live - ++seen < e->max_seqs - n - 1 ? live - seen : e->max_seqs - n - 1;
            propose(e, r, e->max_step_tokens - T, e->max_rows - rows - later);
            int got = schedule_one(e, r, e->max_step_tokens - T, s);
            if (got < 0 && r->n_draft) { /* no pages for the drafts: a plain decode (which may preempt) */
                r->n_draft = r->n_sib = 0;
                got = schedule_one(e, r, e->max_step_tokens - T, s);
            }
            while (got < 0 && pass == 0) {
                /* preempt the latest running request not yet in this step that holds a page of its own:
                 * one whose pages are all shared (with other requests or cached prefixes) frees nothing */
                int victim = -1;
                for (int j = e->n_reqs - 1; j > i && victim < 0; j--)
                    if (e->reqs[j].state == REQ_RUNNING && own_pages(e, e->reqs[j].seq) > 0) victim = j;
                if (victim < 0) break;
                preempt(e, &e->reqs[victim]);
                got = schedule_one(e, r, e->max_step_tokens - T, s);
            }
            if (got < 0) {
                if (pass == 0)
                    preempt(e, r);
                else if (r->seq >= 0) /* a waiting request holds no pages (a fork's are given back) */
                    rt_kv_seq_free(e->kv, r->seq), r->seq = -1, r->n_done = 0;
                if (pass == 1) break; /* no room for new requests this step */
                continue;
            }
            if (!got) continue;
            r->state = REQ_RUNNING;
            in->items[n] = (RtKvStepSeq){r->seq, got};
            in->item_req[n] = i;
            int known = got - r->n_draft - r->n_sib; /* the request's own tokens; drafts, siblings follow */
            memcpy(in->tokens + T, r->tokens + r->n_done, (size_t)known * sizeof *in->tokens);
            memcpy(in->tokens + T + known, r->draft, (size_t)r->n_draft * sizeof *in->tokens);
            for (int q = 0; q < r->n_sib; q++)
                in->tokens[T + known + r->n_draft + q] = r->sib[q / r->sib_w][q % r->sib_w];
            rows += r->n_done + known == r->n_tokens ? 1 + r->n_draft + r->n_sib : 0;
            T += got;
            n++;
        }
    }
    /* a logit row for each sequence whose chunk reaches its last known token, and one for each draft
     * token after it (row j draws the request's token generated + j, as without speculation) and each
     * sibling (one at depth j draws token generated + j + 1, as the draft beside it) */
    int R = 0;
    e->step_tree = 0;
    for (int k = 0, t = 0; k < n; k++) {
        Req *r = &e->reqs[in->item_req[k]];
        t += in->items[k].n_new;
        int last = t - 1 - r->n_draft - r->n_sib;
        if (r->n_done + in->items[k].n_new - r->n_draft - r->n_sib < r->n_tokens) continue;
        for (int j = 0; j <= r->n_draft + r->n_sib; j++, R++) {
            in->logit_rows[R] = last + j;
            in->row_req[R] = in->item_req[k];
            row_sampling(r, j <= r->n_draft ? j : 1 + (j - 1 - r->n_draft) / r->sib_w, in->sampling + 4 * R);
        }
        e->step_tree |= r->n_sib > 0;
    }
    *n_rows = R;
    return n;
}

static KilnStatus put_input(KilnEngine *e, int buf, const void *src, size_t bytes)
{
    if (buf < 0) return KILN_OK;
    if ((int64_t)bytes > e->input_cap[buf])
        return rt_engine_fail(e, KILN_ERR_ARG, "step input %s: %zu bytes, room for %lld",
                              e->plan->bufs[buf].name, bytes, (long long)e->input_cap[buf]);
    return rt_exec_put(e->x, e->inputs[buf], src, bytes, e->err, sizeof e->err);
}

/* Profile mode: the time between the marks around each launch of the step just issued (GPU events, so
 * launches stay asynchronous; the gap before the next launch counts with the kernel), added per kernel. */
static KilnStatus profile_step(KilnEngine *e)
{
    const RtPlan *p = e->plan;
    int n = p->n_launches < RT_EXEC_MAX_MARKS - 1 ? p->n_launches : RT_EXEC_MAX_MARKS - 1;
    KilnStatus s = rt_exec_mark(e->x, n, e->err, sizeof e->err);
    if (s == KILN_OK) s = rt_exec_sync(e->x, e->err, sizeof e->err);
    for (int i = 0; s == KILN_OK && i < n; i++) {
        e->prof_s[p->launches[i].kernel] += 1e-3 * rt_exec_marks_ms(e->x, i, i + 1);
        e->prof_n[p->launches[i].kernel]++;
    }
    return s;
}

/* Writes one dump file like every output (rt_file.h): a temporary beside it, renamed into place; a path
 * that names a directory, FIFO, device or link is refused. */
static KilnStatus dump_write(KilnEngine *e, const char *path, const void *data, size_t n)
{
    char msg[512];
    RtFileOut o;
    if (rt_file_out_begin(&o, path, 0, msg, sizeof msg))
        return rt_engine_fail(e, KILN_ERR_IO, "dump: %s", msg);
    for (size_t done = 0; done < n;) {
        ssize_t w = write(o.fd, (const char *)data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            rt_file_out_abort(&o);
            return rt_engine_fail(e, KILN_ERR_IO, "dump: cannot write %s", path);
        }
        done += (size_t)w;
    }
    if (rt_file_out_commit(&o, msg, sizeof msg)) return rt_engine_fail(e, KILN_ERR_IO, "dump: %s", msg);
    return KILN_OK;
}

/* Debugging (KILN_DUMP_DIR): after launch i of step `step`, each activation argument's rows of this step
 * go to DIR/s<step>_l<i>_a<arg>_<kernel>_<buffer>_<dtype>.bin (the buffer's name without its '%'), so two
 * devices' runs of one package can be compared launch by launch (bench/compare_dumps.py). The split-K
 * scratch pair is not an activation of the model (and a host run never writes it): skipped. Synchronizes
 * after every launch. */
static KilnStatus dump_launch(KilnEngine *e, int i, const int64_t sym[RT_SYM_COUNT])
{
    const RtPlan *p = e->plan;
    const RtPlanLaunch *l = &p->launches[i];
    for (int a = 0; a < l->n_args; a++) {
        if (l->args[a].kind != RT_ARG_ACT) continue;
        const RtPlanBuf *b = &p->bufs[l->args[a].index];
        int64_t n = rt_engine_shape_elems(b->shape, sym, NULL), bytes = n * rt_engine_dtype_bytes(b->dtype);
        if (n <= 0 || bytes <= 0 || bytes > b->bytes || !strncmp(b->name, "%splitk_", 8)) continue;
        void *h = malloc((size_t)bytes);
        if (!h) return rt_engine_fail(e, KILN_ERR_NOMEM, "dump: out of memory");
        KilnStatus s =
            rt_exec_get(e->x, h, e->arena + (uint64_t)b->offset, (size_t)bytes, e->err, sizeof e->err);
        char path[1024];
        snprintf(path, sizeof path, "%s/s%lld_l%d_a%d_%s_%s_%s.bin", e->dump_dir, (long long)e->stats.steps,
                 i, a, p->kernels[l->kernel].name, b->name + (b->name[0] == '%'), b->dtype);
        if (s == KILN_OK) s = dump_write(e, path, h, (size_t)bytes);
        free(h);
        if (s != KILN_OK) return s;
    }
    return KILN_OK;
}

/* Runs every launch of the plan for a step of the given sizes. */
/* Kernel k's binary for a launch with argument values vals. In a step of decodes and verifies only
 * (e->route_rows: its sequences), a kernel with rows takes the binary its sequences' decode step takes
 * when that binary covers the step's rows in one tile of BM (so no extra waves: a small-M binary run
 * over several row tiles costs up to 2x, measured at batch 8 with k 4): a verify row then runs the tiles
 * and K order of the decode it stands for, and its draws are plain decoding's (matmul variants differ in
 * rounding, and near-ties flip tokens). Otherwise the rows decide, as for any step (docs/RUNTIME.md). */
static int pick_binary(const KilnEngine *e, const RtPlanKernel *k, int64_t *vals)
{
    int b = rt_plan_pick(k, vals);
    if (e->route_rows <= 0 || k->m_param < 0 || vals[k->m_param] <= e->route_rows) return b;
    int64_t m = vals[k->m_param];
    vals[k->m_param] = e->route_rows;
    int d = rt_plan_pick(k, vals);
    vals[k->m_param] = m;
    return k->bins[d].bm >= m ? d : b;
}

static KilnStatus run_plan(KilnEngine *e, const int64_t sym[RT_SYM_COUNT], const int64_t rtv[RT_RTV_COUNT])
{
    const RtPlan *p = e->plan;
    for (int i = 0; i < p->n_launches; i++) {
        const RtPlanLaunch *l = &p->launches[i];
        const RtPlanKernel *k = &p->kernels[l->kernel];
        uint64_t ptrs[RT_PLAN_MAX_ARGS];
        int32_t ints[RT_PLAN_MAX_ARGS];
        int64_t vals[RT_PLAN_MAX_ARGS] = {0};
        void *args[RT_PLAN_MAX_ARGS];
        for (int a = 0; a < l->n_args; a++) {
            const RtPlanArg *g = &l->args[a];
            switch (g->kind) {
            case RT_ARG_INPUT: ptrs[a] = e->inputs[g->index]; break;
            case RT_ARG_WEIGHT: ptrs[a] = e->weights[g->index] + (uint64_t)g->offset; break;
            case RT_ARG_ACT: ptrs[a] = e->arena + (uint64_t)p->bufs[g->index].offset; break;
            case RT_ARG_SYM: vals[a] = sym[g->index]; break;
            case RT_ARG_RTV: vals[a] = rtv[g->index]; break;
            }
            if (g->kind == RT_ARG_SYM || g->kind == RT_ARG_RTV) {
                ints[a] = (int32_t)vals[a];
                args[a] = &ints[a];
            } else {
                args[a] = &ptrs[a];
            }
        }
        unsigned grid[3];
        int b = pick_binary(e, k, vals);
        if (e->probe_bucket) {
            int tb = rt_plan_bucket(k, vals), *have = &e->probe_bucket[l->kernel];
            *have = *have == -1 || *have == tb ? tb : -2;
        }
        if (rt_plan_grid(&k->bins[b], vals, grid) != 0)
            return rt_engine_fail(e, KILN_ERR_CORRUPT, "kernel %s: grid too large for this step", k->name);
        KilnStatus s = KILN_OK;
        if ((e->profile || e->probing) && i < RT_EXEC_MAX_MARKS - 1)
            s = rt_exec_mark(e->x, i, e->err, sizeof e->err);
        if (s == KILN_OK)
            s = rt_exec_launch(e->x, e->kernels[l->kernel * RT_PLAN_MAX_BINS + b], args, grid, e->err,
                               sizeof e->err);
        if (s == KILN_OK && e->dump_dir) s = dump_launch(e, i, sym);
        if (s != KILN_OK) return s;
    }
    if (e->probing) { /* the mark that ends the last launch */
        int n = p->n_launches < RT_EXEC_MAX_MARKS - 1 ? p->n_launches : RT_EXEC_MAX_MARKS - 1;
        return rt_exec_mark(e->x, n, e->err, sizeof e->err);
    }
    return e->profile ? profile_step(e) : KILN_OK;
}

/* Runs a uniform step of B sequences of q tokens as a graph: the one captured for (B, q, n_splits), or
 * captures it now.
 * When capturing fails, graphs are turned off and the step runs launch by launch. */
static KilnStatus run_graph(KilnEngine *e, int B, int q, int n_splits, const int64_t *sym, const int64_t *rtv)
{
    for (int i = 0; i < e->n_graphs; i++)
        if (e->graphs[i].B == B && e->graphs[i].q == q && e->graphs[i].n_splits == n_splits)
            return rt_exec_graph_launch(e->x, e->graphs[i].g, e->err, sizeof e->err);
    if (e->n_graphs == MAX_GRAPHS) return run_plan(e, sym, rtv);
    RtExecGraph *g = NULL;
    KilnStatus s = rt_exec_capture_begin(e->x, e->err, sizeof e->err);
    if (s == KILN_OK) {
        KilnStatus r = run_plan(e, sym, rtv);
        s = rt_exec_capture_end(e->x, &g, e->err, sizeof e->err);
        if (r != KILN_OK) s = r;
    }
    if (s != KILN_OK) {
        rt_engine_log(e, "CUDA graphs off: %s", e->err);
        e->use_graphs = 0;
        e->err[0] = 0;
        return run_plan(e, sym, rtv);
    }
    e->graphs[e->n_graphs++] = (StepGraph){B, q, n_splits, g};
    rt_engine_log(e, "captured a step of %d sequences x %d tokens (%d attention splits) as a CUDA graph", B,
                  q, n_splits);
    return rt_exec_graph_launch(e->x, g, e->err, sizeof e->err);
}

/* Runs the plan over in->items[0..B), whose tokens are in in->tokens and whose R logit rows and sampling
 * parameters are set: builds the step arrays, uploads every input, launches every kernel. */
/* The tree mask of a step's T tokens (-1: plain causal) and, for a draft tree's siblings (after the
 * chain in the chunk: [last, d0..d(k-1), siblings by depth]), their positions: a sibling at depth j
 * stands where d(j) stands and sees the chunk's tokens 0..j (the last token, d0..d(j-1)) and itself. */
static void tree_layout(KilnEngine *e, int B, int T)
{
    StepIn *in = &e->in;
    for (int t = 0; t < T; t++)
        in->tree_mask[t] = -1;
    for (int k = 0; k < B && e->step_tree; k++) {
        const Req *r = &e->reqs[in->item_req[k]];
        int base = in->cu_q[k + 1] - 1 - r->n_draft - r->n_sib; /* the last known token's index */
        for (int q = 0; q < r->n_sib; q++) {
            int j = q / r->sib_w, c = 1 + r->n_draft + q; /* depth, index in the chunk (< 64) */
            in->tree_mask[base + c] = (int64_t)((((uint64_t)1 << (j + 1)) - 1) | ((uint64_t)1 << c));
            in->positions[base + c] = in->positions[base] + 1 + j;
        }
    }
}

static KilnStatus run_batch(KilnEngine *e, int B, int R)
{
    StepIn *in = &e->in;
    int32_t mp = 1, q = B ? in->items[0].n_new : 0, uniform = R == B * q;
    for (int k = 0; k < B; k++) {
        const int32_t *pg;
        int32_t np = rt_kv_seq_pages(e->kv, in->items[k].seq, &pg);
        if (np > e->max_pages) /* a sequence past the context: a scheduling bug, never a wrong read */
            return rt_engine_fail(e, KILN_ERR_ARG, "sequence %d holds %d pages, a context %d",
                                  (int)in->items[k].seq, (int)np, (int)e->max_pages);
        if (np > mp) mp = np;
        uniform &= in->items[k].n_new == q;
    }
    /* uniform steps: decodes, and verifies whose sequences all check as many drafts */
    int graph = uniform && q <= KILN_MAX_SPEC_K + 1 && e->use_graphs && !e->probing;
    if (graph) mp = e->max_pages; /* a replayed step bakes the block table's stride in */
    RtKvStep st = {.block_table = in->block_table,
                   .max_pages = mp,
                   .seq_lens = in->seq_lens,
                   .cu_q = in->cu_q,
                   .slots = in->slots,
                   .positions = in->positions,
                   .t_cap = e->max_step_tokens};
    if (rt_kv_step_build(e->kv, in->items, B, &st) != KILN_OK)
        return rt_engine_fail(e, KILN_ERR_ARG, "step: %s", rt_kv_errmsg(e->kv));
    size_t T = (size_t)st.n_tokens;
    if (e->in_tree_mask >= 0) tree_layout(e, B, (int)T);
    int64_t sym[RT_SYM_COUNT] = {0}, rtv[RT_RTV_COUNT] = {0};
    sym[RT_SYM_T] = st.n_tokens, sym[RT_SYM_B] = B, sym[RT_SYM_MP] = mp, sym[RT_SYM_R] = R;
    sym[RT_SYM_P] = e->n_pages;
    rtv[RT_RTV_MAX_Q] = st.max_q;
    rtv[RT_RTV_N_SPLITS] = rt_exec_is_host(e->x)
                               ? 1
                               : rt_kv_attention_splits(&st, B, e->heads, e->kv_heads, e->attn_block_m,
                                                        rt_exec_sm_count(e->x), e->plan->max_split_rows);
    rtv[RT_RTV_SPLIT_TOKENS] = rtv[RT_RTV_N_SPLITS] > 1 ? st.n_tokens : 0;
    KilnStatus s;
    if ((s = put_input(e, e->in_tokens, in->tokens, T * 4)) ||
        (s = put_input(e, e->in_positions, in->positions, T * 4)) ||
        (s = put_input(e, e->in_slots, in->slots, T * 4)) ||
        (s = put_input(e, e->in_block_table, in->block_table, (size_t)B * (size_t)mp * 4)) ||
        (s = put_input(e, e->in_seq_lens, in->seq_lens, (size_t)B * 4)) ||
        (s = put_input(e, e->in_cu_q, in->cu_q, (size_t)(B + 1) * 4)) ||
        (s = put_input(e, e->in_logit_rows, in->logit_rows, (size_t)R * 4)) ||
        (s = put_input(e, e->in_sampling, in->sampling, (size_t)R * 16)) ||
        (s = put_input(e, e->in_tree_mask, in->tree_mask, T * 8)))
        return s;
    if (!graph) return run_plan(e, sym, rtv);
    return run_graph(e, B, q, (int)rtv[RT_RTV_N_SPLITS], sym, rtv);
}

/* Reports token tok of request r and decides whether it ends it. */
/* Reports token tok of request e->reqs[idx] and decides whether it ends it. The callback may submit or
 * abort requests (e->reqs may move: the request is found again by index afterwards). */
static void deliver(KilnEngine *e, int idx, int32_t tok);

/* The ids of the b largest of x[0..V) but x[skip] (skip -1: none; ties: the smaller id; NaN never), into top
 * (descending); returns how many (fewer when V is smaller). Draft trees' siblings, logprobs' alternatives. */
static int top_b(const float *x, int V, int32_t skip, int b, int32_t *top)
{
    int n = 0;
    if (b <= 0) return 0; /* logprobs 0: the chosen token alone */
    for (int32_t v = 0; v < V; v++) {
        if (v == skip || isnan(x[v]) || (n == b && !(x[v] > x[top[n - 1]]))) continue;
        int at = n < b ? n++ : n - 1;
        while (at > 0 && x[v] > x[top[at - 1]])
            top[at] = top[at - 1], at--;
        top[at] = v;
    }
    return n;
}

/* Logprobs of logit row `row` (read back in e->lp_logits) for request r's token tok into lp[0] (chosen) and
 * lp[1..n] (the n most likely), n = r->s.logprobs; double accumulation. */
static void row_logprobs(const KilnEngine *e, int row, int32_t tok, int n, KilnLogprob *lp)
{
    const float *x = e->lp_logits + (size_t)row * (size_t)e->vocab;
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < e->vocab; v++)
        mx = x[v] > mx ? x[v] : mx;
    for (int v = 0; v < e->vocab; v++)
        sum += exp((double)x[v] - mx);
    double lse = mx + log(sum);
    lp[0] = (KilnLogprob){tok, tok >= 0 && tok < e->vocab ? (float)(x[tok] - lse) : -INFINITY};
    int32_t top[KILN_MAX_LOGPROBS];
    int k = top_b(x, e->vocab, -1, n, top);
    for (int i = 0; i < k; i++)
        lp[1 + i] = (KilnLogprob){top[i], (float)(x[top[i]] - lse)};
}

int kiln_engine_logprobs(const KilnEngine *e, KilnLogprob *chosen, KilnLogprob *top, int cap)
{
    if (!e || !e->in_callback || !e->lp_row || e->lp_n < 0) return -1;
    if (chosen) *chosen = e->lp_row[0];
    int n = top && cap > 0 ? (cap < e->lp_n ? cap : e->lp_n) : 0;
    if (n) memcpy(top, e->lp_row + 1, (size_t)n * sizeof *top);
    return n;
}

/* deliver, with the logprobs of logit row `row` for the callback when the request asked for them. */
static void deliver_row(KilnEngine *e, int idx, int32_t tok, int row)
{
    const Req *r = &e->reqs[idx];
    KilnLogprob lp[KILN_MAX_LOGPROBS + 1];
    e->lp_row = NULL, e->lp_n = -1;
    if (e->lp_step && r->host_sample && r->state != REQ_DONE) { /* the host's draw replaces the device's */
        float *x = e->hs_row;
        memcpy(x, e->lp_logits + (size_t)row * (size_t)e->vocab, (size_t)e->vocab * sizeof *x);
        rt_sample_adjust(x, e->vocab, &r->s, r->tokens, r->n_prompt, r->tokens + r->n_prompt,
                         r->n_tokens - r->n_prompt, e->hs_count);
        float sp[4];
        row_sampling(r, 0, sp);
        tok = rt_sample_row(x, e->vocab, sp[0], r->s.top_k, sp[2], r->s.min_p, (int64_t)sp[3], x + e->vocab);
    }
    if (e->lp_step && r->s.logprobs >= 0 && r->state != REQ_DONE) {
        row_logprobs(e, row, tok, r->s.logprobs, lp);
        e->lp_row = lp, e->lp_n = r->s.logprobs;
    }
    deliver(e, idx, tok);
    e->lp_row = NULL, e->lp_n = -1;
}

static void deliver(KilnEngine *e, int idx, int32_t tok)
{
    Req *r = &e->reqs[idx];
    if (r->state == REQ_DONE) return; /* aborted by an earlier callback of this step */
    if (tok < 0 || tok >= e->vocab) {
        r->state = REQ_DONE, r->finish = KILN_FINISH_ERROR;
        rt_engine_fail(e, KILN_ERR_DEVICE, "request %lld: the sampler returned token %d", (long long)r->id,
                       tok);
        return;
    }
    if (r->n_tokens == r->cap) {
        int cap = 2 * r->cap;
        int32_t *t = realloc(r->tokens, (size_t)cap * sizeof *t);
        if (!t) {
            r->state = REQ_DONE, r->finish = KILN_FINISH_ERROR;
            rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory");
            return;
        }
        r->tokens = t, r->cap = cap;
    }
    r->tokens[r->n_tokens++] = tok;
    r->generated++;
    e->stats.generated_tokens++;
    KilnFinish f = KILN_FINISH_NONE;
    if (tok == e->eos && !r->s.ignore_eos) f = KILN_FINISH_STOP;
    for (int i = 0; i < r->s.n_stop && !f; i++)
        if (tok == r->stop[i]) f = KILN_FINISH_STOP;
    /* the context, or the whole KV pool, is full: the next token would have nowhere to go */
    if (!f && ((r->s.max_tokens > 0 && r->generated >= r->s.max_tokens) || r->n_tokens >= e->max_ctx ||
               r->n_tokens >= e->n_pages * e->page_size))
        f = KILN_FINISH_LENGTH;
    KilnTokenCallback cb = r->cb;
    void *user = r->user;
    int64_t id = r->id;
    e->in_callback++;
    int stop = cb ? cb(user, id, tok, f) : 0;
    e->in_callback--;
    r = &e->reqs[idx];
    if (f)
        r->state = REQ_DONE, r->finish = f;
    else if (stop && r->state != REQ_DONE)
        r->state = REQ_DONE, r->finish = KILN_FINISH_ABORT;
}

static KilnStatus fail_all(KilnEngine *e, KilnStatus s)
{
    for (int i = 0; i < e->n_reqs; i++)
        if (e->reqs[i].state != REQ_DONE) e->reqs[i].state = REQ_DONE, e->reqs[i].finish = KILN_FINISH_ERROR;
    reap(e);
    return s;
}

/* The draft model's proposals (KILN_SPEC_DRAFT): for every request about to decode, the draft engine
 * cuts its sequence back to the request's computed tokens (past them it held guesses), catches up with
 * the request's tokens and decodes up to k tokens into r->draft (r->n_pre), the requests batched in each
 * round. Draft j is drawn as the target draws the request's token generated + j: with the request's
 * sampling and the same seed, so the same Gumbel noise (the sample family's draws depend on the seed and
 * the token id only). Greedy requests get greedy drafts; sampled ones get drafts coupled to the target's
 * own draw, which the target keeps whenever the two distributions agree on the noisy argmax
 * (docs/RUNTIME.md, "Speculative decoding"). A request that does not fit a round (the draft's step room, its
 * KV pool) or whose draft returns an id outside the vocabulary proposes what it has so far: a plain decode at
 * worst. */
/* Draft trees: after a draft round of R rows (d->in: row j for candidate row_req[j], whose draft it
 * drew), the siblings of each drawn draft for requests that verify trees: the draft's next
 * spec_branches - 1 most likely tokens at that row (by its logits: what a greedy target takes; a
 * sampled target's draw is most often among them too), read back from the draft's logits output (V
 * floats a row; a device top-b kernel would spare the copy). Row j drew out[j], draft got[c] of its
 * candidate c. */
static KilnStatus draft_siblings(KilnEngine *e, const int *cand, const int *got, const int32_t *out, int R)
{
    KilnEngine *d = e->draft;
    int lg = rt_plan_output(d->plan, "logits"), any = 0;
    for (int j = 0; j < R && e->in_tree_mask >= 0; j++)
        any |= e->reqs[cand[d->in.row_req[j]]].s.spec_branches > 1;
    if (!any || lg < 0) return KILN_OK;
    float *x = malloc((size_t)R * (size_t)d->vocab * sizeof *x);
    if (!x) return rt_engine_fail(d, KILN_ERR_NOMEM, "out of memory for the draft's logits");
    KilnStatus s = rt_exec_get(d->x, x, d->arena + (uint64_t)d->plan->bufs[lg].offset,
                               (size_t)R * (size_t)d->vocab * sizeof *x, d->err, sizeof d->err);
    for (int j = 0; s == KILN_OK && j < R; j++) {
        int c = d->in.row_req[j];
        Req *r = &e->reqs[cand[c]];
        if (r->s.spec_branches < 2 || got[c] >= KILN_MAX_SPEC_K) continue;
        int32_t *sib = r->sib[got[c]];
        int n = top_b(x + (size_t)j * (size_t)d->vocab, d->vocab, out[j], r->s.spec_branches - 1, sib);
        for (; n < r->s.spec_branches - 1; n++) /* fewer candidates than b - 1: repeats are harmless */
            sib[n] = n ? sib[0] : out[j];
    }
    free(x);
    return s;
}

static KilnStatus draft_propose(KilnEngine *e)
{
    KilnEngine *d = e->draft;
    if (!d) return KILN_OK;
    int n = 0, *cand = malloc(((size_t)e->n_reqs + 1) * 3 * sizeof *cand);
    if (!cand) return rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory");
    int *want = cand + e->n_reqs + 1, *got = want + e->n_reqs + 1;
    for (int i = 0; i < e->n_reqs; i++) {
        Req *r = &e->reqs[i];
        r->n_pre = 0;
        if (r->state != REQ_RUNNING || r->s.spec != KILN_SPEC_DRAFT || !spec_ready(r)) continue;
        int k = spec_cap(e, r, rt_spec_budget(&r->spec));
        if (k <= 0 || (r->dseq < 0 && rt_kv_seq_create(d->kv, &r->dseq) != KILN_OK)) continue;
        if (rt_kv_seq_len(d->kv, r->dseq) > r->n_done) rt_kv_seq_truncate(d->kv, r->dseq, r->n_done);
        cand[n] = i, want[n] = k, got[n] = 0, n++;
    }
    KilnStatus s = KILN_OK;
    for (int round = 0; s == KILN_OK; round++) {
        StepIn *in = &d->in;
        int B = 0, T = 0, R = 0;
        for (int c = 0; c < n; c++) {
            Req *r = &e->reqs[cand[c]];
            if (got[c] < round || got[c] == want[c]) continue; /* done, or dropped in an earlier round */
            int len = rt_kv_seq_len(d->kv, r->dseq), n_new = round ? 1 : r->n_tokens - len, ends = 1;
            if (B == d->max_seqs || T == d->max_step_tokens) break;
            if (n_new > d->max_step_tokens - T)
                n_new = d->max_step_tokens - T, ends = 0; /* catch up in parts */
            RtKvCopy cow; /* the draft pool shares no pages, so no copy is ever asked for */
            if (rt_kv_seq_append(d->kv, r->dseq, n_new, &cow) != KILN_OK) {
                want[c] = got[c];
                continue;
            }
            in->items[B] = (RtKvStepSeq){r->dseq, n_new};
            in->item_req[B] = c;
            if (round)
                in->tokens[T] = r->draft[got[c] - 1];
            else
                memcpy(in->tokens + T, r->tokens + len, (size_t)n_new * sizeof *in->tokens);
            T += n_new, B++;
            if (!ends) {
                want[c] = got[c];
                continue;
            }
            in->logit_rows[R] = T - 1, in->row_req[R] = c;
            row_sampling(r, got[c], in->sampling + 4 * R); /* the target's draw, coupled */
            R++;
        }
        if (!B) break;
        int32_t next[256], *out = R <= 256 ? next : malloc((size_t)R * sizeof *out);
        if (!out) s = rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory");
        e->stats.draft_steps++;
        if (s == KILN_OK && (s = run_batch(d, B, R)) == KILN_OK)
            s = rt_exec_get(d->x, out, d->arena + (uint64_t)d->plan->bufs[d->buf_next_tokens].offset,
                            (size_t)R * 4, d->err, sizeof d->err);
        if (s == KILN_OK) s = draft_siblings(e, cand, got, out, R);
        if (s != KILN_OK && out) rt_engine_fail(e, s, "draft model: %s", d->err);
        for (int j = 0; s == KILN_OK && j < R; j++) {
            int c = in->row_req[j];
            if (out[j] < 0 || out[j] >= e->vocab)
                want[c] = got[c];
            else
                e->reqs[cand[c]].draft[got[c]++] = out[j];
        }
        if (out != next) free(out);
    }
    for (int c = 0; c < n; c++)
        e->reqs[cand[c]].n_pre = got[c];
    free(cand);
    return s;
}

KilnStatus kiln_engine_step(KilnEngine *e, int *pending)
{
    if (pending) *pending = e->n_reqs;
    if (e->in_callback)
        return rt_engine_fail(e, KILN_ERR_ARG, "kiln_engine_step called from a request callback");
    double t0 = rt_now_s();
    KilnStatus s = KILN_OK;
    StepIn *in = &e->in;
    reap(e); /* requests aborted since the last step */
    if ((s = draft_propose(e)) != KILN_OK) return fail_all(e, s);
    double t_draft = rt_now_s();
    e->stats.draft_seconds += e->draft ? t_draft - t0 : 0;
    int R = 0, B = schedule(e, &R, &s);
    if (s != KILN_OK) return fail_all(e, s);
    int kind = B > 0 ? 1 : 0; /* 1: every sequence decodes one token, 2: some verify and none prefills */
    for (int k = 0; k < B && kind; k++) {
        const Req *r = &e->reqs[in->item_req[k]];
        if (in->items[k].n_new != 1 + r->n_draft + r->n_sib || r->n_done + 1 != r->n_tokens)
            kind = 0;
        else if (r->n_draft)
            kind = 2;
    }
    if (!B && e->n_reqs && !e->n_cache) {
        /* nothing runs, nothing is cached, and the first waiting request still does not fit: it never will
         * (submit refuses prompts larger than the pool, so this is a backstop) */
        for (int i = 0; i < e->n_reqs; i++)
            if (e->reqs[i].state == REQ_WAITING) {
                e->reqs[i].state = REQ_DONE, e->reqs[i].finish = KILN_FINISH_ERROR;
                rt_engine_fail(e, KILN_ERR_FULL, "request %lld does not fit the KV cache (%d pages)",
                               (long long)e->reqs[i].id, e->n_pages);
                break;
            }
    }
    if (B > 0) {
        e->route_rows = kind == 2 ? B : 0; /* verifies compute as their decodes would (pick_binary) */
        s = run_batch(e, B, R);
        e->route_rows = 0, e->step_tree = 0;
        if (s != KILN_OK) return fail_all(e, s);
        int32_t next[1024];
        int32_t *out = R <= 1024 ? next : malloc((size_t)R * sizeof *out);
        if (!out) s = rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory");
        if (!s)
            s = rt_exec_get(e->x, out, e->arena + (uint64_t)e->plan->bufs[e->buf_next_tokens].offset,
                            (size_t)R * 4, e->err, sizeof e->err);
        int want_lp =
            0; /* a request asked for logprobs or host sampling: the step's logits rows to the host */
        for (int i = 0; i < R && !want_lp; i++)
            want_lp = e->reqs[in->row_req[i]].s.logprobs >= 0 || e->reqs[in->row_req[i]].host_sample;
        if (!s && want_lp && e->buf_logits >= 0 && R > e->lp_rows) { /* grown to the most rows asked */
            float *lg = realloc(e->lp_logits, (size_t)R * (size_t)e->vocab * sizeof(float));
            if (!lg)
                s = rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory (logprobs)");
            else
                e->lp_logits = lg, e->lp_rows = R;
        }
        /* only the rows of the requests that asked, a run of neighbours in one copy (a request's verify
         * rows are neighbours): one penalized request in a batch of 32 reads back its row, not 32 */
        size_t row_bytes = (size_t)e->vocab * sizeof(float);
        for (int i = 0; !s && want_lp && e->buf_logits >= 0 && i < R;) {
            const Req *q = &e->reqs[in->row_req[i]];
            if (q->s.logprobs < 0 && !q->host_sample) {
                i++;
                continue;
            }
            int j = i + 1;
            while (j < R && (e->reqs[in->row_req[j]].s.logprobs >= 0 || e->reqs[in->row_req[j]].host_sample))
                j++;
            s = rt_exec_get(e->x, (char *)e->lp_logits + (size_t)i * row_bytes,
                            e->arena + (uint64_t)e->plan->bufs[e->buf_logits].offset +
                                (uint64_t)i * row_bytes,
                            (size_t)(j - i) * row_bytes, e->err, sizeof e->err);
            i = j;
        }
        if (s != KILN_OK) {
            if (out != next) free(out);
            return fail_all(e, s);
        }
        e->lp_step = want_lp && e->buf_logits >= 0; /* deliver_row reads this step's rows */
        for (int k = 0; k < B; k++) {
            Req *r = &e->reqs[in->item_req[k]];
            int lo = r->n_done, hi = lo + in->items[k].n_new - r->n_draft - r->n_sib;
            /* prompt tokens count once: not again when recomputed after a preemption */
            int p_lo = lo > r->n_prompt_counted ? lo : r->n_prompt_counted,
                p_hi = hi < r->n_prompt ? hi : r->n_prompt;
            if (p_hi > p_lo) e->stats.prompt_tokens += p_hi - p_lo, r->n_prompt_counted = p_hi;
            if (r->n_high > lo) e->stats.recomputed_tokens += (hi < r->n_high ? hi : r->n_high) - lo;
            if (hi > r->n_high) r->n_high = hi;
            r->n_done = hi;
        }
        for (int i = 0; i < R; i++) {
            int idx = in->row_req[i];
            Req *r = &e->reqs[idx];
            if (!r->n_draft) {
                deliver_row(e, idx, out[i], i);
                continue;
            }
            /* a verify: rows i..i+n_draft, then the siblings'; keep the drafts the target drew, then a
             * sibling equal to the target's token where the chain parts (its row gives the next token),
             * and give back the rest's pages */
            int nd = r->n_draft, ns = r->n_sib, a = rt_spec_accept(r->draft, out + i, nd), hit = -1;
            for (int q = a * r->sib_w; a < nd && q < ns && q < (a + 1) * r->sib_w && hit < 0; q++)
                if (r->sib[a][q - a * r->sib_w] == out[i + a]) hit = q;
            KilnStatus kv = KILN_OK;
            if (hit >= 0) /* its K/V to the slot of the draft it replaces, before those pages go */
                kv = copy_slot(e, r->seq, r->n_done + nd + hit, r->n_done + a); /* n_done: the last's + 1 */
            int kept = a + (hit >= 0);
            rt_spec_record(&r->spec, nd, kept);
            e->stats.spec_verifies++, e->stats.spec_proposed += nd, e->stats.spec_accepted += kept;
            e->stats.spec_siblings += ns, e->stats.spec_sibling_hits += hit >= 0;
            r->n_draft = r->n_sib = 0;
            for (int j = 0; j <= a && e->reqs[idx].state != REQ_DONE; j++)
                deliver_row(e, idx, out[i + j], i + j);
            if (hit >= 0 && e->reqs[idx].state != REQ_DONE)
                deliver_row(e, idx, out[i + 1 + nd + hit], i + 1 + nd + hit);
            i += nd + ns;
            /* the kept drafts are computed tokens now (fewer when the request ended inside them) */
            r = &e->reqs[idx];
            int done = r->n_done + kept < r->n_tokens ? r->n_done + kept : r->n_tokens;
            if ((s = kv) != KILN_OK) break; /* e->err says why */
            r->n_done = done, r->n_high = done > r->n_high ? done : r->n_high;
            if ((s = rt_kv_seq_truncate(e->kv, r->seq, done)) != KILN_OK) {
                rt_engine_fail(e, s, "KV cache: %s", rt_kv_errmsg(e->kv));
                break;
            }
        }
        if (out != next) free(out);
        if (s != KILN_OK) return fail_all(e, s);
        e->stats.steps++;
        double dt = rt_now_s() - t_draft;
        if (kind == 1) e->stats.decode_steps++, e->stats.decode_seconds += dt;
        if (kind == 2) e->stats.verify_steps++, e->stats.verify_seconds += dt;
    }
    reap(e);
    e->stats.step_seconds += rt_now_s() - t0;
    if (pending) *pending = e->n_reqs;
    return KILN_OK;
}

void kiln_engine_stats(const KilnEngine *e, KilnEngineStats *out, size_t size)
{
    KilnEngineStats st = e->stats;
    st.running = st.waiting = 0;
    for (int i = 0; i < e->n_reqs; i++) {
        if (e->reqs[i].state == REQ_RUNNING) st.running++;
        if (e->reqs[i].state == REQ_WAITING) st.waiting++;
    }
    st.cached_prefixes = e->n_cache;
    st.kv_pages_free = e->kv ? rt_kv_pages_free(e->kv) : 0;
    memcpy(out, &st, size < sizeof st ? size : sizeof st);
}

KilnStatus kiln_engine_request_stats(const KilnEngine *e, int64_t request, KilnRequestStats *out)
{
    if (!out || out->size < (int)sizeof(int) || out->size > 65536) return KILN_ERR_ARG;
    for (int i = 0; i < e->n_reqs; i++) {
        const Req *r = &e->reqs[i];
        if (r->id != request) continue;
        KilnRequestStats st = {out->size < (int)sizeof st ? out->size : (int)sizeof st,
                               r->n_prompt,
                               r->generated,
                               r->spec.verifies,
                               r->spec.proposed,
                               r->spec.accepted};
        memcpy(out, &st, (size_t)out->size < sizeof st ? (size_t)out->size : sizeof st);
        return KILN_OK;
    }
    return KILN_ERR_ARG;
}

int rt_engine_check(const KilnEngine *e, char *err, int errlen)
{
    int32_t P = e->n_pages, *refs = calloc((size_t)P + 1, sizeof *refs), *owner = NULL;
    int64_t n_seqs = (int64_t)e->n_reqs + e->n_cache, bad = 0;
    if (!refs || !(owner = calloc((size_t)n_seqs + 1, sizeof *owner))) {
        free(refs);
        rt_file_errf(err, errlen, KILN_ERR_NOMEM, "check: out of memory");
        return -1;
    }
    int n_owned = 0;
    for (int i = 0; i < e->n_reqs + e->n_cache && !bad; i++) {
        int is_req = i < e->n_reqs;
        const Req *r = is_req ? &e->reqs[i] : NULL;
        int32_t seq = is_req ? r->seq : e->cache[i - e->n_reqs].seq;
        int32_t want = is_req ? r->n_done : e->cache[i - e->n_reqs].n;
        if (is_req && r->state == REQ_WAITING && seq >= 0)
            bad = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "request %lld waits holding sequence %d",
                               (long long)r->id, seq);
        if (seq < 0 || bad) continue;
        for (int j = 0; j < n_owned && !bad; j++)
            if (owner[j] == seq)
                bad = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "sequence %d has two owners", seq);
        owner[n_owned++] = seq;
        int32_t len = rt_kv_seq_len(e->kv, seq);
        if (!bad && len != want)
            bad = rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                               "sequence %d holds %d tokens, its owner computed %d", seq, len, want);
        const int32_t *pages = NULL;
        int32_t np = rt_kv_seq_pages(e->kv, seq, &pages);
        for (int32_t j = 0; j < np && !bad; j++)
            if (pages[j] < 0 || pages[j] >= P)
                bad = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "page %d out of range", pages[j]);
            else
                refs[pages[j]]++;
    }
    int32_t free_pages = 0;
    for (int32_t p = 0; p < P && !bad; p++) {
        free_pages += refs[p] == 0;
        if (rt_kv_page_refs(e->kv, p) != refs[p])
            bad = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "page %d: %d references, %d holders", p,
                               rt_kv_page_refs(e->kv, p), refs[p]);
    }
    if (!bad && free_pages != rt_kv_pages_free(e->kv))
        bad = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%d pages free, %d held by nobody",
                           rt_kv_pages_free(e->kv), free_pages);
    /* the draft pool: pages held by the requests' draft sequences only, none shared, none past the
     * request's tokens and its drafts */
    int64_t draft_pages = 0;
    for (int i = 0; !bad && e->draft && i < e->n_reqs; i++) {
        const Req *r = &e->reqs[i];
        if (r->dseq < 0) continue;
        const int32_t *pages = NULL;
        draft_pages += rt_kv_seq_pages(e->draft->kv, r->dseq, &pages);
        if (rt_kv_seq_len(e->draft->kv, r->dseq) > r->n_tokens + KILN_MAX_SPEC_K)
            bad = rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                               "request %lld: draft sequence of %d tokens, past its %d", (long long)r->id,
                               rt_kv_seq_len(e->draft->kv, r->dseq), r->n_tokens);
    }
    if (!bad && e->draft && draft_pages != rt_kv_pages_used(e->draft->kv))
        bad = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "draft pool: %d pages used, the requests hold %lld",
                           rt_kv_pages_used(e->draft->kv), (long long)draft_pages);
    free(refs), free(owner);
    return bad ? -1 : 0;
}

int kiln_engine_vocab(const KilnEngine *e)
{
    return e->vocab;
}

KilnStatus kiln_engine_score(KilnEngine *e, const int32_t *tokens, int n, float *logits)
{
    StepIn *in = &e->in;
    int out_buf = rt_plan_output(e->plan, "logits");
    if (e->in_callback)
        return rt_engine_fail(e, KILN_ERR_ARG, "kiln_engine_score called from a request callback");
    if (e->n_reqs) return rt_engine_fail(e, KILN_ERR_ARG, "score: requests are pending");
    if (!tokens || !logits || n < 1 || n > e->max_step_tokens || n > e->max_seqs || n >= e->max_ctx)
        return rt_engine_fail(e, KILN_ERR_ARG, "score: %d tokens (1..%d in one step)", n,
                              e->max_step_tokens < e->max_seqs ? e->max_step_tokens : e->max_seqs);
    if (out_buf < 0)
        return rt_engine_fail(e, KILN_ERR_UNSUPPORTED, "score: the package has no logits output");
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= e->vocab)
            return rt_engine_fail(e, KILN_ERR_ARG, "score: token %d at %d is outside the vocabulary",
                                  tokens[i], i);
    int32_t seq;
    RtKvCopy cow;
    KilnStatus s = rt_kv_seq_create(e->kv, &seq);
    if (s == KILN_OK)
        while ((s = rt_kv_seq_append(e->kv, seq, n, &cow)) == KILN_ERR_FULL && evict_cached(e))
            ;
    if (s != KILN_OK && seq >= 0) {
        rt_kv_seq_free(e->kv, seq);
        return rt_engine_fail(e, s, "score: %s", rt_kv_errmsg(e->kv));
    }
    if (s != KILN_OK) return rt_engine_fail(e, s, "score: %s", rt_kv_errmsg(e->kv));
    in->items[0] = (RtKvStepSeq){seq, n};
    memcpy(in->tokens, tokens, (size_t)n * sizeof *tokens);
    for (int i = 0; i < n; i++) {
        in->logit_rows[i] = i;
        memset(in->sampling + 4 * i, 0, 16); /* greedy */
        in->sampling[4 * i + 2] = 1.0f;
    }
    if ((s = run_batch(e, 1, n)) == KILN_OK)
        s = rt_exec_get(e->x, logits, e->arena + (uint64_t)e->plan->bufs[out_buf].offset,
                        (size_t)n * (size_t)e->vocab * 4, e->err, sizeof e->err);
    rt_kv_seq_free(e->kv, seq);
    return s;
}

/* ---- the tuner's hooks (rt_engine.h) ---- */

RtPlan *rt_engine_plan(KilnEngine *e)
{
    return e->plan;
}

RtExec *rt_engine_exec(KilnEngine *e)
{
    return e->x;
}

void rt_engine_buckets_init(KilnEngine *e)
{
    int n_rows = 1; /* T=1 .. the first power of two >= max_step_tokens, as rt_tune_apply */
    while (n_rows < RT_PLAN_MAX_BUCKETS && ((int64_t)1 << (n_rows - 1)) < e->max_step_tokens)
        n_rows++;
    for (int i = 0; i < e->plan->n_kernels; i++) {
        RtPlanKernel *k = &e->plan->kernels[i];
        k->n_buckets = k->n_pkg ? (k->m_param >= 0 ? n_rows : 1) : 0;
        for (int b = 0; b < RT_PLAN_MAX_BUCKETS; b++)
            k->route[b] = -1, k->match[b] = RT_TDB_NONE, k->from[b] = 0;
    }
}

int rt_engine_binary_add(KilnEngine *e, int ki, const char *config, const char *format, const char *entry,
                         const char *grid, int block, int smem, const void *data, size_t size, char *err,
                         int errlen)
{
    RtPlanKernel *k = &e->plan->kernels[ki];
    int b = rt_plan_binary_add(k, config, format, entry, grid, block, smem, data, size, err, errlen);
    if (b < 0) return -1;
    if (rt_exec_load(e->x, k->name, &k->bins[b], &e->kernels[ki * RT_PLAN_MAX_BINS + b], err, errlen)) {
        e->kernels[ki * RT_PLAN_MAX_BINS + b] = NULL;
        rt_engine_binary_pop(e, ki);
        return -1;
    }
    return b;
}

void rt_engine_binary_pop(KilnEngine *e, int ki)
{
    RtPlanKernel *k = &e->plan->kernels[ki];
    int b = k->n_bins - 1;
    if (b < k->n_pkg || !k->bins[b].tuned) return;
    rt_tune_drop(k, b);
    rt_exec_unload(e->x, e->kernels[ki * RT_PLAN_MAX_BINS + b]);
    e->kernels[ki * RT_PLAN_MAX_BINS + b] = NULL;
    RtPlanBinary *pb = &k->bins[b];
    free(pb->config), free(pb->format), free(pb->entry), free(pb->data);
    memset(pb, 0, sizeof *pb);
    k->n_bins--;
}

/* The probe's per-kernel results from the marks of the step just run (after a sync). */
static void probe_collect(KilnEngine *e, RtEngineProbe *out)
{
    const RtPlan *p = e->plan;
    for (int k = 0; k < p->n_kernels; k++) {
        if (out->kernel_us) out->kernel_us[k] = 0;
        if (out->kernel_launches) out->kernel_launches[k] = 0;
    }
    int n = p->n_launches < RT_EXEC_MAX_MARKS - 1 ? p->n_launches : RT_EXEC_MAX_MARKS - 1;
    for (int i = 0; i < n; i++) {
        int k = p->launches[i].kernel;
        if (out->kernel_us) out->kernel_us[k] += 1e3 * rt_exec_marks_ms(e->x, i, i + 1);
        if (out->kernel_launches) out->kernel_launches[k]++;
    }
}

int rt_engine_probe_max(const KilnEngine *e)
{
    int64_t n = e->max_step_tokens, pool = (int64_t)e->n_pages * e->page_size;
    if (n > e->max_ctx - 1) n = e->max_ctx - 1;
    return (int)(n < pool ? n : pool);
}

KilnStatus rt_engine_probe(KilnEngine *e, const int32_t *tokens, int n, int rows, RtEngineProbe *out)
{
    StepIn *in = &e->in;
    int lg = rt_plan_output(e->plan, "logits");
    if (e->in_callback || e->n_reqs) return rt_engine_fail(e, KILN_ERR_ARG, "probe: requests are pending");
    if (!tokens || !out || n < 1 || n > e->max_step_tokens || n >= e->max_ctx || rows < 1 || rows > n ||
        rows > e->max_seqs)
        return rt_engine_fail(e, KILN_ERR_ARG, "probe: %d tokens, %d rows (1..%d tokens, rows up to %d)", n,
                              rows, e->max_step_tokens, e->max_seqs);
    if (out->logits && lg < 0)
        return rt_engine_fail(e, KILN_ERR_UNSUPPORTED, "probe: the package has no logits output");
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= e->vocab)
            return rt_engine_fail(e, KILN_ERR_ARG, "probe: token %d at %d is outside the vocabulary",
                                  tokens[i], i);
    int32_t seq = -1;
    RtKvCopy cow;
    KilnStatus s = rt_kv_seq_create(e->kv, &seq);
    if (s == KILN_OK)
        while ((s = rt_kv_seq_append(e->kv, seq, n, &cow)) == KILN_ERR_FULL && evict_cached(e))
            ;
    if (s != KILN_OK) {
        if (seq >= 0) rt_kv_seq_free(e->kv, seq);
        return rt_engine_fail(e, s, "probe: %s", rt_kv_errmsg(e->kv));
    }
    in->items[0] = (RtKvStepSeq){seq, n};
    memcpy(in->tokens, tokens, (size_t)n * sizeof *tokens);
    for (int i = 0; i < rows; i++) {
        in->logit_rows[i] = n - rows + i;
        memset(in->sampling + 4 * i, 0, 16); /* greedy */
        in->sampling[4 * i + 2] = 1.0f;
    }
    for (int k = 0; out->kernel_bucket && k < e->plan->n_kernels; k++)
        out->kernel_bucket[k] = -1;
    e->probing = 1, e->probe_bucket = out->kernel_bucket;
    s = run_batch(e, 1, rows);
    e->probing = 0, e->probe_bucket = NULL;
    if (s == KILN_OK) s = rt_exec_sync(e->x, e->err, sizeof e->err);
    if (s == KILN_OK && out->logits)
        s = rt_exec_get(e->x, out->logits, e->arena + (uint64_t)e->plan->bufs[lg].offset,
                        (size_t)rows * (size_t)e->vocab * 4, e->err, sizeof e->err);
    if (s == KILN_OK && out->next)
        s = rt_exec_get(e->x, out->next, e->arena + (uint64_t)e->plan->bufs[e->buf_next_tokens].offset,
                        (size_t)rows * 4, e->err, sizeof e->err);
    if (s == KILN_OK) probe_collect(e, out);
    rt_kv_seq_free(e->kv, seq);
    return s;
}

/* ---- tokenizer ---- */

/* A weights file without a tokenizer is unsupported text; one whose tokenizer is broken is corrupt. */
static KilnStatus no_tokenizer(KilnEngine *e)
{
    if (e->tok_why[0])
        return rt_engine_fail(e, KILN_ERR_CORRUPT, "%s: the weights file's tokenizer is broken: %s",
                              e->tok_src, e->tok_why);
    if (!e->tok_src[0])
        return rt_engine_fail(e, KILN_ERR_UNSUPPORTED,
                              "no tokenizer: random weights carry none (give token ids)");
    return rt_engine_fail(e, KILN_ERR_UNSUPPORTED,
                          "%s: no tokenizer: the weights file carries none (give token ids)", e->tok_src);
}

KilnStatus kiln_engine_tokenize(KilnEngine *e, const char *text, int32_t *ids, int cap, int *n)
{
    return kiln_engine_tokenize_v2(e, text, text ? strlen(text) : 0, 0, ids, cap, n);
}

KilnStatus kiln_engine_tokenize_v2(KilnEngine *e, const char *text, size_t len, int flags, int32_t *ids,
                                   int cap, int *n)
{
    if (!e->tok) return no_tokenizer(e);
    if (flags & ~(KILN_TOKENIZE_SPECIAL | KILN_TOKENIZE_NO_BOS))
        return rt_engine_fail(e, KILN_ERR_ARG,
                              "tokenize: flags 0x%x: want KILN_TOKENIZE_SPECIAL | KILN_TOKENIZE_NO_BOS",
                              (unsigned)flags);
    int rt = (flags & KILN_TOKENIZE_SPECIAL ? RT_TOK_PARSE_SPECIAL : 0) |
             (!(flags & KILN_TOKENIZE_NO_BOS) && rt_tok_add_bos(e->tok) ? RT_TOK_ADD_BOS : 0);
    return rt_tok_encode(e->tok, text, len, rt, ids, cap, n, e->err, sizeof e->err);
}

KilnStatus kiln_engine_tokenize_marked(KilnEngine *e, const char *text, size_t len,
                                       const unsigned char *marks, int flags, int32_t *ids, int cap, int *n)
{
    if (!e->tok) return no_tokenizer(e);
    if (!marks && len) return rt_engine_fail(e, KILN_ERR_ARG, "tokenize_marked: NULL marks");
    if (flags & ~KILN_TOKENIZE_NO_BOS)
        return rt_engine_fail(e, KILN_ERR_ARG, "tokenize_marked: flags 0x%x: want KILN_TOKENIZE_NO_BOS",
                              (unsigned)flags);
    int rt = RT_TOK_PARSE_SPECIAL |
             (!(flags & KILN_TOKENIZE_NO_BOS) && rt_tok_add_bos(e->tok) ? RT_TOK_ADD_BOS : 0);
    return rt_tok_encode_marked(e->tok, text, len, marks, rt, ids, cap, n, e->err, sizeof e->err);
}

const char *kiln_engine_chat_template(const KilnEngine *e)
{
    return e->chat_template;
}

KilnStatus kiln_engine_token_text(KilnEngine *e, int32_t id, char *out, size_t cap, size_t *len)
{
    if (!e->tok) return no_tokenizer(e);
    size_t n = 0;
    const char *t = rt_tok_text(e->tok, id, &n);
    if (!t || !len || (cap && !out))
        return rt_engine_fail(e, KILN_ERR_ARG, "token_text: id %d (or NULL len)", (int)id);
    if (cap) memcpy(out, t, n < cap ? n : cap);
    *len = n;
    return KILN_OK;
}

int32_t kiln_engine_bos(const KilnEngine *e)
{
    return e->tok ? rt_tok_bos(e->tok) : -1;
}

int32_t kiln_engine_eos(const KilnEngine *e)
{
    return e->eos;
}

KilnStatus kiln_engine_detokenize(KilnEngine *e, const int32_t *ids, int n, char *out, size_t cap,
                                  size_t *len)
{
    if (!e->tok) return no_tokenizer(e);
    return rt_tok_decode(e->tok, ids, n, 0, out, cap, len, e->err, sizeof e->err);
}

KilnStatus kiln_engine_detokenize_r(const KilnEngine *e, const int32_t *ids, int n, char *out, size_t cap,
                                    size_t *len)
{
    char err[256]; /* this call's own: e->err belongs to the thread that drives the engine */
    if (!e || !len) return KILN_ERR_ARG;
    if (!e->tok) return KILN_ERR_UNSUPPORTED;
    return rt_tok_decode(e->tok, ids, n, 0, out, cap, len, err, sizeof err);
}
