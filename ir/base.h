/* base.h — the few utilities every compiler stage shares: status codes, a diagnostic slot, an arena,
 * a growable string buffer and a 64-bit hash. Prefix ir_ (types Ir*). Nothing here allocates behind the
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

/* Monotonic clock in milliseconds, for -v timings. */
double ir_now_ms(void);

#endif
