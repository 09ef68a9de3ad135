/* test_tunedb.c — the tuning store: buckets and fingerprints, schema and migrations, hostile files (right
 * status, one-line message that starts with the path, file never modified), lookups (exact, nearest,
 * none), the put/pin/merge rules, prune, export/import, two writer processes at once, and writers killed
 * with SIGKILL mid-transaction (the store passes integrity_check and holds exactly the committed rows). */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "autotune/at_store.h"
#include "kfile.h"
#include "kt.h"
#include "runtime/rt_package.h"
#include "runtime/rt_tunedb.h"

#define KT_STR_(x) #x
#define KT_STR(x)  KT_STR_(x)

static const char *scratch; /* kf_scratch_open's directory */

/* Runs sql on the file at path with a plain SQLite connection (test setup, bypassing kiln). */
static void raw(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    char *emsg = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, &emsg);
    KT_CHECK(rc == SQLITE_OK, "raw sql on %s: %s", path, emsg ? emsg : sqlite3_errstr(rc));
    sqlite3_free(emsg);
    sqlite3_close(db);
}

/* An integer from one query on a plain connection; -1 on failure. */
static long long raw_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static int integrity_ok(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int ok = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        ok = !strcmp((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
    sqlite3_close(db);
    return ok;
}

static RtTdbDevice h200(void)
{
    RtTdbDevice d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "NVIDIA H200");
    snprintf(d.arch, sizeof d.arch, "sm_90a");
    d.sm_count = 132;
    d.mem_bytes = 150754820096LL;
    snprintf(d.driver, sizeof d.driver, "580.159");
    snprintf(d.cuda, sizeof d.cuda, "13.0");
    return d;
}

static RtTdb *open_w(const char *path)
{
    RtTdb *db = NULL;
    char err[512];
    KilnStatus s = rt_tdb_open(path, RT_TDB_WRITE, &db, err, sizeof err);
    KT_CHECK(s == KILN_OK, "open for writing: %s", err);
    return db;
}

static AtResult result(const char *fp, const char *ir_hash, const char *bucket, const char *config, double us)
{
    return (AtResult){.device = fp,
                      .kernel = "rmsnorm_4096_bf16",
                      .ir_hash = ir_hash,
                      .bucket = bucket,
                      .config = config,
                      .median_us = us,
                      .p20_us = us * 0.98,
                      .p80_us = us * 1.03,
                      .samples = 20,
                      .default_us = us * 1.5,
                      .candidates = 12,
                      .invalid = 2};
}

static KilnStatus put(RtTdb *db, const AtResult *r, AtPutOutcome *what)
{
    char err[512];
    KilnStatus s = at_store_put(db, r, what, err, sizeof err);
    KT_CHECK(s == KILN_OK, "put %s %s: %s", r->ir_hash, r->bucket, err);
    return s;
}

/* ---- buckets and fingerprints ---- */

static void test_buckets(void)
{
    RtTdbBucket b, c;
    char text[RT_TDB_MAX_BUCKET], err[256];
    KT_CHECK(rt_tdb_bucket_parse(" ctx = 4096 , B=32", &b, err, sizeof err) == KILN_OK, "parse: %s", err);
    rt_tdb_bucket_format(&b, text);
    KT_CHECK(!strcmp(text, "B=32,ctx=4096"), "canonical form: %s", text);
    KT_CHECK(rt_tdb_bucket_parse("", &b, err, sizeof err) == KILN_OK && b.n == 0, "empty bucket");
    rt_tdb_bucket_format(&b, text);
    KT_CHECK(!strcmp(text, ""), "empty canonical");
    KT_CHECK(rt_tdb_bucket_parse("T=007", &b, err, sizeof err) == KILN_OK && b.val[0] == 7, "leading zeros");
    rt_tdb_bucket_format(&b, text);
    KT_CHECK(!strcmp(text, "T=7"), "leading zeros dropped: %s", text);
    static const char *const bad[] = {"T=0",
                                      "T=",
                                      "=3",
                                      "T=1,T=2",
                                      "1T=3",
                                      "T=12x",
                                      "T=1,",
                                      "T 1",
                                      "T=-1",
                                      "T=1073741825",
                                      "T=99999999999999999999",
                                      "a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1",
                                      "a_very_long_key_name=1"};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        KT_CHECK(rt_tdb_bucket_parse(bad[i], &b, err, sizeof err) == KILN_ERR_ARG && err[0] &&
                     !strchr(err, '\n'),
                 "bad bucket '%s' accepted (%s)", bad[i], err);
    }
    rt_tdb_bucket_parse("T=128", &b, NULL, 0);
    rt_tdb_bucket_parse("T=32", &c, NULL, 0);
    KT_CHECK(rt_tdb_bucket_distance(&b, &c) == 2.0, "log distance");
    rt_tdb_bucket_parse("B=128", &c, NULL, 0);
    KT_CHECK(rt_tdb_bucket_distance(&b, &c) < 0, "other keys: no distance");

    RtTdbDevice d = h200(), e = h200();
    char fp[RT_TDB_FP_LEN], fp2[RT_TDB_FP_LEN];
    rt_tdb_fingerprint(&d, fp);
    /* The fingerprint is stored in every user's tuning DB: it must never change for the same fields. */
    KT_CHECK(!strcmp(fp, "7cf3ce9c10f9db45"), "fingerprint changed: %s", fp);
    snprintf(e.driver, sizeof e.driver, "580.160");
    rt_tdb_fingerprint(&e, fp2);
    KT_CHECK(strcmp(fp, fp2) != 0, "driver is part of the fingerprint");
    e = h200();
    e.sm_count = 66;
    rt_tdb_fingerprint(&e, fp2);
    KT_CHECK(strcmp(fp, fp2) != 0, "SM count is part of the fingerprint");
}

/* ---- schema and migrations ---- */

static void test_schema(void)
{
    const char *path = kf_at("new.db");
    RtTdb *db = open_w(path);
    if (!db) return;
    KT_CHECK(!strcmp(rt_tdb_path(db), path), "path");
    rt_tdb_close(db);
    KT_CHECK(raw_int(path, "PRAGMA application_id") == RT_TDB_APPLICATION_ID, "application_id");
    KT_CHECK(raw_int(path, "PRAGMA user_version") == RT_TDB_SCHEMA_VERSION, "user_version");
    KT_CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'schema_version'") == RT_TDB_SCHEMA_VERSION,
             "meta.schema_version");
    KT_CHECK(raw_int(path, "SELECT count(*) FROM meta WHERE key IN ('created', 'created_by')") == 2,
             "meta keys");
    {
        sqlite3 *c = NULL;
        sqlite3_stmt *st = NULL;
        sqlite3_open_v2(path, &c, SQLITE_OPEN_READONLY, NULL);
        int wal = sqlite3_prepare_v2(c, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK &&
                  sqlite3_step(st) == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(st, 0), "wal");
        KT_CHECK(wal, "the store is in WAL mode");
        sqlite3_finalize(st);
        sqlite3_close(c);
    }
    /* the unique key: (device, ir_hash, bucket) */
    KT_CHECK(raw_int(path, "SELECT count(*) FROM pragma_index_list('results') WHERE \"unique\" = 1") == 1,
             "results has one unique index");

    /* READ opens it and reopening for writing changes nothing */
    char err[512];
    RtTdb *r = NULL;
    KT_CHECK(rt_tdb_open(path, RT_TDB_READ, &r, err, sizeof err) == KILN_OK, "read: %s", err);
    rt_tdb_close(r);
    db = open_w(path);
    rt_tdb_close(db);
    KT_CHECK(raw_int(path, "PRAGMA user_version") == RT_TDB_SCHEMA_VERSION, "reopen keeps the version");

    /* An empty (0-byte) file becomes a store when opened for writing. */
    kf_spit(kf_at("empty-w.db"), "", 0);
    db = open_w(kf_at("empty-w.db"));
    rt_tdb_close(db);
    KT_CHECK(raw_int(kf_at("empty-w.db"), "PRAGMA user_version") == RT_TDB_SCHEMA_VERSION,
             "0-byte file initialized");

    /* A v0 store (kiln's application_id, version 0, no tables): READ refuses it unchanged, WRITE upgrades. */
    const char *v0 = kf_at("v0.db");
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=0;", RT_TDB_APPLICATION_ID);
    raw(v0, sql);
    long n0, n1;
    char *before = kf_slurp(v0, &n0);
    KilnStatus s = rt_tdb_open(v0, RT_TDB_READ, &r, err, sizeof err);
    KT_CHECK(s == KILN_ERR_FORMAT && strstr(err, "older") && strstr(err, "kiln db upgrade"), "v0 read: %s",
             err);
    char *after = kf_slurp(v0, &n1);
    KT_CHECK(before && after && n0 == n1 && !memcmp(before, after, (size_t)n0), "v0 modified by a read");
    free(before);
    free(after);
    db = open_w(v0);
    rt_tdb_close(db);
    KT_CHECK(raw_int(v0, "PRAGMA user_version") == RT_TDB_SCHEMA_VERSION, "v0 upgraded");
    KT_CHECK(raw_int(v0,
                     "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('meta', 'devices',"
                     " 'results')") == 3,
             "v0 upgraded: tables");
    KT_CHECK(rt_tdb_open(v0, RT_TDB_READ, &r, err, sizeof err) == KILN_OK, "upgraded v0 reads: %s", err);
    rt_tdb_close(r);

    /* The framework, on a synthetic chain of three steps. */
    static const RtTdbStep steps[] = {
        {1, "v1: t",
         "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); CREATE TABLE t(a INTEGER);"},
        {2, "v2: t.b", "ALTER TABLE t ADD COLUMN b TEXT NOT NULL DEFAULT 'x';"},
        {3, "v3: index", "CREATE INDEX t_b ON t(b);"},
    };
    sqlite3 *m = NULL;
    sqlite3_open(":memory:", &m);
    s = rt_tdb_migrate(m, "mem", steps, 3, 0, err, sizeof err);
    KT_CHECK(s == KILN_OK, "migrate 0 -> 3: %s", err);
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(m,
                       "SELECT (SELECT user_version FROM pragma_user_version),"
                       " (SELECT value FROM meta WHERE key = 'schema_version'),"
                       " (SELECT count(*) FROM pragma_table_info('t')),"
                       " (SELECT count(*) FROM sqlite_master WHERE name = 't_b')",
                       -1, &st, NULL);
    KT_CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 3 &&
                 sqlite3_column_int(st, 1) == 3 && sqlite3_column_int(st, 2) == 2 &&
                 sqlite3_column_int(st, 3) == 1,
             "every step ran, in order");
    sqlite3_finalize(st);
    sqlite3_close(m);

    /* from v1: only steps 2 and 3 run; a failing step rolls the whole upgrade back */
    static const RtTdbStep broken[] = {
        steps[0], steps[1], {3, "v3: broken", "CREATE INDEX t_b ON no_such_table(b);"}};
    m = NULL;
    sqlite3_open(":memory:", &m);
    sqlite3_exec(m,
                 "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); CREATE TABLE t(a INTEGER);"
                 " PRAGMA user_version=1;",
                 NULL, NULL, NULL);
    sqlite3_exec(m, "BEGIN", NULL, NULL, NULL);
    s = rt_tdb_migrate(m, "mem", broken, 3, 1, err, sizeof err);
    KT_CHECK(s != KILN_OK && strstr(err, "v3") && kf_starts_with(err, "mem: "), "broken step: %s", err);
    sqlite3_exec(m, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_prepare_v2(m,
                       "SELECT (SELECT user_version FROM pragma_user_version),"
                       " (SELECT count(*) FROM pragma_table_info('t'))",
                       -1, &st, NULL);
    KT_CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1 &&
                 sqlite3_column_int(st, 1) == 1,
             "a failed upgrade leaves v1 as it was");
    sqlite3_finalize(st);
    /* a gap in the chain is refused */
    static const RtTdbStep gap[] = {{1, "v1", "SELECT 1;"}, {3, "v3", "SELECT 1;"}};
    s = rt_tdb_migrate(m, "mem", gap, 2, 1, err, sizeof err);
    KT_CHECK(s == KILN_ERR_CORRUPT && strstr(err, "v3"), "gap: %s", err);
    sqlite3_close(m);
}

/* ---- hostile files ---- */

/* Opens path in mode and expects status want, a one-line message that starts with the path and contains
 * needle, and the file's bytes unchanged. */
static void expect_refused(const char *path, RtTdbMode mode, KilnStatus want, const char *needle)
{
    long n0 = 0, n1 = 0;
    char *before = kf_slurp(path, &n0);
    RtTdb *db = (RtTdb *)1;
    char err[512] = "";
    KilnStatus s = rt_tdb_open(path, mode, &db, err, sizeof err);
    KT_CHECK(s == want, "%s (mode %d): status %s, want %s: %s", path, mode, kiln_status_name(s),
             kiln_status_name(want), err);
    KT_CHECK(db == NULL, "out is NULL on failure");
    KT_CHECK(kf_starts_with(err, path) && !strchr(err, '\n') && strstr(err, needle),
             "message for %s: '%s' (want %s)", path, err, needle);
    char *after = kf_slurp(path, &n1);
    KT_CHECK((!before && !after) || (before && after && n0 == n1 && !memcmp(before, after, (size_t)n0)),
             "%s was modified", path);
    free(before);
    free(after);
    if (s == KILN_OK) rt_tdb_close(db);
}

static void test_hostile(void)
{
    char sql[256];
    expect_refused(kf_at("missing.db"), RT_TDB_READ, KILN_ERR_IO, "does not exist");
    expect_refused(kf_at("no-dir/x.db"), RT_TDB_WRITE, KILN_ERR_IO, "does not exist");
    mkdir(kf_at("dir.db"), 0700);
    expect_refused(kf_at("dir.db"), RT_TDB_READ, KILN_ERR_IO, "is a directory");
    expect_refused(kf_at("dir.db"), RT_TDB_WRITE, KILN_ERR_IO, "is a directory");
    kf_spit(kf_at("empty.db"), "", 0);
    expect_refused(kf_at("empty.db"), RT_TDB_READ, KILN_ERR_FORMAT, "empty file");
    const char text[] = "hello, this is not a database at all, just some text that goes on for a while....\n"
                        "and some more text so that it is longer than the 100-byte SQLite header.......\n";
    kf_spit(kf_at("text.db"), text, sizeof text - 1);
    expect_refused(kf_at("text.db"), RT_TDB_READ, KILN_ERR_FORMAT, "not an SQLite file");
    expect_refused(kf_at("text.db"), RT_TDB_WRITE, KILN_ERR_FORMAT, "not an SQLite file");

    raw(kf_at("other.db"), "CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES ('mine');");
    expect_refused(kf_at("other.db"), RT_TDB_READ, KILN_ERR_FORMAT,
                   "not a kiln tuning DB (application_id 0x00000000");
    expect_refused(kf_at("other.db"), RT_TDB_WRITE, KILN_ERR_FORMAT, "not a kiln tuning DB");
    snprintf(sql, sizeof sql, "PRAGMA application_id=%d; CREATE TABLE meta(key TEXT);",
             RT_PKG_APPLICATION_ID);
    raw(kf_at("package.db"), sql);
    expect_refused(kf_at("package.db"), RT_TDB_WRITE, KILN_ERR_FORMAT,
                   "a kiln package, not a kiln tuning DB");

    /* a store from a newer kiln */
    RtTdb *db = open_w(kf_at("newer.db"));
    rt_tdb_close(db);
    raw(kf_at("newer.db"), "PRAGMA journal_mode=DELETE; PRAGMA user_version=9;");
    expect_refused(kf_at("newer.db"), RT_TDB_READ, KILN_ERR_FORMAT,
                   "schema 9 is newer than this build reads (" KT_STR(RT_TDB_SCHEMA_VERSION) ")");
    expect_refused(kf_at("newer.db"), RT_TDB_WRITE, KILN_ERR_FORMAT, "upgrade kiln");

    /* a table or a column missing, meta disagreeing */
    db = open_w(kf_at("nocol.db"));
    rt_tdb_close(db);
    raw(kf_at("nocol.db"), "PRAGMA journal_mode=DELETE; ALTER TABLE results DROP COLUMN default_us;");
    expect_refused(kf_at("nocol.db"), RT_TDB_READ, KILN_ERR_CORRUPT, "missing column results.default_us");
    expect_refused(kf_at("nocol.db"), RT_TDB_WRITE, KILN_ERR_CORRUPT, "missing column results.default_us");
    db = open_w(kf_at("notab.db"));
    rt_tdb_close(db);
    raw(kf_at("notab.db"), "PRAGMA journal_mode=DELETE; DROP TABLE devices;");
    expect_refused(kf_at("notab.db"), RT_TDB_READ, KILN_ERR_CORRUPT, "missing table devices");
    db = open_w(kf_at("meta.db"));
    rt_tdb_close(db);
    raw(kf_at("meta.db"),
        "PRAGMA journal_mode=DELETE; UPDATE meta SET value = '7' WHERE key = 'schema_version';");
    expect_refused(kf_at("meta.db"), RT_TDB_READ, KILN_ERR_CORRUPT, "meta.schema_version 7");
    char sv[128];
    snprintf(sv, sizeof sv, "UPDATE meta SET value = '%dabc' WHERE key = 'schema_version';",
             RT_TDB_SCHEMA_VERSION);
    raw(kf_at("meta.db"), sv);
    snprintf(sv, sizeof sv, "meta.schema_version %dabc", RT_TDB_SCHEMA_VERSION); /* trailing junk: corrupt */
    expect_refused(kf_at("meta.db"), RT_TDB_READ, KILN_ERR_CORRUPT, sv);

    /* damaged b-tree pages and a truncated file */
    db = open_w(kf_at("damaged.db"));
    if (db) {
        RtTdbDevice d = h200();
        char fp[RT_TDB_FP_LEN], err[512], hash[32];
        at_store_device(db, &d, fp, err, sizeof err);
        for (int i = 0; i < 300; i++) {
            snprintf(hash, sizeof hash, "%016x", i);
            AtResult r = result(fp, hash, "T=128", "BLOCK=1024 WARPS=4", 10 + i);
            at_store_put(db, &r, NULL, err, sizeof err);
        }
        rt_tdb_close(db);
    }
    raw(kf_at("damaged.db"), "PRAGMA journal_mode=DELETE");
    long n;
    char *bytes = kf_slurp(kf_at("damaged.db"), &n);
    KT_CHECK(bytes && n > 8 * 4096, "damaged.db has %ld bytes", n);
    if (bytes && n > 8 * 4096) {
        char *copy = malloc((size_t)n);
        memcpy(copy, bytes, (size_t)n);
        for (long i = 3 * 4096; i < 3 * 4096 + 64; i++)
            copy[i] = (char)0xA5; /* a b-tree page header */
        kf_spit(kf_at("garbled.db"), copy, n);
        expect_refused(kf_at("garbled.db"), RT_TDB_READ, KILN_ERR_CORRUPT, "corrupt tuning DB");
        expect_refused(kf_at("garbled.db"), RT_TDB_WRITE, KILN_ERR_CORRUPT, "corrupt tuning DB");
        kf_spit(kf_at("truncated.db"), bytes, n / 2);
        expect_refused(kf_at("truncated.db"), RT_TDB_READ, KILN_ERR_CORRUPT, "corrupt tuning DB");
        kf_spit(kf_at("header.db"), bytes, 60);
        expect_refused(kf_at("header.db"), RT_TDB_READ, KILN_ERR_CORRUPT, "corrupt tuning DB");
        free(copy);
    }
    free(bytes);

    char err[512];
    KT_CHECK(rt_tdb_open(NULL, RT_TDB_READ, &db, err, sizeof err) == KILN_ERR_ARG, "NULL path");
    KT_CHECK(rt_tdb_open(kf_at("x.db"), RT_TDB_READ, NULL, NULL, 0) == KILN_ERR_ARG, "NULL out");
    rt_tdb_close(NULL);
}

/* ---- lookups ---- */

static void test_lookup(void)
{
    const char *path = kf_at("lookup.db");
    RtTdb *db = open_w(path);
    if (!db) return;
    RtTdbDevice d = h200();
    char fp[RT_TDB_FP_LEN], err[512];
    KT_CHECK(at_store_device(db, &d, fp, err, sizeof err) == KILN_OK, "device: %s", err);
    static const char *const buckets[] = {"T=1", "T=16", "T=64", "T=1024", "B=32,ctx=4096", "ctx=512,B=8"};
    char cfg[64];
    for (int i = 0; i < 6; i++) {
        snprintf(cfg, sizeof cfg, "BLOCK=%d WARPS=4", 64 << i);
        AtResult r = result(fp, "aaaa", buckets[i], cfg, 10 + i);
        put(db, &r, NULL);
    }
    rt_tdb_close(db);

    RtTdb *rd = NULL;
    KT_CHECK(rt_tdb_open(path, RT_TDB_READ, &rd, err, sizeof err) == KILN_OK, "read: %s", err);
    if (!rd) return;
    RtTdbHit h;
    KT_CHECK(rt_tdb_lookup(rd, fp, "aaaa", "T=64", &h, err, sizeof err) == KILN_OK, "lookup: %s", err);
    KT_CHECK(h.match == RT_TDB_EXACT && !strcmp(h.config, "BLOCK=256 WARPS=4") && !strcmp(h.bucket, "T=64") &&
                 h.distance == 0 && h.median_us == 12,
             "exact: %d %s", h.match, h.config);
    KT_CHECK(!strcmp(rt_tdb_match_name(h.match), "tuned"), "match name");
    rt_tdb_lookup(rd, fp, "aaaa", "T=100", &h, err, sizeof err);
    KT_CHECK(h.match == RT_TDB_NEAREST && !strcmp(h.bucket, "T=64"), "nearest to 100: %s", h.bucket);
    rt_tdb_lookup(rd, fp, "aaaa", "T=4096", &h, err, sizeof err);
    KT_CHECK(h.match == RT_TDB_NEAREST && !strcmp(h.bucket, "T=1024") && h.distance == 2.0,
             "nearest to 4096: %s", h.bucket);
    /* T=32: T=16 and T=64 are both one octave away; the larger bucket wins the tie */
    rt_tdb_lookup(rd, fp, "aaaa", "T=32", &h, err, sizeof err);
    KT_CHECK(h.match == RT_TDB_NEAREST && !strcmp(h.bucket, "T=64") && h.distance == 1.0, "tie: %s",
             h.bucket);
    KT_CHECK(!strcmp(rt_tdb_match_name(h.match), "nearest"), "match name");
    /* two keys, given in any order and spacing */
    rt_tdb_lookup(rd, fp, "aaaa", "ctx = 4096, B=32", &h, err, sizeof err);
    KT_CHECK(h.match == RT_TDB_EXACT && !strcmp(h.bucket, "B=32,ctx=4096"), "two keys exact: %s", h.bucket);
    rt_tdb_lookup(rd, fp, "aaaa", "B=16,ctx=1024", &h, err, sizeof err);
    KT_CHECK(h.match == RT_TDB_NEAREST && !strcmp(h.bucket, "B=8,ctx=512"), "two keys nearest: %s (%g)",
             h.bucket, h.distance);
    /* nothing with the same keys, another IR hash, another device */
    rt_tdb_lookup(rd, fp, "aaaa", "ctx=4096", &h, err, sizeof err);
    KT_CHECK(h.match == RT_TDB_NONE && !strcmp(rt_tdb_match_name(h.match), "default"), "other keys: none");
    rt_tdb_lookup(rd, fp, "aaaa", "", &h, err, sizeof err);
    KT_CHECK(h.match == RT_TDB_NONE, "empty bucket: none");
    rt_tdb_lookup(rd, fp, "bbbb", "T=64", &h, err, sizeof err);
    KT_CHECK(h.match == RT_TDB_NONE, "other ir hash: none");
    rt_tdb_lookup(rd, "0123456789abcdef", "aaaa", "T=64", &h, err, sizeof err);
    KT_CHECK(h.match == RT_TDB_NONE, "other device: none");
    KT_CHECK(rt_tdb_lookup(rd, fp, "aaaa", "T=zero", &h, err, sizeof err) == KILN_ERR_ARG &&
                 h.match == RT_TDB_NONE,
             "bad bucket: %s", err);
    rt_tdb_close(rd);

    /* a hostile row: an over-long config is corrupt when it matches; an unparseable bucket never matches */
    char sql[1024];
    snprintf(
        sql, sizeof sql,
        "INSERT INTO results(device, kernel, ir_hash, bucket, config, median_us, p20_us, p80_us, samples,"
        " kiln_version, tuned_at) VALUES ('%s', 'k', 'cccc', 'T=8', printf('%%.900c', 'x'), 1, 1, 1, 1, 'v',"
        " 't'), ('%s', 'k', 'cccc', 'T=?x', 'BLOCK=1', 1, 1, 1, 1, 'v', 't')",
        fp, fp);
    raw(path, sql);
    KT_CHECK(rt_tdb_open(path, RT_TDB_READ, &rd, err, sizeof err) == KILN_OK, "read: %s", err);
    if (!rd) return;
    KT_CHECK(rt_tdb_lookup(rd, fp, "cccc", "T=8", &h, err, sizeof err) == KILN_ERR_CORRUPT &&
                 kf_starts_with(err, path) && h.match == RT_TDB_NONE,
             "over-long config: %s", err);
    KT_CHECK(rt_tdb_lookup(rd, fp, "cccc", "T=9", &h, err, sizeof err) == KILN_ERR_CORRUPT,
             "over-long nearest");
    rt_tdb_close(rd);
    raw(path, "DELETE FROM results WHERE ir_hash = 'cccc' AND bucket = 'T=8'");
    KT_CHECK(rt_tdb_open(path, RT_TDB_READ, &rd, err, sizeof err) == KILN_OK, "read: %s", err);
    if (!rd) return;
    KT_CHECK(rt_tdb_lookup(rd, fp, "cccc", "T=9", &h, err, sizeof err) == KILN_OK && h.match == RT_TDB_NONE,
             "an unparseable bucket never matches");
    rt_tdb_close(rd);
}

/* A reader sees rows a writer committed, while the writer's connection is still open (in its -wal). */
static void test_read_while_writing(void)
{
    const char *path = kf_at("live.db");
    RtTdb *w = open_w(path);
    if (!w) return;
    RtTdbDevice d = h200();
    char fp[RT_TDB_FP_LEN], err[512];
    at_store_device(w, &d, fp, err, sizeof err);
    AtResult r = result(fp, "live", "T=4", "BLOCK=64", 3);
    put(w, &r, NULL);
    RtTdb *rd = NULL;
    KT_CHECK(rt_tdb_open(path, RT_TDB_READ, &rd, err, sizeof err) == KILN_OK, "read during a write: %s", err);
    RtTdbHit h = {0};
    if (rd) rt_tdb_lookup(rd, fp, "live", "T=4", &h, err, sizeof err);
    KT_CHECK(h.match == RT_TDB_EXACT && !strcmp(h.config, "BLOCK=64"), "the reader sees the committed row");
    r.config = "BLOCK=128";
    put(w, &r, NULL);
    if (rd) rt_tdb_lookup(rd, fp, "live", "T=4", &h, err, sizeof err);
    KT_CHECK(!strcmp(h.config, "BLOCK=128"), "and the next one: %s", h.config);
    rt_tdb_close(rd);
    rt_tdb_close(w);
}

/* A store in a directory nobody may write (read-only media): the reader cannot make the -shm a WAL
 * store wants, so it reads the file immutable. Needs a directory this process cannot write: mode 0555,
 * or for root the immutable attribute (chattr); skipped when neither is possible. */
static void test_read_only_dir(void)
{
    char dir[600], path[700], probe[700], cmd[1400];
    snprintf(dir, sizeof dir, "%s/ro", scratch);
    snprintf(path, sizeof path, "%s/tune.db", dir);
    snprintf(probe, sizeof probe, "%s/probe", dir);
    mkdir(dir, 0755);
    RtTdb *w = open_w(path);
    if (!w) return;
    RtTdbDevice d = h200();
    char fp[RT_TDB_FP_LEN], err[512];
    at_store_device(w, &d, fp, err, sizeof err);
    AtResult r = result(fp, "ro", "T=4", "BLOCK=64", 3);
    put(w, &r, NULL);
    rt_tdb_close(w); /* the last connection: the -wal is checkpointed and removed */
    chmod(dir, 0555);
    int attr = 0;
    FILE *f = fopen(probe, "w");
    if (f) {
        fclose(f);
        unlink(probe);
        snprintf(cmd, sizeof cmd, "chattr +i '%s' 2>/dev/null", dir);
        attr = system(cmd) == 0;
        f = attr ? fopen(probe, "w") : NULL;
        if (f) fclose(f), unlink(probe);
    }
    if (f || (!attr && access(dir, W_OK) == 0)) {
        printf("test_read_only_dir: skipped (cannot make a directory unwritable here)\n");
    } else {
        RtTdb *rd = NULL;
        RtTdbHit h = {0};
        KT_CHECK(rt_tdb_open(path, RT_TDB_READ, &rd, err, sizeof err) == KILN_OK, "read-only dir: %s", err);
        if (rd) rt_tdb_lookup(rd, fp, "ro", "T=4", &h, err, sizeof err);
        KT_CHECK(h.match == RT_TDB_EXACT && !strcmp(h.config, "BLOCK=64"), "read-only dir: lookup");
        rt_tdb_close(rd);
        KT_CHECK(rt_tdb_open(path, RT_TDB_WRITE, &rd, err, sizeof err) != KILN_OK &&
                     kf_starts_with(err, path),
                 "read-only dir: writing fails with a message: %s", err);
    }
    if (attr) {
        snprintf(cmd, sizeof cmd, "chattr -i '%s' 2>/dev/null", dir);
        KT_CHECK(system(cmd) == 0, "chattr -i");
    }
    chmod(dir, 0755);
}

/* ---- put, pin, merge, prune ---- */

static int count_rows(void *ctx, const RtTdbRow *row)
{
    (*(int *)ctx)++;
    return 0;
}

static int grab_row(void *ctx, const RtTdbRow *row)
{
    *(RtTdbRow *)ctx = *row;
    return 1;
}

static RtTdbRow get_row(RtTdb *db, const char *ir_hash, const char *bucket)
{
    RtTdbRow row;
    memset(&row, 0, sizeof row);
    RtTdbFilter f = {.ir_hash = ir_hash, .bucket = bucket};
    char err[512];
    KT_CHECK(rt_tdb_rows(db, &f, grab_row, &row, err, sizeof err) == KILN_OK, "rows: %s", err);
    return row;
}

static void test_put_pin(void)
{
    RtTdb *db = open_w(kf_at("pin.db"));
    if (!db) return;
    RtTdbDevice d = h200();
    char fp[RT_TDB_FP_LEN], err[512];
    at_store_device(db, &d, fp, err, sizeof err);
    AtPutOutcome what;
    AtResult r = result(fp, "p1", "T=128", "BLOCK=512", 10);
    put(db, &r, &what);
    KT_CHECK(what == AT_PUT_INSERTED, "inserted: %s", at_put_outcome_name(what));
    /* a new run replaces an unpinned row, even with a slower result */
    r.config = "BLOCK=1024";
    r.median_us = 12, r.p20_us = 11, r.p80_us = 13;
    put(db, &r, &what);
    RtTdbRow row = get_row(db, "p1", "T=128");
    KT_CHECK(what == AT_PUT_REPLACED && !strcmp(row.config, "BLOCK=1024") && row.median_us == 12,
             "replaced: %s %s", at_put_outcome_name(what), row.config);
    KT_CHECK(row.samples == 20 && row.candidates == 12 && row.invalid == 2 && row.default_us == 15 &&
                 !strcmp(row.kiln_version, "0.1.0") && strlen(row.tuned_at) == 20 && !row.pinned &&
                 !row.damaged,
             "row fields");

    int64_t changed = 0;
    RtTdbFilter f = {.id = row.id};
    KT_CHECK(at_store_pin(db, &f, 1, &changed, err, sizeof err) == KILN_OK && changed == 1, "pin: %s", err);
    KT_CHECK(at_store_pin(db, &f, 1, &changed, err, sizeof err) == KILN_OK && changed == 0,
             "pin twice: 0 changed");
    r.config = "BLOCK=64";
    r.median_us = 1, r.p20_us = 1, r.p80_us = 1;
    put(db, &r, &what);
    row = get_row(db, "p1", "T=128");
    KT_CHECK(what == AT_PUT_KEPT_PINNED && !strcmp(row.config, "BLOCK=1024") && row.pinned,
             "a pinned row is never overwritten, even by a faster result: %s %s", at_put_outcome_name(what),
             row.config);
    KT_CHECK(at_store_pin(db, &f, 0, &changed, err, sizeof err) == KILN_OK && changed == 1, "unpin");
    put(db, &r, &what);
    row = get_row(db, "p1", "T=128");
    KT_CHECK(what == AT_PUT_REPLACED && !strcmp(row.config, "BLOCK=64") && !row.pinned, "unpinned: replaced");
    /* pin by pattern */
    AtResult r2 = result(fp, "p2", "T=1", "BLOCK=64", 5);
    r2.kernel = "matmul_4096_4096";
    put(db, &r2, NULL);
    RtTdbFilter byname = {.kernel = "matmul*"};
    KT_CHECK(at_store_pin(db, &byname, 1, &changed, err, sizeof err) == KILN_OK && changed == 1,
             "pin by pattern");
    RtTdbFilter pinned = {.pinned = 1};
    int n = 0;
    rt_tdb_rows(db, &pinned, count_rows, &n, err, sizeof err);
    KT_CHECK(n == 1, "one pinned row: %d", n);

    /* bad results are refused whole */
    AtResult bad = result(fp, "p3", "T=1", "BLOCK=64", 5);
    bad.p20_us = 6;
    KT_CHECK(at_store_put(db, &bad, NULL, err, sizeof err) == KILN_ERR_ARG && strstr(err, "p20"),
             "p20 > median: %s", err);
    bad = result(fp, "p3", "T=1", "BLOCK=64", 5);
    bad.p20_us = bad.median_us = 1e-300; /* would beat every honest time forever */
    KT_CHECK(at_store_put(db, &bad, NULL, err, sizeof err) == KILN_ERR_ARG && strstr(err, "0.001 <= p20"),
             "an impossible time: %s", err);
    bad = result("0123456789abcdef", "p3", "T=1", "BLOCK=64", 5);
    KT_CHECK(at_store_put(db, &bad, NULL, err, sizeof err) == KILN_ERR_ARG && strstr(err, "not registered"),
             "unknown device: %s", err);
    bad = result(fp, "p3", "T=0", "BLOCK=64", 5);
    KT_CHECK(at_store_put(db, &bad, NULL, err, sizeof err) == KILN_ERR_ARG, "bad bucket");
    bad = result("xyz", "p3", "T=1", "BLOCK=64", 5);
    KT_CHECK(at_store_put(db, &bad, NULL, err, sizeof err) == KILN_ERR_ARG, "bad fingerprint");
    bad = result(fp, "p3", "T=1", "", 5);
    KT_CHECK(at_store_put(db, &bad, NULL, err, sizeof err) == KILN_ERR_ARG, "empty config");
    n = 0;
    rt_tdb_rows(db, NULL, count_rows, &n, err, sizeof err);
    KT_CHECK(n == 2, "nothing written by refused puts: %d rows", n);
    rt_tdb_close(db);
}

static void test_prune(void)
{
    RtTdb *db = open_w(kf_at("prune.db"));
    if (!db) return;
    RtTdbDevice d = h200(), e = h200();
    snprintf(e.name, sizeof e.name, "NVIDIA A100");
    snprintf(e.arch, sizeof e.arch, "sm_80");
    char fp[RT_TDB_FP_LEN], fe[RT_TDB_FP_LEN], err[512], hash[32];
    at_store_device(db, &d, fp, err, sizeof err);
    at_store_device(db, &e, fe, err, sizeof err);
    for (int i = 0; i < 10; i++) {
        snprintf(hash, sizeof hash, "h%d", i);
        AtResult r = result(i < 8 ? fp : fe, hash, "T=1", "BLOCK=64", 5);
        r.tuned_at = i < 4 ? "2025-01-01T00:00:00Z" : "2026-06-01T00:00:00Z";
        r.kiln_version = i % 2 ? "0.0.9" : "0.1.0";
        put(db, &r, NULL);
    }
    RtTdbFilter p = {.id = get_row(db, "h0", "T=1").id};
    at_store_pin(db, &p, 1, NULL, err, sizeof err); /* h0: old, 0.1.0, pinned */
    int64_t removed = -1;
    RtTdbFilter none = {.pinned = -1};
    KT_CHECK(at_store_prune(db, &none, &removed, err, sizeof err) == KILN_ERR_ARG && strstr(err, "criterion"),
             "prune without a criterion: %s", err);
    RtTdbFilter old = {.before = "2026-01-01T00:00:00Z", .pinned = -1};
    KT_CHECK(at_store_prune(db, &old, &removed, err, sizeof err) == KILN_OK && removed == 3,
             "older than: %lld removed (h1..h3; h0 is pinned)", (long long)removed);
    RtTdbFilter ver = {.kiln_version = "0.0.9", .pinned = -1};
    KT_CHECK(at_store_prune(db, &ver, &removed, err, sizeof err) == KILN_OK && removed == 3,
             "by kiln version: %lld removed (h5, h7, h9)", (long long)removed);
    RtTdbFilter dev = {.device = fe, .pinned = -1};
    KT_CHECK(at_store_prune(db, &dev, &removed, err, sizeof err) == KILN_OK && removed == 1,
             "by device: %lld removed (h8)", (long long)removed);
    KT_CHECK(raw_int(kf_at("prune.db"), "SELECT count(*) FROM devices") == 1, "the pruned device is gone");
    int n = 0;
    rt_tdb_rows(db, NULL, count_rows, &n, err, sizeof err);
    KT_CHECK(n == 3, "h0 (pinned), h4, h6 remain: %d", n);
    RtTdbFilter all_old = {.before = "2026-01-01T00:00:00Z"};
    KT_CHECK(at_store_prune(db, &all_old, &removed, err, sizeof err) == KILN_OK && removed == 1,
             "pinned rows go only when asked");
    rt_tdb_close(db);
}

/* ---- export and import ---- */

static void test_export_import(void)
{
    RtTdb *a = open_w(kf_at("a.db")), *b = open_w(kf_at("b.db"));
    if (!a || !b) return;
    RtTdbDevice d = h200();
    char fp[RT_TDB_FP_LEN], err[512];
    at_store_device(a, &d, fp, err, sizeof err);
    at_store_device(b, &d, fp, err, sizeof err);
    /* in a: k1 10us, k2 10us (pinned), k3 10us, k4 only in a; in b: k1 8us, k2 5us, k3 12us (pinned), k5 */
    AtResult r;
    r = result(fp, "k1", "T=1", "A", 10), put(a, &r, NULL);
    r = result(fp, "k2", "T=1", "A", 10), put(a, &r, NULL);
    r = result(fp, "k3", "T=1", "A", 10), put(a, &r, NULL);
    r = result(fp, "k4", "T=1", "A", 10), put(a, &r, NULL);
    r = result(fp, "k1", "T=1", "B", 8), put(b, &r, NULL);
    r = result(fp, "k2", "T=1", "B", 5), put(b, &r, NULL);
    r = result(fp, "k3", "T=1", "B", 12), put(b, &r, NULL);
    r = result(fp, "k5", "T=1", "B", 12), put(b, &r, NULL);
    r = result(fp, "k6", "T=1", "B", 10), put(b, &r, NULL); /* the same median as a's k6: a tie */
    r = result(fp, "k6", "T=1", "A", 10), put(a, &r, NULL);
    RtTdbFilter f2 = {.ir_hash = "k2"}, f3 = {.ir_hash = "k3"};
    at_store_pin(a, &f2, 1, NULL, err, sizeof err);
    at_store_pin(b, &f3, 1, NULL, err, sizeof err);

    int64_t rows = 0;
    KT_CHECK(at_store_export(b, NULL, kf_at("b-export.db"), &rows, err, sizeof err) == KILN_OK && rows == 5,
             "export: %s (%lld rows)", err, (long long)rows);
    KT_CHECK(access(kf_at("b-export.db-wal"), F_OK) != 0, "an export is one self-contained file");
    KT_CHECK(raw_int(kf_at("b-export.db"), "SELECT count(*) FROM results WHERE pinned = 1") == 1,
             "the export keeps pin flags");
    KT_CHECK(at_store_export(b, NULL, kf_at("b-export.db"), &rows, err, sizeof err) == KILN_ERR_IO &&
                 strstr(err, "exists"),
             "export never overwrites: %s", err);
    RtTdbFilter only5 = {.ir_hash = "k5"};
    KT_CHECK(at_store_export(b, &only5, kf_at("k5.db"), &rows, err, sizeof err) == KILN_OK && rows == 1,
             "filtered export: %lld", (long long)rows);

    AtMergeStats st;
    KT_CHECK(at_store_import(a, kf_at("b-export.db"), &st, err, sizeof err) == KILN_OK, "import: %s", err);
    KT_CHECK(st.inserted == 1 && st.replaced == 2 && st.kept_pinned == 1 && st.kept_better == 1 &&
                 st.bad_device == 0 && st.bad_row == 0,
             "merge stats: ins %lld rep %lld pin %lld better %lld", (long long)st.inserted,
             (long long)st.replaced, (long long)st.kept_pinned, (long long)st.kept_better);
    RtTdbRow row;
    row = get_row(a, "k1", "T=1");
    KT_CHECK(!strcmp(row.config, "B"), "k1: the lower median wins");
    row = get_row(a, "k2", "T=1");
    KT_CHECK(!strcmp(row.config, "A") && row.pinned, "k2: the pinned row stays, though slower");
    row = get_row(a, "k3", "T=1");
    KT_CHECK(!strcmp(row.config, "B") && row.pinned, "k3: the incoming pinned row wins");
    row = get_row(a, "k4", "T=1");
    KT_CHECK(!strcmp(row.config, "A"), "k4: kept");
    row = get_row(a, "k5", "T=1");
    KT_CHECK(!strcmp(row.config, "B"), "k5: added");
    row = get_row(a, "k6", "T=1");
    KT_CHECK(!strcmp(row.config, "A"), "k6: a tie keeps the row there");

    /* import twice: nothing changes */
    KT_CHECK(at_store_import(a, kf_at("b-export.db"), &st, err, sizeof err) == KILN_OK &&
                 st.inserted + st.replaced == 0,
             "a second import changes nothing");

    /* hostile imports: refused whole, the store untouched */
    long long before = raw_int(kf_at("a.db"), "SELECT count(*) FROM results");
    KT_CHECK(at_store_import(a, kf_at("text.db"), &st, err, sizeof err) == KILN_ERR_FORMAT &&
                 kf_starts_with(err, kf_at("text.db")),
             "import of a text file: %s", err);
    KT_CHECK(at_store_import(a, kf_at("missing.db"), &st, err, sizeof err) == KILN_ERR_IO,
             "import of nothing");
    /* a device row whose fields do not hash to its fingerprint, and a damaged row */
    raw(kf_at("k5.db"), "UPDATE devices SET sm_count = 66");
    KT_CHECK(at_store_import(a, kf_at("k5.db"), &st, err, sizeof err) == KILN_OK && st.bad_device == 1 &&
                 st.inserted == 0,
             "tampered device: %lld bad", (long long)st.bad_device);
    raw(kf_at("k5.db"), "UPDATE devices SET sm_count = 132; UPDATE results SET config = x'00ff'");
    KT_CHECK(at_store_import(a, kf_at("k5.db"), &st, err, sizeof err) == KILN_OK && st.bad_row == 1,
             "damaged row");
    KT_CHECK(raw_int(kf_at("a.db"), "SELECT count(*) FROM results") == before,
             "hostile imports changed nothing");
    rt_tdb_close(a);
    rt_tdb_close(b);
}

/* ---- tuned binaries (schema v2) ---- */

static AtBinary binary(const char *fp, const char *ir_hash, const char *config, const char *target,
                       const void *data, size_t size)
{
    return (AtBinary){.device = fp,
                      .ir_hash = ir_hash,
                      .config = config,
                      .target = target,
                      .format = "host-so",
                      .entry = "rmsnorm_4096_bf16",
                      .params = "x:ptr<bf16> n_rows:i32",
                      .grid = "cdiv(n_rows*1,1) 1 1",
                      .block = 1,
                      .data = data,
                      .size = size,
                      .compile_ms = 12.5};
}

/* The binary for the key, expected to be there; its status and (on failure) message. */
static KilnStatus get_bin(RtTdb *db, const char *fp, const char *ir_hash, const char *config,
                          const char *target, RtTdbBinary *b, int *found, char *err)
{
    return rt_tdb_binary_get(db, fp, ir_hash, config, target, b, found, err, 512);
}

static void test_migrate_v1(void)
{
    /* a store as a v1 build wrote it: step 1 only, with a device and a result */
    char path[512];
    snprintf(path, sizeof path, "%s", kf_at("v1.db"));
    sqlite3 *m = NULL;
    char err[512], sql[1024];
    sqlite3_open(path, &m);
    snprintf(sql, sizeof sql, "PRAGMA application_id=%d", RT_TDB_APPLICATION_ID);
    sqlite3_exec(m, sql, NULL, NULL, NULL);
    sqlite3_exec(m, "BEGIN", NULL, NULL, NULL);
    KT_CHECK(rt_tdb_migrate(m, path, rt_tdb_steps, 1, 0, err, sizeof err) == KILN_OK, "v1: %s", err);
    sqlite3_exec(m, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(m);
    RtTdbDevice d = h200();
    char fp[RT_TDB_FP_LEN];
    rt_tdb_fingerprint(&d, fp);
    snprintf(
        sql, sizeof sql,
        "INSERT INTO devices VALUES ('%s', 'NVIDIA H200', 'sm_90a', 132, 150754820096, '580.159', '13.0',"
        " 'x'); INSERT INTO results(device, kernel, ir_hash, bucket, config, median_us, p20_us, p80_us,"
        " samples, kiln_version, tuned_at) VALUES ('%s', 'k', 'h1', 'T=1', 'A', 2, 1, 3, 20, '0.1.0', 'x')",
        fp, fp);
    raw(path, sql);
    KT_CHECK(raw_int(path, "PRAGMA user_version") == 1, "a v1 store");
    long n0, n1;
    char *before = kf_slurp(path, &n0);
    RtTdb *db = NULL;
    KilnStatus s = rt_tdb_open(path, RT_TDB_READ, &db, err, sizeof err);
    KT_CHECK(s == KILN_ERR_FORMAT && strstr(err, "schema 1 is older") && strstr(err, "kiln db upgrade"),
             "v1 read: %s", err);
    char *after = kf_slurp(path, &n1);
    KT_CHECK(before && after && n0 == n1 && !memcmp(before, after, (size_t)n0), "v1 modified by a read");
    free(before), free(after);
    db = open_w(path);
    rt_tdb_close(db);
    KT_CHECK(raw_int(path, "PRAGMA user_version") == RT_TDB_SCHEMA_VERSION &&
                 raw_int(path, "SELECT value FROM meta WHERE key = 'schema_version'") ==
                     RT_TDB_SCHEMA_VERSION,
             "v1 upgraded to the current schema");
    KT_CHECK(raw_int(path, "SELECT count(*) FROM pragma_table_info('binaries')") == 15 &&
                 raw_int(path, "SELECT count(*) FROM results WHERE config = 'A'") == 1,
             "v2: the binaries table, the v1 rows kept");
    KT_CHECK(rt_tdb_open(path, RT_TDB_READ, &db, err, sizeof err) == KILN_OK, "v2 reads: %s", err);
    RtTdbHit hit;
    KT_CHECK(db && rt_tdb_lookup(db, fp, "h1", "T=1", &hit, err, sizeof err) == KILN_OK &&
                 hit.match == RT_TDB_EXACT,
             "the v1 result is found after the upgrade");
    rt_tdb_close(db);
    /* a v2 store whose binaries table lacks a column is corrupt */
    raw(kf_at("v2-nocol.db"), "");
    db = open_w(kf_at("v2-nocol.db"));
    rt_tdb_close(db);
    raw(kf_at("v2-nocol.db"), "ALTER TABLE binaries DROP COLUMN compile_ms");
    expect_refused(kf_at("v2-nocol.db"), RT_TDB_READ, KILN_ERR_CORRUPT, "missing column binaries.compile_ms");
    /* v2 -> v3: v2's binary hashes covered the code only, so its binaries go (a cache: tuning compiles them
     * again) and its results stay */
    raw(kf_at("v2-bins.db"), "");
    db = open_w(kf_at("v2-bins.db"));
    rt_tdb_close(db);
    snprintf(
        sql, sizeof sql,
        "INSERT INTO devices VALUES ('%s', 'NVIDIA H200', 'sm_90a', 132, 150754820096, '580.159', '13.0',"
        " 'x'); INSERT INTO results(device, kernel, ir_hash, bucket, config, median_us, p20_us, p80_us,"
        " samples, kiln_version, tuned_at) VALUES ('%s', 'k', 'h1', 'T=1', 'A', 2, 1, 3, 20, '0.1.0', 'x');"
        " INSERT INTO binaries VALUES ('%s', 'h1', 'A', 'sm_90a', 'cubin', 'k', 'x:ptr<f32>', '1 1 1', 32, 0,"
        " x'00', 'cb', NULL, '0.1.0', 'x'); PRAGMA user_version=2;"
        " UPDATE meta SET value = '2' WHERE key = 'schema_version'",
        fp, fp, fp);
    raw(kf_at("v2-bins.db"), sql);
    db = open_w(kf_at("v2-bins.db"));
    rt_tdb_close(db);
    KT_CHECK(raw_int(kf_at("v2-bins.db"), "PRAGMA user_version") == 3 &&
                 raw_int(kf_at("v2-bins.db"), "SELECT count(*) FROM binaries") == 0 &&
                 raw_int(kf_at("v2-bins.db"), "SELECT count(*) FROM results") == 1,
             "v2 -> v3: binaries dropped, results kept");
}

static void test_binaries(void)
{
    char path[512]; /* kf_at's buffer is reused */
    snprintf(path, sizeof path, "%s", kf_at("bin.db"));
    RtTdb *db = open_w(path);
    if (!db) return;
    RtTdbDevice d = h200();
    char fp[RT_TDB_FP_LEN], err[512], other[RT_TDB_FP_LEN] = "0123456789abcdef";
    at_store_device(db, &d, fp, err, sizeof err);
    unsigned char code[3000];
    for (int i = 0; i < (int)sizeof code; i++)
        code[i] = (unsigned char)(i * 7 + 1);
    AtBinary b = binary(fp, "h1", "BLOCK=64", "host", code, sizeof code);
    KT_CHECK(at_store_put_binary(db, &b, err, sizeof err) == KILN_OK, "put binary: %s", err);
    RtTdbBinary got;
    int found = 0;
    KT_CHECK(get_bin(db, fp, "h1", "BLOCK=64", "host", &got, &found, err) == KILN_OK && found, "get: %s",
             err);
    KT_CHECK(got.size == sizeof code && !memcmp(got.data, code, sizeof code) &&
                 !strcmp(got.format, "host-so") && !strcmp(got.entry, b.entry) &&
                 !strcmp(got.params, b.params) && !strcmp(got.grid, b.grid) && got.block == 1 &&
                 got.smem == 0 && got.compile_ms == 12.5 && got.kiln_version[0] && got.added[0],
             "the binary read back is the one written");
    rt_tdb_binary_free(&got);
    /* a new compile of the same key replaces it; other targets and configs are other rows */
    code[0] ^= 0xff;
    KT_CHECK(at_store_put_binary(db, &b, err, sizeof err) == KILN_OK, "replace: %s", err);
    get_bin(db, fp, "h1", "BLOCK=64", "host", &got, &found, err);
    KT_CHECK(found && got.data && ((unsigned char *)got.data)[0] == code[0], "the newest compile is kept");
    rt_tdb_binary_free(&got);
    KT_CHECK(raw_int(path, "SELECT count(*) FROM binaries") == 1, "one row per key");
    KT_CHECK(get_bin(db, fp, "h1", "BLOCK=64", "sm_90a", &got, &found, err) == KILN_OK && !found &&
                 get_bin(db, fp, "h1", "BLOCK=128", "host", &got, &found, err) == KILN_OK && !found &&
                 get_bin(db, other, "h1", "BLOCK=64", "host", &got, &found, err) == KILN_OK && !found,
             "other target, config or device: not found");
    /* bad binaries are refused by the writer */
    AtBinary bad = b;
    bad.device = other;
    KT_CHECK(at_store_put_binary(db, &bad, err, sizeof err) == KILN_ERR_ARG && strstr(err, "not registered"),
             "unregistered device: %s", err);
    bad = b, bad.block = 0;
    KT_CHECK(at_store_put_binary(db, &bad, err, sizeof err) == KILN_ERR_ARG, "block 0");
    bad = b, bad.size = 0;
    KT_CHECK(at_store_put_binary(db, &bad, err, sizeof err) == KILN_ERR_ARG, "no data");
    bad = b, bad.format = "a-very-long-format-name";
    KT_CHECK(at_store_put_binary(db, &bad, err, sizeof err) == KILN_ERR_ARG, "long format");
    bad = b, bad.grid = "";
    KT_CHECK(at_store_put_binary(db, &bad, err, sizeof err) == KILN_ERR_ARG, "no grid");
    rt_tdb_close(db);

    /* hostile rows, written behind kiln's back: each is CORRUPT with one line naming the store */
    static const char *const damage[][2] = {
        {"UPDATE binaries SET data = CAST(x'00' || substr(data, 2) AS BLOB)", "binary damaged (hash"},
        {"UPDATE binaries SET hash = 'nothex'", "binary damaged"},
        {"UPDATE binaries SET grid = '9 9 9'",
         "binary damaged (hash"}, /* the hash covers the launch fields */
        {"UPDATE binaries SET block = block + 1", "binary damaged (hash"},
        {"UPDATE binaries SET entry = 'other'", "binary damaged (hash"},
        {"UPDATE binaries SET hash = 123", "binary damaged"},
        {"UPDATE binaries SET data = 'text, not a blob'", "not a blob"},
        {"UPDATE binaries SET data = x''", "not a blob"},
        {"UPDATE binaries SET entry = x'00ff'", "text field"},
        {"UPDATE binaries SET format = 'host-so-but-longer-than-fits'", "text field"},
        {"UPDATE binaries SET params = printf('%.2000c', 'x')", "text field"},
        {"UPDATE binaries SET entry = ''", "text field"},
        {"PRAGMA ignore_check_constraints=ON; UPDATE binaries SET block = 5000", "block or smem"},
        {"PRAGMA ignore_check_constraints=ON; UPDATE binaries SET smem = -1", "block or smem"},
        {"UPDATE binaries SET block = 64.5", "block or smem"},
    };
    for (unsigned i = 0; i < sizeof damage / sizeof damage[0]; i++) {
        char copy[64];
        snprintf(copy, sizeof copy, "bin-damaged-%u.db", i);
        long n;
        char *bytes = kf_slurp(path, &n);
        kf_spit(kf_at(copy), bytes, (size_t)n);
        free(bytes);
        raw(kf_at(copy), damage[i][0]);
        RtTdb *r = NULL;
        KT_CHECK(rt_tdb_open(kf_at(copy), RT_TDB_READ, &r, err, sizeof err) == KILN_OK, "open %s: %s", copy,
                 err);
        if (!r) continue;
        KilnStatus s = get_bin(r, fp, "h1", "BLOCK=64", "host", &got, &found, err);

        KT_CHECK(s == KILN_ERR_CORRUPT && !found && !got.data && kf_starts_with(err, kf_at(copy)) &&
                     !strchr(err, '\n') && strstr(err, damage[i][1]),
                 "%s: status %s, message '%s' (want %s)", damage[i][0], kiln_status_name(s), err,
                 damage[i][1]);
        rt_tdb_close(r);
    }
}

/* Export, import and prune carry binaries with the results that name them. */
static void test_binaries_copy(void)
{
    RtTdb *a = open_w(kf_at("ba.db"));
    if (!a) return;
    RtTdbDevice d = h200();
    char fp[RT_TDB_FP_LEN], err[512];
    at_store_device(a, &d, fp, err, sizeof err);
    unsigned char code[64];
    memset(code, 0x5a, sizeof code);
    AtBinary b;
    AtResult r;
    /* k1: config A with binaries for two targets, at two buckets; k2: config B, no binary; Z: no result */
    b = binary(fp, "k1", "A", "host", code, sizeof code), at_store_put_binary(a, &b, err, sizeof err);
    b = binary(fp, "k1", "A", "sm_90a", code, sizeof code), at_store_put_binary(a, &b, err, sizeof err);
    b = binary(fp, "k1", "Z", "host", code, sizeof code), at_store_put_binary(a, &b, err, sizeof err);
    r = result(fp, "k1", "T=1", "A", 10), put(a, &r, NULL);
    r = result(fp, "k1", "T=16", "A", 10), put(a, &r, NULL);
    r = result(fp, "k2", "T=1", "B", 10), put(a, &r, NULL);
    int64_t rows = 0;
    KT_CHECK(at_store_export(a, NULL, kf_at("ba-export.db"), &rows, err, sizeof err) == KILN_OK && rows == 3,
             "export: %s", err);
    KT_CHECK(raw_int(kf_at("ba-export.db"), "SELECT count(*) FROM binaries") == 2 &&
                 raw_int(kf_at("ba-export.db"), "SELECT count(*) FROM binaries WHERE config = 'Z'") == 0,
             "the export has the binaries its results name (both targets), not the orphan");
    /* a second machine (a fresh store) gets the rows and their binaries */
    RtTdb *c = open_w(kf_at("bc.db"));
    AtMergeStats st;
    KT_CHECK(c && at_store_import(c, kf_at("ba-export.db"), &st, err, sizeof err) == KILN_OK &&
                 st.inserted == 3 && st.binaries == 2 && st.bad_binary == 0,
             "import: %s (%lld binaries)", err, (long long)st.binaries);
    RtTdbBinary got;
    int found = 0;
    KT_CHECK(c && get_bin(c, fp, "k1", "A", "host", &got, &found, err) == KILN_OK && found &&
                 got.size == sizeof code && !memcmp(got.data, code, sizeof code),
             "imported binary: %s", err);
    rt_tdb_binary_free(&got);
    rt_tdb_close(c);
    /* a row kept there (pinned) brings no binary; a damaged binary is left behind, its row still comes */
    RtTdb *e = open_w(kf_at("be.db"));
    at_store_device(e, &d, fp, err, sizeof err);
    r = result(fp, "k1", "T=1", "P", 10), put(e, &r, NULL);
    RtTdbFilter pin = {.ir_hash = "k1"};
    at_store_pin(e, &pin, 1, NULL, err, sizeof err);
    raw(kf_at("ba-export.db"),
        "UPDATE binaries SET data = CAST(x'00' || substr(data, 2) AS BLOB) WHERE target = 'sm_90a'");
    KT_CHECK(at_store_import(e, kf_at("ba-export.db"), &st, err, sizeof err) == KILN_OK &&
                 st.kept_pinned == 1 && st.inserted == 2 && st.binaries == 1 && st.bad_binary == 1,
             "import with a pinned row and a damaged binary: %lld binaries, %lld bad", (long long)st.binaries,
             (long long)st.bad_binary);
    KT_CHECK(raw_int(kf_at("be.db"), "SELECT count(*) FROM binaries WHERE target = 'host'") == 1 &&
                 raw_int(kf_at("be.db"), "SELECT count(*) FROM binaries WHERE target = 'sm_90a'") == 0,
             "only the good binary came");
    rt_tdb_close(e);
    /* prune: binaries no result names go (the orphan Z now; A once both its rows are gone) */
    int64_t removed = 0;
    RtTdbFilter f = {.ir_hash = "k2"};
    KT_CHECK(at_store_prune(a, &f, &removed, err, sizeof err) == KILN_OK && removed == 1, "prune k2: %s",
             err);
    KT_CHECK(raw_int(kf_at("ba.db"), "SELECT count(*) FROM binaries") == 2, "the orphan Z is pruned");
    RtTdbFilter b1 = {.ir_hash = "k1", .bucket = "T=1"};
    at_store_prune(a, &b1, &removed, err, sizeof err);
    KT_CHECK(raw_int(kf_at("ba.db"), "SELECT count(*) FROM binaries") == 2, "A is still named by T=16");
    RtTdbFilter dev = {.device = fp};
    KT_CHECK(at_store_prune(a, &dev, &removed, err, sizeof err) == KILN_OK && removed == 1 &&
                 raw_int(kf_at("ba.db"), "SELECT count(*) FROM binaries") == 0 &&
                 raw_int(kf_at("ba.db"), "SELECT count(*) FROM devices") == 0,
             "pruning the device removes its binaries and the device: %s", err);
    rt_tdb_close(a);
}

/* ---- processes ---- */

/* A child: opens the store itself and writes n rows "<tag><i>" one transaction each; exits 0 on success. */
static void writer_child(const char *path, const char *tag, int n, int ack_fd)
{
    RtTdb *db = NULL;
    char err[512], hash[64], fp[RT_TDB_FP_LEN];
    if (rt_tdb_open(path, RT_TDB_WRITE, &db, err, sizeof err)) {
        fprintf(stderr, "child %s: %s\n", tag, err);
        _exit(2);
    }
    RtTdbDevice d = h200();
    if (at_store_device(db, &d, fp, err, sizeof err)) {
        fprintf(stderr, "child %s: %s\n", tag, err);
        _exit(3);
    }
    for (int i = 0; i < n; i++) {
        snprintf(hash, sizeof hash, "%s%04d", tag, i);
        AtResult r = result(fp, hash, "T=128", "BLOCK=1024 WARPS=4", 1 + i);
        if (at_store_put(db, &r, NULL, err, sizeof err)) {
            fprintf(stderr, "child %s: %s\n", tag, err);
            _exit(4);
        }
        if (ack_fd >= 0 && write(ack_fd, "+", 1) != 1) _exit(5);
    }
    rt_tdb_close(db);
    _exit(0);
}

static void test_concurrent_writers(void)
{
    const char *path = kf_at("concurrent.db"); /* does not exist yet: both children create it at once */
    pid_t pid[2];
    for (int i = 0; i < 2; i++) {
        pid[i] = fork();
        if (pid[i] == 0) writer_child(path, i ? "b" : "a", 300, -1);
    }
    for (int i = 0; i < 2; i++) {
        int status = 0;
        waitpid(pid[i], &status, 0);
        KT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d: status %d", i, status);
    }
    KT_CHECK(raw_int(path, "SELECT count(*) FROM results") == 600, "all 600 rows present: %lld",
             raw_int(path, "SELECT count(*) FROM results"));
    KT_CHECK(raw_int(path, "SELECT count(DISTINCT ir_hash) FROM results WHERE ir_hash GLOB 'a*'") == 300 &&
                 raw_int(path, "SELECT count(DISTINCT ir_hash) FROM results WHERE ir_hash GLOB 'b*'") == 300,
             "300 of each");
    KT_CHECK(raw_int(path, "SELECT count(*) FROM devices") == 1, "one device");
    KT_CHECK(integrity_ok(path), "integrity_check");
}

/* Kills a writer (SIGKILL) in the middle of an open transaction: its uncommitted rows vanish, the
 * committed ones stay, and the file is intact. Then kills writers at arbitrary moments of a put loop. */
static void test_killed_writer(void)
{
    const char *path = kf_at("killed.db");
    int ready[2];
    KT_CHECK(pipe(ready) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        RtTdb *db = NULL;
        char err[512], fp[RT_TDB_FP_LEN], hash[32];
        if (rt_tdb_open(path, RT_TDB_WRITE, &db, err, sizeof err)) _exit(2);
        RtTdbDevice d = h200();
        if (at_store_device(db, &d, fp, err, sizeof err)) _exit(3);
        for (int i = 0; i < 50; i++) {
            snprintf(hash, sizeof hash, "c%04d", i);
            AtResult r = result(fp, hash, "T=1", "BLOCK=64", 2);
            if (at_store_put(db, &r, NULL, err, sizeof err)) _exit(4);
        }
        /* a big transaction that never commits (large enough to spill pages into the -wal) */
        sqlite3 *c = rt_tdb_sqlite(db);
        sqlite3_exec(c, "PRAGMA cache_size=8; BEGIN IMMEDIATE", NULL, NULL, NULL);
        for (int i = 0; i < 5000; i++) {
            char sql[512];
            snprintf(
                sql, sizeof sql,
                "INSERT INTO results(device, kernel, ir_hash, bucket, config, median_us, p20_us, p80_us,"
                " samples, kiln_version, tuned_at) VALUES ('%s', '%0200d', 'u%05d', 'T=1', 'X', 1, 1, 1, 1,"
                " 'v', 't')",
                fp, i, i);
            if (sqlite3_exec(c, sql, NULL, NULL, NULL) != SQLITE_OK) _exit(5);
        }
        if (write(ready[1], "!", 1) != 1) _exit(6);
        for (;;)
            pause();
    }
    close(ready[1]);
    char byte = 0;
    KT_CHECK(read(ready[0], &byte, 1) == 1 && byte == '!', "the child reached its open transaction");
    close(ready[0]);
    char wal[600];
    struct stat st;
    snprintf(wal, sizeof wal, "%s-wal", path);
    KT_CHECK(stat(wal, &st) == 0 && st.st_size > 500 * 1024,
             "the open transaction spilled into the -wal (%lld bytes)", (long long)st.st_size);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    KT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "killed");
    KT_CHECK(integrity_ok(path), "integrity_check after the kill");
    KT_CHECK(raw_int(path, "SELECT count(*) FROM results") == 50, "exactly the 50 committed rows: %lld",
             raw_int(path, "SELECT count(*) FROM results"));
    RtTdb *db = open_w(path); /* a writer opens it again and goes on */
    if (db) {
        RtTdbDevice d = h200();
        char fp[RT_TDB_FP_LEN], err[512];
        at_store_device(db, &d, fp, err, sizeof err);
        AtResult r = result(fp, "after", "T=1", "BLOCK=64", 2);
        put(db, &r, NULL);
        rt_tdb_close(db);
    }
    KT_CHECK(raw_int(path, "SELECT count(*) FROM results") == 51, "writable after the kill");

    /* kills at arbitrary moments: the acks say which puts committed (a put may commit before its ack) */
    for (int round = 0; round < 6; round++) {
        char file[64], tag[16];
        snprintf(file, sizeof file, "killed-%d.db", round);
        snprintf(tag, sizeof tag, "r%d_", round);
        const char *p = kf_at(file);
        int acks[2];
        KT_CHECK(pipe(acks) == 0, "pipe");
        pid = fork();
        if (pid == 0) {
            close(acks[0]);
            writer_child(p, tag, 100000, acks[1]);
        }
        close(acks[1]);
        int want = 20 + 37 * round, got = 0;
        char buf[64];
        while (got < want) {
            ssize_t k =
                read(acks[0], buf, (size_t)(want - got) < sizeof buf ? (size_t)(want - got) : sizeof buf);
            if (k <= 0) break;
            got += (int)k;
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        /* the acks the child wrote before it died are still in the pipe */
        ssize_t k;
        while ((k = read(acks[0], buf, sizeof buf)) > 0)
            got += (int)k;
        close(acks[0]);
        long long n = raw_int(p, "SELECT count(*) FROM results");
        KT_CHECK(integrity_ok(p), "round %d: integrity_check", round);
        KT_CHECK(got >= want && n >= got && n <= got + 1, "round %d: %lld rows after %d acks", round, n, got);
        KT_CHECK(
            raw_int(
                p, "SELECT count(*) FROM results WHERE samples != 20 OR config != 'BLOCK=1024 WARPS=4'") == 0,
            "round %d: every row whole", round);
    }
}

int main(void)
{
    if (!(scratch = kf_scratch_open("tunedb"))) return 1;
    test_buckets();
    test_schema();
    test_hostile();
    test_lookup();
    test_read_while_writing();
    test_read_only_dir();
    test_put_pin();
    test_prune();
    test_export_import();
    test_migrate_v1();
    test_binaries();
    test_binaries_copy();
    test_concurrent_writers();
    test_killed_writer();
    kf_scratch_close();
    return kt_done("test_tunedb");
}
