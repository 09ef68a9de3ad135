/* rt_tunedb.h — the tuning store (tune.db): its schema, migrations, device fingerprints, shape buckets and
 * the read side the runtime consults when it loads a package. Prefix rt_tdb_. The write side (results,
 * pins, import/export, prune) is autotune/at_store.h; docs/AUTOTUNE.md has the whole picture.
 *
 *     RtTdb *db;
 *     char err[512];
 *     if (rt_tdb_open("tune.db", RT_TDB_READ, &db, err, sizeof err)) { use defaults; say err; }
 *     RtTdbDevice d = {...};  char fp[RT_TDB_FP_LEN];  rt_tdb_fingerprint(&d, fp);
 *     RtTdbHit hit;
 *     if (rt_tdb_lookup(db, fp, kernel_ir_hash, "T=96", &hit, err, sizeof err) == KILN_OK)
 *         ... hit.match: RT_TDB_EXACT (tuned for T=96), RT_TDB_NEAREST (tuned for hit.bucket, e.g. T=128),
 *             RT_TDB_NONE (use the heuristic default) ... hit.config "BLOCK=1024 WARPS=4"
 *     rt_tdb_close(db);
 *
 * A store is one SQLite file in WAL mode, application_id 'KTUN', user_version the schema version. Any
 * number of processes may read and write it at once (busy_timeout; every write is one transaction).
 * Reading never modifies the file; opening for writing creates it (0 bytes or missing) or upgrades an
 * older schema, in one transaction. Errors are one line that starts with the path.
 *
 * Thread safety: one RtTdb per thread (an SQLite connection); open several for several threads.
 */
#ifndef KILN_RT_TUNEDB_H
#define KILN_RT_TUNEDB_H

#include <stdint.h>

#include "kiln.h"

#define RT_TDB_APPLICATION_ID 0x4b54554e /* 'KTUN', PRAGMA application_id */
#define RT_TDB_SCHEMA_VERSION 3          /* PRAGMA user_version and meta.schema_version */

enum {
    RT_TDB_FP_LEN = 17,         /* a device fingerprint: 16 hex digits + NUL */
    RT_TDB_MAX_KEYS = 8,        /* keys in one bucket */
    RT_TDB_MAX_KEY = 16,        /* bytes of a bucket key, with the NUL */
    RT_TDB_MAX_BUCKET = 160,    /* bytes of a bucket's text, with the NUL */
    RT_TDB_MAX_CONFIG = 512,    /* bytes of a config's text, with the NUL */
    RT_TDB_MAX_NAME = 256,      /* bytes of a kernel name, device name, ir hash, version or date */
    RT_TDB_MAX_VALUE = 1 << 30, /* largest bucket value */
    RT_TDB_MAX_TEXT = 1024,     /* bytes of a binary's params or grid text, with the NUL */
    RT_TDB_MAX_FORMAT = 16      /* bytes of a binary's format ("cubin", "host-so"), with the NUL */
};

typedef struct RtTdb RtTdb;

typedef enum RtTdbMode {
    RT_TDB_READ,  /* the file must exist and be a tuning DB of this schema; never modified */
    RT_TDB_WRITE, /* created when missing or empty; an older schema is upgraded; WAL */
    /* Like RT_TDB_WRITE but left in rollback-journal mode (one self-contained file): for export files. */
    RT_TDB_WRITE_ROLLBACK
} RtTdbMode;

/* Opens the store at path. Errors (one line in err, starting with path):
 *   KILN_ERR_IO       missing (READ), a directory or not a regular file, cannot open/create/read
 *   KILN_ERR_FORMAT   empty (READ), not an SQLite file, not a kiln tuning DB (another application_id:
 *                     a kiln package says so), a newer schema ("upgrade kiln"), an older schema (READ:
 *                     "open it for writing to upgrade: kiln db upgrade")
 *   KILN_ERR_CORRUPT  SQLite reports damage, quick_check fails, a table or column is missing, or
 *                     meta.schema_version disagrees with user_version
 *   KILN_ERR_NOMEM
 * A foreign file is never modified: every check runs before the first write. */
KilnStatus rt_tdb_open(const char *path, RtTdbMode mode, RtTdb **out, char *err, int errlen);
void rt_tdb_close(RtTdb *db); /* NULL is fine */
const char *rt_tdb_path(const RtTdb *db);

/* ---- devices ---- */

/* What identifies a GPU for tuning. Results never move between fingerprints: a driver or CUDA upgrade,
 * or another memory size (a MIG slice), is another device that is tuned afresh. */
typedef struct RtTdbDevice {
    char name[RT_TDB_MAX_NAME];   /* "NVIDIA H200" */
    char arch[32];                /* the kiln target: "sm_90a" */
    int sm_count;                 /* multiprocessors */
    int64_t mem_bytes;            /* total device memory */
    char driver[RT_TDB_MAX_NAME]; /* the driver version: the runtime writes cuDriverGetVersion's "13000" */
    char cuda[32];                /* the CUDA version: the runtime writes the driver's, "13.0" */
} RtTdbDevice;

/* The host CPU as a tuning device: name the CPU model (/proc/cpuinfo "model name", else the machine),
 * arch "host", sm_count the online CPUs, mem_bytes the physical memory, driver the machine ("x86_64"),
 * cuda "none". Host code is built for the compiling CPU's features, so the model is the key field. */
void rt_tdb_device_host(RtTdbDevice *d);

/* The device's fingerprint: FNV-1a 64 of "kiln-device-v1\n" + the six fields, one per line (integers in
 * decimal), as 16 lowercase hex digits. Stable across builds and machines. */
void rt_tdb_fingerprint(const RtTdbDevice *d, char out[RT_TDB_FP_LEN]);

/* ---- shape buckets ---- */

/* A shape bucket: the sizes a tuned config was measured at, as text "key=value[,key=value...]" with
 * keys [A-Za-z_][A-Za-z0-9_]* (< RT_TDB_MAX_KEY bytes) and values integers in 1..RT_TDB_MAX_VALUE,
 * e.g. "T=128" or "B=32,ctx=4096". The empty text is the bucket of a kernel without runtime sizes.
 * Canonical form: keys sorted (strcmp), no spaces, no leading zeros. */
typedef struct RtTdbBucket {
    int n;
    char key[RT_TDB_MAX_KEYS][RT_TDB_MAX_KEY];
    int64_t val[RT_TDB_MAX_KEYS];
} RtTdbBucket;

/* Parses text (spaces around items and '=' allowed; a repeated key is an error) into b, sorted.
 * Returns KILN_OK or KILN_ERR_ARG with a one-line reason in err. */
KilnStatus rt_tdb_bucket_parse(const char *text, RtTdbBucket *b, char *err, int errlen);
/* The canonical text of b into out (RT_TDB_MAX_BUCKET bytes). */
void rt_tdb_bucket_format(const RtTdbBucket *b, char out[RT_TDB_MAX_BUCKET]);
/* The distance between two buckets with the same keys: the sum over keys of |log2(a) - log2(b)|;
 * a negative number when the key sets differ. */
double rt_tdb_bucket_distance(const RtTdbBucket *a, const RtTdbBucket *b);

/* ---- results ---- */

typedef enum RtTdbMatch {
    RT_TDB_NONE,    /* no tuned entry: use the heuristic default */
    RT_TDB_NEAREST, /* tuned for the nearest bucket with the same keys */
    RT_TDB_EXACT    /* tuned for exactly this bucket */
} RtTdbMatch;

const char *rt_tdb_match_name(RtTdbMatch m); /* "tuned", "nearest", "default" */

typedef struct RtTdbHit {
    RtTdbMatch match;
    char bucket[RT_TDB_MAX_BUCKET]; /* the bucket it was tuned for (canonical) */
    char config[RT_TDB_MAX_CONFIG];
    double median_us;
    double distance; /* 0 for an exact match */
    int pinned;
} RtTdbHit;

/* The tuned config for (device fingerprint, kernel IR hash, bucket): the row for exactly this bucket,
 * else among the device's rows for this IR hash whose buckets have the same keys, the one at the
 * smallest rt_tdb_bucket_distance; ties go to the larger bucket (the greater sum of log2 values: a
 * config tuned for more work keeps more of the GPU busy), then to the smaller canonical text. Rows
 * whose bucket does not parse are never a nearest match. hit->match is RT_TDB_NONE when nothing fits.
 * Errors: KILN_ERR_ARG (bad bucket text, with the reason), KILN_ERR_CORRUPT (a matched row's config or
 * bucket is too long or not text), KILN_ERR_IO / KILN_ERR_NOMEM from SQLite. */
KilnStatus rt_tdb_lookup(RtTdb *db, const char *device, const char *ir_hash, const char *bucket,
                         RtTdbHit *hit, char *err, int errlen);

/* One results row, as the listing and export see it. Text fields are cut to their buffers. */
typedef struct RtTdbRow {
    int64_t id;
    char device[RT_TDB_FP_LEN];
    char kernel[RT_TDB_MAX_NAME];
    char ir_hash[RT_TDB_MAX_NAME];
    char bucket[RT_TDB_MAX_BUCKET];
    char config[RT_TDB_MAX_CONFIG];
    double median_us, p20_us, p80_us; /* microseconds */
    int samples;
    double default_us; /* the default config's median in the same run; < 0 when unknown */
    int candidates, invalid;
    char kiln_version[32];
    char tuned_at[32]; /* UTC, "2026-11-29T10:00:00Z" */
    int pinned;
    int damaged; /* 1 when a text field was not text or did not fit, or a number was not a number */
} RtTdbRow;

/* Which rows: every field that is set must hold (AND). */
typedef struct RtTdbFilter {
    int64_t id;               /* > 0: only this row */
    const char *device;       /* fingerprint prefix */
    const char *kernel;       /* SQL GLOB pattern on the kernel name ("matmul*") */
    const char *ir_hash;      /* prefix */
    const char *bucket;       /* exact, compared in canonical form */
    const char *kiln_version; /* exact */
    const char *before;       /* tuned_at < before (UTC text, "2026-11-01T00:00:00Z") */
    int pinned;               /* 0: any, 1: pinned only, -1: unpinned only */
} RtTdbFilter;

/* Calls fn for each matching row in (device, kernel, bucket, id) order until fn returns nonzero.
 * Returns KILN_OK, KILN_ERR_ARG (bad bucket in the filter) or an SQLite failure. */
KilnStatus rt_tdb_rows(RtTdb *db, const RtTdbFilter *f, int (*fn)(void *ctx, const RtTdbRow *row), void *ctx,
                       char *err, int errlen);
/* Calls fn for each device (fingerprint order) with its fingerprint, fields and number of results. */
KilnStatus rt_tdb_devices(RtTdb *db,
                          int (*fn)(void *ctx, const char *fp, const RtTdbDevice *d, int64_t results),
                          void *ctx, char *err, int errlen);

/* ---- tuned binaries (schema v2) ----
 * The compiled code of a tuned config, keyed by (device, ir_hash, config, target): what the runtime
 * loads for a result row, since it cannot compile. Fields as a package's binaries table has them. */

typedef struct RtTdbBinary {
    char format[RT_TDB_MAX_FORMAT]; /* "cubin", "ptx", "host-so" */
    char entry[RT_TDB_MAX_NAME];    /* the symbol */
    char params[RT_TDB_MAX_TEXT];   /* "x:ptr<bf16> n_rows:i32": must equal the package kernel's */
    char grid[RT_TDB_MAX_TEXT];     /* "cdiv(M*1,16) 2 1", as packages write it */
    int block, smem;                /* threads per block (1..1024), dynamic shared memory bytes */
    void *data;                     /* malloc'd, hash verified; rt_tdb_binary_free */
    size_t size;
    double compile_ms; /* < 0: unknown */
    char kiln_version[32];
    char added[32];
} RtTdbBinary;

enum { RT_TDB_MAX_BINARY = 256 << 20 }; /* bytes of one binary */

/* Reads the binary for (device, ir_hash, config, target) into *b (*found 0 when there is none; then b
 * holds nothing to free). Every field is checked: text fields text and short enough, block and smem in
 * range, data a non-empty blob of at most RT_TDB_MAX_BINARY bytes whose hash with the row's launch fields
 * (rt_tdb_binary_hash) equals the stored one. A row failing a check is KILN_ERR_CORRUPT with one line naming
 * the store, the ir_hash and the config ("... binary damaged (hash 0123..., stored 4567...)"); SQLite
 * failures as rt_tdb_lookup's. */
KilnStatus rt_tdb_binary_get(RtTdb *db, const char *device, const char *ir_hash, const char *config,
                             const char *target, RtTdbBinary *b, int *found, char *err, int errlen);
void rt_tdb_binary_free(RtTdbBinary *b); /* frees b->data; NULL is fine */
/* The binaries table's hash is rt_pkg_binary_hash (rt_package.h) of the data and the row's target, config,
 * grid, format, entry, block and smem, as in packages (schema v3; v2's covered the data only). */

/* ---- internal: shared with autotune/at_store.c (the write side) and tests; not for the runtime's users ----
 */

struct sqlite3;
struct sqlite3_stmt;

/* The connection behind db (for at_store's writes and transactions). */
struct sqlite3 *rt_tdb_sqlite(RtTdb *db);

/* One migration step: brings a store from version `to - 1` to `to`. SQL runs inside the upgrade's
 * transaction. */
typedef struct RtTdbStep {
    int to;
    const char *what; /* for messages: "v1: meta, devices, results" */
    const char *sql;
} RtTdbStep;

/* The shipped steps, in order (steps[i].to == i + 1): the schema the reader checks tables and columns
 * against is what they produce. */
extern const RtTdbStep rt_tdb_steps[RT_TDB_SCHEMA_VERSION];

/* Runs steps[from .. to-1] in order on db, inside the caller's transaction, setting user_version and
 * meta.schema_version after each. Each step's `to` must be one more than the version before it.
 * Returns KILN_OK, or a status with "path: cannot upgrade the tuning DB to vN (what): reason" in err;
 * the caller then rolls back, so an upgrade is all or nothing. */
KilnStatus rt_tdb_migrate(struct sqlite3 *db, const char *path, const RtTdbStep *steps, int n_steps, int from,
                          char *err, int errlen);

/* The WHERE clause text for f (" WHERE ..." or "" when f selects everything; columns unqualified) into
 * sql (n bytes), and its bindings from parameter `first` on. rt_tdb_filter_bind returns the next free
 * parameter index. The bucket must already be canonical (rt_tdb_filter_canon). */
void rt_tdb_filter_sql(const RtTdbFilter *f, char *sql, int n);
int rt_tdb_filter_bind(struct sqlite3_stmt *st, const RtTdbFilter *f, int first);
/* Canonicalizes f->bucket into buf (RT_TDB_MAX_BUCKET bytes) and points a copy of f at it; KILN_ERR_ARG
 * with the reason for a bad bucket. */
KilnStatus rt_tdb_filter_canon(const RtTdbFilter *f, RtTdbFilter *out, char *buf, char *err, int errlen);
/* The row at the statement's current position, from the column list RT_TDB_ROW_COLUMNS. */
#define RT_TDB_ROW_COLUMNS                                                                                   \
    "id, device, kernel, ir_hash, bucket, config, median_us, p20_us, p80_us, samples, default_us, "          \
    "candidates, invalid, kiln_version, tuned_at, pinned"
void rt_tdb_row_read(struct sqlite3_stmt *st, RtTdbRow *row);
/* Maps an SQLite result code to a status (busy/locked and I/O: KILN_ERR_IO, corrupt/notadb: CORRUPT). */
KilnStatus rt_tdb_status(int rc);
/* Now, UTC, "2026-11-29T10:00:00Z". */
void rt_tdb_now(char out[32]);

#endif
