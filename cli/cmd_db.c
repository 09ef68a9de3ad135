/* cmd_db.c — `kiln db SUBCOMMAND [--db FILE] [options]`: look after the tuning store (docs/AUTOTUNE.md).
 * Reads go through the runtime's reader (rt_tdb_*, never modifying the file), writes through
 * autotune/at_store. The store's path is read once, here: --db, else
 * $KILN_TUNE_DB, else $XDG_CACHE_HOME/kiln/tune.db, else ~/.cache/kiln/tune.db.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "at_store.h"
#include "cli.h"
#include "cli_num.h"
#include "rt_exec.h"
#include "rt_file.h"

static const char db_usage[] =
    "usage: kiln db <command> [--db FILE] [options]\n"
    "\n"
    "commands:\n"
    "  list                 devices and tuned results (filters below)\n"
    "  show ID              one result in full\n"
    "  pin ID... | FILTERS  keep these results: a new tuning run or an import never replaces them\n"
    "  unpin ID... | FILTERS\n"
    "  export OUT.db        write the selected results to a new file (filters below)\n"
    "  import IN.db...      merge stores from other machines: pinned rows stay, else the faster wins\n"
    "                       (every file is checked first: a refused one changes nothing)\n"
    "  prune CRITERIA       delete results: --older-than DAYS, --kiln-version V, --device FP, ...\n"
    "  upgrade              bring an older store to this build's schema\n"
    "  device [host|N]      this machine's device as the store names it (default: GPU 0, else the host)\n"
    "\n"
    "options:\n"
    "  --db FILE            the store (default $KILN_TUNE_DB, else $XDG_CACHE_HOME/kiln/tune.db,\n"
    "                       else ~/.cache/kiln/tune.db; KILN_TUNE_DB set but empty is an error)\n"
    "  --kernels PATTERN    kernel names matching a glob (\"matmul*\")\n"
    "  --device FP          device fingerprint (a prefix is enough)\n"
    "  --bucket B           shape bucket, e.g. T=128 or B=32,ctx=4096\n"
    "  --ir-hash H          kernel IR hash (a prefix is enough)\n"
    "  --pinned, --unpinned only pinned / unpinned results\n"
    "  --older-than DAYS    (prune) tuned more than DAYS days ago (0..100000, fractions allowed)\n"
    "  --kiln-version V     (prune) written by kiln V\n"
    "  --include-pinned     (prune) pinned results too (kept otherwise)\n";

typedef struct DbArgs {
    const char *cmd;
    const char *db; /* --db */
    const char *args[64];
    int n_args;
    RtTdbFilter f;
    double older_than_days; /* < 0: not given */
    int include_pinned;
    char before[32];
} DbArgs;

const char *cli_tune_db_path(const char *given, char *buf, size_t n, int *is_default)
{
    if (is_default) *is_default = 0;
    if (given) return *given ? given : NULL;
    const char *env = getenv("KILN_TUNE_DB"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (env) return *env ? env : NULL; /* set but empty: no store (cli_tune_db_env_empty says why) */
    if (is_default) *is_default = 1;
    if (xdg && *xdg)
        snprintf(buf, n, "%s/kiln/tune.db", xdg);
    else if (home && *home)
        snprintf(buf, n, "%s/.cache/kiln/tune.db", home);
    else
        return NULL;
    return buf;
}

int cli_tune_db_env_empty(const char *given)
{
    const char *env = getenv("KILN_TUNE_DB");
    if (given || !env || *env) return 0;
    cli_error("KILN_TUNE_DB is set but empty: name a store, give --db FILE, or unset it for the default");
    return 1;
}

/* Creates the default store's directory (and its parents) with mode 0700. */
static int make_parent(const char *path)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = 0;
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(dir, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

static int db_usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "kiln db: %s%s%s\n(run 'kiln db help' for usage)\n", what, arg ? ": " : "",
            arg ? arg : "");
    return 2;
}

static int db_parse(int argc, char **argv, DbArgs *a)
{
    CliSeen seen = {0};
    memset(a, 0, sizeof *a);
    a->older_than_days = -1;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(s, "--pinned") || !strcmp(s, "--unpinned")) {
            int want = !strcmp(s, "--pinned") ? 1 : -1;
            if (a->f.pinned == -want) {
                fprintf(stderr, "kiln db: --pinned and --unpinned exclude each other\n");
                return 2;
            }
            a->f.pinned = want;
        } else if (!strcmp(s, "--include-pinned")) {
            a->include_pinned = 1;
        } else if (!strcmp(s, "--db") || !strcmp(s, "--kernels") || !strcmp(s, "--device") ||
                   !strcmp(s, "--bucket") || !strcmp(s, "--ir-hash") || !strcmp(s, "--older-than") ||
                   !strcmp(s, "--kiln-version")) {
            if (!next) return db_usage_error("missing value for", s);
            if (!*next && strcmp(s, "--older-than")) return cli_empty_error("db", s);
            if (cli_seen(&seen, "db", s)) return 2;
            i++;
            if (!strcmp(s, "--db"))
                a->db = next;
            else if (!strcmp(s, "--kernels"))
                a->f.kernel = next;
            else if (!strcmp(s, "--device"))
                a->f.device = next;
            else if (!strcmp(s, "--bucket"))
                a->f.bucket = next;
            else if (!strcmp(s, "--ir-hash"))
                a->f.ir_hash = next;
            else if (!strcmp(s, "--kiln-version"))
                a->f.kiln_version = next;
            else if (cli_num_real("db", s, next, 0, 100000, 0, &a->older_than_days))
                return 2;
        } else if (s[0] == '-' && s[1]) {
            return db_usage_error("unknown option", s);
        } else if (!a->cmd) {
            a->cmd = s;
        } else if (a->n_args < (int)(sizeof a->args / sizeof a->args[0])) {
            a->args[a->n_args++] = s;
        } else {
            return db_usage_error("too many arguments", s);
        }
    }
    if (!a->cmd) return db_usage_error("missing command", NULL);
    if (a->older_than_days >= 0) {
        time_t t = time(NULL) - (time_t)(a->older_than_days * 86400);
        struct tm tm;
        if (gmtime_r(&t, &tm)) strftime(a->before, sizeof a->before, "%Y-%m-%dT%H:%M:%SZ", &tm);
        a->f.before = a->before;
    }
    return 0;
}

RtTdb *cli_db_open(const char *given, RtTdbMode mode)
{
    char buf[1024], err[1024];
    int dflt = 0;
    if (cli_tune_db_env_empty(given)) return NULL;
    const char *path = cli_tune_db_path(given, buf, sizeof buf, &dflt);
    if (!path) {
        cli_error("no tuning DB path: give --db FILE, or set KILN_TUNE_DB or HOME");
        return NULL;
    }
    if (mode != RT_TDB_READ && dflt && make_parent(path) != 0) {
        cli_error("%s: cannot create its directory: %s", path, strerror(errno));
        return NULL;
    }
    RtTdb *db = NULL;
    KilnStatus s = rt_tdb_open(path, mode, &db, err, sizeof err);
    if (s) {
        struct stat st;
        if (mode == RT_TDB_READ && stat(path, &st) != 0)
            cli_error("%s (nothing tuned yet: kiln tune writes it)", err);
        else
            cli_error("%s", err);
        return NULL;
    }
    return db;
}

static RtTdb *db_open(const DbArgs *a, RtTdbMode mode)
{
    return cli_db_open(a->db, mode);
}

static void fmt_bytes(char *buf, size_t n, double v)
{
    if (v >= 1e9)
        snprintf(buf, n, "%.2f GB", v / 1e9);
    else
        snprintf(buf, n, "%.0f MB", v / 1e6);
}

static int print_device(void *ctx, const char *fp, const RtTdbDevice *d, int64_t results)
{
    char mem[32];
    fmt_bytes(mem, sizeof mem, (double)d->mem_bytes);
    rt_file_line(stdout, "device  %s  %s, %s, %d SMs, %s, driver %s, CUDA %s: %lld result%s", fp, d->name,
                 d->arch, d->sm_count, mem, d->driver, d->cuda, (long long)results, results == 1 ? "" : "s");
    (*(int *)ctx)++;
    return 0;
}

static void speedup_text(const RtTdbRow *r, char *buf, size_t n)
{
    if (r->default_us > 0)
        snprintf(buf, n, "%.2fx", r->default_us / r->median_us);
    else
        snprintf(buf, n, "-");
}

static int print_row(void *ctx, const RtTdbRow *r)
{
    int *count = ctx;
    if (!count[0]++)
        printf("\n%-6s %-8s %-36s %-14s %10s %8s %3s %-10s  %s\n", "id", "device", "kernel", "bucket",
               "median", "speedup", "pin", "tuned", "config");
    char sp[32], med[32];
    speedup_text(r, sp, sizeof sp);
    snprintf(med, sizeof med, "%.2f us", r->median_us);
    rt_file_line(stdout, "%-6lld %-8.8s %-36s %-14s %10s %8s %3s %-10.10s  %s%s", (long long)r->id, r->device,
                 r->kernel, r->bucket[0] ? r->bucket : "-", med, sp, r->pinned ? "*" : "", r->tuned_at,
                 r->config, r->damaged ? "  (damaged row)" : "");
    return 0;
}

static int db_list(const DbArgs *a)
{
    RtTdb *db = db_open(a, RT_TDB_READ);
    if (!db) return 1;
    char err[1024];
    int devices = 0, rows[1] = {0};
    rt_file_line(stdout, "tuning DB %s (schema %d)", rt_tdb_path(db), RT_TDB_SCHEMA_VERSION);
    KilnStatus s = rt_tdb_devices(db, print_device, &devices, err, sizeof err);
    if (!s) s = rt_tdb_rows(db, &a->f, print_row, rows, err, sizeof err);
    rt_tdb_close(db);
    if (s) {
        cli_error("%s", err);
        return 1;
    }
    if (!devices) printf("no devices yet\n");
    printf("%s%d result%s\n", rows[0] ? "" : "\n", rows[0], rows[0] == 1 ? "" : "s");
    return 0;
}

static int parse_id(const char *s, int64_t *id)
{
    return cli_num_int("db", "ID", s, 1, INT64_MAX, id);
}

static int show_row(void *ctx, const RtTdbRow *r)
{
    char sp[32];
    speedup_text(r, sp, sizeof sp);
    /* every text field is the store's: printed through rt_file_line (control characters as '?') */
    FILE *o = stdout;
    rt_file_line(o, "id          %lld", (long long)r->id);
    rt_file_line(o, "device      %s", r->device);
    rt_file_line(o, "kernel      %s", r->kernel);
    rt_file_line(o, "ir_hash     %s", r->ir_hash);
    rt_file_line(o, "bucket      %s", r->bucket[0] ? r->bucket : "(none)");
    rt_file_line(o, "config      %s", r->config);
    rt_file_line(o, "median      %.3f us (p20 %.3f, p80 %.3f, %d samples)", r->median_us, r->p20_us,
                 r->p80_us, r->samples);
    if (r->default_us > 0)
        rt_file_line(o, "default     %.3f us (speedup %s)", r->default_us, sp);
    else
        rt_file_line(o, "default     unknown");
    rt_file_line(o, "candidates  %d tried, %d invalid", r->candidates, r->invalid);
    rt_file_line(o, "tuned       %s by kiln %s", r->tuned_at, r->kiln_version);
    rt_file_line(o, "pinned      %s", r->pinned ? "yes" : "no");
    if (r->damaged) printf("damaged     yes (a field was not what the schema says)\n");
    (*(int *)ctx)++;
    return 0;
}

static int db_show(const DbArgs *a)
{
    if (a->n_args != 1) return db_usage_error("show wants one result id", NULL);
    RtTdbFilter f = {0};
    if (parse_id(a->args[0], &f.id)) return 2;
    RtTdb *db = db_open(a, RT_TDB_READ);
    if (!db) return 1;
    char err[1024];
    int n = 0;
    KilnStatus s = rt_tdb_rows(db, &f, show_row, &n, err, sizeof err);
    rt_tdb_close(db);
    if (s) {
        cli_error("%s", err);
        return 1;
    }
    if (!n) {
        cli_error("no result with id %s", a->args[0]);
        return 1;
    }
    return 0;
}

static int has_filter(const RtTdbFilter *f)
{
    return f->device || f->kernel || f->ir_hash || f->bucket || f->kiln_version || f->before || f->pinned;
}

static int db_pin(const DbArgs *a, int pin)
{
    if (!a->n_args && !has_filter(&a->f))
        return db_usage_error(pin ? "pin wants result ids or filters (--kernels, --device, --bucket)"
                                  : "unpin wants result ids or filters (--kernels, --device, --bucket)",
                              NULL);
    if (a->n_args && has_filter(&a->f)) return db_usage_error("give result ids or filters, not both", NULL);
    int64_t ids[64];
    for (int i = 0; i < a->n_args; i++)
        if (parse_id(a->args[i], &ids[i])) return 2;
    RtTdb *db = db_open(a, RT_TDB_WRITE);
    if (!db) return 1;
    char err[1024];
    int64_t total = 0, changed = 0;
    KilnStatus s = KILN_OK;
    if (a->n_args) {
        for (int i = 0; i < a->n_args && !s; i++) {
            RtTdbFilter f = {.id = ids[i]};
            s = at_store_pin(db, &f, pin, &changed, err, sizeof err);
            total += changed;
        }
    } else {
        s = at_store_pin(db, &a->f, pin, &total, err, sizeof err);
    }
    rt_tdb_close(db);
    if (s) {
        cli_error("%s", err);
        return 1;
    }
    printf("%s %lld result%s\n", pin ? "pinned" : "unpinned", (long long)total, total == 1 ? "" : "s");
    return 0;
}

static int db_export(const DbArgs *a)
{
    if (a->n_args != 1) return db_usage_error("export wants one output file", NULL);
    RtTdb *db = db_open(a, RT_TDB_READ);
    if (!db) return 1;
    char err[1024];
    int64_t rows = 0;
    KilnStatus s = at_store_export(db, &a->f, a->args[0], &rows, err, sizeof err);
    rt_tdb_close(db);
    if (s) {
        cli_error("%s", err);
        return 1;
    }
    printf("exported %lld result%s to %s\n", (long long)rows, rows == 1 ? "" : "s", a->args[0]);
    return 0;
}

/* Removes a store this command created, with SQLite's side files. */
static void remove_store(const char *path)
{
    static const char *const side[] = {"", "-wal", "-shm", "-journal"};
    char f[1100];
    for (int i = 0; i < 4; i++) {
        snprintf(f, sizeof f, "%s%s", path, side[i]);
        unlink(f);
    }
}

static int db_import(const DbArgs *a)
{
    if (!a->n_args) return db_usage_error("import wants one or more store files", NULL);
    if (has_filter(&a->f)) return db_usage_error("import takes no filters", NULL);
    char buf[1024], err[1024];
    const char *path = cli_tune_db_path(a->db, buf, sizeof buf, NULL);
    /* Every input is checked (not the store itself, opens as a store) before the store is opened, so a
     * refused input changes nothing and creates no store; a store this command created is removed again
     * if an import into it fails. */
    for (int i = 0; i < a->n_args; i++) {
        RtTdb *in = NULL;
        if (rt_file_out_distinct(path, a->args[i], "store to import", err, sizeof err) ||
            rt_tdb_open(a->args[i], RT_TDB_READ, &in, err, sizeof err)) {
            cli_error("%s", err);
            return 1;
        }
        rt_tdb_close(in);
    }
    struct stat st_db;
    int created = path && lstat(path, &st_db) != 0 && errno == ENOENT;
    RtTdb *db = db_open(a, RT_TDB_WRITE);
    if (!db) return 1;
    int rc = 0;
    for (int i = 0; i < a->n_args; i++) {
        AtMergeStats st;
        if (at_store_import(db, a->args[i], &st, err, sizeof err)) {
            cli_error("%s", err);
            rc = 1;
            continue;
        }
        printf("%s: %lld inserted, %lld replaced, %lld kept (pinned), %lld kept (not beaten)", a->args[i],
               (long long)st.inserted, (long long)st.replaced, (long long)st.kept_pinned,
               (long long)st.kept_better);
        printf(", %lld binar%s", (long long)st.binaries, st.binaries == 1 ? "y" : "ies");
        if (st.bad_device || st.bad_row)
            printf(", %lld skipped (device fields do not match its fingerprint), %lld skipped (damaged)",
                   (long long)st.bad_device, (long long)st.bad_row);
        if (st.bad_text)
            printf(", %lld skipped (a text field holds a control character)", (long long)st.bad_text);
        if (st.bad_binary) printf(", %lld damaged binaries left behind", (long long)st.bad_binary);
        putchar('\n');
    }
    rt_tdb_close(db);
    if (rc && created) remove_store(path);
    return rc;
}

static int db_prune(const DbArgs *a)
{
    if (a->n_args) return db_usage_error("unexpected argument", a->args[0]);
    RtTdbFilter f = a->f;
    if (!a->include_pinned && f.pinned == 0) f.pinned = -1;
    if (!f.before && !f.kiln_version && !f.device && !f.kernel && !f.ir_hash && !f.bucket)
        return db_usage_error("prune wants a criterion: --older-than DAYS, --kiln-version V, --device FP, "
                              "--kernels PATTERN, --bucket B or --ir-hash H",
                              NULL);
    RtTdb *db = db_open(a, RT_TDB_WRITE);
    if (!db) return 1;
    char err[1024];
    int64_t removed = 0;
    KilnStatus s = at_store_prune(db, &f, &removed, err, sizeof err);
    rt_tdb_close(db);
    if (s) {
        cli_error("%s", err);
        return 1;
    }
    printf("pruned %lld result%s%s\n", (long long)removed, removed == 1 ? "" : "s",
           a->include_pinned ? "" : " (pinned results kept)");
    return 0;
}

static int db_upgrade(const DbArgs *a)
{
    if (a->n_args) return db_usage_error("unexpected argument", a->args[0]);
    RtTdb *db = db_open(a, RT_TDB_WRITE);
    if (!db) return 1;
    printf("%s: schema %d\n", rt_tdb_path(db), RT_TDB_SCHEMA_VERSION);
    rt_tdb_close(db);
    return 0;
}

/* The device the runtime would run on here, as the store names it (what `kiln run --db` looks up). */
static int db_device(const DbArgs *a)
{
    if (a->n_args > 1) return db_usage_error("unexpected argument", a->args[1]);
    const char *which = a->n_args ? a->args[0] : "auto";
    int64_t n = 0;
    int device = !strcmp(which, "host") ? -2 : !strcmp(which, "auto") ? -1 : 0;
    if (!device && !cli_num_int_ok(which, 0, CLI_MAX_DEVICE, &n))
        return cli_num_error("db", "device", "host, auto or a GPU number in 0..1023", which);
    if (!device) device = (int)n;
    RtExec *x = NULL;
    char err[512], fp[RT_TDB_FP_LEN];
    if (rt_exec_open(device, 1, &x, err, sizeof err)) {
        cli_error("%s", err);
        return 1;
    }
    RtTdbDevice d;
    rt_exec_tune_device(x, &d);
    rt_exec_close(x);
    rt_tdb_fingerprint(&d, fp);
    char mem[32];
    fmt_bytes(mem, sizeof mem, (double)d.mem_bytes);
    printf("device  %s  %s, %s, %d %s, %s, driver %s, CUDA %s\n", fp, d.name, d.arch, d.sm_count,
           strcmp(d.arch, "host") ? "SMs" : "CPUs", mem, d.driver, d.cuda);
    return 0;
}

int cli_db(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "help") || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        fputs(db_usage, argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    DbArgs a;
    int rc = db_parse(argc, argv, &a);
    if (rc) return rc;
    if (!strcmp(a.cmd, "list")) {
        if (a.n_args) return db_usage_error("unexpected argument", a.args[0]);
        return db_list(&a);
    }
    if (!strcmp(a.cmd, "show")) return db_show(&a);
    if (!strcmp(a.cmd, "pin")) return db_pin(&a, 1);
    if (!strcmp(a.cmd, "unpin")) return db_pin(&a, 0);
    if (!strcmp(a.cmd, "export")) return db_export(&a);
    if (!strcmp(a.cmd, "import")) return db_import(&a);
    if (!strcmp(a.cmd, "prune")) return db_prune(&a);
    if (!strcmp(a.cmd, "upgrade")) return db_upgrade(&a);
    if (!strcmp(a.cmd, "device")) return db_device(&a);
    return db_usage_error("unknown command", a.cmd);
}
