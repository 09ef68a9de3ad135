/* rt_file.h — what the runtime's file readers and writers share: one-line error messages, quoted names from
 * files, read-only mappings, the regular-file check on inputs and the atomic output file.
 * Prefix rt_file_. Used by the package, safetensors, GGUF and tokenizer modules, the tuning store and the
 * tuner's report. The rules (docs/PACKAGE.md, "Files"): inputs and outputs are regular files; an output
 * is written to a temporary beside it and renamed into place, and every failure removes the temporary.
 */
#ifndef KILN_RT_FILE_H
#define KILN_RT_FILE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

#include "kiln.h"

/* Formats a message into err (errlen bytes, may be NULL/0) with newlines and tabs turned into spaces and
 * other control characters into '?', so every error is one line that cannot drive a terminal (a message
 * may quote a name from a file), and returns s. */
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

/* Opens path read-only for reading as a regular file: non-blocking (a FIFO cannot hang us; the flag is
 * cleared again, so reads block as usual on the regular file), then fstat. Returns the descriptor, or -1
 * with a one-line error naming the path: does not exist, is a directory / a FIFO / a device / a socket (not
 * a `kind`), cannot open/stat. st (may be NULL) gets the file's stat. */
int rt_file_open_regular(const char *path, const char *kind, struct stat *st, char *err, int errlen);

/* An output file written atomically: a temporary "<path>.tmp.XXXXXX" beside path (O_CREAT|O_EXCL, mode
 * 0666 less the umask), renamed onto path by rt_file_out_commit. A last component longer than
 * RT_FILE_TMP_BASE_MAX bytes is cut to that in the temporary's name (NAME_MAX 255 less ".tmp.XXXXXX" and
 * SQLite's "-journal"), so every legal output name has a temporary.
 *
 * What path may name: nothing yet, or a regular file (replaced whole). Refused, with a one-line error
 * and nothing created: a directory, a FIFO, a device node, a socket, and a symbolic link (the rename
 * would replace the link itself, and a link planted in a shared directory must not redirect a write onto
 * another file: give the path it names). With RT_FILE_OUT_NEW an existing regular file is refused too,
 * and the commit is link() + unlink(), so a file that appears meanwhile is never replaced.
 *
 *     RtFileOut o;
 *     if (rt_file_out_begin(&o, path, 0, err, n)) return ...;    // o.fd open on o.tmp
 *     ... write o.fd (or open o.tmp by name) ...;  on failure: rt_file_out_abort(&o)
 *     if (rt_file_out_commit(&o, err, n)) return ...;             // removed the temporary on failure
 *
 * Errors are KILN_ERR_IO (KILN_ERR_NOMEM for memory), their message starting with path. */
enum { RT_FILE_OUT_NEW = 1, RT_FILE_TMP_BASE_MAX = 255 - 11 - 8 };
typedef struct RtFileOut {
    char *path;    /* malloc'd copy of the final path */
    char *tmp;     /* malloc'd temporary's path; NULL once committed or aborted */
    char *journal; /* malloc'd: tmp + "-journal" (SQLite's side file), removed with it; may be NULL */
    int fd;        /* open on tmp (read-write), or -1 */
    int flags;
} RtFileOut;

/* Checks what path names now, as above (nothing is created). `kind` names the output in messages. */
KilnStatus rt_file_out_check(const char *path, int flags, const char *kind, char *err, int errlen);
/* Checks path and creates the temporary. On failure o holds nothing (abort is a no-op). */
KilnStatus rt_file_out_begin(RtFileOut *o, const char *path, int flags, char *err, int errlen);
/* fsyncs and closes o->fd (when open), checks path again (it may have changed since begin), renames the
 * temporary into place and syncs the directory. On any failure the temporary is removed. Always releases o.
 */
KilnStatus rt_file_out_commit(RtFileOut *o, char *err, int errlen);
/* Closes and removes the temporary and releases o. NULL or a released o is fine. */
void rt_file_out_abort(RtFileOut *o);
/* For programs (the CLI calls it first): SIGINT, SIGTERM, SIGHUP and SIGQUIT remove the temporaries in
 * flight (and their SQLite journals) before the process dies of the signal, and SIGXFSZ is ignored so
 * that a write past a file-size limit fails and its error path removes the temporary. */
void rt_file_out_on_signals(void);

/* 1 when paths a and b name the same file: both exist with the same st_dev and st_ino (a hard link, a
 * symbolic link or another spelling of one path), or their parent directories resolve (realpath) to one
 * directory and their last components are equal (a file that does not exist yet). 0 otherwise, and for
 * NULL or empty paths. */
int rt_file_same(const char *a, const char *b);
/* The rule on outputs and inputs: kiln never writes over a file it reads. KILN_OK when out and in are
 * different files (rt_file_same), else KILN_ERR_IO with one line naming both ("OUT: is the same file
 * as the IN_KIND IN; kiln does not write over its input"). Every command checks each input against its
 * output this way before anything is written. */
KilnStatus rt_file_out_distinct(const char *out, const char *in, const char *in_kind, char *err, int errlen);

/* A name or key from a file, quoted for a message: control characters shown as '?', cut with "..." (not
 * inside a UTF-8 character) past RT_FILE_QUOTE_MAX bytes. Returns q->s. */
enum { RT_FILE_QUOTE_MAX = 120 };
typedef struct RtFileQuoted {
    char s[RT_FILE_QUOTE_MAX + 16];
} RtFileQuoted;
const char *rt_file_quote(RtFileQuoted *q, const char *name);

/* Text from a file, made safe to print: formats fmt into buf (n bytes, cut at its size) with every
 * control character of the result (bytes below 0x20 and 0x7f) turned into '?'. A package or a tuning
 * store may hold any bytes in a name or a config: a newline would forge an output line, an ESC would
 * drive the terminal. Everything kiln prints from a file goes through this (kiln inspect, kernels,
 * db list/show, tune --report). Returns the length of buf. */
int rt_file_vclean(char *buf, size_t n, const char *fmt, va_list ap);
/* rt_file_vclean into a buffer of RT_FILE_LINE_MAX bytes, printed to f with a newline after it. */
enum { RT_FILE_LINE_MAX = 2048 };
void rt_file_line(FILE *f, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Seconds on the monotonic clock (for durations). */
double rt_now_s(void);

#endif
