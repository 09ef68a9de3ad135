/* base.h — the few utilities every compiler stage shares: status codes, a diagnostic slot, an arena,
 * a growable string buffer, a 64-bit hash, checked size arithmetic and reading an input file. Prefix ir_ (types Ir*). Nothing here allocates behind the
 * caller's back: arenas own everything they hand out and are freed in one call.
 */
#ifndef KILN_IR_BASE_H
#define KILN_IR_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define KILN_VERSION_STRING "0.1.0"

/* Bugs are asserts; user errors are statuses (STYLE.md, "three tiers"). */
#define KILN_ASSERT(c) ((c) ? (void)0 : ir_panic(__FILE__, __LINE__, #c))
#define UNREACHABLE()  ir_panic(__FILE__, __LINE__, "unreachable")
_Noreturn void ir_panic(const char *file, int line, const char *what);

typedef enum IrStatus {
    IR_OK = 0,
    IR_ERR_INPUT,       /* bad user input: recipe, config, command line */
    IR_ERR_SHAPE,       /* shapes or dtypes that do not fit */
    IR_ERR_NOMEM,       /* an allocation failed or a memory cap was hit */
    IR_ERR_IO,          /* a file could not be read or written */
    IR_ERR_LIMIT,       /* an instruction, size or resource limit was hit */
    IR_ERR_UNSUPPORTED, /* valid, but not supported by this build or target */
    IR_ERR_INTERNAL,    /* a verifier found a broken invariant */
} IrStatus;

const char *ir_status_name(IrStatus s);

/* A diagnostic: the first error wins and later ones are dropped, so a failing call chain reports its root
 * cause. `msg` is one line, already prefixed with its location ("recipes/x.lua:12: ..."). */
typedef struct IrDiag {
    IrStatus status;
    char msg[512];
} IrDiag;

/* Records an error in `d` (when `d` has none yet) and returns `s`; fmt is printf-style. */
IrStatus ir_diag_set(IrDiag *d, IrStatus s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void ir_diag_clear(IrDiag *d);

/* Arena: bump allocation in chunks, freed in one call. Returns NULL on allocation failure (never
 * aborts). `ir_arena_fail_after` makes the k-th following allocation fail (k >= 1), for fault tests. */
typedef struct IrArena IrArena;
IrArena *ir_arena_create(void);
void ir_arena_destroy(IrArena *a);
void *ir_arena_alloc(IrArena *a, size_t n); /* zeroed, 16-byte aligned */
char *ir_arena_strdup(IrArena *a, const char *s);
/* Grows an arena-backed array *items of `size`-byte items (capacity *cap, n in use) to hold at least
 * n + 1: doubles it (64 at first), copying the n items. Returns 0 when out of memory (nothing changed). */
int ir_arena_grow(IrArena *a, void **items, int *cap, int n, size_t size);
char *ir_arena_printf(IrArena *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
size_t ir_arena_used(const IrArena *a); /* bytes handed out */
void ir_arena_fail_after(IrArena *a, long k);

/* Growable, NUL-terminated string buffer on malloc. On allocation failure `oom` is set and further
 * appends are ignored; check it once at the end. */
typedef struct IrBuf {
    char *s;
    size_t len, cap;
    int oom;
} IrBuf;
void ir_buf_printf(IrBuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void ir_buf_vprintf(IrBuf *b, const char *fmt, va_list ap);
void ir_buf_put(IrBuf *b, const char *s, size_t n);
void ir_buf_free(IrBuf *b);

/* 64-bit FNV-1a; `ir_hash64_hex` writes 16 hex digits + NUL into out[17]. */
uint64_t ir_hash64(const void *p, size_t n, uint64_t seed);
#define IR_HASH_SEED 0xcbf29ce484222325ull
void ir_hash64_hex(uint64_t h, char out[17]);

/* Checked arithmetic for every size computed from a recipe (shapes, byte counts, offsets): 1 with the
 * exact result in *r, 0 on overflow (*r is then unspecified). Sizes are int64 and never wrap (C's signed
 * overflow is undefined behaviour; the sanitizer build proves none happens). */
static inline int ir_mul64(int64_t a, int64_t b, int64_t *r)
{
    return !__builtin_mul_overflow(a, b, r);
}
static inline int ir_add64(int64_t a, int64_t b, int64_t *r)
{
    return !__builtin_add_overflow(a, b, r);
}

/* The largest single tensor or buffer, and the largest activation arena, in bytes: 2^48 (256 TiB), far
 * beyond any device, so that sums and products of a few such sizes stay far from INT64_MAX. A constant
 * dimension and an integer attribute are at most IR_MAX_DIM (kernels take sizes as 32-bit integers). */
#define IR_MAX_BYTES ((int64_t)1 << 48)
#define IR_MAX_DIM   ((int64_t)INT32_MAX)

/* Reads the whole regular file at path (at most max_bytes) into a malloc'd, NUL-terminated buffer
 * (*out, the caller's to free; *len without the NUL). The file is opened non-blocking and checked with
 * fstat first, so a FIFO, device, socket or directory is refused before anything is read (never blocks).
 * Errors (one line in d, starting with path): IR_ERR_IO (missing, not a regular file, cannot read),
 * IR_ERR_LIMIT (larger than max_bytes), IR_ERR_NOMEM. */
IrStatus ir_file_read(const char *path, size_t max_bytes, char **out, size_t *len, IrDiag *d);

/* Monotonic clock in milliseconds, for -v timings. */
double ir_now_ms(void);

#endif
