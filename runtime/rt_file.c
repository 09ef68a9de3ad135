/* rt_file.c — one-line error messages, read-only mappings, the regular-file check on inputs and the atomic
 * output file (rt_file.h).
 *
 * Inputs are opened O_NONBLOCK and checked with fstat on that descriptor, so a FIFO or a device never
 * blocks or reads, and the file checked is the file read. Outputs: the path is checked with lstat (only
 * "nothing" or a regular file passes), the temporary is created beside it with O_EXCL (same directory,
 * so the rename cannot cross file systems) and the path is checked again just before the rename; the
 * window between that check and the rename is the only race left, and a temporary is never left behind.
 */
#define _XOPEN_SOURCE 700 /* O_CLOEXEC (POSIX 2008), realpath (XSI) */
#include "rt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

KilnStatus rt_file_verrf(char *err, int errlen, KilnStatus s, const char *fmt, va_list ap)
{
    if (err && errlen > 0) {
        vsnprintf(err, (size_t)errlen, fmt, ap);
        for (unsigned char *p = (unsigned char *)err; *p; p++)
            if (*p == '\n' || *p == '\r' || *p == '\t')
                *p = ' ';
            else if (*p < 0x20 || *p == 0x7f)
                *p = '?';
    }
    return s;
}

KilnStatus rt_file_errf(char *err, int errlen, KilnStatus s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rt_file_verrf(err, errlen, s, fmt, ap);
    va_end(ap);
    return s;
}

/* What a non-regular file is, for messages. */
static const char *rt_file_type_name(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a plain file";
}

int rt_file_open_regular(const char *path, const char *kind, struct stat *st_out, char *err, int errlen)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            rt_file_errf(err, errlen, KILN_ERR_IO, "%s: does not exist", path);
        else
            rt_file_errf(err, errlen, KILN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        rt_file_errf(err, errlen, KILN_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        rt_file_errf(err, errlen, KILN_ERR_IO, "%s: is a directory, not a %s", path, kind);
    } else if (!S_ISREG(st.st_mode)) {
        rt_file_errf(err, errlen, KILN_ERR_IO, "%s: not a regular file (%s), not a %s", path,
                     rt_file_type_name(st.st_mode), kind);
    } else {
        int fl = fcntl(fd, F_GETFL);
        if (fl != -1) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        if (st_out) *st_out = st;
        return fd;
    }
    close(fd);
    return -1;
}

KilnStatus rt_file_map(const char *path, const char *kind, unsigned char **map, size_t *size, char *err,
                       int errlen)
{
    struct stat st;
    KilnStatus s = KILN_OK;
    *map = NULL, *size = 0;
    int fd = rt_file_open_regular(path, kind, &st, err, errlen);
    if (fd < 0) return KILN_ERR_IO;
    if ((uintmax_t)st.st_size > SIZE_MAX)
        s = rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED, "%s: too large to map", path);
    else if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
            s = rt_file_errf(err, errlen, errno == ENOMEM ? KILN_ERR_NOMEM : KILN_ERR_IO,
                             "%s: cannot map: %s", path, strerror(errno));
        else
            *map = p, *size = (size_t)st.st_size;
    }
    close(fd);
    return s;
}

/* ---- output files ------------------------------------------------------------------------------------ */

KilnStatus rt_file_out_check(const char *path, int flags, const char *kind, char *err, int errlen)
{
    struct stat st;
    if (!path || !*path) return rt_file_errf(err, errlen, KILN_ERR_IO, "(no path): no output path given");
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return KILN_OK; /* a missing directory is reported when the temporary is made */
        return rt_file_errf(err, errlen, KILN_ERR_IO, "%s: cannot write the %s here: %s", path, kind,
                            strerror(errno));
    }
    if (S_ISLNK(st.st_mode))
        return rt_file_errf(
            err, errlen, KILN_ERR_IO,
            "%s: is a symbolic link; kiln does not write through links (give the path it names)", path);
    if (!S_ISREG(st.st_mode))
        return rt_file_errf(err, errlen, KILN_ERR_IO,
                            "%s: is %s, not a regular file; kiln writes the %s only "
                            "to a new or regular file",
                            path, rt_file_type_name(st.st_mode), kind);
    if (flags & RT_FILE_OUT_NEW)
        return rt_file_errf(err, errlen, KILN_ERR_IO, "%s: exists (the %s is written to a new file)", path,
                            kind);
    return KILN_OK;
}

/* The temporaries in flight, and their SQLite journals, for the signal handler (rt_file_out_on_signals):
 * a slot is filled after both paths are whole and emptied before they are freed. */
enum { LIVE_MAX = 8 };
static char *volatile live_tmp[LIVE_MAX], *volatile live_journal[LIVE_MAX];

static void live_add(char *tmp, char *journal)
{
    for (int i = 0; i < LIVE_MAX; i++)
        if (!live_tmp[i]) {
            live_journal[i] = journal, live_tmp[i] = tmp;
            return;
        }
}

static void live_drop(const char *tmp)
{
    for (int i = 0; i < LIVE_MAX; i++)
        if (tmp && live_tmp[i] == tmp) live_tmp[i] = NULL, live_journal[i] = NULL;
}

static void on_fatal_signal(int sig)
{
    for (int i = 0; i < LIVE_MAX; i++) {
        char *t = live_tmp[i], *j = live_journal[i];
        if (t) unlink(t);
        if (j) unlink(j);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void rt_file_out_on_signals(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
    signal(SIGXFSZ, SIG_IGN); /* past a file-size limit a write fails (EFBIG), and the error path cleans up */
}

/* Removes the temporary (when there is one) and frees o's strings. */
static void rt_file_out_release(RtFileOut *o)
{
    live_drop(o->tmp);
    if (o->fd >= 0) close(o->fd);
    if (o->tmp) {
        unlink(o->tmp);
        if (o->journal) unlink(o->journal);
    }
    free(o->journal);
    o->journal = NULL;
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
    o->fd = -1;
}

KilnStatus rt_file_out_begin(RtFileOut *o, const char *path, int flags, char *err, int errlen)
{
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->flags = flags;
    KilnStatus s = rt_file_out_check(path, flags, "output", err, errlen);
    if (s) return s;
    /* The temporary's last component is the output's, cut (not inside a UTF-8 character) so that it,
     * its ".tmp.XXXXXX" and a SQLite side file's suffix ("-journal") fit NAME_MAX: any legal output name
     * gets a temporary. */
    size_t n = strlen(path);
    const char *slash = strrchr(path, '/');
    size_t base = slash ? (size_t)(slash + 1 - path) : 0, keep = n;
    if (n - base > RT_FILE_TMP_BASE_MAX) {
        keep = base + RT_FILE_TMP_BASE_MAX;
        while (keep > base && ((unsigned char)path[keep] & 0xc0) == 0x80)
            keep--;
    }
    o->path = strdup(path);
    o->tmp = malloc(keep + sizeof ".tmp.XXXXXX");
    if (!o->path || !o->tmp) {
        rt_file_out_release(o);
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)(uintptr_t)o->tmp ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^
                 ((uint64_t)ts.tv_sec << 20);
    int e = 0;
    for (int attempt = 0; attempt < 100 && o->fd < 0; attempt++) {
        memcpy(o->tmp, path, keep);
        memcpy(o->tmp + keep, ".tmp.", 5);
        for (int i = 0; i < 6; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            o->tmp[keep + 5 + i] = alnum[(x >> 33) % (sizeof alnum - 1)];
        }
        o->tmp[keep + 11] = 0;
        o->fd = open(o->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        e = errno;
        if (o->fd < 0 && e != EEXIST) break;
    }
    if (o->fd < 0) {
        free(o->tmp);
        o->tmp = NULL; /* not ours: nothing to remove */
        rt_file_out_release(o);
        return rt_file_errf(err, errlen, e == ENOMEM ? KILN_ERR_NOMEM : KILN_ERR_IO,
                            "%s: cannot create temporary file: %s", path, strerror(e));
    }
    if ((o->journal = malloc(keep + sizeof ".tmp.XXXXXX-journal"))) {
        memcpy(o->journal, o->tmp, keep + 11);
        memcpy(o->journal + keep + 11, "-journal", sizeof "-journal");
    }
    live_add(o->tmp, o->journal);
    return KILN_OK;
}

/* Best effort: makes the rename durable. Some file systems refuse fsync on a directory; the file is
 * already whole at its path either way, so a failure here is not reported. */
static void rt_file_dir_sync(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

KilnStatus rt_file_out_commit(RtFileOut *o, char *err, int errlen)
{
    KilnStatus s = KILN_OK;
    if (!o || !o->tmp) {
        if (o) rt_file_out_release(o);
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "(no path): rt_file_out_commit: no output file");
    }
    if (o->fd >= 0) {
        int bad = fsync(o->fd) != 0, e = errno;
        if (close(o->fd) != 0 && !bad) bad = 1, e = errno;
        o->fd = -1;
        if (bad) s = rt_file_errf(err, errlen, KILN_ERR_IO, "%s: cannot write: %s", o->path, strerror(e));
    }
    if (!s) s = rt_file_out_check(o->path, o->flags, "output", err, errlen);
    if (!s && (o->flags & RT_FILE_OUT_NEW)) {
        if (link(o->tmp, o->path) != 0)
            s = rt_file_errf(err, errlen, KILN_ERR_IO, "%s: cannot move the file into place: %s", o->path,
                             strerror(errno));
    } else if (!s) {
        if (rename(o->tmp, o->path) != 0)
            s = rt_file_errf(err, errlen, KILN_ERR_IO, "%s: cannot move the file into place: %s", o->path,
                             strerror(errno));
        else
            free(o->tmp), o->tmp = NULL; /* renamed: nothing to remove */
    }
    if (!s) rt_file_dir_sync(o->path);
    rt_file_out_release(o); /* unlinks the temporary if it is still there (always, after link) */
    return s;
}

void rt_file_out_abort(RtFileOut *o)
{
    if (o) rt_file_out_release(o);
}

/* path as "<realpath of its directory>/<last component>" (malloc'd), or NULL when the directory cannot be
 * resolved. A last component of "", "." or ".." is resolved with the rest. */
static char *rt_file_canon(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) return realpath(path, NULL);
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    char *real = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    if (!real) return NULL;
    size_t n = strlen(real), b = strlen(base);
    char *out = malloc(n + b + 2);
    if (out) {
        memcpy(out, real, n);
        out[n] = '/';
        memcpy(out + n + (n > 1 || real[0] != '/'), base, b + 1); /* no "//" after the root */
    }
    free(real);
    return out;
}

int rt_file_same(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b || !*a || !*b) return 0;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *ca = rt_file_canon(a), *cb = rt_file_canon(b);
    int same = ca && cb && !strcmp(ca, cb);
    free(ca);
    free(cb);
    return same;
}

KilnStatus rt_file_out_distinct(const char *out, const char *in, const char *in_kind, char *err, int errlen)
{
    if (!rt_file_same(out, in)) return KILN_OK;
    return rt_file_errf(err, errlen, KILN_ERR_IO,
                        "%s: is the same file as the %s %s; kiln does not write over its input", out, in_kind,
                        in);
}

const char *rt_file_quote(RtFileQuoted *q, const char *name)
{
    size_t o = 0;
    q->s[o++] = '\'';
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (o >= RT_FILE_QUOTE_MAX) {
            while (o > 1 && ((unsigned char)q->s[o - 1] & 0xc0) == 0x80)
                o--; /* not mid-character */
            if (o > 1 && (unsigned char)q->s[o - 1] >= 0xc0) o--;
            memcpy(q->s + o, "...", 3), o += 3;
            break;
        }
        q->s[o++] = *p < 0x20 || *p == 0x7f ? '?' : (char)*p;
    }
    q->s[o++] = '\'';
    q->s[o] = 0;
    return q->s;
}

int rt_file_vclean(char *buf, size_t n, const char *fmt, va_list ap)
{
    if (!n) return 0;
    vsnprintf(buf, n, fmt, ap);
    int len = 0;
    for (unsigned char *p = (unsigned char *)buf; *p; p++, len++)
        if (*p < 0x20 || *p == 0x7f) *p = '?';
    return len;
}

void rt_file_line(FILE *f, const char *fmt, ...)
{
    char buf[RT_FILE_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    rt_file_vclean(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fputs(buf, f);
    fputc('\n', f);
}

void rt_file_unmap(void *map, size_t size)
{
    if (map) munmap(map, size);
}

double rt_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
