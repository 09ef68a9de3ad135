/* srv.h — `kiln serve`: an OpenAI-compatible HTTP server on kiln.h (docs/SERVER.md). Prefix srv_.
 * Three parts: srv_http.c (libmicrohttpd: one polling thread for every connection, routes, bodies,
 * suspend/resume, server-sent events), srv_api.c (the OpenAI JSON through jansson: requests into jobs,
 * jobs into responses and stream chunks), srv_engine.c (the one thread that owns the KilnEngine: it
 * tokenizes, submits, steps, detokenizes and finishes jobs). cmd_serve.c parses the command line and
 * runs them. The engine is not thread-safe: only the engine thread calls it. */
#ifndef KILN_SRV_H
#define KILN_SRV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

enum { SRV_COMPLETION, SRV_CHAT };
/* a job's state, as the HTTP side sees it */
enum { SRV_QUEUED, SRV_RUNNING, SRV_DONE, SRV_REJECTED };
enum { SRV_MAX_STOP = 4, SRV_MAX_BODY = 1 << 20, SRV_MAX_MESSAGES = 1024, SRV_MAX_N = 16 };

typedef struct SrvMsg {
    char *role, *content;
} SrvMsg;

struct SrvJob;

/* One choice of a request: one engine request and its text (engine thread; the text under
 * SrvServer.mu once a stream shows it). */
typedef struct SrvChoice {
    struct SrvJob *job;
    int index;
    int64_t req;
    int32_t *ids;                 /* generated */
    int n_ids, cap_ids, text_ids; /* text_ids: the ids text holds */
    char *text;                   /* the detokenized output so far (the echoed prompt first) */
    size_t text_len, text_cap, emitted, text0;
    const char *reason; /* finish_reason once finished */
    int finished;
    int role_sent;        /* the stream's first chunk (the chat role) went out */
    int engine_done;      /* the request's last callback came (set in it, read by the engine loop) */
    int text_done;        /* the text thread took that last callback's record */
    atomic_int stop_seen; /* the text thread met a stop string: the engine ends the request */
    int aborted;          /* kiln_engine_abort was called */
    int submitted;
    KilnLogprob *lp; /* logprobs: per token, the chosen one then job->s.logprobs alternatives */
    int lp_sent;     /* tokens whose logprobs a stream chunk carried */
    char *sse;       /* srv_chunk_text_sse's template: the text chunk's event, split where the text goes */
    size_t sse_head, sse_len;
} SrvChoice;

/* One request, shared by the HTTP side and the engine thread: fields below "shared" are read and written
 * under SrvServer.mu; the parsed request is written before it is queued and only read afterwards; the
 * choices are the engine thread's. Freed when both sides let go (refs). */
typedef struct SrvJob {
    int refs;
    /* the request */
    int kind, stream, include_usage, echo, n, seeded, top_given;
    KilnSampling s;
    char *prompt;        /* completions: the prompt text (NULL: prompt_ids) */
    int32_t *prompt_ids; /* completions given token ids */
    int n_prompt_ids;
    SrvMsg *msgs; /* chat */
    int n_msgs;
    char *stop[SRV_MAX_STOP]; /* stop strings (never in the output) */
    int n_stop;
    int32_t *stop_ids;   /* stop_token_ids (s.stop_tokens points here) */
    KilnLogitBias *bias; /* logit_bias (s.logit_bias points here) */
    char id[48];
    int64_t created;
    double t_arrive, t_first, t_last;
    struct SrvServer *sv;
    /* shared */
    int state, status; /* status: the HTTP status of a rejected or failed job */
    char err[320];
    char *out; /* bytes for the client: SSE events (stream), or the whole JSON body when done */
    size_t out_len, out_cap, sent;
    int cancelled; /* the client went away: the engine aborts the request */
    void *conn;    /* the MHD connection while it waits (NULL once it is gone) */
    int suspended; /* conn is suspended: the engine resumes it when there is news */
    /* engine */
    SrvChoice *ch; /* n of them */
    int n_finished, n_prompt_tokens, n_generated;
} SrvJob;

typedef struct SrvStats { /* Prometheus counters (under SrvServer.mu) */
    int64_t requests[6];  /* by status class: 200, 400, 401, 404, 429, 5xx */
    int64_t prompt_tokens, completion_tokens;
    int64_t ttft[12], tpot[12]; /* histogram counts per bucket (srv_http.c's bounds), the last +Inf */
    double ttft_sum, tpot_sum;
    int64_t ttft_n, tpot_n;
    KilnEngineStats engine; /* the engine's, after its last step */
} SrvStats;

typedef struct SrvServer {
    KilnEngine *e;
    const char *model;   /* the served model's name */
    const char *api_key; /* NULL: none */
    int max_queue;       /* queued + running jobs at most (429 past it) */
    int max_conns;       /* connections at once (srv_http.c: from the file-descriptor limit) */
    int vocab;
    const char *chat_template; /* Jinja (chat_tpl.c): --chat-template, the model's, or ChatML; NULL: none */
    char bos[64], eos[64];     /* the texts of bos_token and eos_token for the template */
    int64_t max_ctx;           /* tokens a request may hold (prompt + output) */
    KilnSpec spec;             /* --spec: the proposer requests get */
    int spec_k;
    int gather_us; /* --batch-wait-us: how long an idle engine waits for a burst's next request */
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the engine thread waits on it when idle (CLOCK_MONOTONIC) */
    SrvJob **queue;      /* jobs waiting for the engine thread */
    int n_queue, cap_queue;
    int n_live; /* queued or running jobs */
    int stop;   /* shutting down */
    int ready;  /* the engine is open (until then every request but /metrics gets 503) */
    uint64_t next_id;
    SrvStats stats;
    double callback_s; /* engine thread only: seconds in the engine's token callbacks (said at exit) */
    double text_s;     /* text thread only: seconds turning records into text and events */
    /* engine thread -> text thread: the records of a step's callbacks (srv_engine.c) */
    struct SrvRec *stage; /* the engine thread's, filled by its callbacks */
    int n_stage, cap_stage;
    struct SrvRec *text_q; /* handed over, under mu */
    int n_text_q, cap_text_q;
    int text_stop;            /* under mu: the engine thread ended, the text thread drains and ends */
    pthread_cond_t text_wake; /* the text thread waits on it */
    void *daemon;             /* struct MHD_Daemon */
} SrvServer;

/* srv_api.c */
/* Parses a request body for kind into *out (a new job, refs 1). 0, or an HTTP status (400, 404) with one
 * line in err. */
int srv_parse(const SrvServer *sv, int kind, const char *body, size_t len, SrvJob **out, char *err,
              size_t errlen);
void srv_job_release(SrvJob *j); /* drops one reference (under SrvServer.mu) */
/* The OpenAI error body {"error": {"message", "type", "code"}} for status, malloc'd. */
char *srv_error_json(int status, const char *msg);
/* The non-stream response body of a finished job (every choice), malloc'd (NULL: out of memory). */
char *srv_final_json(const SrvServer *sv, const SrvJob *j);
/* A stream chunk of choice c carrying text (first: the chat role too; finish: its reason, else NULL) and
 * the logprobs of its tokens [lp_from, lp_to) (lp_from < 0: none), as one SSE event "data: {...}\n\n",
 * malloc'd; c NULL: the usage-only chunk instead. */
char *srv_chunk_sse(const SrvServer *sv, const SrvJob *j, const SrvChoice *c, const char *text, size_t len,
                    int first, const char *finish, int lp_from, int lp_to);
/* The same for the common chunk (text only: not the first, no finish, no logprobs), from a per-choice
 * template (rendered by srv_chunk_sse once) with the text escaped here: a token's event costs a copy, not
 * a JSON tree. */
char *srv_chunk_text_sse(const SrvServer *sv, const SrvJob *j, SrvChoice *c, const char *text, size_t len);
char *srv_models_json(const SrvServer *sv);
/* json (malloc'd, taken; NULL: out of memory) as one server-sent event "data: ...\n\n", malloc'd. */
char *srv_sse(char *json);

/* srv_engine.c */
/* Runs the engine thread until sv->stop: takes queued jobs, submits them and steps the engine; beside it
 * a text thread it starts turns the tokens into each job's output while the engine runs the next step. */
void *srv_engine_main(void *sv);
/* Appends n bytes to j's output (under SrvServer.mu) and wakes its connection. 0, or -1 out of memory. */
int srv_job_emit(SrvServer *sv, SrvJob *j, const char *bytes, size_t n);
void srv_job_wake(SrvJob *j); /* resumes j's connection if it is suspended (under SrvServer.mu) */

/* srv_http.c */
/* Starts the HTTP daemon on host:port. 0, or 1 after printing why. */
int srv_http_start(SrvServer *sv, const char *host, int port);
void srv_http_stop(SrvServer *sv);
void srv_http_resume(void *conn);           /* MHD_resume_connection: the engine thread's news for a client */
extern const double srv_latency_bounds[11]; /* TTFT and TPOT histogram bounds (seconds) for /metrics */

#endif
