/* kiln.h — the public ABI of the kiln runtime (libkiln). One header, opaque handles, status codes with
 * a readable message, no globals.
 *
 * Status of this header: the package layer is in place; the engine (kiln_engine_*) arrives with the
 * runtime issue. Usage today:
 *
 *     #include "kiln.h"
 *     KilnPackage *pkg;
 *     char err[512];
 *     if (kiln_package_open("model.kiln", &pkg, err, sizeof err) != KILN_OK) {
 *         fprintf(stderr, "%s\n", err);          // "model.kiln: not a kiln package (...)"
 *         return 1;
 *     }
 *     printf("model %s\n", kiln_package_meta(pkg, "model"));
 *     kiln_package_close(pkg);
 */
#ifndef KILN_H
#define KILN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0
/* Returns the library's version as major*10000 + minor*100 + patch. */
KILN_API int kiln_version(void);

typedef enum KilnStatus {
    KILN_OK = 0,
    KILN_ERR_ARG,         /* a bad argument from the caller */
    KILN_ERR_IO,          /* a file could not be opened, read or written */
    KILN_ERR_FORMAT,      /* not a kiln file, or a format version this build does not read */
    KILN_ERR_CORRUPT,     /* a kiln file whose contents are damaged or inconsistent */
    KILN_ERR_NOMEM,       /* host memory allocation failed */
    KILN_ERR_DEVICE,      /* a GPU driver call failed */
    KILN_ERR_UNSUPPORTED, /* valid, but not supported by this build or device */
    KILN_ERR_FULL,        /* a fixed pool is exhausted (no free KV-cache pages); nothing was changed */
} KilnStatus;

/* A short constant name for a status ("corrupt file"). Never NULL. */
KILN_API const char *kiln_status_name(KilnStatus s);

/* ---- packages (model.kiln) ------------------------------------------------------------------------ */
typedef struct KilnPackage KilnPackage;

/* Opens and validates a package read-only: an existing, non-empty SQLite file whose application_id is
 * kiln's, with a format version this build reads, that passes SQLite's quick_check and has every table
 * and column kiln needs. On failure returns a status, writes a one-line message that starts with `path`
 * into err (errlen bytes, may be 0), leaves *out NULL, and never modifies the file. */
KILN_API KilnStatus kiln_package_open(const char *path, KilnPackage **out, char *err, int errlen);
/* Closes a package (NULL is fine). */
KILN_API void kiln_package_close(KilnPackage *pkg);
/* The meta value for key, or NULL. The string is owned by the package and valid until close. */
KILN_API const char *kiln_package_meta(KilnPackage *pkg, const char *key);

#ifdef __cplusplus
}
#endif
#endif
