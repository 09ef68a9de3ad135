/* rt_package.h — the package file (model.kiln): schema, atomic writer, and reader helpers used by the CLI.
 * Prefix rt_pkg (reader, beside the public kiln_package_* in kiln.h) and rt_pkgw (writer).
 * The schema and its invariants are documented in docs/PACKAGE.md.
 *
 * Writer usage (kiln compile):
 *     RtPkgWriter *w;
 *     if (rt_pkgw_create("out.kiln", &w, err, sizeof err)) fail(err);   // nothing at out.kiln yet
 *     rt_pkgw_meta(w, "model", "llama-3-8b"); ... rt_pkgw_weight(w, ...); ...
 *     if (rt_pkgw_commit(w, err, sizeof err)) fail(err);                // now out.kiln appears, whole
 *   or rt_pkgw_abort(w) on any error: the temporary file is removed and out.kiln is untouched.
 */
#ifndef KILN_RT_PACKAGE_H
#define KILN_RT_PACKAGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln.h"

#define RT_PKG_APPLICATION_ID 0x4b494c4e /* 'KILN', PRAGMA application_id */
#define RT_PKG_FORMAT_VERSION 5          /* PRAGMA user_version */

typedef struct RtPkgWriter RtPkgWriter;

/* Starts a package that will be renamed onto `path` at commit: creates a unique temporary file in the
 * same directory, creates the schema, opens one transaction. Returns KILN_OK or a status with a one-line
 * message ("out.kiln: cannot create ...") in err. */
KilnStatus rt_pkgw_create(const char *path, RtPkgWriter **out, char *err, int errlen);
/* Each adds one row. They return KILN_OK or a status; after the first failure every later call returns
 * that same failure and commit refuses, so callers may check only at the end. Strings are copied.
 * A repeated config key or weight name, or a second graph, is KILN_ERR_ARG. For meta the last value of
 * a key wins: the writer sets format_version and kiln_version itself (a caller setting them is
 * KILN_ERR_ARG) and created (UTC, "2026-11-29T10:00:00Z"), which a caller may override, e.g. with a
 * fixed time for a reproducible package. */
KilnStatus rt_pkgw_meta(RtPkgWriter *w, const char *key, const char *value);
KilnStatus rt_pkgw_config(RtPkgWriter *w, const char *key, const char *value);
/* Stores the graph text with its FNV-1a 64 hash (hex), which the reader checks at open. */
KilnStatus rt_pkgw_graph(RtPkgWriter *w, const char *text);
/* shape is text like "[128256,4096]"; nbytes the tensor's size on disk in that dtype. */
KilnStatus rt_pkgw_weight(RtPkgWriter *w, const char *name, const char *dtype, const char *shape,
                          int64_t nbytes);
/* A kernel row: the kernel IR of one spec at its default config, with what the runtime needs to launch
 * it without the compiler: params "name:type ..." (types as kir prints them: ptr<bf16>, i32) and the grid
 * "g0 g1 g2", each a constant or cdiv(param*mul,div). */
typedef struct RtPkgKernel {
    int64_t id;
    const char *name, *family, *spec, *config, *params, *grid, *ir_hash, *ir_text;
} RtPkgKernel;
KilnStatus rt_pkgw_kernel(RtPkgWriter *w, const RtPkgKernel *k);
/* A compiled binary of kernel_id for target at config (text "BM=64 BN=128 ...") with the grid that config
 * launches (the kernel row's grid text format; it differs from the row's when a target got another
 * config) and its launch geometry: `block` threads per block / workgroup (1..1024) and `smem` bytes of
 * dynamic shared memory (0..1 MiB), which only the compiler knows; the writer stores the row's hash
 * (rt_pkg_binary_hash), which readers check before loading it. */
KilnStatus rt_pkgw_binary(RtPkgWriter *w, int64_t kernel_id, const char *target, const char *config,
                          const char *grid, const char *format, const char *entry, int block, int smem,
                          const void *data, size_t size, double compile_ms);
/* One step of the launch plan: kernel_id with args text (ir/sched.h: sched_launch_args). */
KilnStatus rt_pkgw_launch(RtPkgWriter *w, int64_t step, int64_t kernel_id, const char *args);
/* One buffer of the plan: kind input/weight/act, shape text "[T,4096]", arena offset (-1 if none),
 * bytes at the planned maxima, graph output name or NULL. */
KilnStatus rt_pkgw_buffer(RtPkgWriter *w, const char *name, const char *kind, const char *dtype,
                          const char *shape, int64_t offset, int64_t bytes, const char *output);

/* Commits, closes, fsyncs and renames onto the final path. On failure the temporary file is removed and
 * the path is left as it was. Frees w either way. */
KilnStatus rt_pkgw_commit(RtPkgWriter *w, char *err, int errlen);
/* Discards everything: closes and removes the temporary file. Frees w. NULL is fine. */
void rt_pkgw_abort(RtPkgWriter *w);

/* Prints a readable summary of an opened package to f: meta, config, graph size and hash, weight count
 * and total bytes (with the largest few), kernels and binaries per target (counts; zero for now).
 * Deterministic (rows in key order), lines wrapped at 100 columns, control characters shown as '?',
 * sizes in decimal units (1 GB = 1e9 bytes). Returns KILN_OK, KILN_ERR_IO when writing to f failed, or
 * KILN_ERR_CORRUPT / KILN_ERR_NOMEM when a table could not be read (the summary is then cut short). */
KilnStatus rt_pkg_print_summary(KilnPackage *pkg, FILE *f);
/* Prints the kernels (name, uses in the launch plan, default config) and every binary (target, format,
 * size, compile time, config) of an opened package to f. */
KilnStatus rt_pkg_print_kernels(KilnPackage *pkg, FILE *f);
/* The stored graph text (owned by the package, valid until close), or NULL. */
const char *rt_pkg_graph_text(KilnPackage *pkg);
/* The package's read-only SQLite connection (owned by the package), for the runtime's plan loader. */
struct sqlite3 *rt_pkg_db(KilnPackage *pkg);
/* The package's path as opened (owned by the package). */
const char *rt_pkg_path(KilnPackage *pkg);

/* ---- internal: shared by rt_package.c (writer), rt_pkg_read.c (reader) and rt_tunedb.c (the tuning store,
 * which keeps the same file conventions); not for other callers ---- */
/* The schema (CREATE TABLE statements). The reader requires every table and column it names. */
extern const char rt_pkg_schema_sql[];
/* FNV-1a 64 (offset basis 0xcbf29ce484222325): the content hash stored beside the graph text. It equals
 * the compiler's ir_hash64(p, n, IR_HASH_SEED); the runtime keeps its own copy (it links nothing of ir/). */
uint64_t rt_pkg_fnv1a64(const void *data, size_t n);
/* Fuzz builds (KILN_FUZZ defines FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, libFuzzer's convention) compute
 * every content hash but do not refuse a mismatch, so that mutated inputs reach the checks behind the
 * hashes (the plan checks, the grids). Readers never execute a binary, so nothing unchecked runs. Never
 * defined in a product build. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define RT_HASH_DIFFERS(cmp) ((void)(cmp), 0)
#else
#define RT_HASH_DIFFERS(cmp) ((cmp) != 0)
#endif
/* The hash a binaries row stores, in packages and tuning stores: FNV-1a 64 of the code, continued over
 * each field that says how to launch it (target, config, grid, format, entry, "block smem"), each after a
 * 0 byte; 16 lowercase hex digits. Covering the fields binds the code to the config it was compiled for:
 * a config or grid edited without the code no longer matches (package format 5, store schema 3). */
void rt_pkg_binary_hash(const void *data, size_t n, const char *target, const char *config, const char *grid,
                        const char *format, const char *entry, int block, int smem, char out[17]);
/* The config rows' hash: FNV-1a 64 of "key=value\n" in key order, as 16 hex digits (the meta key
 * config_hash, written at commit, checked at open). Returns 0, or -1 when the rows cannot be read. */
int rt_pkg_config_hash(struct sqlite3 *db, char out[17]);
/* An SQLite URI for a file path: "file:" + the path percent-escaped + "?" + query (query may be NULL).
 * Always opened with SQLITE_OPEN_URI, so a path is never misread (this SQLite is built with USE_URI).
 * Returns a malloc'd string (caller frees) or NULL when out of memory. */
char *rt_pkg_uri(const char *path, const char *query);
/* Writes a one-line printf-style message into err (errlen bytes; err may be NULL when errlen is 0),
 * turning any newline into a space, and returns s. */
KilnStatus rt_pkg_errf(char *err, int errlen, KilnStatus s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
