/* srv_engine.c — `kiln serve`'s engine thread (docs/SERVER.md): the only caller of the KilnEngine. It
 * takes queued jobs, renders and tokenizes their prompts, submits them, and steps the engine while
 * anything runs. Its token callback only records (choice, token, end); after each step the records go to
 * the text thread, which turns each request's tokens into text for its client while the engine runs the
 * next step: detokenized incrementally, a UTF-8 sequence never split, stop strings never shown (the text
 * is held back while it could still be the start of one), finished with the usage counts. A stop string
 * the text thread meets ends the request at the engine's next callback or loop. The HTTP side only reads
 * what the text thread writes under SrvServer.mu, and is woken (its connection resumed) when there is
 * news. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_tpl.h"
#include "cli.h"
#include "rt_file.h" /* rt_now_s */
#include "srv.h"

void srv_job_wake(SrvJob *j)
{
    if (j->suspended && j->conn) {
        j->suspended = 0;
        srv_http_resume(j->conn);
    }
}

int srv_job_emit(SrvServer *sv, SrvJob *j, const char *bytes, size_t n)
{
    (void)sv;
    if (j->out_len + n > j->out_cap) {
        size_t cap = (j->out_len + n) * 2 + 256;
        char *o = realloc(j->out, cap);
        if (!o) return -1;
        j->out = o, j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, bytes, n);
    j->out_len += n;
    srv_job_wake(j);
    return 0;
}

/* Ends a job before it ran: status and message for the client. */
static void reject(SrvServer *sv, SrvJob *j, int status, const char *msg)
{
    pthread_mutex_lock(&sv->mu);
    j->state = SRV_REJECTED, j->status = status;
    snprintf(j->err, sizeof j->err, "%.*s", (int)sizeof j->err - 1, msg);
    sv->n_live--;
    srv_job_wake(j);
    srv_job_release(j); /* the engine's reference */
    pthread_mutex_unlock(&sv->mu);
}

/* The prompt's ids: the text (plain: a user's "<|im_end|>" stays text), the given ids, or the chat rendered
 * by the chat template (chat_tpl.c), control tokens parsed only in the template's own text. CT_ERR_REFUSED
 * (the template's raise_exception) and CT_ERR_TEMPLATE come back as *why with its message. */
static KilnStatus prompt_ids(SrvServer *sv, SrvJob *j, int32_t **ids, int *n, int *why, char *msg,
                             size_t msglen)
{
    int cap = 0;
    *ids = NULL, *n = 0, *why = CT_OK;
    if (j->kind == SRV_COMPLETION && j->prompt_ids) {
        if (!(*ids = malloc((size_t)j->n_prompt_ids * sizeof **ids))) return KILN_ERR_NOMEM;
        memcpy(*ids, j->prompt_ids, (size_t)j->n_prompt_ids * sizeof **ids);
        *n = j->n_prompt_ids;
        return KILN_OK;
    }
    if (j->kind == SRV_COMPLETION) return cli_add_text(sv->e, j->prompt, 0, ids, n, &cap);
    CtMsg *msgs = malloc((size_t)j->n_msgs * sizeof *msgs);
    if (!msgs) return KILN_ERR_NOMEM;
    for (int m = 0; m < j->n_msgs; m++)
        msgs[m] = (CtMsg){j->msgs[m].role, j->msgs[m].content};
    CtOut out;
    *why = ct_render(sv->chat_template, msgs, j->n_msgs, sv->bos, sv->eos, 1, &out, msg, msglen);
    free(msgs);
    if (*why == CT_ERR_NOMEM) return KILN_ERR_NOMEM;
    if (*why != CT_OK) return KILN_ERR_ARG;
    /* BOS only where the template writes bos_token (as HF's apply_chat_template) */
    KilnStatus st =
        kiln_engine_tokenize_marked(sv->e, out.text, out.len, out.marks, KILN_TOKENIZE_NO_BOS, NULL, 0, n);
    if (st == KILN_OK && !(*ids = malloc(((size_t)*n + 1) * sizeof **ids))) st = KILN_ERR_NOMEM;
    if (st == KILN_OK)
        st = kiln_engine_tokenize_marked(sv->e, out.text, out.len, out.marks, KILN_TOKENIZE_NO_BOS, *ids, *n,
                                         n);
    ct_out_free(&out);
    return st;
}

static int on_token(void *user, int64_t req, int32_t tok, KilnFinish fin);

/* A seed for requests that give none (each its own draws, as OpenAI's), from the clock and a counter. */
static uint64_t fresh_seed(void)
{
    static uint64_t n;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (++n * 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    return z ^ (z >> 31);
}

/* Starts a queued job on the engine (one request per choice): 1; or rejects it (and lets go of it): 0. */
static int start(SrvServer *sv, SrvJob *j)
{
    char msg[400];
    if (j->kind == SRV_CHAT && !sv->chat_template) {
        reject(sv, j, 400,
               "this model has no chat template (start kiln serve with --chat-template FILE); use "
               "/v1/completions");
        return 0;
    }
    int32_t *ids = NULL;
    int n = 0, why = CT_OK;
    KilnStatus st = prompt_ids(sv, j, &ids, &n, &why, msg, sizeof msg);
    if (st != KILN_OK || !n) {
        reject(sv, j, st == KILN_ERR_NOMEM || why == CT_ERR_TEMPLATE ? 500 : 400,
               st == KILN_ERR_NOMEM ? "out of memory"
               : why != CT_OK       ? msg
               : st != KILN_OK      ? kiln_engine_errmsg(sv->e)
                                    : "empty prompt");
        free(ids);
        return 0;
    }
    int64_t want = (int64_t)n + (j->s.max_tokens > 0 ? j->s.max_tokens : 1);
    if (want > sv->max_ctx) {
        snprintf(msg, sizeof msg,
                 "this model's maximum context length is %lld tokens; the request asks for %lld (%d in the "
                 "prompt, %d to generate)",
                 (long long)sv->max_ctx, (long long)want, n, j->s.max_tokens > 0 ? j->s.max_tokens : 1);
        reject(sv, j, 400, msg);
        free(ids);
        return 0;
    }
    if (!(j->ch = calloc((size_t)j->n, sizeof *j->ch))) {
        reject(sv, j, 500, "out of memory");
        free(ids);
        return 0;
    }
    j->n_prompt_tokens = n;
    size_t echo = 0; /* the prompt's text first */
    if (j->echo && j->prompt)
        echo = strlen(j->prompt);
    else if (j->echo && kiln_engine_detokenize(sv->e, ids, n, NULL, 0, &echo) != KILN_OK)
        echo = 0;
    uint64_t seed = j->seeded ? j->s.seed : fresh_seed();
    pthread_mutex_lock(&sv->mu);
    j->state = SRV_RUNNING; /* before any callback can finish a choice */
    pthread_mutex_unlock(&sv->mu);
    st = KILN_OK;
    for (int c = 0; c < j->n && st == KILN_OK; c++) {
        SrvChoice *ch = &j->ch[c];
        ch->job = j, ch->index = c;
        if (echo && (ch->text = malloc(echo + 64))) {
            if (j->prompt)
                memcpy(ch->text, j->prompt, echo);
            else
                kiln_engine_detokenize(sv->e, ids, n, ch->text, echo, &echo);
            ch->text_cap = echo + 64, ch->text_len = ch->text0 = echo;
        }
        KilnSampling s = j->s;
        s.seed = seed + (uint64_t)c; /* choice c: its own draws */
        st = kiln_engine_submit(sv->e, ids, n, &s, on_token, ch, &ch->req);
        ch->submitted = st == KILN_OK;
    }
    free(ids);
    pthread_mutex_lock(&sv->mu);
    if (st != KILN_OK) { /* choices not submitted end now; submitted ones are aborted (srv_engine_main) */
        j->status = st == KILN_ERR_NOMEM ? 500 : 400;
        snprintf(j->err, sizeof j->err, "%s", kiln_engine_errmsg(sv->e));
        j->cancelled = 1;
        for (int c = 0; c < j->n; c++)
            if (!j->ch[c].submitted) j->ch[c].finished = j->ch[c].engine_done = 1, j->n_finished++;
        if (!j->ch[0].submitted) {
            j->state = SRV_REJECTED, sv->n_live--;
            srv_job_wake(j);
            srv_job_release(j);
            pthread_mutex_unlock(&sv->mu);
            return 0;
        }
    }
    sv->stats.prompt_tokens += n;
    srv_job_wake(j);
    pthread_mutex_unlock(&sv->mu);
    return 1;
}

/* The end of bytes t[0..len) that holds whole UTF-8 sequences (an incomplete tail held back). */
static size_t utf8_whole(const char *t, size_t len)
{
    for (size_t k = 1; k <= 3 && k <= len; k++) {
        unsigned char c = (unsigned char)t[len - k];
        if ((c & 0xC0) == 0x80) continue;
        int need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return (size_t)need > k ? len - k : len;
    }
    return len;
}

/* Brings c's text up to its ids: the new token's bytes are the text of the last few ids less the text of
 * those before it (a decoder's rule for a first token, SentencePiece's leading space, falls on both
 * alike), so a token costs a few ids' decoding, not the whole output's; the whole is decoded where the
 * window's texts do not line up. */
static void append_text(const KilnEngine *e, SrvChoice *c)
{
    enum { WINDOW = 4, BUF = 2048 };
    char a[BUF], b[BUF];
    int n = c->n_ids, p = n > WINDOW ? n - WINDOW : 0;
    size_t la = 0, lb = 0, len = 0;
    int fits = p > 0 && c->text_ids == n - 1 &&
               kiln_engine_detokenize_r(e, c->ids + p, n - 1 - p, a, BUF, &la) == KILN_OK && la <= BUF &&
               kiln_engine_detokenize_r(e, c->ids + p, n - p, b, BUF, &lb) == KILN_OK && lb <= BUF &&
               lb >= la && !memcmp(a, b, la);
    if (fits)
        len = c->text_len - c->text0 + (lb - la);
    else
        kiln_engine_detokenize_r(e, c->ids, n, NULL, 0, &len);
    if (c->text0 + len + 1 > c->text_cap) {
        size_t cap = (c->text0 + len + 1) * 2;
        char *t = realloc(c->text, cap);
        if (!t) return; /* the text stays as it was: the next token tries again */
        c->text = t, c->text_cap = cap;
    }
    if (fits)
        memcpy(c->text + c->text_len, b + la, lb - la);
    else
        kiln_engine_detokenize_r(e, c->ids, n, c->text + c->text0, c->text_cap - c->text0, &len);
    c->text_len = c->text0 + len, c->text_ids = n;
}

static void bucket(int64_t *h, const double *bounds, int nb, double x)
{
    int b = 0;
    while (b < nb && x > bounds[b])
        b++;
    h[b]++;
}

/* Ends choice c (under sv->mu) with reason, or with an error (status); the job ends with its last choice:
 * a stream's usage chunk and [DONE], or the whole body; the latency histograms. */
static void finish(SrvServer *sv, SrvChoice *c, const char *reason, int status, const char *msg)
{
    SrvJob *j = c->job;
    c->finished = 1, c->reason = reason;
    j->n_finished++;
    j->n_generated += c->n_ids;
    if (status && !j->status) {
        j->status = status;
        snprintf(j->err, sizeof j->err, "%.*s", (int)sizeof j->err - 1, msg);
    }
    char *ev = NULL;
    if (j->stream && !status) {
        ev = srv_chunk_sse(sv, j, c, c->text + c->emitted, c->text_len - c->emitted, !c->role_sent, reason,
                           j->s.logprobs >= 0 ? c->lp_sent : -1, c->n_ids);
        c->lp_sent = c->n_ids;
        c->role_sent = 1, c->emitted = c->text_len;
        if (ev) srv_job_emit(sv, j, ev, strlen(ev)), free(ev);
        ev = NULL;
    }
    if (j->n_finished < j->n) return;
    if (j->stream) {
        if (j->status)
            ev = srv_sse(srv_error_json(j->status, j->err)); /* headers went out with 200 */
        else if (j->include_usage)
            ev = srv_chunk_sse(sv, j, NULL, NULL, 0, 0, NULL, -1, 0);
        if (ev) srv_job_emit(sv, j, ev, strlen(ev)), free(ev);
        srv_job_emit(sv, j, "data: [DONE]\n\n", 14);
    } else if (!j->status) {
        char *body = srv_final_json(sv, j);
        if (!body)
            j->status = 500, snprintf(j->err, sizeof j->err, "out of memory");
        else
            free(j->out), j->out = body, j->out_len = j->out_cap = strlen(body);
    }
    j->state = SRV_DONE;
    sv->stats.completion_tokens += j->n_generated;
    if (j->t_first > 0) {
        sv->stats.ttft_sum += j->t_first - j->t_arrive, sv->stats.ttft_n++;
        bucket(sv->stats.ttft, srv_latency_bounds, 11, j->t_first - j->t_arrive);
    }
    if (j->n_generated > j->n) {
        double tpot = (j->t_last - j->t_first) * j->n / (j->n_generated - j->n);
        sv->stats.tpot_sum += tpot, sv->stats.tpot_n++;
        bucket(sv->stats.tpot, srv_latency_bounds, 11, tpot);
    }
    srv_job_wake(j);
}

/* One callback of the engine, recorded for the text thread. */
typedef struct SrvRec {
    SrvChoice *c;
    int32_t tok;
    KilnFinish fin;
    double t;        /* when it came */
    KilnLogprob *lp; /* logprobs on: the token's and its alternatives (malloc'd), read in the callback */
    char *msg;       /* KILN_FINISH_ERROR: the engine's message (malloc'd) */
} SrvRec;

/* The engine's callback (engine thread): records the token (or the end) of choice `user` for the text
 * thread. Returns 1 to end the request early: a stop string the text thread met. srv_engine_main keeps
 * room for every record a step can make. */
static int on_token(void *user, int64_t req, int32_t tok, KilnFinish fin)
{
    SrvChoice *c = user;
    SrvJob *j = c->job;
    SrvServer *sv = j->sv;
    (void)req;
    double t_in = rt_now_s();
    if (fin != KILN_FINISH_NONE) c->engine_done = 1; /* the last callback: srv_engine_main lets go */
    if (sv->n_stage == sv->cap_stage) return 1;      /* not reached: the room is kept */
    SrvRec *r = &sv->stage[sv->n_stage++];
    *r = (SrvRec){c, tok, fin, t_in, NULL, NULL};
    if (tok >= 0 && j->s.logprobs >= 0 && (r->lp = malloc(((size_t)j->s.logprobs + 1) * sizeof *r->lp)))
        kiln_engine_logprobs(sv->e, &r->lp[0], &r->lp[1], j->s.logprobs);
    if (fin == KILN_FINISH_ERROR) r->msg = strdup(kiln_engine_errmsg(sv->e));
    sv->callback_s += rt_now_s() - t_in;
    return atomic_load(&c->stop_seen);
}

/* The text thread's work for one record: the token into the choice's text and the client's events, or
 * the choice's end; the job's engine reference let go with its last choice's end. */
static void text_record(SrvServer *sv, SrvRec *r)
{
    SrvChoice *c = r->c;
    SrvJob *j = c->job;
    int32_t tok = r->tok;
    KilnFinish fin = r->fin;
    int stop = 0;
    pthread_mutex_lock(&sv->mu);
    if (!c->finished && tok >= 0) {
        double now = r->t;
        if (!j->t_first) j->t_first = now;
        j->t_last = now;
        if (c->n_ids == c->cap_ids) {
            int cap = c->cap_ids ? 2 * c->cap_ids : 64;
            int32_t *t = realloc(c->ids, (size_t)cap * sizeof *t);
            if (t) c->ids = t, c->cap_ids = cap;
        }
        if (c->n_ids < c->cap_ids && j->s.logprobs >= 0) { /* this token's, read in its callback */
            size_t row = (size_t)j->s.logprobs + 1;
            KilnLogprob *lp = realloc(c->lp, (size_t)c->cap_ids * row * sizeof *lp);
            if (lp) {
                c->lp = lp;
                if (r->lp)
                    memcpy(&lp[(size_t)c->n_ids * row], r->lp, row * sizeof *lp);
                else
                    memset(&lp[(size_t)c->n_ids * row], 0, row * sizeof *lp);
            }
        }
        if (c->n_ids < c->cap_ids) c->ids[c->n_ids++] = tok;
        append_text(sv->e, c);
        /* a stop string ends the text where it starts */
        size_t longest = 0;
        for (int i = 0; i < j->n_stop; i++) {
            size_t n = strlen(j->stop[i]);
            longest = n > longest ? n : longest;
            for (size_t from = c->emitted > c->text0 + n ? c->emitted - n : c->text0; from + n <= c->text_len;
                 from++)
                if (!memcmp(c->text + from, j->stop[i], n)) {
                    c->text_len = from, stop = 1;
                    break;
                }
        }
        int ends = stop || fin == KILN_FINISH_STOP || fin == KILN_FINISH_LENGTH;
        if (!ends && j->stream) { /* what can be shown: whole UTF-8, and no possible stop-string start */
            size_t end = utf8_whole(c->text, c->text_len), hold = longest ? longest - 1 : 0;
            end = utf8_whole(c->text, end > c->emitted + hold ? end - hold : c->emitted);
            if (end > c->emitted || !c->role_sent) {
                char *ev =
                    c->role_sent && j->s.logprobs < 0
                        ? srv_chunk_text_sse(sv, j, c, c->text + c->emitted, end - c->emitted)
                        : srv_chunk_sse(sv, j, c, c->text + c->emitted, end - c->emitted, !c->role_sent, NULL,
                                        j->s.logprobs >= 0 ? c->lp_sent : -1, c->n_ids);
                if (ev) srv_job_emit(sv, j, ev, strlen(ev)), free(ev);
                c->emitted = end, c->role_sent = 1, c->lp_sent = c->n_ids;
            }
        }
        if (ends) finish(sv, c, fin == KILN_FINISH_LENGTH && !stop ? "length" : "stop", 0, NULL);
    }
    if (!c->finished && fin == KILN_FINISH_ERROR) finish(sv, c, NULL, 500, r->msg ? r->msg : "engine error");
    if (!c->finished && fin == KILN_FINISH_ABORT)
        finish(sv, c, NULL, sv->stop ? 503 : 499,
               sv->stop ? "the server is shutting down" : "the request was cancelled");
    if (stop) atomic_store(&c->stop_seen, 1);
    if (fin != KILN_FINISH_NONE) {
        c->text_done = 1;
        int all = 1; /* choices never submitted ended in start() */
        for (int k = 0; k < j->n; k++)
            all &= j->ch[k].text_done || !j->ch[k].submitted;
        if (all) sv->n_live--, srv_job_release(j); /* the engine's reference */
    }
    pthread_mutex_unlock(&sv->mu);
    free(r->lp), free(r->msg);
}

/* Publishes the engine's counters for /metrics. */
static void publish(SrvServer *sv)
{
    KilnEngineStats st;
    kiln_engine_stats(sv->e, &st, sizeof st);
    pthread_mutex_lock(&sv->mu);
    sv->stats.engine = st;
    pthread_mutex_unlock(&sv->mu);
}

/* Under sv->mu, with jobs queued for an idle engine: waits until none has come for gather_us (at most 4x
 * that in all), so that a burst of requests (clients sending at once, which reach the HTTP thread spread
 * over a few hundred us) starts in one step, as an in-process caller submits a batch before it steps;
 * without it the first request's step runs alone and the rest wait a whole step for their first token. */
static void gather(SrvServer *sv)
{
    double now = rt_now_s(), end = now + 4e-6 * sv->gather_us, quiet = now + 1e-6 * sv->gather_us;
    int seen = sv->n_queue;
    while (!sv->stop && now < (quiet < end ? quiet : end)) {
        double until = quiet < end ? quiet : end;
        struct timespec ts = {(time_t)until, (long)((until - (double)(time_t)until) * 1e9)};
        pthread_cond_timedwait(&sv->wake, &sv->mu, &ts);
        now = rt_now_s();
        if (sv->n_queue != seen) seen = sv->n_queue, quiet = now + 1e-6 * sv->gather_us;
    }
}

/* The text thread: takes the records handed over after each step and works them, until the engine thread
 * has ended and nothing is left. */
static void *text_main(void *arg)
{
    SrvServer *sv = arg;
    SrvRec *work = NULL;
    int cap = 0;
    for (;;) {
        pthread_mutex_lock(&sv->mu);
        while (!sv->n_text_q && !sv->text_stop)
            pthread_cond_wait(&sv->text_wake, &sv->mu);
        if (!sv->n_text_q) { /* stopped and drained */
            pthread_mutex_unlock(&sv->mu);
            break;
        }
        SrvRec *q = sv->text_q; /* swapped with our emptied buffer: no copy, no allocation */
        int n = sv->n_text_q, qcap = sv->cap_text_q;
        sv->text_q = work, sv->cap_text_q = cap, sv->n_text_q = 0;
        work = q, cap = qcap;
        pthread_mutex_unlock(&sv->mu);
        double t0 = rt_now_s();
        for (int i = 0; i < n; i++)
            text_record(sv, &work[i]);
        sv->text_s += rt_now_s() - t0;
    }
    free(work);
    return NULL;
}

/* Hands the step's records to the text thread (or, without one, works them here). A queue that cannot
 * grow keeps them staged for the next hand-over. */
static void hand_over(SrvServer *sv, int threaded)
{
    if (!sv->n_stage) return;
    if (!threaded) {
        for (int i = 0; i < sv->n_stage; i++)
            text_record(sv, &sv->stage[i]);
        sv->n_stage = 0;
        return;
    }
    pthread_mutex_lock(&sv->mu);
    if (!sv->n_text_q) { /* the usual case: the text thread has worked the last step's: swap */
        SrvRec *t = sv->text_q;
        int cap = sv->cap_text_q;
        sv->text_q = sv->stage, sv->cap_text_q = sv->cap_stage, sv->n_text_q = sv->n_stage;
        sv->stage = t, sv->cap_stage = cap, sv->n_stage = 0;
    } else {
        int need = sv->n_text_q + sv->n_stage;
        SrvRec *t = need > sv->cap_text_q ? realloc(sv->text_q, (size_t)need * 2 * sizeof *t) : sv->text_q;
        if (t) {
            if (need > sv->cap_text_q) sv->cap_text_q = need * 2;
            sv->text_q = t;
            memcpy(t + sv->n_text_q, sv->stage, (size_t)sv->n_stage * sizeof *t);
            sv->n_text_q = need, sv->n_stage = 0;
        }
    }
    pthread_cond_signal(&sv->text_wake);
    pthread_mutex_unlock(&sv->mu);
}

/* Keeps room in the stage for every record the next step can make: per running choice, a token for each
 * of its up to KILN_MAX_SPEC_K + 1 new tokens and an end. 0, or -1 out of memory. */
static int keep_room(SrvServer *sv, SrvJob *const *live, int n_live)
{
    int64_t need = sv->n_stage;
    for (int i = 0; i < n_live; i++)
        need += (int64_t)live[i]->n * (KILN_MAX_SPEC_K + 2);
    if (need <= sv->cap_stage) return 0;
    SrvRec *t = realloc(sv->stage, (size_t)need * 2 * sizeof *t);
    if (!t) return -1;
    sv->stage = t, sv->cap_stage = (int)need * 2;
    return 0;
}

void *srv_engine_main(void *arg)
{
    SrvServer *sv = arg;
    SrvJob **live = NULL; /* started jobs whose requests the engine still runs, to abort when asked */
    int n_live = 0, cap_live = 0, pending = 0;
    double step_s = 0;
    pthread_t text;
    pthread_cond_init(&sv->text_wake, NULL);
    int threaded = !pthread_create(&text, NULL, text_main, sv);
    if (!threaded) fprintf(stderr, "kiln serve: no text thread: the engine thread makes the text\n");
    for (;;) {
        pthread_mutex_lock(&sv->mu);
        while (!sv->stop && !sv->n_queue && !pending && !n_live)
            pthread_cond_wait(&sv->wake, &sv->mu);
        if (sv->gather_us > 0 && !pending && !n_live && sv->n_queue) gather(sv);
        int stopping = sv->stop, n = sv->n_queue;
        SrvJob **take = n ? malloc((size_t)n * sizeof *take) : NULL;
        if (take)
            memcpy(take, sv->queue, (size_t)n * sizeof *take), sv->n_queue = 0;
        else
            n = 0;
        /* abort the requests of jobs whose client went away, that met a stop string, or all when stopping */
        for (int i = 0; i < n_live; i++) {
            SrvJob *j = live[i];
            for (int c = 0; c < j->n; c++) {
                SrvChoice *ch = &j->ch[c];
                if ((j->cancelled || stopping || atomic_load(&ch->stop_seen)) && ch->submitted &&
                    !ch->engine_done && !ch->aborted)
                    ch->aborted = 1, kiln_engine_abort(sv->e, ch->req);
            }
        }
        pthread_mutex_unlock(&sv->mu);
        for (int i = 0; i < n; i++) {
            SrvJob *j = take[i];
            if (stopping) {
                reject(sv, j, 503, "the server is shutting down");
                continue;
            }
            if (n_live == cap_live) {
                int cap = cap_live ? 2 * cap_live : 64;
                SrvJob **t = realloc(live, (size_t)cap * sizeof *t);
                if (!t) {
                    reject(sv, j, 500, "out of memory");
                    continue;
                }
                live = t, cap_live = cap;
            }
            if (start(sv, j)) live[n_live++] = j;
        }
        free(take);
        double t0 = rt_now_s();
        if (keep_room(sv, live, n_live)) { /* no room for the step's records: wait for memory */
            fprintf(stderr, "kiln serve: out of memory for the step's records; retrying\n");
            hand_over(sv, threaded);
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            continue;
        }
        if (kiln_engine_step(sv->e, &pending) != KILN_OK) /* every request ended with an error: told */
            fprintf(stderr, "kiln serve: %s\n", kiln_engine_errmsg(sv->e));
        step_s += rt_now_s() - t0;
        /* jobs whose every request had its last callback leave the list before their records go: the text
         * thread lets go of a job (frees it) once it has worked its last choice's end */
        int k = 0;
        for (int i = 0; i < n_live; i++) {
            int done = 1;
            for (int c = 0; c < live[i]->n; c++)
                done &= live[i]->ch[c].engine_done;
            if (!done) live[k++] = live[i];
        }
        n_live = k;
        hand_over(sv, threaded);
        publish(sv);
        if (stopping && !pending && !n_live) break;
    }
    hand_over(sv, threaded);
    if (threaded) {
        pthread_mutex_lock(&sv->mu);
        sv->text_stop = 1;
        pthread_cond_signal(&sv->text_wake);
        pthread_mutex_unlock(&sv->mu);
        pthread_join(text, NULL);
    }
    fprintf(
        stderr,
        "kiln serve: engine thread: %.3f s in steps, %.3f s of it in token callbacks; text thread: %.3f s "
        "(text, SSE)\n",
        step_s, sv->callback_s, sv->text_s);
    free(live), free(sv->stage), free(sv->text_q);
    return NULL;
}
