/* bench_serve.c — the in-process side of issue 29's server figures: the same engine kiln serve drives,
 * driven here through kiln.h in one thread (as `kiln run` does), on the prompts the HTTP client then
 * sends to `kiln serve` (bench/serve_bench.py; bench/run_issue29.sh runs both and prints the table).
 *
 *   bench_serve PACKAGE --prompts FILE [--streams S,S..] [--new N] [--reps R] [--seed S] [--tokenizer T]
 *
 * Random weights (seed S, as `kiln serve --random-weights S`). FILE gets 32 random prompts of 32 ids
 * (one JSON array per line), written here so the client sends the same. For each stream count: one
 * warm-up batch, then R batches of the first S prompts submitted at once, greedy, EOS ignored, N new
 * tokens each. Per batch: tok/s (new tokens after each request's first over the wall time from the first
 * first token to the last token) and each request's time to first token (submit to the first token's
 * callback). Prints one line per stream count: the medians over the batches, as JSON.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/kiln.h"
#include "runtime/rt_engine.h"

enum { MAXS = 32, PROMPT = 32, MAXR = 64 };

typedef struct Req {
    int32_t prompt[PROMPT];
    int n_out;
    double t_submit, t_first, t_last;
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
    if (tok >= 0) {
        if (!r->n_out++) r->t_first = t;
        r->t_last = t;
    }
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One batch of S requests; tok/s and the S TTFTs (ms) into ttft. 0, or -1 on an engine error. */
static int batch(KilnEngine *e, Req *r, int S, int N, double *tps, double *ttft)
{
    for (int i = 0; i < S; i++) {
        KilnSampling s;
        kiln_sampling_init(&s);
        s.max_tokens = N, s.ignore_eos = 1;
        r[i].n_out = 0, r[i].t_submit = now_s();
        if (kiln_engine_submit(e, r[i].prompt, PROMPT, &s, on_token, &r[i], NULL) != KILN_OK) return -1;
    }
    int pending = 1;
    while (pending)
        if (kiln_engine_step(e, &pending) != KILN_OK) return -1;
    double t0 = 1e300, t1 = 0;
    long n = 0;
    for (int i = 0; i < S; i++) {
        t0 = r[i].t_first < t0 ? r[i].t_first : t0, t1 = r[i].t_last > t1 ? r[i].t_last : t1;
        n += r[i].n_out - 1;
        ttft[i] = 1e3 * (r[i].t_first - r[i].t_submit);
    }
    *tps = t1 > t0 ? (double)n / (t1 - t0) : 0;
    return 0;
}

int main(int argc, char **argv)
{
    const char *pkg = NULL, *file = NULL, *streams = "1,32", *tokenizer = NULL;
    int N = 128, R = 5;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--prompts") && v)
            file = argv[++i];
        else if (!strcmp(a, "--streams") && v)
            streams = argv[++i];
        else if (!strcmp(a, "--new") && v)
            N = atoi(argv[++i]);
        else if (!strcmp(a, "--reps") && v)
            R = atoi(argv[++i]);
        else if (!strcmp(a, "--seed") && v)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--tokenizer") && v)
            tokenizer = argv[++i];
        else if (!pkg && a[0] != '-')
            pkg = a;
        else
            pkg = NULL, i = argc;
    }
    if (!pkg || !file || N < 2 || R < 1 || R > MAXR) {
        fprintf(stderr,
                "usage: bench_serve PACKAGE --prompts FILE [--streams 1,32] [--new N] [--reps R (1..%d)] "
                "[--seed S] [--tokenizer T]\n",
                MAXR);
        return 2;
    }
    KilnEngineOptions o;
    kiln_engine_options_init(&o);
    o.tokenizer = tokenizer;
    KilnEngine *e = NULL;
    char err[512];
    double t = now_s();
    if (rt_engine_open(pkg, NULL, seed, &o, &e, err, sizeof err) != KILN_OK) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    fprintf(stderr, "%s: opened in %.1f s\n", kiln_engine_device(e), now_s() - t);
    static Req r[MAXS];
    FILE *f = fopen(file, "w");
    if (!f) return perror(file), 1;
    int V = kiln_engine_vocab(e);
    unsigned lo = V > 2000 ? 1000u : 1u, span = (unsigned)V - lo, s = 29u;
    for (int i = 0; i < MAXS; i++) {
        for (int j = 0; j < PROMPT; j++) {
            s = s * 1103515245u + 12345u;
            r[i].prompt[j] = (int32_t)(lo + (s >> 8) % span);
            fprintf(f, "%s%d", j ? ", " : "[", r[i].prompt[j]);
        }
        fputs("]\n", f);
    }
    if (fclose(f)) return perror(file), 1;
    for (const char *c = streams; *c;) {
        int S = atoi(c);
        if (S < 1 || S > MAXS) return fprintf(stderr, "--streams: 1..%d\n", MAXS), 2;
        static double tps[MAXR], ttft[MAXR * MAXS], one[MAXS];
        if (batch(e, r, S, N, &tps[0], one)) goto fail; /* warm-up: graphs captured, pages touched */
        for (int k = 0; k < R; k++)
            if (batch(e, r, S, N, &tps[k], &ttft[k * S])) goto fail;
        double p99_at = 0.99 * (R * S - 1), med_t = median(tps, R), med_f = median(ttft, R * S);
        printf("{\"side\": \"in-process\", \"streams\": %d, \"new\": %d, \"reps\": %d, \"tok_s\": %.1f, "
               "\"ttft_ms_p50\": %.3f, \"ttft_ms_p99\": %.3f}\n",
               S, N, R, med_t, med_f, ttft[(int)(p99_at + 0.5)]);
        fflush(stdout);
        c = strchr(c, ',');
        if (!c) break;
        c++;
    }
    kiln_engine_close(e);
    return 0;
fail:
    fprintf(stderr, "engine: %s\n", kiln_engine_errmsg(e));
    kiln_engine_close(e);
    return 1;
}
