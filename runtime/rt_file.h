/* rt_file.h — what the runtime's file readers share: one-line error messages, quoted names from files and
 * read-only mappings.
 * Prefix rt_file_. Used by the package, safetensors, GGUF and tokenizer modules.
 */
#ifndef KILN_RT_FILE_H
#define KILN_RT_FILE_H

#include <stdarg.h>
#include <stddef.h>

#include "kiln.h"

/* Formats a message into err (errlen bytes, may be NULL/0) with newlines turned into spaces, so every
 * error is one line, and returns s. */
KilnStatus rt_file_errf(char *err, int errlen, KilnStatus s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
KilnStatus rt_file_verrf(char *err, int errlen, KilnStatus s, const char *fmt, va_list ap);

/* Maps the regular file at path read-only (opened non-blocking, so a FIFO cannot hang us). An empty file
 * is KILN_OK with *map NULL and *size 0 (the caller says why that is wrong). `kind` names what the file
 * should be, for messages ("GGUF file"). Errors, one line naming the path: KILN_ERR_IO (missing, a
 * directory, not a regular file, cannot open/stat/map), KILN_ERR_NOMEM, KILN_ERR_UNSUPPORTED (too large
 * for this address space). Unmap with rt_file_unmap. */
KilnStatus rt_file_map(const char *path, const char *kind, unsigned char **map, size_t *size, char *err,
                       int errlen);
void rt_file_unmap(void *map, size_t size); /* NULL is fine */

/* A name or key from a file, quoted for a message: control characters shown as '?', cut with "..." (not
 * inside a UTF-8 character) past RT_FILE_QUOTE_MAX bytes. Returns q->s. */
enum { RT_FILE_QUOTE_MAX = 120 };
typedef struct RtFileQuoted {
    char s[RT_FILE_QUOTE_MAX + 16];
} RtFileQuoted;
const char *rt_file_quote(RtFileQuoted *q, const char *name);

/* Seconds on the monotonic clock (for durations). */
double rt_now_s(void);

#endif
