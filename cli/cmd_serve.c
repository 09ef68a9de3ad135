/* cmd_serve.c — `kiln serve PACKAGE --weights PATH [--host H] [--port P] ...`: the OpenAI-compatible HTTP
 * server (docs/SERVER.md). Opens the engine, starts the engine thread (srv_engine.c) and the HTTP daemon
 * (srv_http.c), then waits for SIGINT or SIGTERM: new requests get 503, running ones are aborted (their
 * clients told), and the process exits 0. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_tpl.h"
#include "cli.h"
#include "cli_num.h"
#include "rt_engine.h" /* rt_engine_open: --random-weights */
#include "srv.h"

static const char serve_usage[] =
    "usage: kiln serve PACKAGE (--weights PATH | --random-weights S) [options]\n"
    "  an OpenAI-compatible server: POST /v1/completions, /v1/chat/completions (stream or not), GET\n"
    "  /v1/models, /health, /metrics (docs/SERVER.md)\n"
    "  --host H            the address to listen on (default 127.0.0.1: this machine only)\n"
    "  --port P            1..65535 (default 8080)\n"
    "  --api-key KEY       requests must carry 'Authorization: Bearer KEY' (/health and /metrics need none)\n"
    "  --max-queue N       requests queued or running at most, 1..65536 (default 256); past it: 429\n"
    "  --model-name NAME   the model's name in the API (default: the package's file name, without .kiln)\n"
    "  --spec ngram|none   speculative decoding for every request (n-gram lookup; default none)\n"
    "  --spec-k K          draft tokens per step at most, 1..32 (default 4)\n"
    "  --batch-wait-us N   an idle engine starts once no request has come for N us (at most 4N in all), so\n"
    "                      a burst starts in one step; 0..100000 (default 300)\n"
    "  --device D          auto (default), host, or a GPU number 0..1023\n"
    "  --kv-cache-mb N     KV-cache pool size in MiB (default: from free memory)\n"
    "  --threads N         host threads per kernel launch, 1..1024 (default: every CPU)\n"
    "  --tokenizer PATH    a Hugging Face tokenizer.json (or its directory) instead of the weights' own\n"
    "  --chat-template F   the chat template (Jinja, kiln's subset: docs/SERVER.md) instead of the model's\n"
    "  --db FILE           the tuning store (default $KILN_TUNE_DB, else ~/.cache/kiln/tune.db when it "
    "exists)\n";

static int parse(int argc, char **argv, const char **pkg, const char **weights, uint64_t *seed, int *random,
                 const char **host, int *port, SrvServer *sv, KilnEngineOptions *o, const char **db,
                 const char **tpl)
{
    CliSeen seen = {0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(serve_usage, stdout);
            return 1;
        }
        if (a[0] != '-') {
            if (*pkg) return fprintf(stderr, "kiln serve: unexpected argument %s\n%s", a, serve_usage), 2;
            *pkg = a;
            continue;
        }
        if (!v) return fprintf(stderr, "kiln serve: %s wants a value\n", a), 2;
        if (!*v) return cli_empty_error("serve", a);
        if (cli_seen(&seen, "serve", a)) return 2;
        i++;
        int rc = 0;
        if (!strcmp(a, "--weights"))
            *weights = v;
        else if (!strcmp(a, "--random-weights"))
            rc = cli_num_u64("serve", a, v, seed), *random = 1;
        else if (!strcmp(a, "--host"))
            *host = v;
        else if (!strcmp(a, "--port"))
            rc = cli_num_int("serve", a, v, 1, 65535, &n), *port = (int)n;
        else if (!strcmp(a, "--api-key"))
            sv->api_key = v;
        else if (!strcmp(a, "--max-queue"))
            rc = cli_num_int("serve", a, v, 1, 65536, &n), sv->max_queue = (int)n;
        else if (!strcmp(a, "--model-name"))
            sv->model = v;
        else if (!strcmp(a, "--spec-k"))
            rc = cli_num_int("serve", a, v, 1, KILN_MAX_SPEC_K, &n), sv->spec_k = (int)n;
        else if (!strcmp(a, "--batch-wait-us"))
            rc = cli_num_int("serve", a, v, 0, 100000, &n), sv->gather_us = (int)n;
        else if (!strcmp(a, "--spec")) {
            if (strcmp(v, "ngram") && strcmp(v, "none")) rc = cli_num_error("serve", a, "ngram or none", v);
            sv->spec = !strcmp(v, "ngram") ? KILN_SPEC_NGRAM : KILN_SPEC_NONE;
        } else if (!strcmp(a, "--device")) {
            if (!strcmp(v, "host"))
                o->device = -2;
            else if (!strcmp(v, "auto"))
                o->device = -1;
            else if (cli_num_int_ok(v, 0, 1023, &n))
                o->device = (int)n;
            else
                rc = cli_num_error("serve", a, "auto, host or a GPU number in 0..1023", v);
        } else if (!strcmp(a, "--kv-cache-mb"))
            rc = cli_num_int("serve", a, v, 1, 1 << 24, &n), o->kv_cache_bytes = n << 20;
        else if (!strcmp(a, "--threads"))
            rc = cli_num_int("serve", a, v, 1, 1024, &n), o->host_threads = (int)n;
        else if (!strcmp(a, "--db"))
            *db = v;
        else if (!strcmp(a, "--chat-template"))
            *tpl = v;
        else if (!strcmp(a, "--tokenizer"))
            o->tokenizer = v;
        else
            return fprintf(stderr, "kiln serve: unknown option %s\n%s", a, serve_usage), 2;
        if (rc) return 2;
    }
    if (!*pkg || !*weights == !*random) return fputs(serve_usage, stderr), 2;
    return 0;
}

/* The vocabulary has ChatML's control tokens (each a single id when parsed as special). */
static int has_chatml(KilnEngine *e)
{
    int32_t id[4];
    int n1 = 0, n2 = 0;
    return kiln_engine_tokenize_v2(e, "<|im_start|>", 12, KILN_TOKENIZE_SPECIAL | KILN_TOKENIZE_NO_BOS, id, 4,
                                   &n1) == KILN_OK &&
           n1 == 1 &&
           kiln_engine_tokenize_v2(e, "<|im_end|>", 10, KILN_TOKENIZE_SPECIAL | KILN_TOKENIZE_NO_BOS, id, 4,
                                   &n2) == KILN_OK &&
           n2 == 1;
}

static const char chatml[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* The chat template: --chat-template FILE, the model's, or ChatML when the vocabulary has its tokens;
 * checked by rendering one user message (outside kiln's subset: refused, so the server never starts with a
 * template it cannot render). 0, or 1 after one line. *src says where it came from. */
static int chat_template(SrvServer *sv, const char *file, char **owned, const char **src)
{
    char err[512];
    *owned = NULL, *src = "none";
    if (file) {
        if (!(*owned = ct_read_file(file, err, sizeof err))) {
            cli_error("--chat-template %s", err);
            return 1;
        }
        sv->chat_template = *owned, *src = file;
    } else if (kiln_engine_chat_template(sv->e)) {
        sv->chat_template = kiln_engine_chat_template(sv->e), *src = "the model's";
    } else if (has_chatml(sv->e)) {
        sv->chat_template = chatml, *src = "ChatML (the model has none)";
    } else {
        return 0;
    }
    size_t len = 0;
    int32_t ids[2] = {kiln_engine_bos(sv->e), kiln_engine_eos(sv->e)};
    char *dst[2] = {sv->bos, sv->eos};
    for (int k = 0; k < 2; k++)
        if (ids[k] >= 0 && kiln_engine_token_text(sv->e, ids[k], dst[k], 63, &len) == KILN_OK)
            dst[k][len < 63 ? len : 63] = 0;
    CtMsg probe = {"user", "hi"};
    CtOut out;
    int st = ct_render(sv->chat_template, &probe, 1, sv->bos, sv->eos, 1, &out, err, sizeof err);
    if (st == CT_OK) ct_out_free(&out);
    if (st == CT_ERR_TEMPLATE || st == CT_ERR_NOMEM) {
        cli_error("%s chat template: %s (kiln's Jinja subset: docs/SERVER.md; give --chat-template FILE)",
                  *src, err);
        return 1;
    }
    return 0;
}

int cli_serve(int argc, char **argv)
{
    const char *pkg = NULL, *weights = NULL, *host = "127.0.0.1", *db = NULL, *tpl_file = NULL;
    int port = 8080, random = 0;
    uint64_t seed = 0;
    static SrvServer sv; /* one per process */
    sv.max_queue = 256, sv.spec_k = 4, sv.gather_us = 300;
    KilnEngineOptions o;
    kiln_engine_options_init(&o);
    int rc = parse(argc, argv, &pkg, &weights, &seed, &random, &host, &port, &sv, &o, &db, &tpl_file);
    if (rc) return rc == 1 ? 0 : rc;
    char name[256], db_buf[1024];
    if (!sv.model) { /* the package's file name without .kiln */
        const char *base = strrchr(pkg, '/') ? strrchr(pkg, '/') + 1 : pkg;
        snprintf(name, sizeof name, "%s", base);
        size_t n = strlen(name);
        if (n > 5 && !strcmp(name + n - 5, ".kiln")) name[n - 5] = 0;
        sv.model = name;
    }
    int is_default = 0;
    o.tune_db = cli_tune_db_path(db, db_buf, sizeof db_buf, &is_default);
    if (o.tune_db && is_default && access(o.tune_db, 0) != 0) o.tune_db = NULL;
    /* signals go to the thread that waits for them (sigwait below), never to the worker threads */
    sigset_t sigs;
    sigemptyset(&sigs), sigaddset(&sigs, SIGINT), sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_mutex_init(&sv.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* srv_engine.c's gather waits on the monotonic clock */
    pthread_cond_init(&sv.wake, &ca);
    pthread_condattr_destroy(&ca);
    /* listen first: a port in use fails before the weights load; until they have, requests get 503 */
    if (srv_http_start(&sv, host, port)) return 1;
    char err[512];
    KilnStatus st = random ? rt_engine_open(pkg, NULL, seed, &o, &sv.e, err, sizeof err)
                           : kiln_engine_open(pkg, weights, &o, &sv.e, err, sizeof err);
    if (st != KILN_OK) {
        cli_error("%s", err);
        srv_http_stop(&sv);
        return 1;
    }
    KilnEngineStats es;
    kiln_engine_stats(sv.e, &es, sizeof es);
    sv.vocab = kiln_engine_vocab(sv.e);
    sv.max_ctx = (int64_t)es.kv_pages * es.page_size;
    int32_t probe = 0;
    int nt = 0;
    pthread_t engine;
    char *tpl_owned = NULL;
    const char *tpl_src = NULL;
    if (kiln_engine_tokenize(sv.e, "a", &probe, 1, &nt) != KILN_OK) {
        cli_error("%s: kiln serve needs a tokenizer (GGUF weights carry one, or --tokenizer PATH): %s", pkg,
                  kiln_engine_errmsg(sv.e));
        rc = 1;
    } else if (chat_template(&sv, tpl_file, &tpl_owned, &tpl_src)) {
        rc = 1;
    } else if (pthread_create(&engine, NULL, srv_engine_main, &sv)) {
        cli_error("cannot start the engine thread");
        rc = 1;
    }
    if (rc) {
        srv_http_stop(&sv);
        kiln_engine_close(sv.e);
        free(tpl_owned);
        return 1;
    }
    pthread_mutex_lock(&sv.mu);
    sv.ready = 1;
    pthread_mutex_unlock(&sv.mu);
    fprintf(stderr, "kiln serve: %s on http://%s:%d: ready (%s; %s%s)\n", sv.model, host, port,
            kiln_engine_device(sv.e),
            sv.chat_template ? "chat template: " : "no chat template: /v1/completions only",
            sv.chat_template ? tpl_src : "");
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "kiln serve: %s: stopping\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    pthread_mutex_lock(&sv.mu);
    sv.stop = 1;
    pthread_cond_signal(&sv.wake);
    pthread_mutex_unlock(&sv.mu);
    pthread_join(engine, NULL);
    srv_http_stop(&sv);
    kiln_engine_close(sv.e);
    free(sv.queue);
    free(tpl_owned);
    return 0;
}
