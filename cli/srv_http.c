/* srv_http.c — `kiln serve`'s HTTP side (docs/SERVER.md), on libmicrohttpd: one internal polling thread
 * (epoll where there is one) serves every connection, so idle ones cost a socket, not a thread. A request
 * body is gathered (at most SRV_MAX_BODY bytes), parsed (srv_api.c) and queued for the engine thread; the
 * connection is then suspended until the engine has news: a rejection (400), the whole answer, or, for a
 * stream, the events so far (the reader callback suspends again when it has sent them). A client that goes
 * away cancels its job, and the engine aborts the request, which frees its pages. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "rt_file.h" /* rt_now_s */
#include "srv.h"

/* TTFT and TPOT histogram bounds (seconds) for /metrics */
const double srv_latency_bounds[11] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

typedef struct Conn {
    char *body;
    size_t len, cap;
    int too_big;
    SrvJob *job;
} Conn;

void srv_http_resume(void *conn)
{
    MHD_resume_connection(conn);
}

static void count(SrvServer *sv, int status)
{
    int c = status == 200   ? 0
            : status == 400 ? 1
            : status == 401 ? 2
            : status == 404 ? 3
            : status == 429 ? 4
                            : 5;
    pthread_mutex_lock(&sv->mu);
    sv->stats.requests[c]++;
    pthread_mutex_unlock(&sv->mu);
}

/* Queues body (malloc'd, taken; NULL: out of memory) with status. */
static enum MHD_Result respond(SrvServer *sv, struct MHD_Connection *conn, int status, const char *type,
                               char *body)
{
    if (!body) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    count(sv, status);
    return ok;
}

static enum MHD_Result fail(SrvServer *sv, struct MHD_Connection *conn, int status, const char *msg)
{
    return respond(sv, conn, status, "application/json", srv_error_json(status, msg));
}

/* The bearer token against --api-key, in time that does not depend on where they differ. */
static int authorized(const SrvServer *sv, struct MHD_Connection *conn)
{
    if (!sv->api_key) return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    const char *given = h && !strncmp(h, "Bearer ", 7) ? h + 7 : "";
    size_t a = strlen(given), b = strlen(sv->api_key), n = a > b ? a : b;
    unsigned diff = (unsigned)(a != b);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned)(unsigned char)(i < a ? given[i] : 0) ^
                (unsigned)(unsigned char)(i < b ? sv->api_key[i] : 0);
    return diff == 0;
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    SrvJob *j = cls;
    SrvServer *sv = j->sv;
    (void)pos;
    pthread_mutex_lock(&sv->mu);
    ssize_t n = 0;
    if (j->sent < j->out_len) {
        n = (ssize_t)(j->out_len - j->sent < max ? j->out_len - j->sent : max);
        memcpy(buf, j->out + j->sent, (size_t)n);
        j->sent += (size_t)n;
    } else if (j->state == SRV_DONE || j->state == SRV_REJECTED) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else if (j->conn) { /* nothing yet: the engine resumes the connection with the next event */
        j->suspended = 1;
        MHD_suspend_connection(j->conn);
    }
    pthread_mutex_unlock(&sv->mu);
    return n;
}

/* A resumed connection: what the engine said about its job. */
static enum MHD_Result answer(SrvServer *sv, struct MHD_Connection *conn, Conn *c)
{
    SrvJob *j = c->job;
    pthread_mutex_lock(&sv->mu);
    int state = j->state, status = j->status;
    if (state == SRV_QUEUED || (state == SRV_RUNNING && !j->stream)) { /* not yet */
        j->suspended = 1;
        MHD_suspend_connection(conn);
        pthread_mutex_unlock(&sv->mu);
        return MHD_YES;
    }
    char msg[sizeof j->err], *body = NULL;
    snprintf(msg, sizeof msg, "%s", j->err);
    if (state == SRV_DONE && !j->stream && !status && j->out) body = strdup(j->out);
    pthread_mutex_unlock(&sv->mu);
    if (state == SRV_REJECTED || (state == SRV_DONE && !j->stream && status))
        return fail(sv, conn, status, msg);
    if (!j->stream) return respond(sv, conn, 200, "application/json", body);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, j, NULL);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    count(sv, 200);
    return ok;
}

static char *metrics(SrvServer *sv)
{
    static const char *const classes[] = {"200", "400", "401", "404", "429", "5xx"};
    size_t cap = 8192, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
#define OUT(...) (n += (size_t)snprintf(s + n, n < cap ? cap - n : 0, __VA_ARGS__))
    pthread_mutex_lock(&sv->mu);
    SrvStats st = sv->stats;
    int live = sv->n_live, queued = sv->n_queue;
    pthread_mutex_unlock(&sv->mu);
    OUT("# TYPE kiln_requests_total counter\n");
    for (int i = 0; i < 6; i++)
        OUT("kiln_requests_total{status=\"%s\"} %lld\n", classes[i], (long long)st.requests[i]);
    OUT("# TYPE kiln_prompt_tokens_total counter\nkiln_prompt_tokens_total %lld\n",
        (long long)st.prompt_tokens);
    OUT("# TYPE kiln_generation_tokens_total counter\nkiln_generation_tokens_total %lld\n",
        (long long)st.completion_tokens);
    OUT("# TYPE kiln_queue_depth gauge\nkiln_queue_depth %d\n", queued);
    OUT("# TYPE kiln_connection_limit gauge\nkiln_connection_limit %d\n", sv->max_conns);
    OUT("# TYPE kiln_requests_running gauge\nkiln_requests_running %d\n", live - queued);
    OUT("# TYPE kiln_kv_pages_used gauge\nkiln_kv_pages_used %d\n",
        st.engine.kv_pages - st.engine.kv_pages_free);
    OUT("# TYPE kiln_kv_pages gauge\nkiln_kv_pages %d\n", st.engine.kv_pages);
    OUT("# TYPE kiln_preemptions_total counter\nkiln_preemptions_total %lld\n",
        (long long)st.engine.preemptions);
    OUT("# TYPE kiln_spec_proposed_tokens_total counter\nkiln_spec_proposed_tokens_total %lld\n",
        (long long)st.engine.spec_proposed);
    OUT("# TYPE kiln_spec_accepted_tokens_total counter\nkiln_spec_accepted_tokens_total %lld\n",
        (long long)st.engine.spec_accepted);
    const char *hist[2] = {"kiln_time_to_first_token_seconds", "kiln_time_per_output_token_seconds"};
    for (int h = 0; h < 2; h++) {
        const int64_t *b = h ? st.tpot : st.ttft;
        int64_t cum = 0;
        OUT("# TYPE %s histogram\n", hist[h]);
        for (int i = 0; i < 11; i++)
            cum += b[i], OUT("%s_bucket{le=\"%g\"} %lld\n", hist[h], srv_latency_bounds[i], (long long)cum);
        cum += b[11];
        OUT("%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.6f\n%s_count %lld\n", hist[h], (long long)cum, hist[h],
            h ? st.tpot_sum : st.ttft_sum, hist[h], (long long)(h ? st.tpot_n : st.ttft_n));
    }
#undef OUT
    if (n >= cap) s[cap - 1] = 0;
    return s;
}

/* A complete request: its route, auth, body and job. */
static enum MHD_Result route(SrvServer *sv, struct MHD_Connection *conn, Conn *c, const char *url,
                             const char *method)
{
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    pthread_mutex_lock(&sv->mu);
    int ready = sv->ready;
    pthread_mutex_unlock(&sv->mu);
    if (!strcmp(url, "/health") && !get) return fail(sv, conn, 405, "use GET /health");
    if (!strcmp(url, "/health"))
        return ready ? respond(sv, conn, 200, "application/json", strdup("{\"status\":\"ok\"}"))
                     : respond(sv, conn, 503, "application/json", strdup("{\"status\":\"loading\"}"));
    if (!ready) return fail(sv, conn, 503, "the model is loading");
    if (!strcmp(url, "/metrics"))
        return get ? respond(sv, conn, 200, "text/plain; version=0.0.4", metrics(sv))
                   : fail(sv, conn, 405, "use GET /metrics");
    int kind = !strcmp(url, "/v1/completions")        ? SRV_COMPLETION
               : !strcmp(url, "/v1/chat/completions") ? SRV_CHAT
                                                      : -1;
    if (kind < 0 && strcmp(url, "/v1/models")) return fail(sv, conn, 404, "no such endpoint");
    if (!authorized(sv, conn))
        return fail(sv, conn, 401, "a valid API key is needed (Authorization: Bearer KEY)");
    if (kind < 0)
        return get ? respond(sv, conn, 200, "application/json", srv_models_json(sv))
                   : fail(sv, conn, 405, "use GET /v1/models");
    if (!post) return fail(sv, conn, 405, "use POST");
    if (c->too_big) return fail(sv, conn, 400, "the body is larger than 1 MiB");
    char err[400];
    SrvJob *j = NULL;
    int status = srv_parse(sv, kind, c->body ? c->body : "", c->len, &j, err, sizeof err);
    if (status) return fail(sv, conn, status, err);
    j->t_arrive = rt_now_s(), j->created = (int64_t)time(NULL), j->sv = sv;
    pthread_mutex_lock(&sv->mu);
    if (sv->n_live >= sv->max_queue || sv->stop) {
        pthread_mutex_unlock(&sv->mu);
        srv_job_release(j);
        return fail(sv, conn, sv->stop ? 503 : 429,
                    sv->stop ? "the server is shutting down" : "the queue is full; try again later");
    }
    if (sv->n_queue == sv->cap_queue) {
        int cap = sv->cap_queue ? 2 * sv->cap_queue : 64;
        SrvJob **q = realloc(sv->queue, (size_t)cap * sizeof *q);
        if (!q) {
            pthread_mutex_unlock(&sv->mu);
            srv_job_release(j);
            return fail(sv, conn, 500, "out of memory");
        }
        sv->queue = q, sv->cap_queue = cap;
    }
    snprintf(j->id, sizeof j->id, "%s-%llx%08llx", kind == SRV_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)++sv->next_id, (unsigned long long)(j->created & 0xffffffff));
    j->refs = 2; /* this connection's and the engine's */
    j->conn = conn, j->suspended = 1;
    sv->queue[sv->n_queue++] = j, sv->n_live++;
    c->job = j;
    MHD_suspend_connection(conn);
    pthread_cond_signal(&sv->wake);
    pthread_mutex_unlock(&sv->mu);
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size,
                                  void **con_cls)
{
    SrvServer *sv = cls;
    Conn *c = *con_cls;
    (void)version;
    if (!c) { /* headers only so far */
        if (!(c = calloc(1, sizeof *c))) return MHD_NO;
        *con_cls = c;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (c->too_big || c->len + n > SRV_MAX_BODY) {
            c->too_big = 1;
            return MHD_YES;
        }
        if (c->len + n + 1 > c->cap) {
            size_t cap = (c->len + n + 1) * 2;
            char *b = realloc(c->body, cap);
            if (!b) return MHD_NO;
            c->body = b, c->cap = cap;
        }
        memcpy(c->body + c->len, upload, n);
        c->len += n;
        return MHD_YES;
    }
    return c->job ? answer(sv, conn, c) : route(sv, conn, c, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    SrvServer *sv = cls;
    Conn *c = *con_cls;
    (void)conn, (void)toe;
    if (!c) return;
    if (c->job) {
        pthread_mutex_lock(&sv->mu);
        c->job->conn = NULL, c->job->suspended = 0;
        if (c->job->state != SRV_DONE && c->job->state != SRV_REJECTED) c->job->cancelled = 1;
        srv_job_release(c->job);
        pthread_cond_signal(&sv->wake);
        pthread_mutex_unlock(&sv->mu);
    }
    free(c->body);
    free(c);
    *con_cls = NULL;
}

int srv_http_start(SrvServer *sv, const char *host, int port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc) {
        fprintf(stderr, "kiln serve: --host %s: %s\n", host, gai_strerror(rc));
        return 1;
    }
    /* connections by the thousand need descriptors: the soft limit up to the hard one, a reserve kept for
     * the weights' files, the tuning store and the engine */
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
        if (rl.rlim_cur < want) rl.rlim_cur = want, setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    long fds = rl.rlim_cur == RLIM_INFINITY ? 65536 : (long)rl.rlim_cur;
    sv->max_conns = fds - 128 < 16 ? 16 : fds - 128 > 4000 ? 4000 : (int)(fds - 128);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    sv->daemon =
        MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, sv, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, sv, MHD_OPTION_CONNECTION_LIMIT,
                         (unsigned)4000, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                         MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!sv->daemon) {
        fprintf(stderr, "kiln serve: cannot listen on %s:%d (in use, or not an address of this machine)\n",
                host, port);
        return 1;
    }
    return 0;
}

void srv_http_stop(SrvServer *sv)
{
    if (sv->daemon) MHD_stop_daemon(sv->daemon);
    sv->daemon = NULL;
}
