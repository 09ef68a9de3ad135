/* base.c — status names, diagnostics, the arena, string buffers, hashing, input files and the clock.
 * The arena is a list of malloc'd chunks; a large request gets a chunk of its own. Fault injection
 * (ir_arena_fail_after) lets tests prove every caller handles NULL.
 */
#define _POSIX_C_SOURCE 200809L
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void ir_panic(const char *file, int line, const char *what)
{
    fprintf(stderr, "kiln: internal error at %s:%d: %s\n", file, line, what);
    abort();
}

const char *ir_status_name(IrStatus s)
{
    switch (s) {
    case IR_OK: return "ok";
    case IR_ERR_INPUT: return "bad input";
    case IR_ERR_SHAPE: return "shape error";
    case IR_ERR_NOMEM: return "out of memory";
    case IR_ERR_IO: return "i/o error";
    case IR_ERR_LIMIT: return "limit exceeded";
    case IR_ERR_UNSUPPORTED: return "unsupported";
    case IR_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

IrStatus ir_diag_set(IrDiag *d, IrStatus s, const char *fmt, ...)
{
    if (d && d->status == IR_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->msg, sizeof d->msg, fmt, ap);
        va_end(ap);
        for (char *p = d->msg; *p; p++) /* one line, always, and no terminal escapes (ESC, ...) */
            if (*p == '\n' || *p == '\r' || *p == '\t')
                *p = ' ';
            else if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
        d->status = s;
    }
    return s;
}

void ir_diag_clear(IrDiag *d)
{
    d->status = IR_OK;
    d->msg[0] = 0;
}

typedef struct IrChunk {
    struct IrChunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} IrChunk;

struct IrArena {
    IrChunk *head;
    size_t used;
    long fail_after; /* 0: never fail */
};

enum { IR_CHUNK = 64 * 1024 };

IrArena *ir_arena_create(void)
{
    return calloc(1, sizeof(IrArena));
}

void ir_arena_destroy(IrArena *a)
{
    if (!a) return;
    for (IrChunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(a);
}

void ir_arena_fail_after(IrArena *a, long k)
{
    a->fail_after = k;
}

void *ir_arena_alloc(IrArena *a, size_t n)
{
    if (a->fail_after > 0 && --a->fail_after == 0) return NULL;
    n = (n + 15) & ~(size_t)15;
    IrChunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > IR_CHUNK / 4 ? n : IR_CHUNK;
        IrChunk *nc = malloc(sizeof(IrChunk) + cap);
        if (!nc) return NULL;
        nc->used = 0;
        nc->cap = cap;
        if (c && cap == n) { /* a big block: keep the current chunk on top for small ones */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            a->head = nc;
        }
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *ir_arena_strdup(IrArena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ir_arena_alloc(a, n);
    if (p) memcpy(p, s, n);
    return p;
}

int ir_arena_grow(IrArena *a, void **items, int *cap, int n, size_t size)
{
    if (n < *cap) return 1;
    int ncap = *cap ? *cap * 2 : 64;
    void *p = ir_arena_alloc(a, (size_t)ncap * size);
    if (!p) return 0;
    if (*items) memcpy(p, *items, (size_t)n * size);
    *items = p;
    *cap = ncap;
    return 1;
}

char *ir_arena_printf(IrArena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = n < 0 ? NULL : ir_arena_alloc(a, (size_t)n + 1);
    if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

size_t ir_arena_used(const IrArena *a)
{
    return a->used;
}

static int buf_reserve(IrBuf *b, size_t extra)
{
    if (b->oom) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return 0;
    }
    b->s = s;
    b->cap = cap;
    return 1;
}

void ir_buf_put(IrBuf *b, const char *s, size_t n)
{
    if (!buf_reserve(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void ir_buf_vprintf(IrBuf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !buf_reserve(b, (size_t)n)) return;
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void ir_buf_printf(IrBuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ir_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void ir_buf_free(IrBuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

uint64_t ir_hash64(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    uint64_t h = seed;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void ir_hash64_hex(uint64_t h, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

double ir_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *file_type_name(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a plain file";
}

IrStatus ir_file_read(const char *path, size_t max_bytes, char **out, size_t *len, IrDiag *d)
{
    struct stat st;
    *out = NULL, *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return ir_diag_set(d, IR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    IrStatus s = IR_OK;
    if (fstat(fd, &st) != 0)
        s = ir_diag_set(d, IR_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        s = ir_diag_set(d, IR_ERR_IO, "%s: is %s, not a regular file", path, file_type_name(st.st_mode));
    else if ((uintmax_t)st.st_size > max_bytes)
        s = ir_diag_set(d, IR_ERR_LIMIT, "%s: %lld bytes, more than the %zu allowed", path,
                        (long long)st.st_size, max_bytes);
    char *buf = s ? NULL : malloc((size_t)st.st_size + 1);
    if (!s && !buf) s = ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory", path);
    size_t got = 0;
    while (!s) { /* read to the end: the file may have grown or shrunk since fstat */
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) s = ir_diag_set(d, IR_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        if (r <= 0 || (got += (size_t)r) == (size_t)st.st_size) break;
    }
    close(fd);
    if (s) {
        free(buf);
        return s;
    }
    buf[got] = 0;
    *out = buf, *len = got;
    return IR_OK;
}
