/* rt_file.c — one-line error messages and read-only file mappings for the runtime's readers (rt_file.h). */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC */
#include "rt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

KilnStatus rt_file_verrf(char *err, int errlen, KilnStatus s, const char *fmt, va_list ap)
{
    if (err && errlen > 0) {
        vsnprintf(err, (size_t)errlen, fmt, ap);
        for (char *p = err; *p; p++)
            if (*p == '\n' || *p == '\r') *p = ' ';
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

KilnStatus rt_file_map(const char *path, const char *kind, unsigned char **map, size_t *size, char *err,
                       int errlen)
{
    struct stat st;
    KilnStatus s = KILN_OK;
    *map = NULL, *size = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return rt_file_errf(err, errlen, KILN_ERR_IO, "%s: does not exist", path);
        return rt_file_errf(err, errlen, KILN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    if (fstat(fd, &st) != 0)
        s = rt_file_errf(err, errlen, KILN_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        s = rt_file_errf(err, errlen, KILN_ERR_IO, "%s: is a directory, not a %s", path, kind);
    else if (!S_ISREG(st.st_mode))
        s = rt_file_errf(err, errlen, KILN_ERR_IO, "%s: not a regular file", path);
    else if ((uintmax_t)st.st_size > SIZE_MAX)
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
