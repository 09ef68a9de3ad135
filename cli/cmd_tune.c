/* cmd_tune.c — `kiln tune PACKAGE [options]`: tune a package's kernels on this machine's device into the
 * tuning store, and `kiln tune --report`: tuned-vs-default speedups from the store (docs/AUTOTUNE.md).
 * The measuring is autotune/at_engine (candidates timed inside the engine's step), the search
 * autotune/at_search, the report autotune/at_report; this file parses options and shows progress.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "at_engine.h"
#include "at_report.h"
#include "cli.h"

static const char tune_usage[] =
    "usage: kiln tune PACKAGE [options]\n"
    "       kiln tune --report [--db FILE] [--kernels PATTERN] [--html OUT.html]\n"
    "\n"
    "Tunes every kernel of PACKAGE on this machine's device (each shape bucket the runtime meets) and\n"
    "writes the winners and their compiled code into the tuning store.\n"
    "\n"
    "options:\n"
    "  --db FILE             the tuning store (default $KILN_TUNE_DB, else $XDG_CACHE_HOME/kiln/tune.db,\n"
    "                        else ~/.cache/kiln/tune.db)\n"
    "  --budget SECONDS      time for the whole run (default 600; 0: no limit)\n"
    "  --kernels PATTERN     only kernels whose name matches this glob (\"matmul*\")\n"
    "  --device D            auto (default: GPU 0, else the host), host, or a GPU number\n"
    "  --weights PATH        run the model on these weights (default: random weights)\n"
    "  --max-step-tokens N   tune steps up to N tokens (default: as kiln run, min(plan, 2048))\n"
    "  --max-candidates N    configs tried per kernel at most (default 256)\n"
    "  --samples N           timed steps per candidate and bucket (default and minimum 20)\n"
    "  --seed S              random weights and tokens (default 1)\n"
    "  --threads N           host threads per kernel launch (default: every CPU)\n"
    "  --compile-threads N   compile candidates ahead on N CPU threads while the device times others\n"
    "                        (default: a GPU min(4, CPUs - 1), the host 0)\n"
    "  -v                    say which kernels are skipped and why each INVALID candidate is\n"
    "  --report              print tuned-vs-default speedups per kernel and bucket from the store\n"
    "  --html OUT.html       (with --report) also write them as an HTML page with a chart\n";

typedef struct TuneArgs {
    const char *package, *db, *kernels, *weights, *html;
    int device, max_step_tokens, max_candidates, samples, threads, compile_threads, verbose, report;
    double budget;
    uint64_t seed;
} TuneArgs;

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "kiln tune: %s%s%s\n(run 'kiln tune --help' for usage)\n", what, arg ? ": " : "",
            arg ? arg : "");
    return 2;
}

/* A whole number in [lo, hi] into *out. Returns 0, or 2 after a usage error. */
static int parse_int(const char *opt, const char *v, long lo, long hi, long *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
        char what[96];
        snprintf(what, sizeof what, "%s wants a whole number in %ld..%ld, got", opt, lo, hi);
        return usage_error(what, v);
    }
    *out = x;
    return 0;
}

static int tune_parse(int argc, char **argv, TuneArgs *a)
{
    memset(a, 0, sizeof *a);
    a->device = -1, a->budget = 600, a->seed = 1, a->compile_threads = -1;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x = 0;
        if (!strcmp(s, "-v")) {
            a->verbose = 1;
        } else if (!strcmp(s, "--report")) {
            a->report = 1;
        } else if (!strcmp(s, "--db") || !strcmp(s, "--kernels") || !strcmp(s, "--weights") ||
                   !strcmp(s, "--html") || !strcmp(s, "--budget") || !strcmp(s, "--device") ||
                   !strcmp(s, "--max-step-tokens") || !strcmp(s, "--max-candidates") ||
                   !strcmp(s, "--samples") || !strcmp(s, "--seed") || !strcmp(s, "--threads") ||
                   !strcmp(s, "--compile-threads")) {
            if (!v) return usage_error("missing value for", s);
            i++;
            if (!strcmp(s, "--db")) a->db = v;
            if (!strcmp(s, "--kernels")) a->kernels = v;
            if (!strcmp(s, "--weights")) a->weights = v;
            if (!strcmp(s, "--html")) a->html = v;
            if (!strcmp(s, "--budget")) {
                char *end;
                a->budget = strtod(v, &end);
                if (!*v || *end || !(a->budget >= 0) || a->budget > 1e7)
                    return usage_error("--budget wants seconds, got", v);
            }
            if (!strcmp(s, "--device")) {
                if (!strcmp(v, "host"))
                    a->device = -2;
                else if (!strcmp(v, "auto"))
                    a->device = -1;
                else if (parse_int(s, v, 0, 1024, &x))
                    return 2;
                else
                    a->device = (int)x;
            }
            if (!strcmp(s, "--max-step-tokens")) {
                if (parse_int(s, v, 1, 1 << 20, &x)) return 2;
                a->max_step_tokens = (int)x;
            }
            if (!strcmp(s, "--max-candidates")) {
                if (parse_int(s, v, 1, 1 << 16, &x)) return 2;
                a->max_candidates = (int)x;
            }
            if (!strcmp(s, "--samples")) {
                if (parse_int(s, v, 1, 100000, &x)) return 2;
                a->samples = (int)x;
            }
            if (!strcmp(s, "--threads")) {
                if (parse_int(s, v, 0, 4096, &x)) return 2;
                a->threads = (int)x;
            }
            if (!strcmp(s, "--compile-threads")) {
                if (parse_int(s, v, 0, 64, &x)) return 2;
                a->compile_threads = (int)x;
            }
            if (!strcmp(s, "--seed")) {
                if (parse_int(s, v, 0, 0x7fffffff, &x)) return 2;
                a->seed = (uint64_t)x;
            }
        } else if (s[0] == '-' && s[1]) {
            return usage_error("unknown option", s);
        } else if (!a->package) {
            a->package = s;
        } else {
            return usage_error("unexpected argument", s);
        }
    }
    if (a->report && a->package)
        return usage_error("--report reads the store; it takes no package", a->package);
    if (a->html && !a->report) return usage_error("--html goes with --report", NULL);
    if (!a->report && !a->package) return usage_error("missing package", NULL);
    return 0;
}

/* ---- progress ---- */

typedef struct Progress {
    int tty;
    int last_done, last_kernel;
    size_t width; /* of the last line drawn (tty) */
} Progress;

static void fmt_eta(char *buf, size_t n, double s)
{
    if (s >= 3600)
        snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60)
        snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, n, "%ds", (int)s);
}

static void on_progress(void *ctx, const AtProgress *p)
{
    Progress *g = ctx;
    char eta[32], best[160] = "";
    fmt_eta(eta, sizeof eta, p->eta_s);
    if (p->best_config) snprintf(best, sizeof best, "best %.2f us (%s)", p->best_us, p->best_config);
    if (g->tty) {
        char line[400];
        int n = snprintf(line, sizeof line, "\r[%d/%d] %.40s %d/%d  %.100s  ETA %s", p->kernel_index + 1,
                         p->n_kernels, p->kernel, p->done, p->n_cands, best[0] ? best : "best -", eta);
        size_t w = n > 0 ? (size_t)n : 0;
        fprintf(stderr, "%s%*s", line, g->width > w ? (int)(g->width - w) : 0, "");
        g->width = w;
        fflush(stderr);
        return;
    }
    /* not a terminal: a plain line per tenth of a kernel's candidates and at its end */
    int step = p->n_cands >= 10 ? p->n_cands / 10 : 1;
    if (p->done != p->n_cands && p->done % step) return;
    fprintf(stderr, "kiln: tune [%d/%d] %s: %d/%d candidates, %s, ETA %s\n", p->kernel_index + 1,
            p->n_kernels, p->kernel, p->done, p->n_cands, best[0] ? best : "no best yet", eta);
}

static void on_log(void *user, const char *line)
{
    if (*(int *)user) fprintf(stderr, "kiln: tune: %s\n", line);
}

/* What the search did, per kernel and bucket. */
static void print_summary(const AtSearchResult *res, const TuneArgs *a)
{
    for (int i = 0; i < res->n_kernels; i++) {
        const AtKernelResult *r = &res->kernels[i];
        const AtKernel *k = r->kernel;
        if (r->status) {
            printf("%s: not tuned: %s\n", k->name, r->msg);
            continue;
        }
        printf("%s: %d candidates (%lld in the space, %d pruned), %d tried, %d invalid, %d skipped, %.1f s\n",
               k->name, r->n_cands, (long long)r->n_space, r->n_pruned, r->tried, r->invalid, r->skipped,
               r->seconds);
        for (int c = 0; a->verbose && c < r->n_cands; c++)
            if (r->cands[c].status != AT_CAND_OK && r->cands[c].status != AT_CAND_SKIPPED)
                printf("  INVALID (%s) %s: %s\n", at_cand_status_name(r->cands[c].status), r->cands[c].config,
                       r->cands[c].msg);
        for (int b = 0; b < k->n_buckets; b++) {
            const AtBucketResult *br = &r->buckets[b];
            if (br->best < 0) {
                printf("  %-8s no valid candidate\n", br->bucket[0] ? br->bucket : "-");
                continue;
            }
            char dflt[48] = "default -";
            if (br->default_us > 0)
                snprintf(dflt, sizeof dflt, "default %.2f us, %.2fx", br->default_us,
                         br->default_us / br->stats[br->best].median_us);
            printf("  %-8s %.2f us (%s)  %s  [%s]\n", br->bucket[0] ? br->bucket : "-",
                   br->stats[br->best].median_us, dflt, r->cands[br->best].config,
                   br->stored ? at_put_outcome_name(br->put) : "not stored");
        }
    }
}

static int tune_report(const TuneArgs *a)
{
    RtTdb *db = cli_db_open(a->db, RT_TDB_READ);
    if (!db) return 1;
    RtTdbFilter f = {.kernel = a->kernels};
    AtReport *r = NULL;
    char err[1024];
    KilnStatus s = at_report_load(db, &f, &r, err, sizeof err);
    rt_tdb_close(db);
    if (s) {
        cli_error("%s", err);
        return 1;
    }
    at_report_text(r, stdout);
    if (a->html && (s = at_report_html(r, a->html, err, sizeof err)))
        cli_error("%s", err);
    else if (a->html)
        printf("wrote %s\n", a->html);
    at_report_free(r);
    return s ? 1 : 0;
}

int cli_tune(int argc, char **argv)
{
    if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "help") || !strcmp(argv[0], "-h"))) {
        fputs(tune_usage, stdout);
        return 0;
    }
    TuneArgs a;
    int rc = tune_parse(argc, argv, &a);
    if (rc) return rc;
    if (a.report) return tune_report(&a);

    char err[1024];
    CgDriverOptions cg = {.threads = 1};
    AtEngineOptions eo = {.package = a.package,
                          .weights = a.weights,
                          .device = a.device,
                          .max_step_tokens = a.max_step_tokens,
                          .host_threads = a.threads,
                          .seed = a.seed,
                          .kernels = a.kernels,
                          .cg = &cg,
                          .compile_threads = a.compile_threads,
                          .log = on_log,
                          .log_user = &a.verbose};
    AtEngine *t = NULL;
    if (at_engine_create(&eo, &t, err, sizeof err)) {
        cli_error("%s", err);
        return 1;
    }
    const AtKernel *ks;
    int n = at_engine_kernels(t, &ks);
    if (!n) {
        cli_error("tune: %s: no kernel to tune%s%s", a.package, a.kernels ? " matches " : "",
                  a.kernels ? a.kernels : "");
        at_engine_destroy(t);
        return 1;
    }
    RtTdb *db = cli_db_open(a.db, RT_TDB_WRITE);
    char fp[RT_TDB_FP_LEN];
    if (db && at_store_device(db, at_engine_device(t), fp, err, sizeof err)) {
        cli_error("%s", err);
        rt_tdb_close(db);
        db = NULL;
    }
    if (!db) {
        at_engine_destroy(t);
        return 1;
    }
    const RtTdbDevice *dev = at_engine_device(t);
    char budget[32] = "none";
    if (a.budget > 0) snprintf(budget, sizeof budget, "%g s", a.budget);
    fprintf(stderr, "kiln: tune: %d kernel%s on %s (%s, device %s), store %s, budget %s\n", n,
            n == 1 ? "" : "s", dev->name, at_engine_target(t), fp, rt_tdb_path(db), budget);
    Progress g = {.tty = isatty(fileno(stderr))};
    AtTimer timer = at_engine_timer(t);
    AtSearchOptions so = {.limits = at_engine_limits(t),
                          .max_candidates = a.max_candidates,
                          .samples = a.samples,
                          .budget_s = a.budget,
                          .tie_rel = 0.01,
                          .store = db,
                          .device = fp,
                          .progress = on_progress,
                          .progress_ctx = &g};
    AtSearchResult res;
    KilnStatus s = at_search(ks, n, &timer, &so, &res, err, sizeof err);
    if (g.tty) fputc('\n', stderr);
    print_summary(&res, &a);
    if (res.budget_exhausted) printf("the budget ran out: untried candidates were skipped (--budget)\n");
    if (s) cli_error("tune: %s", err);
    at_search_result_free(&res);
    rt_tdb_close(db);
    at_engine_destroy(t);
    return s ? 1 : 0;
}
