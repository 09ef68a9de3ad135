/* at_store.c — the tuning store's write side (at_store.h): devices, results by the put and merge rules,
 * tuned binaries, pins, prune, export to a new file and import from one (rows bring their binaries).
 *
 * Every public call is one BEGIN IMMEDIATE ... COMMIT on the store's connection (WAL, busy timeout:
 * rt_tunedb.c), and any failure rolls the whole call back. Rows are decided by reading the existing row
 * for the key (device, ir_hash, bucket) inside that transaction, so two tuners writing the same key
 * serialize and the later one sees the earlier one's row.
 */
#define _POSIX_C_SOURCE 200809L
#include "at_store.h"

#include "ir/base.h" /* KILN_VERSION_STRING */
#include "cg_target.h"
#include "rt_file.h"    /* rt_file_errf */
#include "rt_package.h" /* rt_pkg_binary_hash */
#include "rt_plan.h"    /* rt_plan_config_i */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

const char *at_put_outcome_name(AtPutOutcome o)
{
    switch (o) {
    case AT_PUT_INSERTED: return "inserted";
    case AT_PUT_REPLACED: return "replaced";
    case AT_PUT_KEPT_PINNED: return "kept (pinned)";
    case AT_PUT_KEPT_BETTER: return "kept (not beaten)";
    }
    return "?";
}

/* ---- transactions and errors ---- */

static KilnStatus at_sql_fail(RtTdb *db, int rc, const char *what, char *err, int errlen)
{
    KilnStatus s = rt_tdb_status(rc);
    if (s == KILN_OK) s = KILN_ERR_IO;
    const char *m = sqlite3_errmsg(rt_tdb_sqlite(db));
    if (s == KILN_ERR_CORRUPT)
        return rt_file_errf(err, errlen, s, "%s: corrupt tuning DB (%s: %s)", rt_tdb_path(db), what, m);
    return rt_file_errf(err, errlen, s, "%s: %s: %s", rt_tdb_path(db), what, m);
}

static KilnStatus at_exec(RtTdb *db, const char *sql, const char *what, char *err, int errlen)
{
    int rc = sqlite3_exec(rt_tdb_sqlite(db), sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? KILN_OK : at_sql_fail(db, rc, what, err, errlen);
}

static KilnStatus at_begin(RtTdb *db, char *err, int errlen)
{
    return at_exec(db, "BEGIN IMMEDIATE", "cannot start a write", err, errlen);
}

/* Commits s == KILN_OK work, else (or when COMMIT fails) rolls back. Returns the first failure. */
static KilnStatus at_end(RtTdb *db, KilnStatus s, char *err, int errlen)
{
    if (s == KILN_OK) s = at_exec(db, "COMMIT", "cannot commit", err, errlen);
    if (s != KILN_OK) sqlite3_exec(rt_tdb_sqlite(db), "ROLLBACK", NULL, NULL, NULL);
    return s;
}

static KilnStatus at_prepare(RtTdb *db, sqlite3_stmt **st, const char *sql, char *err, int errlen)
{
    int rc = sqlite3_prepare_v2(rt_tdb_sqlite(db), sql, -1, st, NULL);
    return rc == SQLITE_OK ? KILN_OK : at_sql_fail(db, rc, "cannot prepare", err, errlen);
}

/* ---- checks ---- */

static int at_text_ok(const char *s, int max)
{
    return s && *s && strlen(s) < (size_t)max;
}

/* 1 when s holds a control character (a byte below 0x20, or 0x7f). The store keeps none: printed, a
 * newline would forge a line of `kiln db list` and an ESC would drive the terminal. */
static int at_has_ctrl(const char *s)
{
    for (; s && *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 1;
    return 0;
}

static int at_result_has_ctrl(const AtResult *r)
{
    return at_has_ctrl(r->kernel) || at_has_ctrl(r->ir_hash) || at_has_ctrl(r->config) ||
           at_has_ctrl(r->bucket) || at_has_ctrl(r->kiln_version) || at_has_ctrl(r->tuned_at);
}

static int at_device_has_ctrl(const RtTdbDevice *d)
{
    return at_has_ctrl(d->name) || at_has_ctrl(d->arch) || at_has_ctrl(d->driver) || at_has_ctrl(d->cuda);
}

static int at_is_fp(const char *s)
{
    if (!s || strlen(s) != RT_TDB_FP_LEN - 1) return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return 0;
    return 1;
}

KilnStatus at_result_check(const AtResult *r, char *err, int errlen)
{
    RtTdbBucket b;
    char why[200];
    if (!r) return rt_file_errf(err, errlen, KILN_ERR_ARG, "result: missing");
    const char *name = r->kernel && *r->kernel ? r->kernel : "(no kernel)";
    if (!at_is_fp(r->device))
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "result %.80s: device is not a fingerprint (16 hex digits)", name);
    if (!at_text_ok(r->kernel, RT_TDB_MAX_NAME) || !at_text_ok(r->ir_hash, RT_TDB_MAX_NAME))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "result %.80s: kernel and ir_hash must be 1..%d bytes",
                            name, RT_TDB_MAX_NAME - 1);
    if (!at_text_ok(r->config, RT_TDB_MAX_CONFIG))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "result %.80s: config must be 1..%d bytes", name,
                            RT_TDB_MAX_CONFIG - 1);
    if (at_result_has_ctrl(r))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "result %.80s: a text field holds a control character",
                            name);
    if (rt_tdb_bucket_parse(r->bucket, &b, why, sizeof why))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "result %.80s: %s", name, why);
    if (!(isfinite(r->median_us) && isfinite(r->p20_us) && isfinite(r->p80_us) && r->p20_us >= 1e-3 &&
          r->p20_us <= r->median_us && r->median_us <= r->p80_us))
        return rt_file_errf(
            err, errlen, KILN_ERR_ARG,
            "result %.80s: times must be finite with 0.001 <= p20 <= median <= p80 (%g, %g, %g)", name,
            r->p20_us, r->median_us, r->p80_us);
    if (r->samples < 1 || r->candidates < 0 || r->invalid < 0 || r->invalid > r->candidates ||
        !(r->default_us <= 0 || isfinite(r->default_us)))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "result %.80s: bad samples, counts or default time",
                            name);
    if ((r->kiln_version && !at_text_ok(r->kiln_version, 32)) ||
        (r->tuned_at && !at_text_ok(r->tuned_at, 32)))
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "result %.80s: kiln_version and tuned_at must be 1..31 bytes", name);
    return KILN_OK;
}

/* ---- devices ---- */

/* Inserts (or ignores) one device row, inside the caller's transaction. */
static KilnStatus at_device_insert(RtTdb *db, const char *fp, const RtTdbDevice *d, char *err, int errlen)
{
    sqlite3_stmt *st = NULL;
    char now[32];
    rt_tdb_now(now);
    KilnStatus s =
        at_prepare(db, &st,
                   "INSERT OR IGNORE INTO devices(fingerprint, name, arch, sm_count, mem_bytes, driver,"
                   " cuda, added) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                   err, errlen);
    if (s) return s;
    const char *text[] = {fp, d->name, d->arch};
    for (int i = 0; i < 3; i++)
        sqlite3_bind_text(st, 1 + i, text[i], -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 4, d->sm_count);
    sqlite3_bind_int64(st, 5, d->mem_bytes);
    sqlite3_bind_text(st, 6, d->driver, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 7, d->cuda, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 8, now, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) s = at_sql_fail(db, rc, "cannot add device", err, errlen);
    sqlite3_finalize(st);
    return s;
}

KilnStatus at_store_device(RtTdb *db, const RtTdbDevice *d, char fp[RT_TDB_FP_LEN], char *err, int errlen)
{
    if (!db || !d || !fp) return rt_file_errf(err, errlen, KILN_ERR_ARG, "at_store_device: missing argument");
    if (!*d->name || !*d->arch || d->sm_count < 0 || d->mem_bytes < 0 ||
        !memchr(d->name, 0, sizeof d->name) || !memchr(d->arch, 0, sizeof d->arch) ||
        !memchr(d->driver, 0, sizeof d->driver) || !memchr(d->cuda, 0, sizeof d->cuda))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: device: missing name or arch, or a bad field",
                            rt_tdb_path(db));
    rt_tdb_fingerprint(d, fp);
    KilnStatus s = at_begin(db, err, errlen);
    if (s) return s;
    return at_end(db, at_device_insert(db, fp, d, err, errlen), err, errlen);
}

/* ---- results ---- */

/* Writes r inside the caller's transaction by the put rule (merge 0) or the merge rule (merge 1). */
static KilnStatus at_write(RtTdb *db, const AtResult *r, int merge, AtPutOutcome *out, char *err, int errlen)
{
    RtTdbBucket b;
    char bucket[RT_TDB_MAX_BUCKET], now[32];
    KilnStatus s = at_result_check(r, err, errlen);
    if (s) return s;
    rt_tdb_bucket_parse(r->bucket, &b, NULL, 0);
    rt_tdb_bucket_format(&b, bucket);
    rt_tdb_now(now);

    sqlite3_stmt *st = NULL;
    if ((s = at_prepare(
             db, &st,
             "SELECT (SELECT count(*) FROM devices WHERE fingerprint = ?1), r.id, r.pinned, r.median_us"
             " FROM (SELECT 1) LEFT JOIN results r ON r.device = ?1 AND r.ir_hash = ?2 AND r.bucket = ?3",
             err, errlen)))
        return s;
    sqlite3_bind_text(st, 1, r->device, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, r->ir_hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, bucket, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        s = at_sql_fail(db, rc, "cannot read results", err, errlen);
        sqlite3_finalize(st);
        return s;
    }
    int known = sqlite3_column_int(st, 0) > 0, exists = sqlite3_column_type(st, 1) != SQLITE_NULL;
    int64_t id = sqlite3_column_int64(st, 1);
    int pinned = sqlite3_column_int(st, 2) != 0;
    double old = sqlite3_column_double(st, 3);
    sqlite3_finalize(st);
    st = NULL;
    if (!known)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: device %s is not registered", rt_tdb_path(db),
                            r->device);

    AtPutOutcome what = exists ? AT_PUT_REPLACED : AT_PUT_INSERTED;
    if (exists && pinned)
        what = AT_PUT_KEPT_PINNED;
    else if (exists && merge && !r->pinned && !(r->median_us < old))
        what = AT_PUT_KEPT_BETTER;
    if (out) *out = what;
    if (what == AT_PUT_KEPT_PINNED || what == AT_PUT_KEPT_BETTER) return KILN_OK;

    const char *sql =
        exists ? "UPDATE results SET device = ?1, kernel = ?2, ir_hash = ?3, bucket = ?4, config = ?5,"
                 " median_us = ?6, p20_us = ?7, p80_us = ?8, samples = ?9, default_us = ?10,"
                 " candidates = ?11, invalid = ?12, kiln_version = ?13, tuned_at = ?14, pinned = ?15"
                 " WHERE id = ?16"
               : "INSERT INTO results(device, kernel, ir_hash, bucket, config, median_us, p20_us,"
                 " p80_us, samples, default_us, candidates, invalid, kiln_version, tuned_at, pinned)"
                 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
    if ((s = at_prepare(db, &st, sql, err, errlen))) return s;
    const char *text[] = {r->device, r->kernel, r->ir_hash, bucket, r->config};
    for (int i = 0; i < 5; i++)
        sqlite3_bind_text(st, 1 + i, text[i], -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, 6, r->median_us);
    sqlite3_bind_double(st, 7, r->p20_us);
    sqlite3_bind_double(st, 8, r->p80_us);
    sqlite3_bind_int(st, 9, r->samples);
    if (r->default_us > 0)
        sqlite3_bind_double(st, 10, r->default_us);
    else
        sqlite3_bind_null(st, 10);
    sqlite3_bind_int(st, 11, r->candidates);
    sqlite3_bind_int(st, 12, r->invalid);
    sqlite3_bind_text(st, 13, r->kiln_version ? r->kiln_version : KILN_VERSION_STRING, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 14, r->tuned_at ? r->tuned_at : now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 15, merge && r->pinned ? 1 : 0);
    if (exists) sqlite3_bind_int64(st, 16, id);
    rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) s = at_sql_fail(db, rc, "cannot write result", err, errlen);
    sqlite3_finalize(st);
    return s;
}

KilnStatus at_store_put(RtTdb *db, const AtResult *r, AtPutOutcome *out, char *err, int errlen)
{
    if (!db) return rt_file_errf(err, errlen, KILN_ERR_ARG, "at_store_put: no store");
    KilnStatus s = at_result_check(r, err, errlen);
    if (s || (s = at_begin(db, err, errlen))) return s;
    return at_end(db, at_write(db, r, 0, out, err, errlen), err, errlen);
}

/* ---- binaries ---- */

KilnStatus at_binary_check(const AtBinary *b, char *err, int errlen)
{
    if (!b) return rt_file_errf(err, errlen, KILN_ERR_ARG, "binary: missing");
    const char *cfg = b->config && *b->config ? b->config : "(no config)";
    if (!at_is_fp(b->device))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "binary %.80s: device is not a fingerprint", cfg);
    if (!at_text_ok(b->ir_hash, RT_TDB_MAX_NAME) || !at_text_ok(b->config, RT_TDB_MAX_CONFIG) ||
        !at_text_ok(b->target, RT_TDB_MAX_NAME) || !at_text_ok(b->format, RT_TDB_MAX_FORMAT) ||
        !at_text_ok(b->entry, RT_TDB_MAX_NAME) || !at_text_ok(b->grid, RT_TDB_MAX_TEXT) || !b->params ||
        strlen(b->params) >= RT_TDB_MAX_TEXT)
        return rt_file_errf(
            err, errlen, KILN_ERR_ARG,
            "binary %.80s: ir_hash, target, format, entry, params or grid missing or too long", cfg);
    if (b->block < 1 || b->block > 1024 || b->smem < 0 || b->smem > 1 << 20)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "binary %.80s: block %d or smem %d out of range", cfg,
                            b->block, b->smem);
    if (!b->data || b->size < 1 || b->size > RT_TDB_MAX_BINARY)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "binary %.80s: %zu bytes of data (1 .. %d)", cfg,
                            b->size, RT_TDB_MAX_BINARY);
    if (!(b->compile_ms < 0 || isfinite(b->compile_ms)) ||
        (b->kiln_version && !at_text_ok(b->kiln_version, 32)) || (b->added && !at_text_ok(b->added, 32)))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "binary %.80s: bad compile_ms, kiln_version or added",
                            cfg);
    return KILN_OK;
}

/* An imported binary's launch limits re-derived from its target and config rather than taken from the
 * row: the target is one kiln knows; a CUDA binary launches WARPS * 32 threads and at most the target's
 * shared memory; a host binary 1 and 0. Its grid needs the kernel's spec, which a store does not hold:
 * the engine re-derives it when it loads the binary (rt_plan_binary_check). 0, or -1 with why. */
static int at_binary_limits(const AtBinary *b, char *why, size_t n)
{
    const CgTarget *t = cg_target_find(b->target);
    int64_t warps = rt_plan_config_i(b->config, "WARPS", 0);
    if (!t) return snprintf(why, n, "unknown target %.40s", b->target), -1;
    if (t->backend == CG_BACKEND_CUDA && warps > 0 && b->block != warps * 32)
        return snprintf(why, n, "%d threads per block, its config's WARPS=%lld gives %lld", b->block,
                        (long long)warps, (long long)warps * 32),
               -1;
    if (t->backend == CG_BACKEND_CUDA && b->smem > t->facts.smem_block)
        return snprintf(why, n, "%d bytes of shared memory, %s has %d", b->smem, t->name,
                        t->facts.smem_block),
               -1;
    if (t->backend == CG_BACKEND_HOST && (b->block != 1 || b->smem != 0))
        return snprintf(why, n, "block %d, smem %d: a host binary launches with 1 and 0", b->block, b->smem),
               -1;
    return 0;
}

/* Writes b inside the caller's transaction: replacing the row for its key, or keeping it (replace 0).
 * *written (may be NULL) is 1 when a row was written. */
static KilnStatus at_binary_write(RtTdb *db, const AtBinary *b, int replace, int *written, char *err,
                                  int errlen)
{
    if (written) *written = 0;
    KilnStatus s = at_binary_check(b, err, errlen);
    if (s) return s;
    sqlite3_stmt *st = NULL;
    if ((s = at_prepare(db, &st, "SELECT count(*) FROM devices WHERE fingerprint = ?1", err, errlen)))
        return s;
    sqlite3_bind_text(st, 1, b->device, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st), known = rc == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_ROW) return at_sql_fail(db, rc, "cannot read devices", err, errlen);
    if (!known)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: device %s is not registered", rt_tdb_path(db),
                            b->device);
    char hash[RT_TDB_FP_LEN], now[32];
    rt_pkg_binary_hash(b->data, b->size, b->target, b->config, b->grid, b->format, b->entry, b->block,
                       b->smem, hash);
    rt_tdb_now(now);
    if ((s = at_prepare(
             db, &st,
             replace ? "INSERT OR REPLACE INTO binaries(device, ir_hash, config, target, format, entry,"
                       " params, grid, block, smem, data, hash, compile_ms, kiln_version, added)"
                       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
                     : "INSERT OR IGNORE INTO binaries(device, ir_hash, config, target, format, entry,"
                       " params, grid, block, smem, data, hash, compile_ms, kiln_version, added)"
                       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
             err, errlen)))
        return s;
    const char *text[] = {b->device, b->ir_hash, b->config, b->target,
                          b->format, b->entry,   b->params, b->grid};
    for (int i = 0; i < 8; i++)
        sqlite3_bind_text(st, 1 + i, text[i], -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 9, b->block);
    sqlite3_bind_int(st, 10, b->smem);
    sqlite3_bind_blob(st, 11, b->data, (int)b->size, SQLITE_STATIC);
    sqlite3_bind_text(st, 12, hash, -1, SQLITE_TRANSIENT);
    if (b->compile_ms >= 0)
        sqlite3_bind_double(st, 13, b->compile_ms);
    else
        sqlite3_bind_null(st, 13);
    sqlite3_bind_text(st, 14, b->kiln_version ? b->kiln_version : KILN_VERSION_STRING, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 15, b->added ? b->added : now, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        s = at_sql_fail(db, rc, "cannot write binary", err, errlen);
    else if (written)
        *written = sqlite3_changes(rt_tdb_sqlite(db)) > 0;
    sqlite3_finalize(st);
    return s;
}

KilnStatus at_store_put_binary(RtTdb *db, const AtBinary *b, char *err, int errlen)
{
    if (!db) return rt_file_errf(err, errlen, KILN_ERR_ARG, "at_store_put_binary: no store");
    KilnStatus s = at_binary_check(b, err, errlen);
    if (s || (s = at_begin(db, err, errlen))) return s;
    return at_end(db, at_binary_write(db, b, 1, NULL, err, errlen), err, errlen);
}

/* ---- pins and prune ---- */

KilnStatus at_store_pin(RtTdb *db, const RtTdbFilter *f, int pin, int64_t *changed, char *err, int errlen)
{
    if (changed) *changed = 0;
    if (!db || !f) return rt_file_errf(err, errlen, KILN_ERR_ARG, "at_store_pin: missing argument");
    RtTdbFilter cf;
    char canon[RT_TDB_MAX_BUCKET], where[512], sql[768];
    KilnStatus s = rt_tdb_filter_canon(f, &cf, canon, err, errlen);
    if (s) return s;
    rt_tdb_filter_sql(&cf, where, sizeof where);
    snprintf(sql, sizeof sql, "UPDATE results SET pinned = ?1%s%s pinned != ?1", where,
             where[0] ? " AND" : " WHERE");
    if ((s = at_begin(db, err, errlen))) return s;
    sqlite3_stmt *st = NULL;
    if (!(s = at_prepare(db, &st, sql, err, errlen))) {
        sqlite3_bind_int(st, 1, pin ? 1 : 0);
        rt_tdb_filter_bind(st, &cf, 2);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_DONE)
            s = at_sql_fail(db, rc, "cannot pin", err, errlen);
        else if (changed)
            *changed = sqlite3_changes(rt_tdb_sqlite(db));
    }
    sqlite3_finalize(st);
    return at_end(db, s, err, errlen);
}

KilnStatus at_store_prune(RtTdb *db, const RtTdbFilter *f, int64_t *removed, char *err, int errlen)
{
    if (removed) *removed = 0;
    if (!db || !f) return rt_file_errf(err, errlen, KILN_ERR_ARG, "at_store_prune: missing argument");
    if (f->id <= 0 && !f->device && !f->kernel && !f->ir_hash && !f->bucket && !f->kiln_version && !f->before)
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "%s: prune needs a criterion (age, kiln version, device, kernel, ...)",
                            rt_tdb_path(db));
    RtTdbFilter cf;
    char canon[RT_TDB_MAX_BUCKET], where[512], sql[768];
    KilnStatus s = rt_tdb_filter_canon(f, &cf, canon, err, errlen);
    if (s) return s;
    rt_tdb_filter_sql(&cf, where, sizeof where);
    snprintf(sql, sizeof sql, "DELETE FROM results%s", where);
    if ((s = at_begin(db, err, errlen))) return s;
    sqlite3_stmt *st = NULL;
    if (!(s = at_prepare(db, &st, sql, err, errlen))) {
        rt_tdb_filter_bind(st, &cf, 1);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_DONE)
            s = at_sql_fail(db, rc, "cannot prune", err, errlen);
        else if (removed)
            *removed = sqlite3_changes(rt_tdb_sqlite(db));
    }
    sqlite3_finalize(st);
    st = NULL;
    if (!s)
        s = at_exec(db,
                    "DELETE FROM binaries WHERE NOT EXISTS (SELECT 1 FROM results r WHERE r.device ="
                    " binaries.device AND r.ir_hash = binaries.ir_hash AND r.config = binaries.config)",
                    "cannot prune binaries", err, errlen);
    if (!s && f->device &&
        !(s = at_prepare(db, &st,
                         "DELETE FROM devices WHERE instr(fingerprint, ?1) = 1"
                         " AND NOT EXISTS (SELECT 1 FROM results r WHERE r.device = devices.fingerprint)",
                         err, errlen))) {
        sqlite3_bind_text(st, 1, f->device, -1, SQLITE_TRANSIENT);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_DONE) s = at_sql_fail(db, rc, "cannot prune devices", err, errlen);
    }
    sqlite3_finalize(st);
    return at_end(db, s, err, errlen);
}

/* ---- import and export: copying rows between two stores ---- */

typedef struct AtDev {
    char fp[RT_TDB_FP_LEN];
    RtTdbDevice d;
    int ok;     /* its fields hash to its fingerprint */
    int ctrl;   /* a field holds a control character (its rows are skipped) */
    int copied; /* written to the destination (export) */
} AtDev;

typedef struct AtCopy {
    RtTdb *src, *dst;
    AtDev *devs;
    int n_devs, cap_devs;
    AtMergeStats *st; /* import */
    int64_t rows;     /* export */
    KilnStatus status;
    char *err;
    int errlen;
} AtCopy;

static int at_copy_dev(void *ctx, const char *fp, const RtTdbDevice *d, int64_t results)
{
    AtCopy *c = ctx;
    if (c->n_devs == c->cap_devs) {
        int cap = c->cap_devs ? 2 * c->cap_devs : 8;
        AtDev *n = realloc(c->devs, sizeof *n * (size_t)cap);
        if (!n) {
            c->status =
                rt_file_errf(c->err, c->errlen, KILN_ERR_NOMEM, "%s: out of memory", rt_tdb_path(c->dst));
            return 1;
        }
        c->devs = n, c->cap_devs = cap;
    }
    AtDev *x = &c->devs[c->n_devs++];
    memset(x, 0, sizeof *x);
    snprintf(x->fp, sizeof x->fp, "%s", fp);
    x->d = *d;
    char want[RT_TDB_FP_LEN];
    rt_tdb_fingerprint(d, want);
    x->ok = !strcmp(want, fp);
    x->ctrl = at_device_has_ctrl(d);
    return 0;
}

static AtDev *at_find_dev(AtCopy *c, const char *fp)
{
    for (int i = 0; i < c->n_devs; i++)
        if (!strcmp(c->devs[i].fp, fp)) return &c->devs[i];
    return NULL;
}

/* Copies src's binaries of (device, ir_hash, config), every target, into dst (keeping any dst has). A
 * damaged binary is counted and left behind: the row is still a valid measurement. Returns 0, or 1 after
 * a failure of dst (c->status). */
static int at_copy_binaries(AtCopy *c, const RtTdbRow *row)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(rt_tdb_sqlite(c->src),
                                "SELECT DISTINCT target FROM binaries WHERE device = ?1 AND ir_hash = ?2 AND"
                                " config = ?3 ORDER BY target",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) {
        c->status = at_sql_fail(c->src, rc, "cannot list binaries", c->err, c->errlen);
        return 1;
    }
    const char *key[] = {row->device, row->ir_hash, row->config};
    for (int i = 0; i < 3; i++)
        sqlite3_bind_text(st, i + 1, key[i], -1, SQLITE_TRANSIENT);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        char target[RT_TDB_MAX_NAME];
        const unsigned char *t = sqlite3_column_text(st, 0);
        RtTdbBinary bin;
        int found = 0, fits = t && sqlite3_column_bytes(st, 0) < (int)sizeof target;
        if (fits) snprintf(target, sizeof target, "%s", (const char *)t);
        if (!fits ||
            rt_tdb_binary_get(c->src, row->device, row->ir_hash, row->config, target, &bin, &found, NULL,
                              0) ||
            !found) {
            if (c->st) c->st->bad_binary++;
            continue;
        }
        AtBinary b = {.device = row->device,
                      .ir_hash = row->ir_hash,
                      .config = row->config,
                      .target = target,
                      .format = bin.format,
                      .entry = bin.entry,
                      .params = bin.params,
                      .grid = bin.grid,
                      .block = bin.block,
                      .smem = bin.smem,
                      .data = bin.data,
                      .size = bin.size,
                      .compile_ms = bin.compile_ms,
                      .kiln_version = bin.kiln_version,
                      .added = bin.added};
        int written = 0;
        char why[160];
        if (at_binary_check(&b, NULL, 0) || (c->st && at_binary_limits(&b, why, sizeof why))) {
            if (c->st) c->st->bad_binary++;
        } else if ((c->status = at_binary_write(c->dst, &b, 0, &written, c->err, c->errlen))) {
            rt_tdb_binary_free(&bin);
            break;
        }
        if (written && c->st) c->st->binaries++;
        rt_tdb_binary_free(&bin);
    }
    if (!c->status && rc != SQLITE_DONE)
        c->status = at_sql_fail(c->src, rc, "cannot list binaries", c->err, c->errlen);
    sqlite3_finalize(st);
    return c->status != KILN_OK;
}

static int at_copy_row(void *ctx, const RtTdbRow *row)
{
    AtCopy *c = ctx;
    AtDev *dev = at_find_dev(c, row->device);
    if (!dev || !dev->ok) {
        if (c->st) c->st->bad_device++;
        return 0;
    }
    AtResult r = {.device = row->device,
                  .kernel = row->kernel,
                  .ir_hash = row->ir_hash,
                  .bucket = row->bucket,
                  .config = row->config,
                  .median_us = row->median_us,
                  .p20_us = row->p20_us,
                  .p80_us = row->p80_us,
                  .samples = row->samples,
                  .default_us = row->default_us,
                  .candidates = row->candidates,
                  .invalid = row->invalid,
                  .kiln_version = row->kiln_version,
                  .tuned_at = row->tuned_at,
                  .pinned = row->pinned};
    if (dev->ctrl || at_result_has_ctrl(&r)) {
        if (c->st) c->st->bad_text++;
        return 0;
    }
    if (row->damaged || at_result_check(&r, NULL, 0)) {
        if (c->st) c->st->bad_row++;
        return 0;
    }
    if (!dev->copied) {
        if ((c->status = at_device_insert(c->dst, dev->fp, &dev->d, c->err, c->errlen))) return 1;
        dev->copied = 1;
    }
    AtPutOutcome what;
    if ((c->status = at_write(c->dst, &r, 1, &what, c->err, c->errlen))) return 1;
    if ((what == AT_PUT_INSERTED || what == AT_PUT_REPLACED) && at_copy_binaries(c, row)) return 1;
    c->rows++;
    if (c->st) {
        int64_t *count[] = {&c->st->inserted, &c->st->replaced, &c->st->kept_pinned, &c->st->kept_better};
        (*count[what])++;
    }
    return 0;
}

/* Copies src's rows that f selects into c->dst by the merge rule (an export's destination is new, so
 * there every row goes in as it is, pin flag included), inside one transaction of dst. */
static KilnStatus at_copy(RtTdb *src, const RtTdbFilter *f, AtCopy *c)
{
    KilnStatus s = rt_tdb_devices(src, at_copy_dev, c, c->err, c->errlen);
    if (s || (s = c->status)) return s;
    if ((s = at_begin(c->dst, c->err, c->errlen))) return s;
    s = rt_tdb_rows(src, f, at_copy_row, c, c->err, c->errlen);
    if (!s) s = c->status;
    return at_end(c->dst, s, c->err, c->errlen);
}

KilnStatus at_store_import(RtTdb *db, const char *src, AtMergeStats *stats, char *err, int errlen)
{
    AtMergeStats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    if (!db || !src) return rt_file_errf(err, errlen, KILN_ERR_ARG, "at_store_import: missing argument");
    RtTdb *in = NULL;
    KilnStatus s = rt_tdb_open(src, RT_TDB_READ, &in, err, errlen);
    if (s) return s;
    AtCopy c = {.src = in, .dst = db, .st = stats, .err = err, .errlen = errlen};
    s = at_copy(in, NULL, &c);
    free(c.devs);
    rt_tdb_close(in);
    return s;
}

KilnStatus at_store_export(RtTdb *db, const RtTdbFilter *f, const char *path, int64_t *rows, char *err,
                           int errlen)
{
    if (rows) *rows = 0;
    if (!db || !path || !*path)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "at_store_export: missing argument");
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
        return rt_file_errf(err, errlen, KILN_ERR_IO, "%s: exists (export writes a new file)", path);
    RtFileOut o; /* refuses a directory, FIFO, device or link; commit by link(), so nothing is replaced */
    KilnStatus s = rt_file_out_begin(&o, path, RT_FILE_OUT_NEW, err, errlen);
    if (s) return s;
    RtTdb *out = NULL;
    AtCopy c = {.src = db, .err = err, .errlen = errlen};
    s = rt_tdb_open(o.tmp, RT_TDB_WRITE_ROLLBACK, &out, err, errlen);
    if (!s) {
        c.dst = out;
        s = at_copy(db, f, &c);
    }
    free(c.devs);
    rt_tdb_close(out);
    if (!s)
        s = rt_file_out_commit(&o, err, errlen); /* fsync, re-check, link, remove the temporary */
    else
        rt_file_out_abort(&o);
    if (!s && rows) *rows = c.rows;
    return s;
}
