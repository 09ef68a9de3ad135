/* rt_tunedb.c — the tuning store's schema, migrations, opening and validation, fingerprints, buckets and
 * lookups (rt_tunedb.h). The write side is autotune/at_store.c.
 *
 * The schema exists only as the ordered list of migration steps (rt_tdb_steps): a new store is an empty
 * file that runs every step, an older store runs the steps it lacks, both inside one BEGIN IMMEDIATE
 * transaction that also re-reads the version (so two processes upgrading at once upgrade once). The
 * reader's reference schema is the same steps run in a private in-memory database: one source of truth.
 *
 * Invariant: a file that is not a kiln tuning DB of a version this build can write is never modified.
 * Opening checks everything through SQLite before the first write: the application_id, the version, a
 * quick_check and every table and column. A new file's first transaction runs in rollback-journal
 * mode and WAL is switched on after it commits, so the header in the main file (which tools such as
 * file(1) read) always carries the application_id.
 * READ opens with SQLITE_OPEN_READONLY and query_only (not immutable=1, as packages do: tuners may be
 * committing to the -wal while the runtime reads, and immutable would miss those rows).
 */
#define _POSIX_C_SOURCE 200809L
#include "rt_tunedb.h"
#include "rt_package.h" /* rt_pkg_fnv1a64, rt_pkg_uri, rt_pkg_errf, RT_PKG_APPLICATION_ID */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#define RT_STR_(x) #x
#define RT_STR(x)  RT_STR_(x)
#define RT_VERSION_STRING                                                                                    \
    RT_STR(KILN_VERSION_MAJOR) "." RT_STR(KILN_VERSION_MINOR) "." RT_STR(KILN_VERSION_PATCH)

enum { RT_TDB_BUSY_MS = 30000 };

/* The schema, as its steps. A new step is appended for every change (never edit a shipped one):
 * docs/AUTOTUNE.md. */
const RtTdbStep rt_tdb_steps[RT_TDB_SCHEMA_VERSION] = {
    {1, "v1: meta, devices, results",
     "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
     "CREATE TABLE devices(fingerprint TEXT PRIMARY KEY, name TEXT NOT NULL, arch TEXT NOT NULL,\n"
     "                     sm_count INTEGER NOT NULL CHECK (sm_count >= 0),\n"
     "                     mem_bytes INTEGER NOT NULL CHECK (mem_bytes >= 0),\n"
     "                     driver TEXT NOT NULL, cuda TEXT NOT NULL, added TEXT NOT NULL);\n"
     "CREATE TABLE results(id INTEGER PRIMARY KEY,\n"
     "                     device TEXT NOT NULL REFERENCES devices(fingerprint),\n"
     "                     kernel TEXT NOT NULL, ir_hash TEXT NOT NULL, bucket TEXT NOT NULL,\n"
     "                     config TEXT NOT NULL,\n"
     "                     median_us REAL NOT NULL CHECK (median_us > 0),\n"
     "                     p20_us REAL NOT NULL, p80_us REAL NOT NULL,\n"
     "                     samples INTEGER NOT NULL CHECK (samples >= 1),\n"
     "                     default_us REAL CHECK (default_us IS NULL OR default_us > 0),\n"
     "                     candidates INTEGER NOT NULL DEFAULT 0, invalid INTEGER NOT NULL DEFAULT 0,\n"
     "                     kiln_version TEXT NOT NULL, tuned_at TEXT NOT NULL,\n"
     "                     pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),\n"
     "                     CHECK (p20_us <= median_us AND median_us <= p80_us),\n"
     "                     UNIQUE(device, ir_hash, bucket));\n"
     "INSERT INTO meta(key, value) VALUES ('created', strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),\n"
     "                                    ('created_by', 'kiln " RT_VERSION_STRING "');\n"},
    {2, "v2: binaries",
     "CREATE TABLE binaries(device TEXT NOT NULL REFERENCES devices(fingerprint),\n"
     "                      ir_hash TEXT NOT NULL, config TEXT NOT NULL, target TEXT NOT NULL,\n"
     "                      format TEXT NOT NULL, entry TEXT NOT NULL, params TEXT NOT NULL,\n"
     "                      grid TEXT NOT NULL,\n"
     "                      block INTEGER NOT NULL CHECK (block BETWEEN 1 AND 1024),\n"
     "                      smem INTEGER NOT NULL CHECK (smem BETWEEN 0 AND 1048576),\n"
     "                      data BLOB NOT NULL, hash TEXT NOT NULL, compile_ms REAL,\n"
     "                      kiln_version TEXT NOT NULL, added TEXT NOT NULL,\n"
     "                      PRIMARY KEY(device, ir_hash, config, target));\n"},
    {3, "v3: a binary's hash covers its launch fields",
     /* v2's hashes covered the code only; binaries are a cache of what the results name, so they go and
      * the next `kiln tune` compiles them again */
     "DELETE FROM binaries;\n"},
};

struct RtTdb {
    sqlite3 *db;
    char *path;
    RtTdbMode mode;
    sqlite3_stmt *exact, *near, *binary;
};

/* ---- small helpers ---------------------------------------------------------------------------------- */

KilnStatus rt_tdb_status(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE: return KILN_OK;
    case SQLITE_NOMEM: return KILN_ERR_NOMEM;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_FORMAT: return KILN_ERR_CORRUPT;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
    case SQLITE_RANGE: return KILN_ERR_ARG;
    default: return KILN_ERR_IO;
    }
}

/* One line for an SQLite failure on db (may be NULL) while doing `what`. */
static KilnStatus rt_tdb_fail(sqlite3 *db, const char *path, int rc, const char *what, char *err, int errlen)
{
    const char *m = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if ((rc & 0xff) == SQLITE_NOTADB)
        return rt_pkg_errf(err, errlen, KILN_ERR_FORMAT, "%s: not an SQLite file, so not a kiln tuning DB",
                           path);
    if ((rc & 0xff) == SQLITE_CORRUPT)
        return rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT, "%s: corrupt tuning DB (%s: %s)", path, what, m);
    return rt_pkg_errf(err, errlen, rt_tdb_status(rc), "%s: %s: %s", path, what, m);
}

void rt_tdb_now(char out[32])
{
    struct tm tm;
    time_t now = time(NULL);
    snprintf(out, 32, "unknown");
    if (gmtime_r(&now, &tm)) strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* An integer from a one-row, one-column query; *rc is SQLITE_OK or the failure. */
static int64_t rt_tdb_int(sqlite3 *db, const char *sql, int *rc)
{
    sqlite3_stmt *st = NULL;
    int64_t v = 0;
    *rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (*rc == SQLITE_OK) *rc = sqlite3_step(st);
    if (*rc == SQLITE_ROW) {
        v = sqlite3_column_int64(st, 0);
        *rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return v;
}

void rt_tdb_fingerprint(const RtTdbDevice *d, char out[RT_TDB_FP_LEN])
{
    char text[1024];
    int n = snprintf(text, sizeof text, "kiln-device-v1\n%s\n%s\n%d\n%lld\n%s\n%s\n", d->name, d->arch,
                     d->sm_count, (long long)d->mem_bytes, d->driver, d->cuda);
    if (n < 0) n = 0;
    if (n >= (int)sizeof text) n = (int)sizeof text - 1;
    snprintf(out, RT_TDB_FP_LEN, "%016llx", (unsigned long long)rt_pkg_fnv1a64(text, (size_t)n));
}

void rt_tdb_device_host(RtTdbDevice *d)
{
    memset(d, 0, sizeof *d);
    struct utsname u;
    const char *machine = uname(&u) == 0 ? u.machine : "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && !d->name[0] && fgets(line, sizeof line, f)) {
        /* x86: "model name"; some other machines: "Hardware" or "cpu model" */
        char *colon = strchr(line, ':');
        if (!colon || (strncmp(line, "model name", 10) && strncmp(line, "Hardware", 8) &&
                       strncmp(line, "cpu model", 9)))
            continue;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        v[strcspn(v, "\n")] = 0;
        snprintf(d->name, sizeof d->name, "%s", v);
    }
    if (f) fclose(f);
    if (!d->name[0]) snprintf(d->name, sizeof d->name, "%s CPU", machine);
    snprintf(d->arch, sizeof d->arch, "host");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    d->sm_count = cpus > 0 ? (int)cpus : 1;
    d->mem_bytes = pages > 0 && psize > 0 ? (int64_t)pages * psize : 0;
    snprintf(d->driver, sizeof d->driver, "%s", machine);
    snprintf(d->cuda, sizeof d->cuda, "none");
}

/* ---- buckets ---------------------------------------------------------------------------------------- */

static int rt_is_key_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int rt_is_key_char(int c)
{
    return rt_is_key_start(c) || (c >= '0' && c <= '9');
}

KilnStatus rt_tdb_bucket_parse(const char *text, RtTdbBucket *b, char *err, int errlen)
{
    memset(b, 0, sizeof *b);
    if (!text) return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "bucket: missing");
    const char *p = text;
    while (*p == ' ')
        p++;
    if (!*p) return KILN_OK;
    for (;;) {
        while (*p == ' ')
            p++;
        const char *k = p;
        if (!rt_is_key_start((unsigned char)*p))
            return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "bucket '%.60s': expected a key at '%.20s'", text,
                               p);
        while (rt_is_key_char((unsigned char)*p))
            p++;
        size_t klen = (size_t)(p - k);
        if (klen >= RT_TDB_MAX_KEY)
            return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "bucket '%.60s': key longer than %d bytes", text,
                               RT_TDB_MAX_KEY - 1);
        if (b->n == RT_TDB_MAX_KEYS)
            return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "bucket '%.60s': more than %d keys", text,
                               RT_TDB_MAX_KEYS);
        while (*p == ' ')
            p++;
        if (*p++ != '=')
            return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "bucket '%.60s': expected key=value", text);
        while (*p == ' ')
            p++;
        int64_t v = 0;
        const char *digits = p;
        while (*p >= '0' && *p <= '9') {
            v = v * 10 + (*p++ - '0');
            if (v > RT_TDB_MAX_VALUE) break;
        }
        if (p == digits || v < 1 || v > RT_TDB_MAX_VALUE)
            return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "bucket '%.60s': %.*s wants an integer in 1..%d",
                               text, (int)klen, k, RT_TDB_MAX_VALUE);
        for (int i = 0; i < b->n; i++)
            if (strlen(b->key[i]) == klen && !memcmp(b->key[i], k, klen))
                return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "bucket '%.60s': key %.*s given twice", text,
                                   (int)klen, k);
        /* insertion sort: keys stay in strcmp order */
        char key[RT_TDB_MAX_KEY];
        memcpy(key, k, klen);
        key[klen] = 0;
        int at = b->n;
        while (at > 0 && strcmp(b->key[at - 1], key) > 0) {
            memcpy(b->key[at], b->key[at - 1], RT_TDB_MAX_KEY);
            b->val[at] = b->val[at - 1];
            at--;
        }
        memcpy(b->key[at], key, RT_TDB_MAX_KEY);
        b->val[at] = v;
        b->n++;
        while (*p == ' ')
            p++;
        if (!*p) return KILN_OK;
        if (*p++ != ',')
            return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "bucket '%.60s': expected ',' at '%.20s'", text,
                               p - 1);
    }
}

void rt_tdb_bucket_format(const RtTdbBucket *b, char out[RT_TDB_MAX_BUCKET])
{
    int len = 0;
    out[0] = 0;
    for (int i = 0; i < b->n && len < RT_TDB_MAX_BUCKET; i++)
        len += snprintf(out + len, (size_t)(RT_TDB_MAX_BUCKET - len), "%s%s=%lld", i ? "," : "", b->key[i],
                        (long long)b->val[i]);
}

double rt_tdb_bucket_distance(const RtTdbBucket *a, const RtTdbBucket *b)
{
    if (a->n != b->n) return -1;
    double d = 0;
    for (int i = 0; i < a->n; i++) {
        if (strcmp(a->key[i], b->key[i])) return -1;
        d += fabs(log2((double)a->val[i]) - log2((double)b->val[i]));
    }
    return d;
}

static double rt_bucket_size(const RtTdbBucket *b)
{
    double s = 0;
    for (int i = 0; i < b->n; i++)
        s += log2((double)b->val[i]);
    return s;
}

/* ---- migrations ------------------------------------------------------------------------------------- */

KilnStatus rt_tdb_migrate(sqlite3 *db, const char *path, const RtTdbStep *steps, int n_steps, int from,
                          char *err, int errlen)
{
    int v = from;
    for (int i = 0; i < n_steps; i++) {
        const RtTdbStep *s = &steps[i];
        if (s->to <= v) continue;
        if (s->to != v + 1)
            return rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT,
                               "%s: cannot upgrade the tuning DB from v%d: the next step is v%d (%s)", path,
                               v, s->to, s->what);
        char *emsg = NULL, tail[160];
        int rc = sqlite3_exec(db, s->sql, NULL, NULL, &emsg);
        if (rc == SQLITE_OK) {
            snprintf(tail, sizeof tail,
                     "PRAGMA user_version=%d;"
                     " INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', '%d');",
                     s->to, s->to);
            sqlite3_free(emsg);
            emsg = NULL;
            rc = sqlite3_exec(db, tail, NULL, NULL, &emsg);
        }
        if (rc != SQLITE_OK) {
            KilnStatus st =
                rt_pkg_errf(err, errlen, rt_tdb_status(rc) == KILN_OK ? KILN_ERR_IO : rt_tdb_status(rc),
                            "%s: cannot upgrade the tuning DB to v%d (%s): %s", path, s->to, s->what,
                            emsg ? emsg : sqlite3_errstr(rc));
            sqlite3_free(emsg);
            return st;
        }
        v = s->to;
    }
    return KILN_OK;
}

/* Every (table, column) the shipped steps create must exist in db. */
static KilnStatus rt_tdb_check_schema(sqlite3 *db, const char *path, char *err, int errlen)
{
    sqlite3 *ref = NULL;
    sqlite3_stmt *want = NULL, *have = NULL;
    KilnStatus s = KILN_OK;
    char e2[256];
    int rc = sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK ||
        rt_tdb_migrate(ref, ":memory:", rt_tdb_steps, RT_TDB_SCHEMA_VERSION, 0, e2, sizeof e2) != KILN_OK ||
        sqlite3_prepare_v2(ref,
                           "SELECT m.name, c.name FROM sqlite_master AS m, pragma_table_info(m.name) AS c"
                           " WHERE m.type = 'table' ORDER BY m.rowid, c.cid",
                           -1, &want, NULL) != SQLITE_OK) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_NOMEM, "%s: cannot build the reference schema", path);
        goto done;
    }
    rc = sqlite3_prepare_v2(db,
                            "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1),"
                            " EXISTS(SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
                            -1, &have, NULL);
    if (rc != SQLITE_OK) {
        s = rt_tdb_fail(db, path, rc, "schema", err, errlen);
        goto done;
    }
    while ((rc = sqlite3_step(want)) == SQLITE_ROW) {
        const char *table = (const char *)sqlite3_column_text(want, 0);
        const char *column = (const char *)sqlite3_column_text(want, 1);
        sqlite3_bind_text(have, 1, table, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(have, 2, column, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(have);
        if (rc != SQLITE_ROW) {
            s = rt_tdb_fail(db, path, rc, "schema", err, errlen);
            goto done;
        }
        if (!sqlite3_column_int(have, 0)) {
            s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT, "%s: corrupt tuning DB (missing table %s)", path,
                            table);
            goto done;
        }
        if (!sqlite3_column_int(have, 1)) {
            s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT, "%s: corrupt tuning DB (missing column %s.%s)",
                            path, table, column);
            goto done;
        }
        sqlite3_reset(have);
    }
    if (rc != SQLITE_DONE)
        s = rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: cannot read the reference schema", path);
done:
    sqlite3_finalize(have);
    sqlite3_finalize(want);
    sqlite3_close(ref);
    return s;
}

/* ---- opening ---------------------------------------------------------------------------------------- */

/* The file before SQLite sees it: READ wants an existing, non-empty regular file; WRITE accepts a
 * missing one (its directory must exist). */
static KilnStatus rt_tdb_check_file(const char *path, RtTdbMode mode, char *err, int errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT && mode != RT_TDB_READ) {
            const char *slash = strrchr(path, '/');
            if (!slash) return KILN_OK;
            char *dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
            if (!dir) return rt_pkg_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
            int ok = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
            KilnStatus s = ok ? KILN_OK
                              : rt_pkg_errf(err, errlen, KILN_ERR_IO,
                                            "%s: cannot create: directory %s does not exist", path, dir);
            free(dir);
            return s;
        }
        if (errno == ENOENT) return rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: does not exist", path);
        return rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    if (S_ISDIR(st.st_mode))
        return rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: is a directory, not a kiln tuning DB", path);
    if (!S_ISREG(st.st_mode)) return rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: not a regular file", path);
    if (st.st_size == 0 && mode == RT_TDB_READ)
        return rt_pkg_errf(err, errlen, KILN_ERR_FORMAT, "%s: empty file (0 bytes), not a kiln tuning DB",
                           path);
    return KILN_OK;
}

/* Inside the open transaction: identity, version, damage and tables. For WRITE, *version gets the
 * stored version (0 for a new file) so the caller can upgrade it. */
static KilnStatus rt_tdb_validate(RtTdb *t, int *version, char *err, int errlen)
{
    int rc;
    *version = 0;
    uint32_t app = (uint32_t)rt_tdb_int(t->db, "PRAGMA application_id", &rc);
    if (rc != SQLITE_OK) return rt_tdb_fail(t->db, t->path, rc, "cannot read", err, errlen);
    int64_t v = rt_tdb_int(t->db, "PRAGMA user_version", &rc);
    if (rc != SQLITE_OK) return rt_tdb_fail(t->db, t->path, rc, "cannot read", err, errlen);
    int64_t objects = rt_tdb_int(t->db, "SELECT count(*) FROM sqlite_master", &rc);
    if (rc != SQLITE_OK) return rt_tdb_fail(t->db, t->path, rc, "cannot read", err, errlen);
    /* A new store: a 0-byte file, or an SQLite database with nothing in it (no schema, no application_id,
     * no user_version; inside a write transaction SQLite shows both as one empty page). */
    if (app == 0 && v == 0 && objects == 0 && t->mode != RT_TDB_READ) return KILN_OK;
    if (app == RT_PKG_APPLICATION_ID)
        return rt_pkg_errf(err, errlen, KILN_ERR_FORMAT, "%s: a kiln package, not a kiln tuning DB", t->path);
    if (app != RT_TDB_APPLICATION_ID)
        return rt_pkg_errf(err, errlen, KILN_ERR_FORMAT,
                           "%s: not a kiln tuning DB (application_id 0x%08x, kiln's is 0x%08x)", t->path, app,
                           (unsigned)RT_TDB_APPLICATION_ID);
    if (v > RT_TDB_SCHEMA_VERSION || v < 0)
        return rt_pkg_errf(err, errlen, KILN_ERR_FORMAT,
                           "%s: tuning DB schema %lld is newer than this build reads (%d): upgrade kiln",
                           t->path, (long long)v, RT_TDB_SCHEMA_VERSION);
    if (v < RT_TDB_SCHEMA_VERSION && t->mode == RT_TDB_READ)
        return rt_pkg_errf(err, errlen, KILN_ERR_FORMAT,
                           "%s: tuning DB schema %lld is older than this build reads (%d): upgrade it with "
                           "'kiln db upgrade --db %s'",
                           t->path, (long long)v, RT_TDB_SCHEMA_VERSION, t->path);
    *version = (int)v;

    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(t->db, "PRAGMA quick_check(1)", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        KilnStatus s = rt_tdb_fail(t->db, t->path, rc, "quick_check", err, errlen);
        sqlite3_finalize(st);
        return s;
    }
    const char *verdict = (const char *)sqlite3_column_text(st, 0);
    if (!verdict || strcmp(verdict, "ok")) {
        KilnStatus s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT, "%s: corrupt tuning DB (quick_check: %s)",
                                   t->path, verdict ? verdict : "no verdict");
        sqlite3_finalize(st);
        return s;
    }
    sqlite3_finalize(st);
    if (v < RT_TDB_SCHEMA_VERSION) return KILN_OK; /* the upgrade checks the tables it makes */

    KilnStatus s = rt_tdb_check_schema(t->db, t->path, err, errlen);
    if (s) return s;
    st = NULL;
    rc = sqlite3_prepare_v2(t->db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        const char *mv = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
        char *end = NULL;
        if (!mv || strtoll(mv, &end, 10) != v || end == mv || *end)
            s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: corrupt tuning DB (meta.schema_version %s, user_version %lld)", t->path,
                            mv ? mv : "missing", (long long)v);
    } else {
        s = rt_tdb_fail(t->db, t->path, rc, "meta", err, errlen);
    }
    sqlite3_finalize(st);
    return s;
}

static KilnStatus rt_tdb_exec(RtTdb *t, const char *sql, const char *what, char *err, int errlen)
{
    int rc = sqlite3_exec(t->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? KILN_OK : rt_tdb_fail(t->db, t->path, rc, what, err, errlen);
}

/* WAL for WRITE (concurrent readers while a tuner commits), checked: a mode change needs the file to
 * itself for a moment, which the busy handler waits for. */
static KilnStatus rt_tdb_set_journal(RtTdb *t, char *err, int errlen)
{
    const char *want = t->mode == RT_TDB_WRITE ? "wal" : "delete";
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s", want);
    for (int attempt = 0;; attempt++) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(t->db, sql, -1, &st, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(st);
        const char *got = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
        int ok = got && !strcmp(got, want);
        sqlite3_finalize(st);
        if (ok) return KILN_OK;
        if (rc != SQLITE_ROW && (rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
            return rt_tdb_fail(t->db, t->path, rc, "cannot set the journal mode", err, errlen);
        if (attempt == 200)
            return rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: cannot switch to journal_mode=%s (file busy)",
                               t->path, want);
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
}

/* Opens t->db (immutable: read without locks or side files), validates and, for WRITE, creates or
 * upgrades. On failure the connection is closed and *code has SQLite's error code, if any. */
static KilnStatus rt_tdb_connect(RtTdb *t, int immutable, int *code, char *err, int errlen)
{
    KilnStatus s;
    RtTdbMode mode = t->mode;
    const char *path = t->path;
    char *uri = rt_pkg_uri(path, immutable ? "immutable=1" : NULL);
    *code = 0;
    if (!uri) return rt_pkg_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    int flags = SQLITE_OPEN_URI |
                (mode == RT_TDB_READ ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(uri, &t->db, flags, NULL);
    free(uri);
    if (rc != SQLITE_OK) {
        s = rt_tdb_fail(t->db, path, rc, "cannot open", err, errlen);
        goto fail;
    }
    sqlite3_busy_timeout(t->db, RT_TDB_BUSY_MS);
    sqlite3_db_config(t->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
#ifdef SQLITE_DBCONFIG_TRUSTED_SCHEMA
    sqlite3_db_config(t->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
#endif
    if ((s = rt_tdb_exec(t, "PRAGMA cell_size_check=ON", "cannot open", err, errlen))) goto fail;
    if (mode == RT_TDB_READ && (s = rt_tdb_exec(t, "PRAGMA query_only=ON", "cannot open", err, errlen)))
        goto fail;

    /* WRITE: the version is read and upgraded under the write lock, so concurrent openers upgrade once. */
    if ((s = rt_tdb_exec(t, mode == RT_TDB_READ ? "BEGIN" : "BEGIN IMMEDIATE", "cannot open", err, errlen)))
        goto fail;
    int version = 0;
    if ((s = rt_tdb_validate(t, &version, err, errlen))) goto rollback;
    if (mode != RT_TDB_READ && version < RT_TDB_SCHEMA_VERSION) {
        char app[64];
        snprintf(app, sizeof app, "PRAGMA application_id=%d", RT_TDB_APPLICATION_ID);
        if ((s = rt_tdb_exec(t, app, "cannot create", err, errlen)) ||
            (s = rt_tdb_migrate(t->db, path, rt_tdb_steps, RT_TDB_SCHEMA_VERSION, version, err, errlen)) ||
            (s = rt_tdb_check_schema(t->db, path, err, errlen)))
            goto rollback;
    }
    if ((s = rt_tdb_exec(t, mode == RT_TDB_READ ? "ROLLBACK" : "COMMIT", "cannot commit", err, errlen)))
        goto fail;
    if (mode != RT_TDB_READ) {
        if ((s = rt_tdb_set_journal(t, err, errlen)) ||
            (s = rt_tdb_exec(t, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON", "cannot open", err,
                             errlen)))
            goto fail;
    }
    return KILN_OK;

rollback:
    *code = sqlite3_errcode(t->db);
    sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(t->db);
    t->db = NULL;
    return s;
fail:
    *code = t->db ? sqlite3_errcode(t->db) : rc;
    sqlite3_close(t->db);
    t->db = NULL;
    return s;
}

KilnStatus rt_tdb_open(const char *path, RtTdbMode mode, RtTdb **out, char *err, int errlen)
{
    if (out) *out = NULL;
    if (!path || !*path || !out || mode < RT_TDB_READ || mode > RT_TDB_WRITE_ROLLBACK)
        return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "%s: rt_tdb_open: missing path or out, or bad mode",
                           path && *path ? path : "(no path)");
    KilnStatus s = rt_tdb_check_file(path, mode, err, errlen);
    if (s) return s;
    RtTdb *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return rt_pkg_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    }
    t->mode = mode;
    int code = 0;
    s = rt_tdb_connect(t, 0, &code, err, errlen);
    /* A WAL store in a directory this process cannot write (read-only media, a container's image layer)
     * cannot get its -shm: read it immutable instead. Nobody can be writing there, for a writer needs
     * the same -shm; what a -wal left there holds is not seen. */
    if (s && mode == RT_TDB_READ && ((code & 0xff) == SQLITE_CANTOPEN || (code & 0xff) == SQLITE_READONLY))
        s = rt_tdb_connect(t, 1, &code, err, errlen);
    if (s) {
        rt_tdb_close(t);
        return s;
    }
    *out = t;
    return KILN_OK;
}

void rt_tdb_close(RtTdb *db)
{
    if (!db) return;
    sqlite3_finalize(db->exact);
    sqlite3_finalize(db->near);
    sqlite3_finalize(db->binary);
    sqlite3_close(db->db);
    free(db->path);
    free(db);
}

const char *rt_tdb_path(const RtTdb *db)
{
    return db ? db->path : NULL;
}

sqlite3 *rt_tdb_sqlite(RtTdb *db)
{
    return db ? db->db : NULL;
}

/* ---- lookups ---------------------------------------------------------------------------------------- */

const char *rt_tdb_match_name(RtTdbMatch m)
{
    switch (m) {
    case RT_TDB_EXACT: return "tuned";
    case RT_TDB_NEAREST: return "nearest";
    default: return "default";
    }
}

/* Text column i into out (n bytes), cut to fit; "" for NULL or a non-text value. Returns 0 for those
 * (not text, or cut), 1 otherwise. */
static int rt_col_cut(sqlite3_stmt *st, int i, char *out, int n)
{
    int type = sqlite3_column_type(st, i);
    const unsigned char *s = type == SQLITE_TEXT ? sqlite3_column_text(st, i) : NULL;
    int len = s ? sqlite3_column_bytes(st, i) : 0;
    snprintf(out, (size_t)n, "%s", s ? (const char *)s : "");
    return s && len < n && (int)strlen((const char *)s) == len;
}

static KilnStatus rt_tdb_prepare(RtTdb *t, sqlite3_stmt **st, const char *sql, char *err, int errlen)
{
    if (*st) {
        sqlite3_reset(*st);
        sqlite3_clear_bindings(*st);
        return KILN_OK;
    }
    int rc = sqlite3_prepare_v2(t->db, sql, -1, st, NULL);
    return rc == SQLITE_OK ? KILN_OK : rt_tdb_fail(t->db, t->path, rc, "cannot query", err, errlen);
}

KilnStatus rt_tdb_lookup(RtTdb *t, const char *device, const char *ir_hash, const char *bucket, RtTdbHit *hit,
                         char *err, int errlen)
{
    if (!hit) return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "rt_tdb_lookup: missing hit");
    memset(hit, 0, sizeof *hit);
    if (!t || !device || !ir_hash || !bucket)
        return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "rt_tdb_lookup: missing argument");
    RtTdbBucket want, have;
    char canon[RT_TDB_MAX_BUCKET];
    KilnStatus s = rt_tdb_bucket_parse(bucket, &want, err, errlen);
    if (s) return s;
    rt_tdb_bucket_format(&want, canon);

    s = rt_tdb_prepare(
        t, &t->exact,
        "SELECT config, median_us, pinned FROM results WHERE device = ?1 AND ir_hash = ?2 AND bucket = ?3",
        err, errlen);
    if (s) return s;
    sqlite3_bind_text(t->exact, 1, device, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(t->exact, 2, ir_hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(t->exact, 3, canon, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(t->exact);
    if (rc == SQLITE_ROW) {
        if (!rt_col_cut(t->exact, 0, hit->config, sizeof hit->config)) {
            sqlite3_reset(t->exact);
            return rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT,
                               "%s: corrupt tuning DB (the config for %s %s is not text "
                               "or longer than %d bytes)",
                               t->path, ir_hash, canon, RT_TDB_MAX_CONFIG - 1);
        }
        hit->match = RT_TDB_EXACT;
        memcpy(hit->bucket, canon, sizeof canon);
        hit->median_us = sqlite3_column_double(t->exact, 1);
        hit->pinned = sqlite3_column_int(t->exact, 2) != 0;
        sqlite3_reset(t->exact);
        return KILN_OK;
    }
    sqlite3_reset(t->exact);
    if (rc != SQLITE_DONE) return rt_tdb_fail(t->db, t->path, rc, "lookup", err, errlen);

    s = rt_tdb_prepare(
        t, &t->near,
        "SELECT bucket, config, median_us, pinned FROM results WHERE device = ?1 AND ir_hash = ?2", err,
        errlen);
    if (s) return s;
    sqlite3_bind_text(t->near, 1, device, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(t->near, 2, ir_hash, -1, SQLITE_TRANSIENT);
    double best = -1, best_size = 0;
    char text[RT_TDB_MAX_BUCKET];
    while ((rc = sqlite3_step(t->near)) == SQLITE_ROW) {
        if (!rt_col_cut(t->near, 0, text, sizeof text) || rt_tdb_bucket_parse(text, &have, NULL, 0)) continue;
        double d = rt_tdb_bucket_distance(&want, &have), size = rt_bucket_size(&have);
        if (d < 0) continue;
        char c[RT_TDB_MAX_BUCKET];
        rt_tdb_bucket_format(&have, c);
        int better = best < 0 || d < best || (d == best && size > best_size) ||
                     (d == best && size == best_size && strcmp(c, hit->bucket) < 0);
        if (!better) continue;
        if (!rt_col_cut(t->near, 1, hit->config, sizeof hit->config)) {
            sqlite3_reset(t->near);
            memset(hit, 0, sizeof *hit);
            return rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT,
                               "%s: corrupt tuning DB (the config for %s %s is not text "
                               "or longer than %d bytes)",
                               t->path, ir_hash, c, RT_TDB_MAX_CONFIG - 1);
        }
        best = d, best_size = size;
        memcpy(hit->bucket, c, sizeof c);
        hit->median_us = sqlite3_column_double(t->near, 2);
        hit->pinned = sqlite3_column_int(t->near, 3) != 0;
        hit->distance = d;
        hit->match = RT_TDB_NEAREST;
    }
    sqlite3_reset(t->near);
    if (rc != SQLITE_DONE) {
        memset(hit, 0, sizeof *hit);
        return rt_tdb_fail(t->db, t->path, rc, "lookup", err, errlen);
    }
    return KILN_OK;
}

/* ---- tuned binaries ---------------------------------------------------------------------------------- */

void rt_tdb_binary_free(RtTdbBinary *b)
{
    if (!b) return;
    free(b->data);
    b->data = NULL, b->size = 0;
}

KilnStatus rt_tdb_binary_get(RtTdb *t, const char *device, const char *ir_hash, const char *config,
                             const char *target, RtTdbBinary *b, int *found, char *err, int errlen)
{
    if (found) *found = 0;
    if (!b || !found) return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "rt_tdb_binary_get: missing argument");
    memset(b, 0, sizeof *b);
    if (!t || !device || !ir_hash || !config || !target)
        return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "rt_tdb_binary_get: missing argument");
    KilnStatus s = rt_tdb_prepare(t, &t->binary,
                                  "SELECT format, entry, params, grid, block, smem, data, hash, compile_ms,"
                                  " kiln_version, added FROM binaries"
                                  " WHERE device = ?1 AND ir_hash = ?2 AND config = ?3 AND target = ?4",
                                  err, errlen);
    if (s) return s;
    sqlite3_stmt *st = t->binary;
    const char *key[] = {device, ir_hash, config, target};
    for (int i = 0; i < 4; i++)
        sqlite3_bind_text(st, i + 1, key[i], -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(st);
        return KILN_OK;
    }
    if (rc != SQLITE_ROW) {
        sqlite3_reset(st);
        return rt_tdb_fail(t->db, t->path, rc, "cannot read binaries", err, errlen);
    }
    const char *why = NULL;
    char hash[RT_TDB_FP_LEN], stored[RT_TDB_FP_LEN], what[160];
    if (!rt_col_cut(st, 0, b->format, sizeof b->format) || !rt_col_cut(st, 1, b->entry, sizeof b->entry) ||
        !rt_col_cut(st, 2, b->params, sizeof b->params) || !rt_col_cut(st, 3, b->grid, sizeof b->grid) ||
        !rt_col_cut(st, 9, b->kiln_version, sizeof b->kiln_version) ||
        !rt_col_cut(st, 10, b->added, sizeof b->added) || !b->format[0] || !b->entry[0])
        why = "a text field is missing, not text or too long";
    else if (sqlite3_column_type(st, 4) != SQLITE_INTEGER || sqlite3_column_type(st, 5) != SQLITE_INTEGER ||
             (b->block = sqlite3_column_int(st, 4)) < 1 || b->block > 1024 ||
             (b->smem = sqlite3_column_int(st, 5)) < 0 || b->smem > 1 << 20)
        why = "block or smem out of range";
    else if (sqlite3_column_type(st, 6) != SQLITE_BLOB || sqlite3_column_bytes(st, 6) < 1 ||
             sqlite3_column_bytes(st, 6) > RT_TDB_MAX_BINARY)
        why = "data is not a blob of 1 byte .. 256 MiB";
    if (!why) {
        const void *data = sqlite3_column_blob(st, 6);
        b->size = (size_t)sqlite3_column_bytes(st, 6);
        rt_pkg_binary_hash(data, b->size, target, config, b->grid, b->format, b->entry, b->block, b->smem,
                           hash);
        if (!data || !rt_col_cut(st, 7, stored, sizeof stored) || RT_HASH_DIFFERS(strcmp(hash, stored))) {
            if (sqlite3_column_type(st, 7) != SQLITE_TEXT) snprintf(stored, sizeof stored, "none");
            snprintf(what, sizeof what,
                     "binary damaged (hash %s, stored %s; it covers the code and its launch fields)", hash,
                     stored);
            why = what;
        } else if (!(b->data = malloc(b->size))) {
            sqlite3_reset(st);
            memset(b, 0, sizeof *b);
            return rt_pkg_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", t->path);
        } else {
            memcpy(b->data, data, b->size);
        }
    }
    b->compile_ms = sqlite3_column_type(st, 8) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 8);
    sqlite3_reset(st);
    if (why) {
        rt_tdb_binary_free(b);
        memset(b, 0, sizeof *b);
        return rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT,
                           "%s: corrupt tuning DB (%s binary of %.40s %.80s: %s)", t->path, target, ir_hash,
                           config, why);
    }
    *found = 1;
    return KILN_OK;
}

/* ---- listing ---------------------------------------------------------------------------------------- */

void rt_tdb_filter_sql(const RtTdbFilter *f, char *sql, int n)
{
    static const char *const cond[] = {
        "id = ?",     "instr(device, ?) = 1", "kernel GLOB ?", "instr(ir_hash, ?) = 1",
        "bucket = ?", "kiln_version = ?",     "tuned_at < ?",  "pinned = ?"};
    int on[8] = {f->id > 0,         f->device != NULL,       f->kernel != NULL, f->ir_hash != NULL,
                 f->bucket != NULL, f->kiln_version != NULL, f->before != NULL, f->pinned != 0};
    int len = 0, k = 0;
    sql[0] = 0;
    for (int i = 0; i < 8 && len < n; i++)
        if (on[i]) len += snprintf(sql + len, (size_t)(n - len), "%s%s", k++ ? " AND " : " WHERE ", cond[i]);
}

int rt_tdb_filter_bind(sqlite3_stmt *st, const RtTdbFilter *f, int first)
{
    int i = first;
    if (f->id > 0) sqlite3_bind_int64(st, i++, f->id);
    const char *text[] = {f->device, f->kernel, f->ir_hash, f->bucket, f->kiln_version, f->before};
    for (int k = 0; k < 6; k++)
        if (text[k]) sqlite3_bind_text(st, i++, text[k], -1, SQLITE_TRANSIENT);
    if (f->pinned) sqlite3_bind_int(st, i++, f->pinned > 0);
    return i;
}

KilnStatus rt_tdb_filter_canon(const RtTdbFilter *f, RtTdbFilter *out, char *buf, char *err, int errlen)
{
    *out = *f;
    if (!f->bucket) return KILN_OK;
    RtTdbBucket b;
    KilnStatus s = rt_tdb_bucket_parse(f->bucket, &b, err, errlen);
    if (s) return s;
    rt_tdb_bucket_format(&b, buf);
    out->bucket = buf;
    return KILN_OK;
}

/* A number column: 1 when it holds one (integer or real). */
static int rt_col_num(sqlite3_stmt *st, int i)
{
    int type = sqlite3_column_type(st, i);
    return type == SQLITE_INTEGER || type == SQLITE_FLOAT;
}

void rt_tdb_row_read(sqlite3_stmt *st, RtTdbRow *r)
{
    memset(r, 0, sizeof *r);
    int ok = rt_col_num(st, 0);
    r->id = sqlite3_column_int64(st, 0);
    ok &= rt_col_cut(st, 1, r->device, sizeof r->device);
    ok &= rt_col_cut(st, 2, r->kernel, sizeof r->kernel);
    ok &= rt_col_cut(st, 3, r->ir_hash, sizeof r->ir_hash);
    ok &= rt_col_cut(st, 4, r->bucket, sizeof r->bucket);
    ok &= rt_col_cut(st, 5, r->config, sizeof r->config);
    for (int i = 6; i <= 9; i++)
        ok &= rt_col_num(st, i);
    r->median_us = sqlite3_column_double(st, 6);
    r->p20_us = sqlite3_column_double(st, 7);
    r->p80_us = sqlite3_column_double(st, 8);
    r->samples = sqlite3_column_int(st, 9);
    if (sqlite3_column_type(st, 10) == SQLITE_NULL) {
        r->default_us = -1;
    } else {
        ok &= rt_col_num(st, 10);
        r->default_us = sqlite3_column_double(st, 10);
    }
    ok &= rt_col_num(st, 11) & rt_col_num(st, 12);
    r->candidates = sqlite3_column_int(st, 11);
    r->invalid = sqlite3_column_int(st, 12);
    ok &= rt_col_cut(st, 13, r->kiln_version, sizeof r->kiln_version);
    ok &= rt_col_cut(st, 14, r->tuned_at, sizeof r->tuned_at);
    ok &= rt_col_num(st, 15);
    r->pinned = sqlite3_column_int(st, 15) != 0;
    r->damaged = !ok;
}

KilnStatus rt_tdb_rows(RtTdb *t, const RtTdbFilter *f, int (*fn)(void *ctx, const RtTdbRow *row), void *ctx,
                       char *err, int errlen)
{
    if (!t || !fn) return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "rt_tdb_rows: missing argument");
    RtTdbFilter all = {0}, cf;
    char canon[RT_TDB_MAX_BUCKET], where[512], sql[1024];
    KilnStatus s = rt_tdb_filter_canon(f ? f : &all, &cf, canon, err, errlen);
    if (s) return s;
    rt_tdb_filter_sql(&cf, where, sizeof where);
    snprintf(sql, sizeof sql,
             "SELECT " RT_TDB_ROW_COLUMNS " FROM results%s ORDER BY device, kernel, bucket, id", where);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(t->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) return rt_tdb_fail(t->db, t->path, rc, "cannot list results", err, errlen);
    rt_tdb_filter_bind(st, &cf, 1);
    RtTdbRow *row = malloc(sizeof *row);
    if (!row) {
        sqlite3_finalize(st);
        return rt_pkg_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", t->path);
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        rt_tdb_row_read(st, row);
        if (fn(ctx, row)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    if (rc != SQLITE_DONE) s = rt_tdb_fail(t->db, t->path, rc, "cannot list results", err, errlen);
    free(row);
    sqlite3_finalize(st);
    return s;
}

KilnStatus rt_tdb_devices(RtTdb *t,
                          int (*fn)(void *ctx, const char *fp, const RtTdbDevice *d, int64_t results),
                          void *ctx, char *err, int errlen)
{
    if (!t || !fn) return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "rt_tdb_devices: missing argument");
    sqlite3_stmt *st = NULL;
    KilnStatus s = KILN_OK;
    int rc =
        sqlite3_prepare_v2(t->db,
                           "SELECT d.fingerprint, d.name, d.arch, d.sm_count, d.mem_bytes, d.driver, d.cuda,"
                           " (SELECT count(*) FROM results r WHERE r.device = d.fingerprint)"
                           " FROM devices d ORDER BY d.fingerprint",
                           -1, &st, NULL);
    if (rc != SQLITE_OK) return rt_tdb_fail(t->db, t->path, rc, "cannot list devices", err, errlen);
    RtTdbDevice d;
    char fp[RT_TDB_FP_LEN];
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        memset(&d, 0, sizeof d);
        rt_col_cut(st, 0, fp, sizeof fp);
        rt_col_cut(st, 1, d.name, sizeof d.name);
        rt_col_cut(st, 2, d.arch, sizeof d.arch);
        d.sm_count = sqlite3_column_int(st, 3);
        d.mem_bytes = sqlite3_column_int64(st, 4);
        rt_col_cut(st, 5, d.driver, sizeof d.driver);
        rt_col_cut(st, 6, d.cuda, sizeof d.cuda);
        if (fn(ctx, fp, &d, sqlite3_column_int64(st, 7))) {
            rc = SQLITE_DONE;
            break;
        }
    }
    if (rc != SQLITE_DONE) s = rt_tdb_fail(t->db, t->path, rc, "cannot list devices", err, errlen);
    sqlite3_finalize(st);
    return s;
}
