/* at_store.h — the tuning store's write side: devices, results, pins, prune, export and import/merge.
 * Prefix at_store_. The schema, opening and lookups are the runtime's (runtime/rt_tunedb.h); open the
 * store with rt_tdb_open(path, RT_TDB_WRITE, ...) and pass it here.
 *
 *     RtTdb *db;  rt_tdb_open("tune.db", RT_TDB_WRITE, &db, err, sizeof err);
 *     char fp[RT_TDB_FP_LEN];  at_store_device(db, &dev, fp, err, sizeof err);
 *     AtResult r = {.device = fp, .kernel = "rmsnorm_4096_bf16", .ir_hash = h, .bucket = "T=128",
 *                   .config = "BLOCK=1024 WARPS=4", .median_us = 3.2, .p20_us = 3.1, .p80_us = 3.3,
 *                   .samples = 20, .default_us = 4.0};
 *     AtPutOutcome what;  at_store_put(db, &r, &what, err, sizeof err);  // AT_PUT_KEPT_PINNED: ignored
 *     AtBinary b = {.device = fp, .ir_hash = h, .config = "BLOCK=1024 WARPS=4", .target = "sm_90a",
 *                   .format = "cubin", .entry = "rmsnorm_4096_bf16", .params = ..., .grid = ...,
 *                   .block = 128, .data = cubin, .size = n};
 *     at_store_put_binary(db, &b, err, sizeof err);   // the code the runtime loads for that config
 *
 * Every call is one transaction (BEGIN IMMEDIATE ... COMMIT): a killed writer loses only the call in
 * flight, and concurrent writers wait for each other (busy timeout) instead of failing.
 *
 * Rules (docs/AUTOTUNE.md):
 *   put    a new tuning run replaces an unpinned row, even a faster one (the newest measurement on this
 *          device is the one to trust; keeping the minimum would ratchet towards lucky noise). A pinned
 *          row is never overwritten: the new result is ignored and reported (AT_PUT_KEPT_PINNED).
 *   merge  (import) keeps a pinned row; else takes an incoming pinned row; else the lower median
 *          (a tie keeps the existing row). Rows only ever meet rows of the same device fingerprint.
 */
#ifndef KILN_AT_STORE_H
#define KILN_AT_STORE_H

#include <stdint.h>

#include "rt_tunedb.h"

typedef struct AtResult {
    const char *device;  /* fingerprint of a registered device (at_store_device) */
    const char *kernel;  /* kernel name, for people ("rmsnorm_4096_bf16_1e_05") */
    const char *ir_hash; /* the package's kernels.ir_hash */
    const char *bucket;  /* any text rt_tdb_bucket_parse accepts; stored canonical */
    const char *config;  /* "BLOCK=1024 WARPS=4" */
    double median_us, p20_us, p80_us;
    int samples;
    double default_us; /* the default config's median in the same run; <= 0: unknown */
    int candidates;    /* configs tried, and how many of them were INVALID */
    int invalid;
    const char *kiln_version; /* NULL: this build's */
    const char *tuned_at;     /* NULL: now (UTC, "2026-11-29T10:00:00Z") */
    int pinned;               /* honoured by merges (import, export); at_store_put writes unpinned rows */
} AtResult;

typedef enum AtPutOutcome {
    AT_PUT_INSERTED,    /* a new row */
    AT_PUT_REPLACED,    /* replaced an unpinned row */
    AT_PUT_KEPT_PINNED, /* the row there is pinned: it stays and the new result is ignored */
    AT_PUT_KEPT_BETTER  /* merge: the row there has the lower (or the same) median: not beaten */
} AtPutOutcome;

const char *at_put_outcome_name(AtPutOutcome o); /* "inserted", "replaced", "kept (pinned)", ... */

/* Registers d (insert or ignore) and writes its fingerprint into fp. */
KilnStatus at_store_device(RtTdb *db, const RtTdbDevice *d, char fp[RT_TDB_FP_LEN], char *err, int errlen);

/* Checks r: device, kernel, ir_hash and config present and short enough, the bucket parses, times
 * finite with 0 < p20 <= median <= p80, samples >= 1, counts >= 0. KILN_ERR_ARG with the reason. */
KilnStatus at_result_check(const AtResult *r, char *err, int errlen);

/* Writes one tuning result by the put rule; *out (may be NULL) says what happened. KILN_ERR_ARG for a
 * bad result or an unregistered device. */
KilnStatus at_store_put(RtTdb *db, const AtResult *r, AtPutOutcome *out, char *err, int errlen);

/* The compiled code of one config for one target: what the runtime loads for the results that name the
 * config (it cannot compile). Put it before the results that name it: a result whose binary is missing
 * is one the runtime cannot use (it says so and runs the default). */
typedef struct AtBinary {
    const char *device;  /* fingerprint of a registered device */
    const char *ir_hash; /* the package's kernels.ir_hash */
    const char *config;  /* "BLOCK=1024 WARPS=4", as in the results rows */
    const char *target;  /* "sm_90a", "host" */
    const char *format;  /* "cubin", "ptx", "host-so" */
    const char *entry;   /* the symbol */
    const char *params;  /* the kernel's params at this config, "x:ptr<bf16> n_rows:i32" */
    const char *grid;    /* "cdiv(n_rows*1,1) 1 1", as packages write it */
    int block, smem;     /* 1..1024 threads, 0..1 MiB of dynamic shared memory */
    const void *data;
    size_t size;              /* 1 .. RT_TDB_MAX_BINARY bytes */
    double compile_ms;        /* < 0: unknown */
    const char *kiln_version; /* NULL: this build's */
    const char *added;        /* NULL: now */
} AtBinary;

/* Checks b's fields (present, short enough, in range). KILN_ERR_ARG with the reason. */
KilnStatus at_binary_check(const AtBinary *b, char *err, int errlen);
/* Writes b (its hash computed here), replacing the binary stored for its key (device, ir_hash, config,
 * target): one config compiles to one binary, so the newest compile is kept. KILN_ERR_ARG for a bad
 * binary or an unregistered device. One transaction. */
KilnStatus at_store_put_binary(RtTdb *db, const AtBinary *b, char *err, int errlen);

/* Sets (pin = 1) or clears the pin flag of the rows f selects; *changed (may be NULL) gets how many
 * rows changed. */
KilnStatus at_store_pin(RtTdb *db, const RtTdbFilter *f, int pin, int64_t *changed, char *err, int errlen);

/* Deletes the rows f selects, which must name something (id, device, kernel, ir_hash, bucket,
 * kiln_version or before; KILN_ERR_ARG otherwise): f->pinned as given, so pass -1 to keep pinned rows.
 * Binaries that no result names any more (device, ir_hash, config) go too, and with f->device, devices
 * left without results. *removed gets the number of results. */
KilnStatus at_store_prune(RtTdb *db, const RtTdbFilter *f, int64_t *removed, char *err, int errlen);

typedef struct AtMergeStats {
    int64_t inserted, replaced, kept_pinned, kept_better;
    int64_t bad_device; /* rows of a device whose fields do not hash to its fingerprint, or missing */
    int64_t bad_row;    /* rows that fail at_result_check or have damaged fields */
    int64_t bad_text;   /* rows whose text fields, or their device's, hold control characters (a newline
                           or an ESC that `kiln db list` would print) */
    int64_t binaries;   /* binaries copied with the rows that were written */
    int64_t bad_binary; /* binaries left behind: damaged (rt_tdb_binary_get), failing at_binary_check or
                           launch limits that are not its target's and config's (import) */
} AtMergeStats;

/* Merges the store at src (opened RT_TDB_READ: every hostile-file check applies, and it is never
 * modified) into db by the merge rule, in one transaction. Each row written brings its binaries (every
 * target) along; a binary db already has for that key stays. */
KilnStatus at_store_import(RtTdb *db, const char *src, AtMergeStats *stats, char *err, int errlen);

/* Writes the rows f selects (NULL: all), their binaries and their devices to a new store at path, a
 * self-contained rollback-journal file that import reads. path must not exist; it appears whole or not at all
 * (built in "<path>.tmp.<pid>.<n>", fsynced and linked into place). *rows gets the number of rows written. */
KilnStatus at_store_export(RtTdb *db, const RtTdbFilter *f, const char *path, int64_t *rows, char *err,
                           int errlen);

#endif
