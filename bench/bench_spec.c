/* bench_spec.c — speculative decoding in the engine against plain decoding, every workload in one process
 * (one open of the target and its draft: an 8B model with random weights takes most of a minute to open,
 * so one `kiln run` per row does not fit a device call). Issue 28's figures (docs/BENCHMARKS.md).
 *
 *   bench_spec PACKAGE [--draft PACKAGE] [--new N] [--seed S]
 *
 * Random weights (rt_engine_open, seed S; the draft gets its own from the same seed). Workloads, each a
 * batch submitted at once and run to the end (greedy, EOS ignored, N new tokens per request):
 *   b1 / b8 / b32   random prompts of 32 ids: plain, n-gram k 4 and 8, the draft model k 4;
 *   copy b1 / b8    each prompt followed by its own plain continuation (N tokens): the request continues
 *                   text it has seen, as in editing and RAG; with random weights the continuation repeats
 *                   what the model fell into, so the n-gram proposer's acceptance is what it measures.
 * Each row: tok/s (new tokens after each request's first / wall time from the first token to the last),
 * the ratio to the plain row of the same prompts, acceptance, tokens per verify, the engine's mean decode
 * and verify step times (KilnEngineStats) and whether every request's ids equal the plain row's.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/kiln.h"
#include "runtime/rt_engine.h"

enum { MAXB = 32, PROMPT = 32, MAXN = 1024 };

typedef struct Req {
    int32_t prompt[PROMPT + MAXN];
    int n_prompt;
    int32_t out[MAXN];
    int n_out;
    double t_first, t_last;
} Req;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int on_token(void *user, int64_t id, int32_t tok, KilnFinish fin)
{
    (void)id, (void)fin;
    Req *r = user;
    double t = now_s();
    if (tok >= 0 && r->n_out < MAXN) {
        if (!r->n_out) r->t_first = t;
        r->out[r->n_out++] = tok;
        r->t_last = t;
    }
    return 0;
}

typedef struct Row {
    double tps, acc, per_verify, decode_ms, verify_ms, draft_ms;
} Row;

/* Runs requests r[0..B) with the proposer spec (k drafts) and fills row. 0, or -1 on an engine error. */
static int run(KilnEngine *e, Req *r, int B, int new_tokens, int spec, int k, Row *row)
{
    KilnEngineStats a, b;
    kiln_engine_stats(e, &a, sizeof a);
    for (int i = 0; i < B; i++) {
        KilnSampling s;
        kiln_sampling_init(&s);
        s.max_tokens = new_tokens, s.ignore_eos = 1, s.spec = spec, s.spec_k = k;
        r[i].n_out = 0;
        if (kiln_engine_submit(e, r[i].prompt, r[i].n_prompt, &s, on_token, &r[i], NULL) != KILN_OK) {
            fprintf(stderr, "submit: %s\n", kiln_engine_errmsg(e));
            return -1;
        }
    }
    int pending = 1;
    while (pending)
        if (kiln_engine_step(e, &pending) != KILN_OK) {
            fprintf(stderr, "step: %s\n", kiln_engine_errmsg(e));
            return -1;
        }
    kiln_engine_stats(e, &b, sizeof b);
    double t0 = 1e300, t1 = 0;
    int n = 0;
    for (int i = 0; i < B; i++) {
        t0 = r[i].t_first < t0 ? r[i].t_first : t0, t1 = r[i].t_last > t1 ? r[i].t_last : t1;
        n += r[i].n_out - 1;
    }
    int64_t ver = b.spec_verifies - a.spec_verifies, prop = b.spec_proposed - a.spec_proposed,
            acc = b.spec_accepted - a.spec_accepted, ds = b.decode_steps - a.decode_steps,
            vs = b.verify_steps - a.verify_steps, steps = b.steps - a.steps;
    row->tps = t1 > t0 ? n / (t1 - t0) : 0;
    row->acc = prop ? (double)acc / (double)prop : 0;
    row->per_verify = ver ? (double)(acc + ver) / (double)ver : 0;
    row->decode_ms = ds ? 1e3 * (b.decode_seconds - a.decode_seconds) / (double)ds : 0;
    row->verify_ms = vs ? 1e3 * (b.verify_seconds - a.verify_seconds) / (double)vs : 0;
    row->draft_ms = steps ? 1e3 * (b.draft_seconds - a.draft_seconds) / (double)steps : 0;
    return 0;
}

/* B prompts of PROMPT ids in the vocabulary (V), avoiding the low ids where special tokens live. */
static void prompts(Req *r, int B, unsigned seed, int V)
{
    unsigned lo = V > 2000 ? 1000u : 1u, span = (unsigned)V - lo;
    for (int i = 0; i < B; i++) {
        unsigned s = seed * 7919u + (unsigned)i * 104729u + 1;
        for (int j = 0; j < PROMPT; j++) {
            s = s * 1103515245u + 12345u;
            r[i].prompt[j] = (int32_t)(lo + (s >> 8) % span);
        }
        r[i].n_prompt = PROMPT;
    }
}

static int same_ids(const Req *a, const Req *b, int B)
{
    for (int i = 0; i < B; i++)
        if (a[i].n_out != b[i].n_out || memcmp(a[i].out, b[i].out, (size_t)a[i].n_out * sizeof a[i].out[0]))
            return 0;
    return 1;
}

static void print_row(const char *name, const Row *x, const Row *plain, int same)
{
    printf("%-16s %9.1f %7.2fx %6.1f%% %6.2f %9.3f %9.3f %8.3f  %s\n", name, x->tps,
           plain->tps > 0 ? x->tps / plain->tps : 0, 100 * x->acc, x->per_verify, x->decode_ms, x->verify_ms,
           x->draft_ms, same ? "same ids" : "IDS DIFFER");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *pkg = NULL, *draft = NULL;
    int N = 192;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--draft") && i + 1 < argc)
            draft = argv[++i];
        else if (!strcmp(argv[i], "--new") && i + 1 < argc)
            N = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!pkg)
            pkg = argv[i];
        else {
            fprintf(stderr, "usage: bench_spec PACKAGE [--draft PACKAGE] [--new N] [--seed S]\n");
            return 2;
        }
    }
    if (!pkg || N < 2 || N > MAXN) {
        fprintf(stderr, "usage: bench_spec PACKAGE [--draft PACKAGE] [--new N (2..%d)] [--seed S]\n", MAXN);
        return 2;
    }
    KilnEngineOptions o;
    kiln_engine_options_init(&o);
    o.draft_package = draft;
    KilnEngine *e = NULL;
    char err[512];
    double t = now_s();
    if (rt_engine_open(pkg, NULL, seed, &o, &e, err, sizeof err) != KILN_OK) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    printf("%s: opened in %.1f s, %d new tokens per request, greedy, random weights (seed %llu)%s%s\n",
           kiln_engine_device(e), now_s() - t, N, seed, draft ? ", draft " : "", draft ? draft : "");
    printf("%-16s %9s %8s %7s %6s %9s %9s %8s\n", "row", "tok/s", "vs plain", "accept", "tok/vf", "decode ms",
           "verify ms", "draft ms");
    static Req plain[MAXB], r[MAXB];
    static const int batches[] = {1, 8, 32};
    int status = 0;
    for (int bi = 0; bi < 3 && !status; bi++) {
        int B = batches[bi];
        char name[32];
        Row p, x;
        prompts(plain, B, (unsigned)B, kiln_engine_vocab(e));
        if (B == 1 && run(e, plain, B, N, KILN_SPEC_NONE, 0, &p)) return 1; /* warm-up: graphs captured */
        if (run(e, plain, B, N, KILN_SPEC_NONE, 0, &p)) return 1;
        snprintf(name, sizeof name, "b%d plain", B);
        print_row(name, &p, &p, 1);
        struct {
            const char *what;
            int spec, k;
        } rows[] = {
            {"ngram4", KILN_SPEC_NGRAM, 4}, {"ngram8", KILN_SPEC_NGRAM, 8}, {"draft4", KILN_SPEC_DRAFT, 4}};
        for (int j = 0; j < 3; j++) {
            if (rows[j].spec == KILN_SPEC_DRAFT && !draft) continue;
            if (B == 32 && rows[j].k == 8) continue;
            memcpy(r, plain, sizeof r);
            if (run(e, r, B, N, rows[j].spec, rows[j].k, &x)) return 1;
            snprintf(name, sizeof name, "b%d %s", B, rows[j].what);
            print_row(name, &x, &p, same_ids(r, plain, B));
        }
        if (B == 32) break;
        /* copy: each prompt followed by its own plain continuation */
        Req *c = r;
        for (int i = 0; i < B; i++) {
            c[i] = plain[i];
            memcpy(c[i].prompt + PROMPT, plain[i].out, (size_t)plain[i].n_out * sizeof c[i].prompt[0]);
            c[i].n_prompt = PROMPT + plain[i].n_out;
        }
        static Req cp[MAXB];
        memcpy(cp, c, sizeof cp);
        if (run(e, cp, B, N, KILN_SPEC_NONE, 0, &p)) return 1;
        snprintf(name, sizeof name, "copy b%d plain", B);
        print_row(name, &p, &p, 1);
        for (int k = 4; k <= 8; k += 4) {
            memcpy(c, cp, sizeof cp);
            if (run(e, c, B, N, KILN_SPEC_NGRAM, k, &x)) return 1;
            snprintf(name, sizeof name, "copy b%d ngram%d", B, k);
            print_row(name, &x, &p, same_ids(c, cp, B));
        }
    }
    kiln_engine_close(e);
    return status;
}
