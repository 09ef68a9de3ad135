/* rt_pkg_read.c — opening and validating a package (kiln_package_*), and its readable summary.
 *
 * The reader treats the file as hostile: it must never crash and never modify it. Validation goes from
 * cheap to thorough, and each step has its own one-line message that starts with the path:
 *   1. the file itself (exists, regular, not empty), by open() + fstat() on our own descriptor;
 *   2. the 100-byte SQLite header, read by hand: magic, application_id, user_version (format), page size,
 *      and page count × page size against the file size (truncation) — before SQLite sees the file;
 *   3. SQLite, read-only and immutable=1 (no locks, no -journal/-wal/-shm, a hot journal is ignored: a
 *      package is never written in place, see rt_package.c), defensive, untrusted schema;
 *      PRAGMA quick_check; then every table and column of rt_pkg_schema_sql must be present.
 * Then the meta table is loaded into memory, so kiln_package_meta is a lookup.
 * An open KilnPackage is read-only in memory: meta and graph are loaded (and checked) at open.
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
#include <unistd.h>

#include <sqlite3.h>

struct KilnPackage {
    sqlite3 *db;
    char *path;
    int n_meta;
    char **meta; /* n_meta (key, value) pairs: meta[2i] key, meta[2i+1] value, sorted by key */
    char *graph; /* loaded by rt_pkg_graph_text */
};

enum { RT_SQLITE_HEADER = 100 };

static uint32_t rt_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Step 1 and 2: the file and its SQLite header, without SQLite. */
static KilnStatus rt_pkg_check_file(const char *path, char *err, int errlen)
{
    static const char magic[16] = "SQLite format 3";
    unsigned char h[RT_SQLITE_HEADER];
    struct stat st;
    KilnStatus s = KILN_OK;

    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC); /* O_NONBLOCK: a FIFO must not hang */
    if (fd < 0) {
        if (errno == ENOENT) return rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: does not exist", path);
        return rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    if (fstat(fd, &st) != 0) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    if (S_ISDIR(st.st_mode)) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: is a directory, not a kiln package", path);
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: not a regular file", path);
        goto done;
    }
    if (st.st_size == 0) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_FORMAT, "%s: empty file (0 bytes), not a kiln package", path);
        goto done;
    }
    size_t got = 0;
    while (got < sizeof h) {
        ssize_t r = pread(fd, h + got, sizeof h - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            s = rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
            goto done;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    if (memcmp(h, magic, got < sizeof magic ? got : sizeof magic) != 0 || got < 8) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_FORMAT, "%s: not an SQLite file, so not a kiln package", path);
        goto done;
    }
    if (got < sizeof h) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT,
                        "%s: truncated (%zu bytes, shorter than the 100-byte SQLite header)", path, got);
        goto done;
    }
    uint32_t app_id = rt_be32(h + 68), format = rt_be32(h + 60);
    if (app_id != RT_PKG_APPLICATION_ID) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_FORMAT,
                        "%s: not a kiln package (application_id 0x%08x, kiln's is 0x%08x)", path, app_id,
                        (unsigned)RT_PKG_APPLICATION_ID);
        goto done;
    }
    if (format != RT_PKG_FORMAT_VERSION) {
        s = rt_pkg_errf(
            err, errlen, KILN_ERR_FORMAT,
            format > RT_PKG_FORMAT_VERSION
                ? "%s: package format %u is newer than this build reads (%d): upgrade kiln"
                : "%s: package format %u is older than this build reads (%d): recompile the package",
            path, format, RT_PKG_FORMAT_VERSION);
        goto done;
    }
    uint32_t page = (uint32_t)h[16] << 8 | h[17];
    if (page == 1) page = 65536;
    if (page < 512 || (page & (page - 1)) != 0) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT, "%s: corrupt header (page size %u)", path, page);
        goto done;
    }
    /* The in-header page count is valid when "version-valid-for" equals the change counter (SQLite >= 3.7).
     */
    uint32_t pages = rt_be32(h + 28);
    int count_valid = pages != 0 && rt_be32(h + 92) == rt_be32(h + 24);
    long long need = count_valid ? (long long)pages * page : (long long)page;
    if ((long long)st.st_size < need) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT,
                        "%s: truncated (%lld bytes; the header says %u pages of %u bytes, %lld bytes)", path,
                        (long long)st.st_size, count_valid ? pages : 1u, page, need);
        goto done;
    }
done:
    close(fd);
    return s;
}

/* The status for an SQLite failure while reading a file that passed the header checks. */
static KilnStatus rt_sqlite_read_status(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_NOMEM: return KILN_ERR_NOMEM;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM: return KILN_ERR_IO;
    default: return KILN_ERR_CORRUPT;
    }
}

static KilnStatus rt_pkg_sqlite_fail(KilnPackage *p, int rc, const char *what, char *err, int errlen)
{
    KilnStatus s = rt_sqlite_read_status(rc);
    const char *m = p->db ? sqlite3_errmsg(p->db) : sqlite3_errstr(rc);
    if (s == KILN_ERR_CORRUPT)
        return rt_pkg_errf(err, errlen, s, "%s: corrupt package (%s: %s)", p->path, what, m);
    return rt_pkg_errf(err, errlen, s, "%s: %s: %s", p->path, what, m);
}

/* Step 3b: every (table, column) of the schema this build writes must exist in the file. The reference
 * list comes from running rt_pkg_schema_sql in a private in-memory database: one source of truth. */
static KilnStatus rt_pkg_check_schema(KilnPackage *p, char *err, int errlen)
{
    sqlite3 *ref = NULL;
    sqlite3_stmt *want = NULL, *have = NULL;
    KilnStatus s = KILN_OK;
    int rc = sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_exec(ref, rt_pkg_schema_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc =
            sqlite3_prepare_v2(ref,
                               "SELECT m.name, c.name FROM sqlite_master AS m, pragma_table_info(m.name) AS c"
                               " WHERE m.type = 'table' ORDER BY m.rowid, c.cid",
                               -1, &want, NULL);
    if (rc != SQLITE_OK) {
        s = rt_pkg_errf(err, errlen, rc == SQLITE_NOMEM ? KILN_ERR_NOMEM : KILN_ERR_IO,
                        "%s: cannot build the reference schema: %s", p->path, sqlite3_errstr(rc));
        goto done;
    }
    rc = sqlite3_prepare_v2(p->db,
                            "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1),"
                            " EXISTS(SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
                            -1, &have, NULL);
    if (rc != SQLITE_OK) {
        s = rt_pkg_sqlite_fail(p, rc, "schema", err, errlen);
        goto done;
    }
    while ((rc = sqlite3_step(want)) == SQLITE_ROW) {
        const char *table = (const char *)sqlite3_column_text(want, 0);
        const char *column = (const char *)sqlite3_column_text(want, 1);
        sqlite3_bind_text(have, 1, table, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(have, 2, column, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(have);
        if (rc != SQLITE_ROW) {
            s = rt_pkg_sqlite_fail(p, rc, "schema", err, errlen);
            goto done;
        }
        if (!sqlite3_column_int(have, 0)) {
            s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT, "%s: corrupt package (missing table %s)", p->path,
                            table);
            goto done;
        }
        if (!sqlite3_column_int(have, 1)) {
            s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT, "%s: corrupt package (missing column %s.%s)",
                            p->path, table, column);
            goto done;
        }
        sqlite3_reset(have);
    }
    if (rc != SQLITE_DONE)
        s = rt_pkg_errf(err, errlen, KILN_ERR_IO, "%s: cannot read the reference schema: %s", p->path,
                        sqlite3_errmsg(ref));
done:
    sqlite3_finalize(have);
    sqlite3_finalize(want);
    sqlite3_close(ref);
    return s;
}

static char *rt_strdup_or_empty(const unsigned char *s)
{
    return strdup(s ? (const char *)s : "");
}

static KilnStatus rt_pkg_load_meta(KilnPackage *p, char *err, int errlen)
{
    sqlite3_stmt *st = NULL;
    KilnStatus s = KILN_OK;
    int cap = 0, rc = sqlite3_prepare_v2(p->db, "SELECT key, value FROM meta ORDER BY key", -1, &st, NULL);
    if (rc != SQLITE_OK) return rt_pkg_sqlite_fail(p, rc, "meta", err, errlen);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (p->n_meta == cap) {
            int ncap = cap ? 2 * cap : 16;
            char **m = realloc(p->meta, sizeof *m * 2 * (size_t)ncap);
            if (!m) break;
            p->meta = m, cap = ncap;
        }
        char *k = rt_strdup_or_empty(sqlite3_column_text(st, 0));
        char *v = rt_strdup_or_empty(sqlite3_column_text(st, 1));
        if (!k || !v) {
            free(k), free(v);
            break;
        }
        p->meta[2 * p->n_meta] = k, p->meta[2 * p->n_meta + 1] = v, p->n_meta++;
    }
    if (rc == SQLITE_ROW)
        s = rt_pkg_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory reading meta", p->path);
    else if (rc != SQLITE_DONE)
        s = rt_pkg_sqlite_fail(p, rc, "meta", err, errlen);
    sqlite3_finalize(st);
    return s;
}

/* Loads the graph text and checks it against its stored hash: SQLite keeps no checksums of values, so
 * this is what catches a damaged graph. A package without a graph row is valid (graph stays NULL). */
static KilnStatus rt_pkg_load_graph(KilnPackage *p, char *err, int errlen)
{
    sqlite3_stmt *st = NULL;
    KilnStatus s = KILN_OK;
    int rc = sqlite3_prepare_v2(p->db, "SELECT text, hash FROM graph WHERE id = 1", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const void *text = sqlite3_column_blob(st, 0);
        size_t n = (size_t)sqlite3_column_bytes(st, 0);
        const char *hash = (const char *)sqlite3_column_text(st, 1);
        char want[17];
        snprintf(want, sizeof want, "%016llx", (unsigned long long)rt_pkg_fnv1a64(text ? text : "", n));
        if (!hash || RT_HASH_DIFFERS(strcmp(hash, want)))
            s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: corrupt package: graph text does not match its "
                            "hash (%s, stored %s)",
                            p->path, want, hash ? hash : "none");
        else if (!(p->graph = malloc(n + 1)))
            s = rt_pkg_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", p->path);
        else {
            memcpy(p->graph, text ? text : "", n);
            p->graph[n] = 0;
        }
    } else if (rc != SQLITE_DONE) {
        s = rt_pkg_sqlite_fail(p, rc, "graph", err, errlen);
    }
    sqlite3_finalize(st);
    return s;
}

KilnStatus kiln_package_open(const char *path, KilnPackage **out, char *err, int errlen)
{
    KilnPackage *p = NULL;
    char *uri = NULL;
    sqlite3_stmt *st = NULL;
    KilnStatus s;
    if (out) *out = NULL;
    if (!path || !*path || !out)
        return rt_pkg_errf(err, errlen, KILN_ERR_ARG, "%s: kiln_package_open: missing path or out",
                           path && *path ? path : "(no path)");
    if ((s = rt_pkg_check_file(path, err, errlen))) return s;

    if (!(p = calloc(1, sizeof *p)) || !(p->path = strdup(path)) ||
        !(uri = rt_pkg_uri(path, "immutable=1"))) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    int rc = sqlite3_open_v2(uri, &p->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    if (rc != SQLITE_OK) {
        s = rt_pkg_sqlite_fail(p, rc, "cannot open", err, errlen);
        goto fail;
    }
    sqlite3_db_config(p->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
#ifdef SQLITE_DBCONFIG_TRUSTED_SCHEMA
    sqlite3_db_config(p->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
#endif
    sqlite3_exec(p->db, "PRAGMA cell_size_check=ON", NULL, NULL, NULL);

    rc = sqlite3_prepare_v2(p->db, "PRAGMA quick_check(1)", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        s = rt_pkg_sqlite_fail(p, rc, "quick_check", err, errlen);
        goto fail;
    }
    const char *verdict = (const char *)sqlite3_column_text(st, 0);
    if (!verdict || strcmp(verdict, "ok") != 0) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT, "%s: corrupt package (quick_check: %s)", path,
                        verdict ? verdict : "no verdict");
        goto fail;
    }
    sqlite3_finalize(st);
    st = NULL;
    if ((s = rt_pkg_check_schema(p, err, errlen)) || (s = rt_pkg_load_meta(p, err, errlen)) ||
        (s = rt_pkg_load_graph(p, err, errlen)))
        goto fail;
    /* the config rows are the model's facts the engine and the weights checks read: edited rows are a
     * corrupt package (a package from before config_hash carries none and is not checked) */
    const char *want = kiln_package_meta(p, "config_hash");
    char have[17];
    if (want && (rt_pkg_config_hash(p->db, have) || RT_HASH_DIFFERS(strcmp(want, have)))) {
        s = rt_pkg_errf(err, errlen, KILN_ERR_CORRUPT,
                        "%s: corrupt package (config rows hash to %s, meta config_hash says %.20s: edited)",
                        path, have, want);
        goto fail;
    }
    free(uri);
    *out = p;
    return KILN_OK;

fail:
    sqlite3_finalize(st);
    free(uri);
    kiln_package_close(p);
    return s;
}

void kiln_package_close(KilnPackage *pkg)
{
    if (!pkg) return;
    for (int i = 0; i < 2 * pkg->n_meta; i++)
        free(pkg->meta[i]);
    free(pkg->meta);
    free(pkg->graph);
    sqlite3_close(pkg->db);
    free(pkg->path);
    free(pkg);
}

const char *kiln_package_meta(KilnPackage *pkg, const char *key)
{
    if (!pkg || !key) return NULL;
    for (int i = 0; i < pkg->n_meta; i++)
        if (!strcmp(pkg->meta[2 * i], key)) return pkg->meta[2 * i + 1];
    return NULL;
}

struct sqlite3 *rt_pkg_db(KilnPackage *pkg)
{
    return pkg ? pkg->db : NULL;
}

const char *rt_pkg_path(KilnPackage *pkg)
{
    return pkg ? pkg->path : NULL;
}

const char *rt_pkg_graph_text(KilnPackage *pkg)
{
    return pkg ? pkg->graph : NULL;
}

/* ---- summary ----------------------------------------------------------------------------------------- */

enum { RT_SUMMARY_WIDTH = 100, RT_LABEL = 10 };

/* Prints one piece of a summary line through rt_file_vclean (control characters from the file as '?', so
 * the layout holds; cut at 512 bytes: a summary, not a dump) and returns its width; rt_line adds the
 * newline. */
static int rt_put(FILE *f, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int rt_put(FILE *f, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int len = rt_file_vclean(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fputs(buf, f);
    return len;
}

/* A list of items after a label, separated by sep and wrapped at RT_SUMMARY_WIDTH onto continuation lines
 * indented to the value column. */
typedef struct RtWrap {
    FILE *f;
    const char *sep;
    int col, items;
} RtWrap;

static void rt_wrap(RtWrap *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void rt_wrap(RtWrap *w, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int len = rt_file_vclean(buf, sizeof buf, fmt, ap);
    va_end(ap);
    int seplen = (int)strlen(w->sep), kept = seplen;
    while (kept > 0 && w->sep[kept - 1] == ' ')
        kept--;
    if (w->items && w->col + seplen + len > RT_SUMMARY_WIDTH) {
        fprintf(w->f, "%.*s\n%*s", kept, w->sep, RT_LABEL, "");
        w->col = RT_LABEL;
    } else if (w->items) {
        fputs(w->sep, w->f);
        w->col += seplen;
    }
    fputs(buf, w->f);
    w->col += len;
    w->items++;
}

/* Bytes in decimal units (1 kB = 1000 B), two decimals. */
static const char *rt_fmt_bytes(char buf[32], double n)
{
    static const char *const unit[] = {"kB", "MB", "GB", "TB", "PB"};
    if (n < 1000) {
        snprintf(buf, 32, "%.0f B", n);
        return buf;
    }
    int u = 0;
    for (n /= 1000; n >= 1000 && u < 4; u++)
        n /= 1000;
    snprintf(buf, 32, "%.2f %s", n, unit[u]);
    return buf;
}

static int rt_meta_shown(const char *key)
{
    static const char *const shown[] = {"format_version", "kiln_version", "created",
                                        "recipe",         "recipe_file",  "recipe_hash",
                                        "model",          "targets",      "graph_hash"};
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++)
        if (!strcmp(key, shown[i])) return 1;
    return 0;
}

/* Finalizes *st and prepares sql in its place. */
static int rt_query(KilnPackage *pkg, sqlite3_stmt **st, const char *sql)
{
    sqlite3_finalize(*st);
    *st = NULL;
    return sqlite3_prepare_v2(pkg->db, sql, -1, st, NULL);
}

static const char *rt_meta_or(KilnPackage *pkg, const char *key, const char *dflt)
{
    const char *v = kiln_package_meta(pkg, key);
    return v ? v : dflt;
}

static const char *rt_col(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (const char *)t : "";
}

KilnStatus rt_pkg_print_summary(KilnPackage *pkg, FILE *f)
{
    if (!pkg || !f) return KILN_ERR_ARG;
    sqlite3_stmt *st = NULL;
    char b1[32];

    rt_file_line(f, "%-*s%s (format %s, kiln %s, created %s)", RT_LABEL, "package", pkg->path,
                 rt_meta_or(pkg, "format_version", "?"), rt_meta_or(pkg, "kiln_version", "?"),
                 rt_meta_or(pkg, "created", "?"));
    if (kiln_package_meta(pkg, "recipe") || kiln_package_meta(pkg, "recipe_file"))
        rt_file_line(f, "%-*s%s (%s, hash %s)", RT_LABEL, "recipe", rt_meta_or(pkg, "recipe", "?"),
                     rt_meta_or(pkg, "recipe_file", "?"), rt_meta_or(pkg, "recipe_hash", "?"));
    const char *label[] = {"model", "targets"};
    for (int i = 0; i < 2; i++) {
        const char *v = kiln_package_meta(pkg, label[i]);
        if (v && *v) rt_file_line(f, "%-*s%s", RT_LABEL, label[i], v);
    }

    if (rt_query(pkg, &st, "SELECT text, hash FROM graph WHERE id = 1") != SQLITE_OK) goto fail;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        long lines = 0;
        for (const char *p = rt_col(st, 0); *p; p++)
            if (*p == '\n' || !p[1]) lines++;
        rt_file_line(f, "%-*s%ld lines, hash %s", RT_LABEL, "graph", lines, rt_col(st, 1));
    } else if (rc == SQLITE_DONE) {
        rt_file_line(f, "%-*s(none)", RT_LABEL, "graph");
    } else {
        goto fail;
    }

    if (rt_query(pkg, &st, "SELECT key, value FROM config ORDER BY key") != SQLITE_OK) goto fail;
    RtWrap w = {f, " ", RT_LABEL, 0};
    fprintf(f, "%-*s", RT_LABEL, "config");
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        rt_wrap(&w, "%s=%s", rt_col(st, 0), rt_col(st, 1));
    if (rc != SQLITE_DONE) goto fail;
    fputs(w.items ? "\n" : "(none)\n", f);

    if (rt_query(pkg, &st, "SELECT count(*), total(nbytes) FROM weights") != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW)
        goto fail;
    long long n_weights = sqlite3_column_int64(st, 0);
    w = (RtWrap){f, ", ", 0, 0};
    w.col = rt_put(f, "%-*s%lld tensors, %s", RT_LABEL, "weights", n_weights,
                   rt_fmt_bytes(b1, sqlite3_column_double(st, 1)));
    if (rt_query(pkg, &st,
                 "SELECT name, dtype, shape, nbytes FROM weights ORDER BY nbytes DESC, name LIMIT 3") !=
        SQLITE_OK)
        goto fail;
    for (int i = 0; (rc = sqlite3_step(st)) == SQLITE_ROW; i++) {
        int last = i + 1 == (n_weights < 3 ? n_weights : 3);
        if (i == 0) fputc(' ', f), w.col++;
        rt_wrap(&w, "%s%s %s%s %s%s", i ? "" : "(largest: ", rt_col(st, 0), rt_col(st, 1), rt_col(st, 2),
                rt_fmt_bytes(b1, sqlite3_column_double(st, 3)), last ? ")" : "");
    }
    if (rc != SQLITE_DONE) goto fail;
    fputc('\n', f);

    if (rt_query(pkg, &st, "SELECT (SELECT count(*) FROM kernels), (SELECT count(*) FROM launch_plan)") !=
            SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW)
        goto fail;
    rt_file_line(f, "%-*s%lld, launch plan %lld steps", RT_LABEL, "kernels", sqlite3_column_int64(st, 0),
                 sqlite3_column_int64(st, 1));
    if (rt_query(
            pkg, &st,
            "SELECT target, count(*), total(length(data)) FROM binaries GROUP BY target ORDER BY target") !=
        SQLITE_OK)
        goto fail;
    w = (RtWrap){f, ", ", RT_LABEL, 0};
    fprintf(f, "%-*s", RT_LABEL, "binaries");
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        rt_wrap(&w, "%s %lld (%s)", rt_col(st, 0), sqlite3_column_int64(st, 1),
                rt_fmt_bytes(b1, sqlite3_column_double(st, 2)));
    if (rc != SQLITE_DONE) goto fail;
    fputs(w.items ? "\n" : "0 (no targets compiled yet)\n", f);

    w = (RtWrap){f, " ", RT_LABEL, 0};
    for (int i = 0; i < pkg->n_meta; i++) {
        if (rt_meta_shown(pkg->meta[2 * i])) continue;
        if (!w.items) fprintf(f, "%-*s", RT_LABEL, "meta");
        rt_wrap(&w, "%s=%s", pkg->meta[2 * i], pkg->meta[2 * i + 1]);
    }
    if (w.items) fputc('\n', f);
    sqlite3_finalize(st);
    return ferror(f) ? KILN_ERR_IO : KILN_OK;

fail:;
    int err = sqlite3_errcode(pkg->db);
    sqlite3_finalize(st);
    fputc('\n', f);
    return err == SQLITE_OK ? KILN_ERR_CORRUPT : rt_sqlite_read_status(err);
}

KilnStatus rt_pkg_print_kernels(KilnPackage *pkg, FILE *f)
{
    if (!pkg || !f) return KILN_ERR_ARG;
    sqlite3_stmt *st = NULL;
    char b1[32];
    int rc;
    if (rt_query(
            pkg, &st,
            "SELECT k.id, k.name, k.config, (SELECT count(*) FROM launch_plan l WHERE l.kernel_id = k.id),"
            " k.spec FROM kernels k ORDER BY k.id") != SQLITE_OK)
        goto fail;
    fprintf(f, "%-4s %-44s %-6s %s\n", "id", "kernel", "uses", "default config");
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) /* names and configs from the file: rt_file_line */
        rt_file_line(f, "%-4lld %-44s %-6lld %s", sqlite3_column_int64(st, 0), rt_col(st, 1),
                     sqlite3_column_int64(st, 3), rt_col(st, 2));
    if (rc != SQLITE_DONE) goto fail;
    if (rt_query(pkg, &st,
                 "SELECT b.kernel_id, k.name, b.target, b.format, length(b.data), b.compile_ms, b.config,"
                 " b.block, b.smem"
                 " FROM binaries b JOIN kernels k ON k.id = b.kernel_id ORDER BY b.target, b.kernel_id, "
                 "b.config") != SQLITE_OK)
        goto fail;
    int header = 0;
    double total_ms = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!header++)
            fprintf(f, "\n%-4s %-44s %-8s %-8s %10s %10s %5s %8s  %s\n", "id", "binary", "target", "format",
                    "size", "compile", "block", "smem", "config");
        double ms = sqlite3_column_double(st, 5);
        total_ms += ms;
        rt_file_line(f, "%-4lld %-44s %-8s %-8s %10s %8.1fms %5lld %8lld  %s", sqlite3_column_int64(st, 0),
                     rt_col(st, 1), rt_col(st, 2), rt_col(st, 3),
                     rt_fmt_bytes(b1, sqlite3_column_double(st, 4)), ms, sqlite3_column_int64(st, 7),
                     sqlite3_column_int64(st, 8), rt_col(st, 6));
    }
    if (rc != SQLITE_DONE) goto fail;
    if (header)
        fprintf(f, "%d binaries, %.1f ms of compile time in all\n", header, total_ms);
    else
        fprintf(f, "\nno binaries (compile with --target)\n");
    sqlite3_finalize(st);
    return ferror(f) ? KILN_ERR_IO : KILN_OK;
fail:;
    int err = sqlite3_errcode(pkg->db);
    sqlite3_finalize(st);
    return err == SQLITE_OK ? KILN_ERR_CORRUPT : rt_sqlite_read_status(err);
}
