/* bench_spec.c — speculative decoding in the engine against plain decoding, every workload in one process
 * (one open of the target and its draft: an 8B model with random weights takes most of a minute to open,
 * so one `kiln run` per row does not fit a device call). Issue 28's figures (docs/BENCHMARKS.md).
 *
 *   bench_spec PACKAGE [--draft PACKAGE] [--branches B] [--batch 1,8,32] [--new N] [--lead L] [--seed S]
 *              [--db TUNE_DB] [--probe]
 *
 * Random weights (rt_engine_open, seed S; the draft gets its own from the same seed). Workloads, each a
 * batch submitted at once and run to the end (greedy, EOS ignored, N new tokens per request):
 *   b1 / b8 / b32   random prompts of 32 ids: plain, n-gram k 4 and 8, the draft model k 4 (and, with
 *                   --branches B > 1 and a target compiled with tree=true, k 4 as a draft tree of B
 *                   candidates per depth: 4 + 4 (B - 1) tokens verified per request);
 *   predict b1/b8/b32  the b rows' prompts with their plain continuation handed over as
 *                   sampling.prediction (OpenAI's predicted outputs): the n-gram proposer drafts from it
 *                   while the output follows it (acceptance 1 where the ids equal plain decoding's);
 *   copy b1/b8/b32  a prompt followed by its own plain continuation (L tokens, default 512): the request
 *                   continues text it has seen, as in editing and RAG. A model with random weights cannot
 *                   copy, but its greedy text falls into a cycle sooner or later: of up to 4 rounds of 4B
 *                   random prompts the first B whose continuations end in a cycle are taken (the line
 *                   says how many did), so the next N tokens are in the prompt already (acceptance near
 *                   1 where the verify step rounds as the decode step did).
 * After each copy ngram4 row: the draft model's projected speed-up at that batch as a function of its
 * acceptance rate a, from measured costs: (1 - a^(k+1)) / (1 - a) tokens per (a verify step of k 4, the
 * copy row's, + 4 draft rounds, the draft row's mean draft step) against the copy plain decode step.
 * Each row: tok/s (new tokens after each request's first / wall time from the first token to the last),
 * the ratio to the plain row of the same prompts, acceptance, tokens per verify, the engine's mean decode
 * and verify step times (KilnEngineStats) and whether every request's ids equal the plain row's.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/kiln.h"
#include "runtime/rt_engine.h"

enum { MAXB = 32, POOL = 4 * MAXB, PROMPT = 32, MAXN = 1024, ROUNDS = 4 };

typedef struct Req {
    int32_t prompt[PROMPT + MAXN];
    int n_prompt;
    int32_t out[MAXN];
    int n_out;
    const int32_t *pred; /* sampling.prediction (NULL: none), n_pred tokens */
    int n_pred;
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
    double tps, acc, per_verify, decode_ms, verify_ms, draft_ms, round_ms;
} Row;

/* Runs requests r[0..B) with the proposer spec (k drafts) and fills row. 0, or -1 on an engine error. */
static int branches = 1; /* --branches: spec_branches of the draft tree row */

static int run(KilnEngine *e, Req *r, int B, int new_tokens, int spec, int k, int tree, Row *row)
{
    KilnEngineStats a, b;
    kiln_engine_stats(e, &a, sizeof a);
    for (int i = 0; i < B; i++) {
        KilnSampling s;
        kiln_sampling_init(&s);
        s.max_tokens = new_tokens, s.ignore_eos = 1, s.spec = spec, s.spec_k = k;
        s.spec_branches = tree ? branches : 1;
        s.prediction = r[i].pred, s.n_prediction = r[i].n_pred;
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
    row->round_ms = b.draft_steps > a.draft_steps
                        ? 1e3 * (b.draft_seconds - a.draft_seconds) / (double)(b.draft_steps - a.draft_steps)
                        : 0;
    return 0;
}

/* The period (1..256) of the cycle that the last 64 of t[0..n) repeat, or 0. */
static int loop_period(const int32_t *t, int n)
{
    for (int p = 1; p <= 256 && p + 64 <= n; p++) {
        int i = 0;
        while (i < 64 && t[n - 1 - i] == t[n - 1 - i - p])
            i++;
        if (i == 64) return p;
    }
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

/* The draft model's projection at batch B: tokens per verify at acceptance a (k drafts, each kept with
 * probability a while the chain holds, plus the target's own token) over one verify step of k drafts
 * (verify_ms: the copy workload's, where nearly every verify checks k) and k draft rounds (round_ms: the
 * draft row's mean draft step), against the plain decode step. */
static void print_projection(int B, int k, double verify_ms, double round_ms, double decode_ms)
{
    double ms = verify_ms + k * round_ms;
    printf("  projected b%d draft%d (verify %.3f + %d x %.3f ms draft, decode %.3f ms):", B, k, verify_ms, k,
           round_ms, decode_ms);
    for (int i = 5; i <= 9; i++) {
        double a = i / 10.0, tokens = (1 - pow(a, k + 1)) / (1 - a);
        printf(" a %.1f %.2fx", a, ms > 0 ? tokens * decode_ms / ms : 0);
    }
    printf("\n");
}

static void print_row(const char *name, const Row *x, const Row *plain, int same)
{
    printf("%-16s %9.1f %7.2fx %6.1f%% %6.2f %9.3f %9.3f %8.3f  %s\n", name, x->tps,
           plain->tps > 0 ? x->tps / plain->tps : 0, 100 * x->acc, x->per_verify, x->decode_ms, x->verify_ms,
           x->draft_ms, same ? "same ids" : "IDS DIFFER");
    fflush(stdout);
}

/* --probe: each kernel's time in one step of a single sequence of n tokens and n logit rows (the
 * matmuls' M of a decode step of n sequences, or of a verify step of n / 5 sequences with k 4), the
 * least of 5 probes, microseconds per step. */
static void probe_table(KilnEngine *e)
{
    static const int ns[] = {1, 8, 32, 40, 160};
    enum { NN = sizeof ns / sizeof ns[0] };
    const RtPlan *p = rt_engine_plan(e);
    double *us = calloc((size_t)p->n_kernels * (NN + 1), sizeof *us), *one = us + (size_t)p->n_kernels * NN;
    int32_t tokens[160];
    for (int i = 0; i < 160; i++)
        tokens[i] = 1000 + i * 7;
    for (int j = 0; us && j < NN; j++)
        for (int rep = 0; rep < 5; rep++) {
            RtEngineProbe pr = {.kernel_us = one};
            if (rt_engine_probe(e, tokens, ns[j], ns[j], &pr) != KILN_OK) {
                fprintf(stderr, "probe: %s\n", kiln_engine_errmsg(e));
                free(us);
                return;
            }
            for (int k = 0; k < p->n_kernels; k++)
                if (!rep || one[k] < us[k * NN + j]) us[k * NN + j] = one[k];
        }
    printf("probe: one sequence of n tokens, n rows; us per step (least of 5)\n%-44s", "kernel");
    for (int j = 0; j < NN; j++)
        printf(" %8s%-3d", "n=", ns[j]);
    printf("\n");
    double tot[NN] = {0};
    for (int k = 0; us && k < p->n_kernels; k++) {
        printf("%-44.44s", p->kernels[k].name);
        for (int j = 0; j < NN; j++)
            printf(" %11.1f", us[k * NN + j]), tot[j] += us[k * NN + j];
        printf("\n");
    }
    printf("%-44s", "total");
    for (int j = 0; j < NN; j++)
        printf(" %11.1f", tot[j]);
    printf("\n");
    free(us);
}

int main(int argc, char **argv)
{
    const char *pkg = NULL, *draft = NULL, *db = NULL;
    int N = 192, L = 512, probe = 0, only = 0; /* --batch 1,8,32: the batches run, a bit each (0: all) */
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--draft") && i + 1 < argc)
            draft = argv[++i];
        else if (!strcmp(argv[i], "--new") && i + 1 < argc)
            N = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--db") && i + 1 < argc)
            db = argv[++i];
        else if (!strcmp(argv[i], "--branches") && i + 1 < argc)
            branches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--probe"))
            probe = 1;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            for (const char *c = argv[++i]; c; c = strchr(c, ','), c = c ? c + 1 : NULL)
                only |= atoi(c) == 1 ? 1 : atoi(c) == 8 ? 2 : atoi(c) == 32 ? 4 : 0;
        else if (!strcmp(argv[i], "--lead") && i + 1 < argc)
            L = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!pkg)
            pkg = argv[i];
        else {
            fprintf(stderr, "usage: bench_spec PACKAGE [--draft PACKAGE] [--new N] [--lead L] [--seed S]\n");
            return 2;
        }
    }
    if (!pkg || N < 2 || N > MAXN || L < 2 || L > MAXN || branches < 1 || branches > KILN_MAX_SPEC_BRANCHES) {
        fprintf(
            stderr,
            "usage: bench_spec PACKAGE [--draft PACKAGE] [--new N (2..%d)] [--lead L (2..%d)] [--seed S]\n",
            MAXN, MAXN);
        return 2;
    }
    KilnEngineOptions o;
    kiln_engine_options_init(&o);
    o.draft_package = draft, o.tune_db = db;
    KilnEngine *e = NULL;
    char err[512];
    double t = now_s();
    if (rt_engine_open(pkg, NULL, seed, &o, &e, err, sizeof err) != KILN_OK) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    printf("%s: opened in %.1f s, %d new tokens per request, greedy, random weights (seed %llu)%s%s\n",
           kiln_engine_device(e), now_s() - t, N, seed, draft ? ", draft " : "", draft ? draft : "");
    KilnEngineStats st0;
    kiln_engine_stats(e, &st0, sizeof st0);
    printf("tuning store %s: %d kernels tuned, %d nearest, %d default\n", db ? db : "(none)",
           st0.kernels_tuned, st0.kernels_nearest, st0.kernels_default);
    printf("%-16s %9s %8s %7s %6s %9s %9s %8s\n", "row", "tok/s", "vs plain", "accept", "tok/vf", "decode ms",
           "verify ms", "draft ms");
    static Req plain[MAXB], r[MAXB];
    static const int batches[] = {1, 8, 32};
    int status = 0, warm = 0;
    for (int bi = 0; bi < 3 && !status; bi++) {
        int B = batches[bi];
        if (only && !(only & (1 << bi))) continue;
        char name[32];
        Row p, x, dr = {0};
        prompts(plain, B, (unsigned)B, kiln_engine_vocab(e));
        if (!warm++ && run(e, plain, B, N, KILN_SPEC_NONE, 0, 0, &p)) return 1; /* warm-up: graphs captured */
        if (run(e, plain, B, N, KILN_SPEC_NONE, 0, 0, &p)) return 1;
        snprintf(name, sizeof name, "b%d plain", B);
        print_row(name, &p, &p, 1);
        struct {
            const char *what;
            int spec, k, tree;
        } rows[] = {{"ngram4", KILN_SPEC_NGRAM, 4, 0},
                    {"ngram8", KILN_SPEC_NGRAM, 8, 0},
                    {"draft4", KILN_SPEC_DRAFT, 4, 0},
                    {"tree4", KILN_SPEC_DRAFT, 4, 1}};
        for (int j = 0; j < 4; j++) {
            if (rows[j].spec == KILN_SPEC_DRAFT && !draft) continue;
            if (rows[j].tree && branches < 2) continue;
            if (B == 32 && rows[j].k == 8) continue;
            memcpy(r, plain, sizeof r);
            if (run(e, r, B, N, rows[j].spec, rows[j].k, rows[j].tree, &x)) return 1;
            snprintf(name, sizeof name, "b%d %s", B, rows[j].what);
            print_row(name, &x, &p, same_ids(r, plain, B));
            if (rows[j].spec == KILN_SPEC_DRAFT && !rows[j].tree) dr = x;
        }
        /* predicted: the plain row's prompts with its continuation as the prediction (the copy workload
         * with the text handed over, as an editor does with the file it edits) */
        static Req pred_out[MAXB];
        memcpy(pred_out, plain, sizeof *plain * (size_t)B);
        for (int k = 4; k <= 8; k += 4) {
            memcpy(r, plain, sizeof *r * (size_t)B);
            for (int i = 0; i < B; i++)
                r[i].pred = pred_out[i].out, r[i].n_pred = pred_out[i].n_out;
            if (run(e, r, B, N, KILN_SPEC_NGRAM, k, 0, &x)) return 1;
            snprintf(name, sizeof name, "predict b%d ngram%d", B, k);
            print_row(name, &x, &p, same_ids(r, plain, B));
        }
        /* copy: rounds of 4B random prompts run L tokens plainly (at most ROUNDS, until B continuations
         * loop: random weights cannot copy a text, but greedy decoding falls into cycles, and a looping
         * continuation is in the prompt already); the loopers, else the first others, become prompts of
         * their continuation */
        static Req pool[POOL];
        Req *c = r;
        int taken = 0, loops = 0, drawn = 0, others = 0;
        static Req other[MAXB];
        for (int round = 0; round < ROUNDS && taken < B; round++) {
            prompts(pool, 4 * B, 1000u + (unsigned)B + 7u * (unsigned)round, kiln_engine_vocab(e));
            if (run(e, pool, 4 * B, L, KILN_SPEC_NONE, 0, 0, &x)) return 1;
            drawn += 4 * B;
            for (int i = 0; i < 4 * B; i++) {
                int lp = loop_period(pool[i].out, pool[i].n_out);
                loops += lp > 0;
                Req *to = lp && taken < B ? &c[taken++] : !lp && others < B ? &other[others++] : NULL;
                if (!to) continue;
                *to = pool[i];
                memcpy(to->prompt + PROMPT, pool[i].out, (size_t)pool[i].n_out * sizeof to->prompt[0]);
                to->n_prompt = PROMPT + pool[i].n_out;
            }
        }
        int looped = taken;
        for (int i = 0; taken < B; i++)
            c[taken++] = other[i];
        printf("copy b%d: %d of %d continuations of %d tokens end in a loop; %d of the %d taken do\n", B,
               loops, drawn, L, looped, B);
        static Req cp[MAXB];
        memcpy(cp, c, sizeof *c * (size_t)B);
        if (run(e, cp, B, N, KILN_SPEC_NONE, 0, 0, &p)) return 1;
        snprintf(name, sizeof name, "copy b%d plain", B);
        print_row(name, &p, &p, 1);
        for (int k = 4; k <= 8; k += 4) {
            memcpy(c, cp, sizeof *c * (size_t)B);
            if (run(e, c, B, N, KILN_SPEC_NGRAM, k, 0, &x)) return 1;
            snprintf(name, sizeof name, "copy b%d ngram%d", B, k);
            print_row(name, &x, &p, same_ids(c, cp, B));
            if (k == 4 && dr.round_ms > 0) print_projection(B, 4, x.verify_ms, dr.round_ms, p.decode_ms);
        }
    }
    if (probe) probe_table(e);
    kiln_engine_close(e);
    return status;
}
