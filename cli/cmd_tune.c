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
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "at_engine.h"
#include "at_report.h"
#include "rt_file.h"
#include "cli.h"
#include "cli_num.h"

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
    "  --budget SECONDS      time for the whole run, 0..1e7 (default 600; 0: no limit)\n"
    "  --kernels PATTERN     only kernels whose name matches this glob (\"matmul*\")\n"
    "  --device D            auto (default: GPU 0, else the host), host, or a GPU number 0..1023\n"
    "  --weights PATH        run the model on these weights (default: random weights)\n"
    "  --max-step-tokens N   tune steps up to N tokens, 1..1048576 (default: as kiln run, min(plan, 2048))\n"
    "  --max-candidates N    configs tried per kernel at most, 1..65536 (default 256)\n"
    "  --samples N           timed steps per candidate and bucket, 1..100000 (default and minimum 20)\n"
    "  --seed S              random weights and tokens, 0..2^64-1 (default 1)\n"
    "  --threads N           host threads per kernel launch, 1..1024 (default: every CPU)\n"
    "  --compile-threads N   compile candidates ahead on N CPU threads while the device times others,\n"
    "                        0..64 (default: a GPU min(4, CPUs - 1), the host 0)\n"
    "  --no-isolate          tune in this process (default: in a child process; a candidate that kills\n"
    "                        it is INVALID and a new child goes on from its kernel)\n"
    "  -v                    say which kernels are skipped and why each INVALID candidate is\n"
    "  --report              print tuned-vs-default speedups per kernel and bucket from the store\n"
    "  --html OUT.html       (with --report) also write them as an HTML page with a chart\n";

enum { MAX_DENIED = 32 };

typedef struct TuneArgs {
    const char *package, *db, *kernels, *weights, *html;
    int device, max_step_tokens, max_candidates, samples, threads, compile_threads, verbose, report;
    int no_isolate;
    double budget;
    uint64_t seed;
    /* isolation (tune_supervise): the kernel to start from and the candidates that killed a child */
    int resume;
    int n_denied;
    char denied[MAX_DENIED][RT_TDB_MAX_CONFIG + 160]; /* "kernel\tconfig" */
} TuneArgs;

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "kiln tune: %s%s%s\n(run 'kiln tune --help' for usage)\n", what, arg ? ": " : "",
            arg ? arg : "");
    return 2;
}

/* A whole number in [lo, hi] into *out. Returns 0, or 2 after the one-line usage error (cli_num.h). */
static int parse_int(const char *opt, const char *v, long lo, long hi, long *out)
{
    int64_t x;
    if (cli_num_int("tune", opt, v, lo, hi, &x)) return 2;
    *out = (long)x;
    return 0;
}

static int tune_parse(int argc, char **argv, TuneArgs *a)
{
    CliSeen seen = {0};
    memset(a, 0, sizeof *a);
    a->device = -1, a->budget = 600, a->seed = 1, a->compile_threads = -1;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x = 0;
        int64_t dev = 0;
        if (!strcmp(s, "-v")) {
            a->verbose = 1;
        } else if (!strcmp(s, "--report")) {
            a->report = 1;
        } else if (!strcmp(s, "--no-isolate")) {
            a->no_isolate = 1;
        } else if (!strcmp(s, "--db") || !strcmp(s, "--kernels") || !strcmp(s, "--weights") ||
                   !strcmp(s, "--html") || !strcmp(s, "--budget") || !strcmp(s, "--device") ||
                   !strcmp(s, "--max-step-tokens") || !strcmp(s, "--max-candidates") ||
                   !strcmp(s, "--samples") || !strcmp(s, "--seed") || !strcmp(s, "--threads") ||
                   !strcmp(s, "--compile-threads")) {
            if (!v) return usage_error("missing value for", s);
            int text = !strcmp(s, "--db") || !strcmp(s, "--kernels") || !strcmp(s, "--weights") ||
                       !strcmp(s, "--html");
            if (text && !*v) return cli_empty_error("tune", s);
            if (cli_seen(&seen, "tune", s)) return 2;
            i++;
            if (!strcmp(s, "--db")) a->db = v;
            if (!strcmp(s, "--kernels")) a->kernels = v;
            if (!strcmp(s, "--weights")) a->weights = v;
            if (!strcmp(s, "--html")) a->html = v;
            if (!strcmp(s, "--budget") && cli_num_real("tune", s, v, 0, 1e7, 0, &a->budget)) return 2;
            if (!strcmp(s, "--device")) {
                if (!strcmp(v, "host"))
                    a->device = -2;
                else if (!strcmp(v, "auto"))
                    a->device = -1;
                else if (!cli_num_int_ok(v, 0, CLI_MAX_DEVICE, &dev))
                    return cli_num_error("tune", s, "auto, host or a GPU number in 0..1023", v);
                else
                    a->device = (int)dev;
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
                if (parse_int(s, v, 1, CLI_MAX_THREADS, &x)) return 2;
                a->threads = (int)x;
            }
            if (!strcmp(s, "--compile-threads")) {
                if (parse_int(s, v, 0, 64, &x)) return 2;
                a->compile_threads = (int)x;
            }
            if (!strcmp(s, "--seed") && cli_num_u64("tune", s, v, &a->seed)) return 2;
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

static int tune_run(const TuneArgs *a, int journal_fd);
static int tune_supervise(TuneArgs *a);

/* kiln never writes over a file it reads: the store is not the package or the weights, and the report
 * is not the store. Returns 0, or 1 after the one-line error, before anything is opened. */
static int tune_check_files(const TuneArgs *a)
{
    char buf[1024], err[1024];
    if (cli_tune_db_env_empty(a->db)) return 1;
    const char *db = cli_tune_db_path(a->db, buf, sizeof buf, NULL);
    KilnStatus s = KILN_OK;
    if (a->report && a->html) s = rt_file_out_distinct(a->html, db, "tuning store", err, sizeof err);
    if (!a->report) s = rt_file_out_distinct(db, a->package, "package", err, sizeof err);
    if (!a->report && !s && a->weights)
        s = rt_file_out_distinct(db, a->weights, "weights file", err, sizeof err);
    if (s) cli_error("%s", err);
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
    if (tune_check_files(&a)) return 1;
    if (a.report) return tune_report(&a);
    return a.no_isolate ? tune_run(&a, -1) : tune_supervise(&a);
}

/* ---- isolation ---- */

/* The engine's timer with a journal: before each kernel and each candidate a line goes to fd ("K index",
 * "C kernel\tconfig"), so the parent knows what a child was doing when it died; candidates that killed an
 * earlier child are INVALID without running. */
typedef struct Journal {
    AtTimer inner;
    const TuneArgs *a;
    const AtKernel *base; /* the engine's kernel list: indexes in "K" lines are into it */
    int fd;
} Journal;

static void journal_write(int fd, const char *line)
{
    size_t n = strlen(line), off = 0;
    while (fd >= 0 && off < n) {
        ssize_t w = write(fd, line + off, n - off);
        if (w <= 0) return;
        off += (size_t)w;
    }
}

static void j_start(void *ctx, const AtKernel *k, const AtCand *cands, int n)
{
    Journal *j = ctx;
    char line[32];
    snprintf(line, sizeof line, "K %d\n", (int)(k - j->base));
    journal_write(j->fd, line);
    if (j->inner.start) j->inner.start(j->inner.ctx, k, cands, n);
}

static AtCandStatus j_prepare(void *ctx, const AtKernel *k, const KirConfig *cfg, char *msg, int msglen)
{
    Journal *j = ctx;
    IrBuf key = {0};
    kir_config_print(cfg, &key);
    char line[RT_TDB_MAX_CONFIG + 200];
    snprintf(line, sizeof line, "%s\t%s", k->name, key.s ? key.s : "");
    ir_buf_free(&key);
    for (int i = 0; i < j->a->n_denied; i++)
        if (!strcmp(j->a->denied[i], line)) {
            snprintf(msg, (size_t)msglen, "killed an earlier tuner process (not run again)");
            return AT_CAND_LAUNCH;
        }
    char rec[sizeof line + 4];
    snprintf(rec, sizeof rec, "C %s\n", line);
    journal_write(j->fd, rec);
    const char *kill_at = getenv("KILN_TUNE_KILL"); /* fault injection for tests/cli/tune.sh */
    if (kill_at && !strcmp(kill_at, line + strlen(k->name) + 1)) raise(SIGKILL);
    return j->inner.prepare(j->inner.ctx, k, cfg, msg, msglen);
}

#define J_FWD(name, ret, params, args)                                                                       \
    static ret j_##name params                                                                               \
    {                                                                                                        \
        Journal *j = ctx;                                                                                    \
        return j->inner.name args;                                                                           \
    }
J_FWD(time, AtCandStatus,
      (void *ctx, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b, double *us, int n, char *msg,
       int msglen),
      (j->inner.ctx, k, cfg, b, us, n, msg, msglen))
J_FWD(recover, int, (void *ctx), (j->inner.ctx))
J_FWD(serves, int, (void *ctx, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b),
      (j->inner.ctx, k, cfg, b))
J_FWD(keep, KilnStatus,
      (void *ctx, const AtKernel *k, const KirConfig *cfg, RtTdb *store, const char *device, char *err,
       int errlen),
      (j->inner.ctx, k, cfg, store, device, err, errlen))

/* Runs the tuning in a child process (fork before any device or compiler is touched: the parent only
 * parsed options). When a child dies of a signal, or exits 3 (a GPU fault it could not recover from),
 * the candidate it was preparing or timing (its journal's last "C" line after the last "K") becomes
 * INVALID and a new child goes on from that kernel with what is left of the budget; kernels before it
 * are in the store already (each kernel's winners are stored before the next starts). At most
 * MAX_DENIED restarts; a child that dies outside a candidate ends the run. */
static int tune_supervise(TuneArgs *a)
{
    double t0 = rt_now_s(), budget = a->budget;
    for (;;) {
        int p[2];
        if (pipe(p) != 0) return tune_run(a, -1);
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            close(p[0]), close(p[1]);
            return tune_run(a, -1);
        }
        if (pid == 0) {
            close(p[0]);
            int rc = tune_run(a, p[1]);
            fflush(NULL);
            _exit(rc);
        }
        close(p[1]);
        char buf[4096], last_c[sizeof a->denied[0]] = "", carry[sizeof a->denied[0] + 2] = "";
        int kernel = a->resume;
        ssize_t got;
        size_t have = 0;
        while ((got = read(p[0], buf, sizeof buf)) > 0) /* the journal, line by line */
            for (ssize_t i = 0; i < got; i++) {
                if (buf[i] != '\n') {
                    if (have + 1 < sizeof carry) carry[have++] = buf[i];
                    continue;
                }
                carry[have] = 0, have = 0;
                if (carry[0] == 'K') kernel = atoi(carry + 2), last_c[0] = 0;
                if (carry[0] == 'C') snprintf(last_c, sizeof last_c, "%s", carry + 2);
            }
        close(p[0]);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0)
            ;
        int died = WIFSIGNALED(st), rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
        if (!died && rc != 3) return rc;
        char why[48];
        if (died)
            snprintf(why, sizeof why, "signal %d", WTERMSIG(st));
        else
            snprintf(why, sizeof why, "an unrecoverable GPU fault");
        if (!last_c[0] || a->n_denied == MAX_DENIED) {
            cli_error("tune: the tuner process died (%s) %s", why,
                      last_c[0] ? "too many times" : "outside any candidate");
            return 1;
        }
        char *tab = strchr(last_c, '\t');
        fprintf(stderr, "kiln: tune: %.*s %s killed the tuner process (%s): INVALID; a new process goes on\n",
                tab ? (int)(tab - last_c) : 0, last_c, tab ? tab + 1 : "", why);
        snprintf(a->denied[a->n_denied++], sizeof a->denied[0], "%s", last_c);
        a->resume = kernel;
        if (budget > 0) {
            a->budget = budget - (rt_now_s() - t0);
            if (a->budget < 1) a->budget = 1; /* what is left: at least the default per kernel */
        }
    }
}

/* The tuning itself, in this process; journal_fd >= 0 in a child of tune_supervise. Exit status: 0, 1, or
 * 3 when a GPU fault could not be recovered from (the parent restarts). */
static int tune_run(const TuneArgs *a_in, int journal_fd)
{
    TuneArgs a = *a_in;
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
    if (a.resume > 0 && a.resume < n) { /* a restarted child: the earlier kernels are stored */
        ks += a.resume;
        n -= a.resume;
    }
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
    if (a.budget > 0) snprintf(budget, sizeof budget, "%.0f s", a.budget);
    fprintf(stderr, "kiln: tune: %d kernel%s on %s (%s, device %s), store %s, budget %s\n", n,
            n == 1 ? "" : "s", dev->name, at_engine_target(t), fp, rt_tdb_path(db), budget);
    Progress g = {.tty = isatty(fileno(stderr))};
    Journal jr = {.inner = at_engine_timer(t), .a = &a, .base = ks - a.resume, .fd = journal_fd};
    AtTimer timer = {.ctx = &jr,
                     .start = j_start,
                     .prepare = j_prepare,
                     .time = j_time,
                     .recover = j_recover,
                     .serves = j_serves,
                     .keep = j_keep};
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
    return s == KILN_ERR_DEVICE && journal_fd >= 0 ? 3 : s ? 1 : 0;
}
