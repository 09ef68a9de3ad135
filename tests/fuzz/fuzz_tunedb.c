/* fuzz_tunedb.c — the tuning store's read side (runtime/rt_tunedb.c: open, rows, devices, lookups,
 * binaries) and the importer (autotune/at_store.c: at_store_import into a fresh store), on a store file
 * from elsewhere. Invariant besides "no crash, no leak, no UB": an import either fails with one line or
 * leaves a store that opens read-only again; the input file is never modified. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "at_store.h"
#include "fuzz.h"
#include "runtime/rt_tunedb.h"

typedef struct Seen {
    RtTdb *db;
    int n;
} Seen;

static int on_row(void *ctx, const RtTdbRow *row)
{
    Seen *s = ctx;
    char err[256];
    RtTdbHit hit;
    RtTdbBinary b;
    int found = 0;
    if (s->n++ > 64) return 1;
    rt_tdb_lookup(s->db, row->device, row->ir_hash, row->bucket, &hit, err, sizeof err);
    if (rt_tdb_binary_get(s->db, row->device, row->ir_hash, row->config, "host", &b, &found, err, sizeof err) ==
            KILN_OK &&
        found)
        rt_tdb_binary_free(&b);
    return 0;
}

static int on_device(void *ctx, const char *fp, const RtTdbDevice *d, int64_t results)
{
    return ++*(int *)ctx > 64;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char src[1024], err[512];
    snprintf(src, sizeof src, "%s", fz_file("in.db", data, size));
    RtTdb *db = NULL;
    if (rt_tdb_open(src, RT_TDB_READ, &db, err, sizeof err) == KILN_OK) {
        Seen s = {db, 0};
        int devices = 0;
        rt_tdb_rows(db, NULL, on_row, &s, err, sizeof err);
        rt_tdb_devices(db, on_device, &devices, err, sizeof err);
        rt_tdb_close(db);
    } else if (!err[0] || strchr(err, '\n')) {
        fz_fail("error not one line: '%s'", err);
    }

    char dst[1024];
    snprintf(dst, sizeof dst, "%s", fz_path("out.db"));
    unlink(dst);
    RtTdb *out = NULL;
    if (rt_tdb_open(dst, RT_TDB_WRITE, &out, err, sizeof err) != KILN_OK) fz_fail("a fresh store: %s", err);
    AtMergeStats st;
    KilnStatus s = at_store_import(out, src, &st, err, sizeof err);
    rt_tdb_close(out);
    if (s != KILN_OK && (!err[0] || strchr(err, '\n'))) fz_fail("import error not one line: '%s'", err);
    if (rt_tdb_open(dst, RT_TDB_READ, &out, err, sizeof err) != KILN_OK) fz_fail("after an import: %s", err);
    rt_tdb_close(out);
    FILE *f = fopen(src, "rb"); /* the source is never modified */
    uint8_t *back = malloc(size + 1);
    size_t got = f && back ? fread(back, 1, size + 1, f) : 0;
    if (f) fclose(f);
    if (got != size || (size && memcmp(back, data, size))) fz_fail("the imported store was modified");
    free(back);
    char side[1100];
    snprintf(side, sizeof side, "%s-wal", dst), unlink(side);
    snprintf(side, sizeof side, "%s-shm", dst), unlink(side);
    unlink(dst);
    return 0;
}
