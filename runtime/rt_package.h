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

#include <stdint.h>
#include <stdio.h>

#include "kiln.h"

#define RT_PKG_APPLICATION_ID 0x4b494c4e /* 'KILN', PRAGMA application_id */
#define RT_PKG_FORMAT_VERSION 1          /* PRAGMA user_version */

typedef struct RtPkgWriter RtPkgWriter;

/* Starts a package that will be renamed onto `path` at commit: creates a unique temporary file in the
 * same directory, creates the schema, opens one transaction. Returns KILN_OK or a status with a one-line
 * message ("out.kiln: cannot create ...") in err. */
KilnStatus rt_pkgw_create(const char *path, RtPkgWriter **out, char *err, int errlen);
/* Each adds one row. They return KILN_OK or a status; after the first failure every later call returns
 * that same failure and commit refuses, so callers may check only at the end. */
KilnStatus rt_pkgw_meta(RtPkgWriter *w, const char *key, const char *value);
KilnStatus rt_pkgw_config(RtPkgWriter *w, const char *key, const char *value);
KilnStatus rt_pkgw_graph(RtPkgWriter *w, const char *text, const char *hash_hex);
/* shape is text like "[128256,4096]"; nbytes the tensor's size on disk in that dtype. */
KilnStatus rt_pkgw_weight(RtPkgWriter *w, const char *name, const char *dtype, const char *shape,
                          int64_t nbytes);
/* Commits, closes, fsyncs and renames onto the final path. On failure the temporary file is removed and
 * the path is left as it was. Frees w either way. */
KilnStatus rt_pkgw_commit(RtPkgWriter *w, char *err, int errlen);
/* Discards everything: closes and removes the temporary file. Frees w. NULL is fine. */
void rt_pkgw_abort(RtPkgWriter *w);

/* Prints a readable summary of an opened package to f: meta, config, graph size and hash, weight count
 * and total bytes (with the largest few), kernels and binaries per target (counts; zero for now). */
KilnStatus rt_pkg_print_summary(KilnPackage *pkg, FILE *f);
/* The stored graph text (owned by the package, valid until close), or NULL. */
const char *rt_pkg_graph_text(KilnPackage *pkg);

#endif
