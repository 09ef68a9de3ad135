/* rt_package.c — the package schema and its atomic writer (rt_pkgw_*); the reader is rt_pkg_read.c.
 *
 * A package is one SQLite file (docs/PACKAGE.md). The writer never writes the final path in place: it
 * builds the whole package in a temporary file beside it (rt_file_out_begin: "<path>.tmp.XXXXXX", O_EXCL,
 * same directory so the final rename() cannot cross file systems; a path naming a directory, FIFO,
 * device, socket or symbolic link is refused before anything is made), inside one transaction, then
 * COMMIT, close, fsync, rename (rt_file_out_commit, which checks the path again).
 * Invariant: at every instant `path` is either what it was before or the complete new package, and
 * every failure path (and abort) removes the temporary file.
 *
 * Journaling: atomicity comes from rename(), not from SQLite's journal, so the writer uses
 * journal_mode=MEMORY (no "-journal" side file to clean up) and synchronous=OFF with one explicit
 * fsync at the end. The result is an ordinary rollback-journal database (never WAL): one self-contained
 * file, which `sqlite3` opens in the default DELETE mode.
 *
 * Failures in the add calls are sticky: the first one is kept in w->status / w->msg and returned by
 * every later call and by commit.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt_package.h"
#include "rt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#define RT_STR_(x) #x
#define RT_STR(x)  RT_STR_(x)
#define RT_VERSION_STRING                                                                                    \
    RT_STR(KILN_VERSION_MAJOR) "." RT_STR(KILN_VERSION_MINOR) "." RT_STR(KILN_VERSION_PATCH)

/* Format 5. Changing any table or column, what a package's kernels expect of the buffers the runtime
 * binds (format 4: w4a16 words in the fragment order, rt_quant.h) or what a hash covers (format 5: a
 * binary's hash covers its launch fields, rt_pkg_binary_hash), means bumping RT_PKG_FORMAT_VERSION. */
const char rt_pkg_schema_sql[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
    "CREATE TABLE config(key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
    "CREATE TABLE graph(id INTEGER PRIMARY KEY CHECK (id = 1), text TEXT NOT NULL, hash TEXT NOT NULL);\n"
    "CREATE TABLE weights(name TEXT PRIMARY KEY, dtype TEXT NOT NULL, shape TEXT NOT NULL,\n"
    "                     nbytes INTEGER NOT NULL);\n"
    "CREATE TABLE kernels(id INTEGER PRIMARY KEY, name TEXT NOT NULL, family TEXT NOT NULL,\n"
    "                     spec TEXT NOT NULL, config TEXT NOT NULL, params TEXT NOT NULL,\n"
    "                     grid TEXT NOT NULL, ir_hash TEXT NOT NULL, ir_text TEXT NOT NULL);\n"
    "CREATE TABLE binaries(kernel_id INTEGER NOT NULL REFERENCES kernels(id), target TEXT NOT NULL,\n"
    "                      config TEXT NOT NULL, grid TEXT NOT NULL, format TEXT NOT NULL,\n"
    "                      entry TEXT NOT NULL,\n"
    "                      block INTEGER NOT NULL CHECK (block BETWEEN 1 AND 1024),\n"
    "                      smem INTEGER NOT NULL CHECK (smem BETWEEN 0 AND 1048576),\n"
    "                      data BLOB NOT NULL, hash TEXT NOT NULL, compile_ms REAL,\n"
    "                      PRIMARY KEY(kernel_id, target, config));\n"
    "CREATE TABLE launch_plan(step INTEGER PRIMARY KEY, kernel_id INTEGER NOT NULL, args TEXT NOT NULL);\n"
    "CREATE TABLE buffers(name TEXT PRIMARY KEY, kind TEXT NOT NULL, dtype TEXT NOT NULL,\n"
    "                     shape TEXT NOT NULL, offset INTEGER NOT NULL, bytes INTEGER NOT NULL,\n"
    "                     output TEXT);\n";

uint64_t rt_pkg_fnv1a64(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_more(uint64_t h, const char *text)
{
    h = (h ^ 0) * 0x100000001b3ull; /* the separator */
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

void rt_pkg_binary_hash(const void *data, size_t n, const char *target, const char *config, const char *grid,
                        const char *format, const char *entry, int block, int smem, char out[17])
{
    char geometry[32];
    snprintf(geometry, sizeof geometry, "%d %d", block, smem);
    const char *field[] = {target, config, grid, format, entry, geometry};
    uint64_t h = rt_pkg_fnv1a64(data, n);
    for (size_t i = 0; i < sizeof field / sizeof field[0]; i++)
        h = fnv_more(h, field[i] ? field[i] : "");
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

KilnStatus rt_pkg_errf(char *err, int errlen, KilnStatus s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rt_file_verrf(err, errlen, s, fmt, ap);
    va_end(ap);
    return s;
}

char *rt_pkg_uri(const char *path, const char *query)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(path), q = query ? strlen(query) : 0;
    char *u = malloc(sizeof "file://" + 3 * n + 1 + q);
    if (!u) return NULL;
    char *o = u;
    memcpy(o, "file:", 5), o += 5;
    if (path[0] == '/') memcpy(o, "//", 2), o += 2; /* "file:///abs": an empty authority */
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        unsigned c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("-._~/", (int)c)) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    if (q) {
        *o++ = '?';
        memcpy(o, query, q), o += q;
    }
    *o = 0;
    return u;
}

/* ---- writer ------------------------------------------------------------------------------------------ */

enum {
    RT_INS_META,
    RT_INS_CONFIG,
    RT_INS_GRAPH,
    RT_INS_WEIGHT,
    RT_INS_KERNEL,
    RT_INS_BINARY,
    RT_INS_LAUNCH,
    RT_INS_BUFFER,
    RT_INS_COUNT
};

static const char *const rt_ins_sql[RT_INS_COUNT] = {
    "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
    "INSERT INTO config(key, value) VALUES (?1, ?2)",
    "INSERT INTO graph(id, text, hash) VALUES (1, ?1, ?2)",
    "INSERT INTO weights(name, dtype, shape, nbytes) VALUES (?1, ?2, ?3, ?4)",
    "INSERT INTO kernels(id, name, family, spec, config, params, grid, ir_hash, ir_text)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    "INSERT INTO binaries(kernel_id, target, config, grid, format, entry, data, hash, compile_ms, block, "
    "smem)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    "INSERT INTO launch_plan(step, kernel_id, args) VALUES (?1, ?2, ?3)",
    "INSERT INTO buffers(name, kind, dtype, shape, offset, bytes, output) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
    "?7)",
};

struct RtPkgWriter {
    char *path;    /* the final path */
    RtFileOut out; /* the temporary file beside it (rt_file.h): checks, O_EXCL, fsync, rename */
    sqlite3 *db;
    sqlite3_stmt *ins[RT_INS_COUNT]; /* prepared INSERTs, one per table */
    char graph_hash[17];             /* bound to ins_graph until it steps */
    KilnStatus status;               /* the first failure; sticky */
    char msg[512];                   /* its one-line message, starting with path */
};

/* Records the first failure (later ones are dropped, so the root cause is reported) and returns it. */
static KilnStatus rt_pkgw_fail(RtPkgWriter *w, KilnStatus s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static KilnStatus rt_pkgw_fail(RtPkgWriter *w, KilnStatus s, const char *fmt, ...)
{
    if (w->status == KILN_OK) {
        char what[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        rt_pkg_errf(w->msg, sizeof w->msg, s, "%s: %s", w->path, what);
        w->status = s;
    }
    return w->status;
}

static KilnStatus rt_sqlite_write_status(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_NOMEM: return KILN_ERR_NOMEM;
    case SQLITE_CONSTRAINT:
    case SQLITE_TOOBIG:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE: return KILN_ERR_ARG;
    default: return KILN_ERR_IO;
    }
}

static void rt_pkgw_finalize(RtPkgWriter *w)
{
    for (int i = 0; i < RT_INS_COUNT; i++) {
        sqlite3_finalize(w->ins[i]);
        w->ins[i] = NULL;
    }
}

/* Releases everything and removes the temporary file when it is still there. */
static void rt_pkgw_free(RtPkgWriter *w)
{
    rt_pkgw_finalize(w);
    if (w->db) sqlite3_close(w->db); /* rolls back an open transaction */
    rt_file_out_abort(&w->out);
    free(w->path);
    free(w);
}

static KilnStatus rt_pkgw_exec(RtPkgWriter *w, const char *sql, const char *what)
{
    char *emsg = NULL;
    int rc = sqlite3_exec(w->db, sql, NULL, NULL, &emsg);
    if (rc != SQLITE_OK)
        rt_pkgw_fail(w, rt_sqlite_write_status(rc), "%s: %s", what, emsg ? emsg : sqlite3_errstr(rc));
    sqlite3_free(emsg);
    return w->status;
}

static KilnStatus rt_pkgw_prepare(RtPkgWriter *w, sqlite3_stmt **st, const char *sql)
{
    int rc = sqlite3_prepare_v2(w->db, sql, -1, st, NULL);
    if (rc != SQLITE_OK)
        return rt_pkgw_fail(w, rt_sqlite_write_status(rc), "cannot prepare the schema: %s",
                            sqlite3_errmsg(w->db));
    return KILN_OK;
}

/* Steps a bound insert; `what` and `name` describe the row in a failure message. */
static KilnStatus rt_pkgw_step(RtPkgWriter *w, sqlite3_stmt *st, const char *what, const char *name)
{
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
        if ((rc & 0xff) == SQLITE_CONSTRAINT)
            rt_pkgw_fail(w, KILN_ERR_ARG, "%s '%s' given twice", what, name);
        else
            rt_pkgw_fail(w, rt_sqlite_write_status(rc), "cannot add %s '%s': %s", what, name,
                         sqlite3_errmsg(w->db));
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return w->status;
}

static KilnStatus rt_pkgw_put_meta(RtPkgWriter *w, const char *key, const char *value)
{
    sqlite3_bind_text(w->ins[RT_INS_META], 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->ins[RT_INS_META], 2, value, -1, SQLITE_STATIC);
    return rt_pkgw_step(w, w->ins[RT_INS_META], "meta key", key);
}

KilnStatus rt_pkgw_create(const char *path, RtPkgWriter **out, char *err, int errlen)
{
    if (out) *out = NULL;
    if (!path || !*path || !out)
        return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "%s: rt_pkgw_create: missing path or out",
                           path && *path ? path : "(no path)");
    RtPkgWriter *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return rt_pkg_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    }
    w->out.fd = -1;
    KilnStatus fs = rt_file_out_begin(&w->out, path, 0, w->msg, sizeof w->msg);
    if (fs) { /* the message starts with path already */
        w->status = fs;
        goto fail;
    }

    char *uri = rt_pkg_uri(w->out.tmp, "mode=rw");
    if (!uri) {
        rt_pkgw_fail(w, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    int rc = sqlite3_open_v2(uri, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL);
    free(uri);
    if (rc != SQLITE_OK) {
        rt_pkgw_fail(w, rt_sqlite_write_status(rc), "cannot open temporary file %s: %s", w->out.tmp,
                     w->db ? sqlite3_errmsg(w->db) : sqlite3_errstr(rc));
        goto fail;
    }
    char head[256];
    snprintf(head, sizeof head,
             "PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF; BEGIN;"
             " PRAGMA application_id=%d; PRAGMA user_version=%d;",
             RT_PKG_APPLICATION_ID, RT_PKG_FORMAT_VERSION);
    if (rt_pkgw_exec(w, head, "cannot start the package") ||
        rt_pkgw_exec(w, rt_pkg_schema_sql, "cannot create the schema"))
        goto fail;
    for (int i = 0; i < RT_INS_COUNT; i++)
        if (rt_pkgw_prepare(w, &w->ins[i], rt_ins_sql[i])) goto fail;

    char created[32] = "unknown";
    struct tm tm;
    time_t now = time(NULL);
    if (gmtime_r(&now, &tm)) strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (rt_pkgw_put_meta(w, "format_version", RT_STR(RT_PKG_FORMAT_VERSION)) ||
        rt_pkgw_put_meta(w, "kiln_version", RT_VERSION_STRING) || rt_pkgw_put_meta(w, "created", created))
        goto fail;
    *out = w;
    return KILN_OK;

fail:;
    KilnStatus s = rt_pkg_errf(err, errlen, w->status, "%s", w->msg);
    rt_pkgw_free(w);
    return s;
}

KilnStatus rt_pkgw_meta(RtPkgWriter *w, const char *key, const char *value)
{
    if (!w) return KILN_ERR_ARG;
    if (w->status) return w->status;
    if (!key || !*key || !value) return rt_pkgw_fail(w, KILN_ERR_ARG, "meta: missing key or value");
    if (!strcmp(key, "format_version") || !strcmp(key, "kiln_version") || !strcmp(key, "config_hash"))
        return rt_pkgw_fail(w, KILN_ERR_ARG, "meta key '%s' is written by the package writer", key);
    return rt_pkgw_put_meta(w, key, value);
}

KilnStatus rt_pkgw_config(RtPkgWriter *w, const char *key, const char *value)
{
    if (!w) return KILN_ERR_ARG;
    if (w->status) return w->status;
    if (!key || !*key || !value) return rt_pkgw_fail(w, KILN_ERR_ARG, "config: missing key or value");
    sqlite3_bind_text(w->ins[RT_INS_CONFIG], 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->ins[RT_INS_CONFIG], 2, value, -1, SQLITE_STATIC);
    return rt_pkgw_step(w, w->ins[RT_INS_CONFIG], "config key", key);
}

KilnStatus rt_pkgw_graph(RtPkgWriter *w, const char *text)
{
    if (!w) return KILN_ERR_ARG;
    if (w->status) return w->status;
    if (!text) return rt_pkgw_fail(w, KILN_ERR_ARG, "graph: missing text");
    snprintf(w->graph_hash, sizeof w->graph_hash, "%016llx",
             (unsigned long long)rt_pkg_fnv1a64(text, strlen(text)));
    sqlite3_bind_text(w->ins[RT_INS_GRAPH], 1, text, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->ins[RT_INS_GRAPH], 2, w->graph_hash, -1, SQLITE_STATIC);
    return rt_pkgw_step(w, w->ins[RT_INS_GRAPH], "graph", w->graph_hash);
}

KilnStatus rt_pkgw_weight(RtPkgWriter *w, const char *name, const char *dtype, const char *shape,
                          int64_t nbytes)
{
    if (!w) return KILN_ERR_ARG;
    if (w->status) return w->status;
    if (!name || !*name || !dtype || !*dtype || !shape)
        return rt_pkgw_fail(w, KILN_ERR_ARG, "weight: missing name, dtype or shape");
    if (nbytes < 0)
        return rt_pkgw_fail(w, KILN_ERR_ARG, "weight '%s': negative size %lld", name, (long long)nbytes);
    sqlite3_bind_text(w->ins[RT_INS_WEIGHT], 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->ins[RT_INS_WEIGHT], 2, dtype, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->ins[RT_INS_WEIGHT], 3, shape, -1, SQLITE_STATIC);
    sqlite3_bind_int64(w->ins[RT_INS_WEIGHT], 4, nbytes);
    return rt_pkgw_step(w, w->ins[RT_INS_WEIGHT], "weight", name);
}

/* Binds text, or NULL for a NULL pointer. */
static void rt_bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

KilnStatus rt_pkgw_kernel(RtPkgWriter *w, const RtPkgKernel *k)
{
    if (!w) return KILN_ERR_ARG;
    if (w->status) return w->status;
    if (!k || k->id < 0 || !k->name || !k->family || !k->spec || !k->config || !k->params || !k->grid ||
        !k->ir_hash || !k->ir_text)
        return rt_pkgw_fail(w, KILN_ERR_ARG, "kernel: missing field");
    sqlite3_stmt *st = w->ins[RT_INS_KERNEL];
    sqlite3_bind_int64(st, 1, k->id);
    const char *text[] = {k->name, k->family, k->spec, k->config, k->params, k->grid, k->ir_hash, k->ir_text};
    for (int i = 0; i < 8; i++)
        rt_bind_text(st, 2 + i, text[i]);
    return rt_pkgw_step(w, st, "kernel", k->name);
}

KilnStatus rt_pkgw_binary(RtPkgWriter *w, int64_t kernel_id, const char *target, const char *config,
                          const char *grid, const char *format, const char *entry, int block, int smem,
                          const void *data, size_t size, double compile_ms)
{
    if (!w) return KILN_ERR_ARG;
    if (w->status) return w->status;
    if (!target || !config || !grid || !format || !entry || !data || !size || size > 0x7fffffff)
        return rt_pkgw_fail(w, KILN_ERR_ARG, "binary: missing field or bad size");
    if (block < 1 || block > 1024 || smem < 0 || smem > (1 << 20))
        return rt_pkgw_fail(w, KILN_ERR_ARG, "binary: block size or shared memory out of range");
    char hash[17];
    rt_pkg_binary_hash(data, size, target, config, grid, format, entry, block, smem, hash);
    sqlite3_stmt *st = w->ins[RT_INS_BINARY];
    sqlite3_bind_int64(st, 1, kernel_id);
    rt_bind_text(st, 2, target);
    rt_bind_text(st, 3, config);
    rt_bind_text(st, 4, grid);
    rt_bind_text(st, 5, format);
    rt_bind_text(st, 6, entry);
    sqlite3_bind_blob(st, 7, data, (int)size, SQLITE_STATIC);
    rt_bind_text(st, 8, hash);
    sqlite3_bind_double(st, 9, compile_ms);
    sqlite3_bind_int(st, 10, block);
    sqlite3_bind_int(st, 11, smem);
    return rt_pkgw_step(w, st, "binary for", entry);
}

KilnStatus rt_pkgw_launch(RtPkgWriter *w, int64_t step, int64_t kernel_id, const char *args)
{
    if (!w) return KILN_ERR_ARG;
    if (w->status) return w->status;
    if (!args) return rt_pkgw_fail(w, KILN_ERR_ARG, "launch: missing args");
    sqlite3_stmt *st = w->ins[RT_INS_LAUNCH];
    sqlite3_bind_int64(st, 1, step);
    sqlite3_bind_int64(st, 2, kernel_id);
    rt_bind_text(st, 3, args);
    return rt_pkgw_step(w, st, "launch", "step");
}

KilnStatus rt_pkgw_buffer(RtPkgWriter *w, const char *name, const char *kind, const char *dtype,
                          const char *shape, int64_t offset, int64_t bytes, const char *output)
{
    if (!w) return KILN_ERR_ARG;
    if (w->status) return w->status;
    if (!name || !kind || !dtype || !shape) return rt_pkgw_fail(w, KILN_ERR_ARG, "buffer: missing field");
    sqlite3_stmt *st = w->ins[RT_INS_BUFFER];
    rt_bind_text(st, 1, name);
    rt_bind_text(st, 2, kind);
    rt_bind_text(st, 3, dtype);
    rt_bind_text(st, 4, shape);
    sqlite3_bind_int64(st, 5, offset);
    sqlite3_bind_int64(st, 6, bytes);
    rt_bind_text(st, 7, output);
    return rt_pkgw_step(w, st, "buffer", name);
}

int rt_pkg_config_hash(struct sqlite3 *db, char out[17])
{
    sqlite3_stmt *st = NULL;
    uint64_t h = 0xcbf29ce484222325ull;
    int rc = sqlite3_prepare_v2(db, "SELECT key, value FROM config ORDER BY key", -1, &st, NULL);
    while (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        for (int c = 0; c < 2; c++) {
            const unsigned char *t = sqlite3_column_text(st, c);
            int n = sqlite3_column_bytes(st, c);
            for (int i = 0; i < n; i++)
                h = (h ^ t[i]) * 0x100000001b3ull;
            h = (h ^ (unsigned char)(c ? '\n' : '=')) * 0x100000001b3ull;
        }
    if (rc == SQLITE_OK) rc = sqlite3_reset(st);
    sqlite3_finalize(st);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return rc == SQLITE_OK ? 0 : -1;
}

KilnStatus rt_pkgw_commit(RtPkgWriter *w, char *err, int errlen)
{
    if (!w) return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "(no path): rt_pkgw_commit: no writer");
    if (w->status) goto fail;
    char ch[17];
    if (rt_pkg_config_hash(w->db, ch)) {
        rt_pkgw_fail(w, KILN_ERR_IO, "cannot hash the config rows: %s", sqlite3_errmsg(w->db));
        goto fail;
    }
    if (rt_pkgw_put_meta(w, "config_hash", ch)) goto fail;
    rt_pkgw_finalize(w);
    if (rt_pkgw_exec(w, "COMMIT", "cannot commit")) goto fail;
    int rc = sqlite3_close(w->db);
    if (rc != SQLITE_OK) {
        rt_pkgw_fail(w, rt_sqlite_write_status(rc), "cannot close: %s", sqlite3_errmsg(w->db));
        goto fail;
    }
    w->db = NULL;
    KilnStatus fs = rt_file_out_commit(&w->out, w->msg, sizeof w->msg); /* fsync, re-check, rename */
    if (fs) {
        w->status = fs;
        goto fail;
    }
    rt_pkgw_free(w);
    return KILN_OK;

fail:;
    KilnStatus s = rt_pkg_errf(err, errlen, w->status, "%s", w->msg);
    rt_pkgw_free(w);
    return s;
}

void rt_pkgw_abort(RtPkgWriter *w)
{
    if (w) rt_pkgw_free(w);
}
