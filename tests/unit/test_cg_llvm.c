/* test_cg_llvm.c — the LLVM backend: every kernel-IR op, built by hand, run through the host JIT on random
 * inputs (outputs poisoned first) and checked against values computed here in C; the same kernels
 * compared with the IR interpreter when it is available; compiled for sm_80/sm_90a/sm_100a (the PTX must
 * assemble with ptxas when it is installed), gfx942/gfx950 (HSACO: ELF64, EM_AMDGPU, the arch flag, the
 * kernel symbol) and the host (ELF relocatable); each twice, with identical bytes (once in the reduced
 * tier). Also: parallel compiles, linking host objects into a shared library, and the krun host executor.
 * With KILN_LLVM_GPU_CASES=<dir>, every kernel run is also written as a GPU replay case (kcase.h).
 * Exit 77 when this build has no LLVM.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codegen/cg.h"
#include "codegen/llvm/cg_host.h"
#include "ir/kir.h"
#include "ir/kir_interp.h"
#include "kcase.h"
#include "krun.h"
#include "ksweep.h"
#include "kt.h"

/* ---- random numbers and dtype codecs (plain double arithmetic, independent of the backend) ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd64(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dull;
}

static double frand(double lo, double hi)
{
    return lo + (hi - lo) * (double)(rnd64() >> 11) / 9007199254740992.0;
}

/* Round x to the nearest value with mbits mantissa bits and min normal exponent emin (even on ties). */
static double round_mini(double x, int mbits, int emin, double maxv, int sat)
{
    if (isnan(x)) return x;
    double a = fabs(x);
    if (isinf(a)) return sat ? copysign(maxv, x) : x;
    int e;
    frexp(a, &e);
    int E = e - 1 < emin ? emin : e - 1;
    double q = ldexp(1.0, E - mbits);
    double r = nearbyint(a / q) * q;
    if (r > maxv) r = sat ? maxv : INFINITY;
    return copysign(r, x);
}

static double round_to(KirDtype t, double x)
{
    switch (t) {
    case KIR_F32: return (double)(float)x;
    case KIR_BF16: return round_mini(x, 7, -126, 3.3895313892515355e38, 0);
    case KIR_F16: return round_mini(x, 10, -14, 65504.0, 0);
    case KIR_F8E4M3: return round_mini(x, 3, -6, 448.0, 1);
    default: return x;
    }
}

static void mini_fmt(KirDtype t, int *eb, int *mb, int *bias)
{
    *eb = t == KIR_F16 ? 5 : t == KIR_BF16 ? 8 : 4;
    *mb = t == KIR_F16 ? 10 : t == KIR_BF16 ? 7 : 3;
    *bias = t == KIR_F16 ? 15 : t == KIR_BF16 ? 127 : 7;
}

static double mini_decode(KirDtype t, uint32_t bits)
{
    int eb, mb, bias;
    mini_fmt(t, &eb, &mb, &bias);
    uint32_t sign = bits >> (eb + mb) & 1, e = bits >> mb & ((1u << eb) - 1), m = bits & ((1u << mb) - 1);
    double v;
    if (t == KIR_F8E4M3 && e == 15 && m == 7)
        v = NAN;
    else if (t != KIR_F8E4M3 && e == (1u << eb) - 1)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - bias - mb);
    else
        v = ldexp(1.0 + ldexp((double)m, -mb), (int)e - bias);
    return sign ? -v : v;
}

/* v must be representable in t. */
static uint32_t mini_encode(KirDtype t, double v)
{
    int eb, mb, bias;
    mini_fmt(t, &eb, &mb, &bias);
    uint32_t sign = signbit(v) ? 1u << (eb + mb) : 0;
    double a = fabs(v);
    if (isnan(v)) return t == KIR_F8E4M3 ? 0x7f : t == KIR_F16 ? 0x7e00 : 0x7fc0;
    if (isinf(a)) return sign | ((1u << eb) - 1) << mb;
    if (a == 0) return sign;
    int e;
    frexp(a, &e);
    int E = e - 1;
    if (E < 1 - bias) return sign | (uint32_t)ldexp(a, bias - 1 + mb);
    return sign | (uint32_t)(E + bias) << mb | (uint32_t)((ldexp(a, -E) - 1.0) * (1 << mb));
}

/* Element i of buffer p of dtype t, as a double (integers exactly, i64 within 2^53). */
static double get(KirDtype t, const void *p, int i)
{
    switch (t) {
    case KIR_I1: return ((const uint8_t *)p)[i] != 0;
    case KIR_I8: return ((const int8_t *)p)[i];
    case KIR_U8: return ((const uint8_t *)p)[i];
    case KIR_I32: return ((const int32_t *)p)[i];
    case KIR_I64: return (double)((const int64_t *)p)[i];
    case KIR_F32: return ((const float *)p)[i];
    case KIR_F16:
    case KIR_BF16: return mini_decode(t, ((const uint16_t *)p)[i]);
    case KIR_F8E4M3: return mini_decode(t, ((const uint8_t *)p)[i]);
    default: return 0;
    }
}

static int64_t geti(KirDtype t, const void *p, int i)
{
    return t == KIR_I64 ? ((const int64_t *)p)[i] : (int64_t)get(t, p, i);
}

static void put(KirDtype t, void *p, int i, double v)
{
    switch (t) {
    case KIR_I1: ((uint8_t *)p)[i] = v != 0; break;
    case KIR_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case KIR_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case KIR_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case KIR_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case KIR_F32: ((float *)p)[i] = (float)v; break;
    case KIR_F16:
    case KIR_BF16: ((uint16_t *)p)[i] = (uint16_t)mini_encode(t, v); break;
    case KIR_F8E4M3: ((uint8_t *)p)[i] = (uint8_t)mini_encode(t, v); break;
    default: break;
    }
}

/* A random value of dtype t (floats in [lo, hi], rounded to t). */
static void put_random(KirDtype t, void *p, int i, double lo, double hi)
{
    uint64_t r = rnd64();
    switch (t) {
    case KIR_I1: ((uint8_t *)p)[i] = r & 1; break;
    case KIR_I8:
    case KIR_U8: ((uint8_t *)p)[i] = (uint8_t)r; break;
    case KIR_I32: ((uint32_t *)p)[i] = (uint32_t)r; break;
    case KIR_I64: ((uint64_t *)p)[i] = r; break;
    default: put(t, p, i, round_to(t, frand(lo, hi))); break;
    }
}

/* Fills a buffer with a byte pattern that decodes to NaN in every float format. */
static void poison(void *p, size_t bytes)
{
    memset(p, 0xff, bytes);
}

static int same(double a, double b, double tol)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (a == b) return 1;
    return fabs(a - b) <= tol * (fabs(b) > 1 ? fabs(b) : 1);
}

static size_t bytes_of(KirDtype t, int n)
{
    return (size_t)kir_dtype_bytes(t) * (size_t)n;
}

/* ---- kernels ---- */

typedef struct TK {
    IrArena *arena;
    KirKernel *k;
    KirBuilder b;
    IrDiag d;
} TK;

static KirBuilder *tk_begin(TK *t, const char *name)
{
    memset(t, 0, sizeof *t);
    t->arena = ir_arena_create();
    KirConfig cfg = {0};
    kir_config_set(&cfg, "WARPS", 1);
    t->k = kir_kernel_create(t->arena, name, "test", &cfg);
    kir_builder_init(&t->b, t->k, &t->d);
    return &t->b;
}

static KirKernel *tk_end(TK *t)
{
    kir_ret(&t->b);
    IrStatus s = kir_builder_done(&t->b);
    if (s == IR_OK) s = kir_verify(t->k, NULL, &t->d);
    KT_CHECK(s == IR_OK, "build %s: %s", t->k->name, t->d.msg);
    return s == IR_OK ? t->k : NULL;
}

static void tk_free(TK *t)
{
    ir_arena_destroy(t->arena);
}

static KirValue *ci(KirBuilder *b, int64_t v)
{
    return kir_const_i32(b, v);
}

/* pid(0)*block + arange(block) */
static KirValue *block_offs(KirBuilder *b, int block)
{
    return kir_add(b, kir_mul(b, kir_pid(b, 0), ci(b, block)), kir_arange(b, block));
}

/* 2-D row-major offsets [m,n]: r*ld + c */
static KirValue *offs2(KirBuilder *b, int m, int n, int ld)
{
    KirValue *r = kir_mul(b, kir_arange(b, m), ci(b, ld));
    KirValue *rb = kir_broadcast(b, kir_expand(b, r, 1), m, n);
    KirValue *cb = kir_broadcast(b, kir_expand(b, kir_arange(b, n), 0), m, n);
    return kir_add(b, rb, cb);
}

/* A constant of dtype t (ints through a cast of an i32). */
static KirValue *const_of(KirBuilder *b, KirDtype t, double v)
{
    if (kir_dtype_is_float(t)) return kir_const_f(b, t, v);
    if (t == KIR_I64) return kir_const_i64(b, (int64_t)v);
    KirValue *c = ci(b, (int64_t)v);
    return t == KIR_I32 ? c : kir_cast(b, c, t);
}

/* ---- executors and target checks ---- */

static const char *ptxas_path;
static char tmp_dir[64];
static int interp_state; /* 0 unknown, 1 works, -1 unavailable */

static void grid_of(const KirKernel *k, const KRunArg *a, int32_t g[3])
{
    for (int i = 0; i < 3; i++) {
        const KirGridDim *gd = &k->grid[i];
        g[i] = gd->param < 0 ? (int32_t)gd->c : (int32_t)((a[gd->param].i * gd->mul + gd->div - 1) / gd->div);
    }
}

static void compare_buffers(const KirKernel *k, const KRunArg *a, void *const *other, double tol,
                            const char *who)
{
    for (int i = 0; i < k->n_params; i++) {
        const KirType *t = &k->params[i].type;
        if (!t->is_ptr) continue;
        int n = (int)(a[i].bytes / (size_t)kir_dtype_bytes(t->dtype)), bad = 0, first = -1;
        for (int j = 0; j < n; j++) {
            int ok = kir_dtype_is_float(t->dtype)
                         ? same(get(t->dtype, a[i].data, j), get(t->dtype, other[i], j), tol)
                         : geti(t->dtype, a[i].data, j) == geti(t->dtype, other[i], j);
            if (!ok && !bad++) first = j;
        }
        KT_CHECK(!bad, "%s: %s vs host: param %s: %d of %d differ (first [%d]: %g vs %g)", k->name, who,
                 k->params[i].name, bad, n, first, first >= 0 ? get(t->dtype, other[i], first) : 0,
                 first >= 0 ? get(t->dtype, a[i].data, first) : 0);
    }
}

static void check_elf_common(const CgBinary *b, int machine, int type, const char *what)
{
    const unsigned char *e = b->data;
    KT_CHECK(b->size > 64 && !memcmp(e, "\177ELF", 4) && e[4] == 2 && e[5] == 1, "%s: not an ELF64 LSB file",
             what);
    if (b->size <= 64) return;
    uint16_t et, em;
    memcpy(&et, e + 16, 2);
    memcpy(&em, e + 18, 2);
    KT_CHECK(em == machine, "%s: e_machine %d, want %d", what, em, machine);
    KT_CHECK(et == type, "%s: e_type %d, want %d", what, et, type);
}

/* 1 when the ELF's symbol table has a symbol `name`. */
static int elf_has_symbol(const CgBinary *b, const char *name)
{
    const unsigned char *e = b->data;
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, e + 40, 8);
    memcpy(&shentsize, e + 58, 2);
    memcpy(&shnum, e + 60, 2);
    if (shoff + (uint64_t)shnum * shentsize > b->size || shentsize < 64) return 0;
    for (int i = 0; i < shnum; i++) {
        const unsigned char *sh = e + shoff + (uint64_t)i * shentsize;
        uint32_t type, link;
        uint64_t off, size, entsize;
        memcpy(&type, sh + 4, 4);
        memcpy(&off, sh + 24, 8);
        memcpy(&size, sh + 32, 8);
        memcpy(&link, sh + 40, 4);
        memcpy(&entsize, sh + 56, 8);
        if ((type != 2 && type != 11) || entsize < 24 || link >= shnum || off + size > b->size) continue;
        const unsigned char *str = e + shoff + (uint64_t)link * shentsize;
        uint64_t stroff, strsize;
        memcpy(&stroff, str + 24, 8);
        memcpy(&strsize, str + 32, 8);
        if (stroff + strsize > b->size) continue;
        for (uint64_t s = 0; s < size / entsize; s++) {
            uint32_t nm;
            memcpy(&nm, e + off + s * entsize, 4);
            if (nm < strsize && !strcmp((const char *)e + stroff + nm, name)) return 1;
        }
    }
    return 0;
}

static struct {
    const char *target;
    double ms;
    int n;
} timing[8];

static void note_time(const char *target, double ms)
{
    for (int i = 0; i < 8; i++)
        if (!timing[i].target || !strcmp(timing[i].target, target)) {
            timing[i].target = target;
            timing[i].ms += ms;
            timing[i].n++;
            return;
        }
}

static int compile_for(const KirKernel *k, const char *target, CgBinary *out)
{
    const CgTarget *t = cg_target_find(target);
    const CgBackend *be = t ? cg_backend_for(t, "llvm") : NULL;
    IrDiag d = {0};
    KT_CHECK(be != NULL, "no llvm backend for %s", target);
    if (!be) return 0;
    IrStatus s = be->compile(k, t, out, &d);
    KT_CHECK(s == IR_OK, "%s for %s: %s", k->name, target, d.msg);
    if (s == IR_OK) note_time(target, out->compile_ms);
    return s == IR_OK;
}

/* Compiles twice, checks the bytes are identical; returns the first binary in out. One target per
 * format (host, sm_90a, gfx942) is enough for determinism; the others compile once, and so does every
 * target in the reduced tier (the sanitized build: ksweep.h; a second compile finds no memory error the
 * first would not). */
static int compile_twice(const KirKernel *k, const char *target, CgBinary *out)
{
    CgBinary again;
    if (!compile_for(k, target, out)) return 0;
    if (ksweep_reduced()) return 1;
    if (strcmp(target, "host") && strcmp(target, "sm_90a") && strcmp(target, "gfx942")) return 1;
    if (!compile_for(k, target, &again)) return 0;
    KT_CHECK(out->size == again.size && !memcmp(out->data, again.data, out->size),
             "%s for %s: not deterministic", k->name, target);
    cg_binary_free(&again);
    return 1;
}

/* The reduced tier (the sanitized build) compiles one target per format (host, sm_90a, gfx942): the
 * others differ only inside LLVM, which the Release build covers. */
static void check_targets(const KirKernel *k)
{
    static const char *const nv[] = {"sm_90a", "sm_80", "sm_100a"};
    unsigned n_nv = ksweep_reduced() ? 1 : 3, n_amd = ksweep_reduced() ? 1 : 2;
    static const struct {
        const char *name;
        int mach;
    } amd[] = {{"gfx942", 0x04c}, {"gfx950", 0x04f}};
    CgBinary b;
    char what[160];
    if (compile_twice(k, "host", &b)) {
        snprintf(what, sizeof what, "%s host-so", k->name);
        KT_CHECK(!strcmp(b.format, "host-so") && b.entry, "%s: format %s", what, b.format);
        check_elf_common(&b, 62 /* EM_X86_64 */, 3 /* ET_DYN */, what);
        KT_CHECK(elf_has_symbol(&b, b.entry), "%s: no symbol %s", what, b.entry);
        cg_binary_free(&b);
    }
    for (unsigned i = 0; i < n_nv; i++) {
        if (!compile_twice(k, nv[i], &b)) continue;
        KT_CHECK(!strcmp(b.format, "ptx") && strstr(b.data, ".entry") && strstr(b.data, b.entry),
                 "%s for %s: no .entry %s", k->name, nv[i], b.entry);
        if (ptxas_path) {
            char src[128], cmd[512];
            snprintf(src, sizeof src, "%s/%s_%s.ptx", tmp_dir, k->name, nv[i]);
            FILE *fp = fopen(src, "wb");
            if (fp) {
                fwrite(b.data, 1, b.size, fp);
                fclose(fp);
            }
            snprintf(cmd, sizeof cmd, "%s -arch=%s -o /dev/null %s", ptxas_path, nv[i], src);
            int rc = system(cmd);
            KT_CHECK(rc == 0, "%s: ptxas -arch=%s rejects the PTX (%s)", k->name, nv[i], src);
            if (rc == 0) unlink(src);
        }
        cg_binary_free(&b);
    }
    for (unsigned i = 0; i < n_amd; i++) {
        if (!compile_twice(k, amd[i].name, &b)) continue;
        snprintf(what, sizeof what, "%s %s hsaco", k->name, amd[i].name);
        KT_CHECK(!strcmp(b.format, "hsaco"), "%s: format %s", what, b.format);
        check_elf_common(&b, 224 /* EM_AMDGPU */, 3 /* ET_DYN */, what);
        if (b.size > 64) {
            const unsigned char *e = b.data;
            uint32_t flags;
            memcpy(&flags, e + 48, 4);
            KT_CHECK((int)(flags & 0xff) == amd[i].mach, "%s: EF_AMDGPU_MACH 0x%x, want 0x%x", what,
                     flags & 0xff, amd[i].mach);
            KT_CHECK(e[7] == 64 && e[8] == 3, "%s: OS ABI %d version %d, want AMDGPU_HSA (64) v5 (3)", what,
                     e[7], e[8]);
            char kd[300];
            snprintf(kd, sizeof kd, "%s.kd", b.entry);
            KT_CHECK(elf_has_symbol(&b, b.entry) && elf_has_symbol(&b, kd), "%s: no symbol %s / %s", what,
                     b.entry, kd);
        }
        cg_binary_free(&b);
    }
}

/* Runs k through the host JIT on a's buffers (in place); then the interpreter on copies of the inputs,
 * comparing every buffer; then the target checks. */
static void run_k(const KirKernel *k, KRunArg *a, double tol)
{
    if (!k) return;
    int32_t grid[3];
    grid_of(k, a, grid);
    void *snap[KIR_MAX_PARAMS] = {0}, *ptrs[KIR_MAX_PARAMS] = {0}, *args[KIR_MAX_PARAMS];
    int64_t storage[KIR_MAX_PARAMS];
    for (int i = 0; i < k->n_params; i++)
        if (k->params[i].type.is_ptr) {
            snap[i] = malloc(a[i].bytes + 1);
            memcpy(snap[i], a[i].data, a[i].bytes);
            ptrs[i] = a[i].data;
        }
    IrDiag d = {0};
    CgHostKernel *hk = NULL;
    IrStatus s = cg_host_jit(k, &hk, &d);
    KT_CHECK(s == IR_OK, "jit %s: %s", k->name, d.msg);
    if (s == IR_OK) {
        krun_pack_args(k, a, ptrs, args, storage);
        cg_host_call(hk, args, grid);
        cg_host_free(hk);
        KT_CHECK(kcase_write(k, a, snap, storage, grid, tol), "%s: GPU replay case", k->name);
    }
    if (interp_state >= 0) {
        IrDiag di = {0};
        krun_pack_args(k, a, snap, args, storage);
        s = kir_interp_run(k, args, grid, &di);
        if (s == IR_ERR_UNSUPPORTED) {
            if (interp_state == 0) printf("note: interpreter comparison skipped: %s\n", di.msg);
            interp_state = -1;
        } else {
            interp_state = 1;
            KT_CHECK(s == IR_OK, "interp %s: %s", k->name, di.msg);
            if (s == IR_OK) compare_buffers(k, a, snap, tol, "interp");
        }
    }
    for (int i = 0; i < k->n_params; i++)
        free(snap[i]);
    check_targets(k);
}

/* ---- element-wise ops in every dtype ---- */

static const KirDtype all_dtypes[] = {KIR_I1,  KIR_I8,   KIR_U8,  KIR_I32,   KIR_I64,
                                      KIR_F16, KIR_BF16, KIR_F32, KIR_F8E4M3};
enum { N_DTYPES = sizeof all_dtypes / sizeof all_dtypes[0] };

static int binary_ok(KirOp op, KirDtype t)
{
    if (t == KIR_I1) return op == KIR_OP_AND || op == KIR_OP_OR || op == KIR_OP_XOR;
    if (op == KIR_OP_REM || (op >= KIR_OP_AND && op <= KIR_OP_SHR)) return kir_dtype_is_int(t);
    return op >= KIR_OP_ADD && op <= KIR_OP_MAX;
}

static int cmp_ok(KirOp op, KirDtype t)
{
    return t != KIR_I1 || op == KIR_OP_EQ || op == KIR_OP_NE;
}

static int unary_ok(KirOp op, KirDtype t)
{
    if (op == KIR_OP_NEG || op == KIR_OP_ABS) return t != KIR_I1 && t != KIR_U8;
    return t == KIR_F32;
}

static int64_t wrap(KirDtype t, uint64_t v)
{
    switch (t) {
    case KIR_I1: return (int64_t)(v & 1);
    case KIR_I8: return (int8_t)(uint8_t)v;
    case KIR_U8: return (uint8_t)v;
    case KIR_I32: return (int32_t)(uint32_t)v;
    default: return (int64_t)v;
    }
}

static double ref_binary(KirOp op, KirDtype t, const void *x, const void *y, int i)
{
    if (kir_dtype_is_float(t)) {
        float a = (float)get(t, x, i), b = (float)get(t, y, i), r = 0;
        switch (op) {
        case KIR_OP_ADD: r = a + b; break;
        case KIR_OP_SUB: r = a - b; break;
        case KIR_OP_MUL: r = a * b; break;
        case KIR_OP_DIV: r = a / b; break;
        case KIR_OP_MIN: r = fminf(a, b); break;
        case KIR_OP_MAX: r = fmaxf(a, b); break;
        case KIR_OP_LT: return a < b;
        case KIR_OP_LE: return a <= b;
        case KIR_OP_GT: return a > b;
        case KIR_OP_GE: return a >= b;
        case KIR_OP_EQ: return a == b;
        case KIR_OP_NE: return a != b;
        default: break;
        }
        return round_to(t, r);
    }
    int64_t a = geti(t, x, i), b = geti(t, y, i);
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    int bits = kir_dtype_bytes(t) * 8, u = t == KIR_U8 || t == KIR_I1;
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    switch (op) {
    case KIR_OP_ADD: return (double)wrap(t, ua + ub);
    case KIR_OP_SUB: return (double)wrap(t, ua - ub);
    case KIR_OP_MUL: return (double)wrap(t, ua * ub);
    case KIR_OP_DIV: return b == -1 ? (double)wrap(t, 0 - ua) : (double)wrap(t, (uint64_t)(a / b));
    case KIR_OP_REM: return b == -1 ? 0 : (double)wrap(t, (uint64_t)(a % b));
    case KIR_OP_MIN: return (double)(a < b ? a : b);
    case KIR_OP_MAX: return (double)(a > b ? a : b);
    case KIR_OP_AND: return (double)wrap(t, ua & ub);
    case KIR_OP_OR: return (double)wrap(t, ua | ub);
    case KIR_OP_XOR: return (double)wrap(t, ua ^ ub);
    case KIR_OP_SHL: return (double)wrap(t, ua << (ub & (uint64_t)(bits - 1)));
    case KIR_OP_SHR:
        if (u) return (double)((ua & mask) >> (ub & (uint64_t)(bits - 1)));
        return (double)wrap(t, (uint64_t)(a >> (ub & (uint64_t)(bits - 1))));
    case KIR_OP_LT: return a < b;
    case KIR_OP_LE: return a <= b;
    case KIR_OP_GT: return a > b;
    case KIR_OP_GE: return a >= b;
    case KIR_OP_EQ: return a == b;
    case KIR_OP_NE: return a != b;
    default: return 0;
    }
}

static double ref_unary(KirOp op, KirDtype t, const void *x, int i)
{
    if (kir_dtype_is_int(t)) {
        int64_t a = geti(t, x, i);
        return (double)wrap(t, op == KIR_OP_NEG || a < 0 ? 0 - (uint64_t)a : (uint64_t)a);
    }
    float a = (float)get(t, x, i), r = 0;
    switch (op) {
    case KIR_OP_NEG: r = -a; break;
    case KIR_OP_ABS: r = fabsf(a); break;
    case KIR_OP_EXP: r = expf(a); break;
    case KIR_OP_EXP2: r = exp2f(a); break;
    case KIR_OP_LOG: r = logf(a); break;
    case KIR_OP_SQRT: r = sqrtf(a); break;
    case KIR_OP_RSQRT: r = 1.0f / sqrtf(a); break;
    case KIR_OP_SIN: r = sinf(a); break;
    case KIR_OP_COS: r = cosf(a); break;
    case KIR_OP_FLOOR: r = floorf(a); break;
    default: break;
    }
    return round_to(t, r);
}

/* One kernel per dtype: every valid binary op (out[j*n + i]), compare (cmp[c*n + i]), unary op, plus a
 * scalar operand, a select and a scalar-only chain; n is not a multiple of the block. */
static void test_elementwise(KirDtype t)
{
    enum { BLOCK = 16, N = 40 };
    TK tk;
    char name[64];
    snprintf(name, sizeof name, "elem_%s", kir_dtype_name(t));
    KirBuilder *b = tk_begin(&tk, name);
    KirValue *x = kir_param(b, "x", kir_ptr(t), KIR_PARAM_RDONLY);
    KirValue *y = kir_param(b, "y", kir_ptr(t), KIR_PARAM_RDONLY);
    KirValue *out = kir_param(b, "out", kir_ptr(t), 0);
    KirValue *cmp = kir_param(b, "cmp", kir_ptr(KIR_I1), 0);
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, n, 1, BLOCK);
    KirValue *offs = block_offs(b, BLOCK);
    KirValue *m = kir_lt(b, offs, n);
    KirValue *one = t == KIR_I1 ? kir_cast(b, ci(b, 1), KIR_I1) : const_of(b, t, 1.0);
    KirValue *a = kir_load(b, x, offs, m, NULL),
             *bv = kir_load(b, y, offs, m, one); /* no x/0 on masked lanes */
    int n_out = 0, n_cmp = 0;
    KirOp outs[40];
    for (int op = KIR_OP_ADD; op <= KIR_OP_SHR; op++)
        if (binary_ok((KirOp)op, t)) {
            KirValue *o = kir_add(b, offs, kir_mul(b, ci(b, n_out), n)), *rhs = bv;
            if (op == KIR_OP_SHL || op == KIR_OP_SHR) /* amounts >= the width are errors (kir_interp.c) */
                rhs = kir_binary(b, KIR_OP_AND, bv, const_of(b, t, kir_dtype_bytes(t) * 8 - 1));
            kir_store(b, out, o, kir_binary(b, (KirOp)op, a, rhs), m);
            outs[n_out++] = (KirOp)op;
        }
    for (int op = KIR_OP_NEG; op <= KIR_OP_FLOOR; op++)
        if (unary_ok((KirOp)op, t)) {
            KirValue *o = kir_add(b, offs, kir_mul(b, ci(b, n_out), n));
            kir_store(b, out, o, kir_unary(b, (KirOp)op, a), m);
            outs[n_out++] = (KirOp)op;
        }
    KirOp cmps[6];
    for (int op = KIR_OP_LT; op <= KIR_OP_NE; op++)
        if (cmp_ok((KirOp)op, t)) {
            KirValue *o = kir_add(b, offs, kir_mul(b, ci(b, n_cmp), n));
            kir_store(b, cmp, o, kir_binary(b, (KirOp)op, a, bv), m);
            cmps[n_cmp++] = (KirOp)op;
        }
    /* extras: select(a != b, b, a) = b; (a op scalar) with a constant; a scalar-only chain at pid 0 */
    int sel_at = n_out++, sc_at = n_out++;
    KirValue *ne = kir_binary(b, KIR_OP_NE, a, bv);
    kir_store(b, out, kir_add(b, offs, kir_mul(b, ci(b, sel_at), n)), kir_select(b, ne, bv, a), m);
    KirOp scop = t == KIR_I1 ? KIR_OP_XOR : KIR_OP_ADD;
    kir_store(b, out, kir_add(b, offs, kir_mul(b, ci(b, sc_at), n)), kir_binary(b, scop, a, one), m);
    KirValue *s0 = kir_load(b, x, ci(b, 0), NULL, NULL), *s1 = kir_load(b, y, ci(b, 1), NULL, NULL);
    KirValue *sr = kir_binary(b, scop, kir_binary(b, t == KIR_I1 ? KIR_OP_AND : KIR_OP_MAX, s0, s1), one);
    KirValue *is0 = kir_binary(b, KIR_OP_EQ, kir_pid(b, 0), ci(b, 0));
    kir_store(b, cmp, kir_mul(b, ci(b, n_cmp), n), kir_binary(b, KIR_OP_EQ, sr, sr), is0);
    kir_store(b, out, kir_mul(b, ci(b, n_out), n), sr, is0);
    KirKernel *k = tk_end(&tk);

    int total = n_out + 1;
    void *xb = malloc(bytes_of(t, N)), *yb = malloc(bytes_of(t, N));
    void *ob = malloc(bytes_of(t, total * N)), *cb = malloc((size_t)(n_cmp + 1) * N);
    for (int i = 0; i < N; i++) {
        put_random(t, xb, i, -4, 4);
        put_random(t, yb, i, -4, 4);
        if (kir_dtype_is_int(t) && t != KIR_I1 && geti(t, yb, i) == 0) put(t, yb, i, 3);
        if (i % 17 == 5) memcpy((char *)yb + bytes_of(t, i), (char *)xb + bytes_of(t, i), bytes_of(t, 1));
    }
    poison(ob, bytes_of(t, total * N));
    poison(cb, (size_t)(n_cmp + 1) * N);
    KRunArg args[] = {{.data = xb, .bytes = bytes_of(t, N)},
                      {.data = yb, .bytes = bytes_of(t, N)},
                      {.data = ob, .bytes = bytes_of(t, total * N)},
                      {.data = cb, .bytes = (size_t)(n_cmp + 1) * N},
                      {.i = N}};
    run_k(k, args, 1e-6);
    int bad = 0;
    for (int j = 0; j < n_out - 2 && bad < 5; j++) {
        KirOp op = outs[j];
        double tol = op >= KIR_OP_EXP && op <= KIR_OP_COS ? 2e-6 : 0;
        for (int i = 0; i < N; i++) {
            double want = op >= KIR_OP_NEG ? ref_unary(op, t, xb, i) : ref_binary(op, t, xb, yb, i);
            double got = get(t, ob, j * N + i);
            if (!same(got, want, tol) && bad++ < 5)
                KT_CHECK(0, "%s: %s[%d] (%g, %g) = %.9g, want %.9g", name, kir_op_name(op), i, get(t, xb, i),
                         get(t, yb, i), got, want);
        }
    }
    for (int c = 0; c < n_cmp; c++)
        for (int i = 0; i < N; i++) {
            double want = ref_binary(cmps[c], t, xb, yb, i), got = get(KIR_I1, cb, c * N + i);
            if (got != want && bad++ < 5)
                KT_CHECK(0, "%s: %s[%d] = %g, want %g", name, kir_op_name(cmps[c]), i, got, want);
        }
    for (int i = 0; i < N; i++) {
        double sel = get(t, ob, sel_at * N + i), want_sel = get(t, yb, i);
        double sc = get(t, ob, sc_at * N + i);
        double want_sc = t == KIR_I1             ? (double)(geti(t, xb, i) ^ 1)
                         : kir_dtype_is_float(t) ? round_to(t, (float)get(t, xb, i) + 1.0f)
                                                 : (double)wrap(t, (uint64_t)geti(t, xb, i) + 1);
        if (!same(sel, want_sel, 0) && bad++ < 5)
            KT_CHECK(0, "%s: select[%d] = %g, want %g", name, i, sel, want_sel);
        if (!same(sc, want_sc, 0) && bad++ < 5)
            KT_CHECK(0, "%s: op-with-scalar[%d] = %g, want %g", name, i, sc, want_sc);
    }
    double s0v = get(t, xb, 0), s1v = get(t, yb, 1), mx;
    if (t == KIR_I1)
        mx = (double)((geti(t, xb, 0) & geti(t, yb, 1)) ^ 1);
    else if (kir_dtype_is_float(t))
        mx = round_to(t, (float)(s0v > s1v ? s0v : s1v) + 1.0f);
    else
        mx = (double)wrap(t, (uint64_t)(s0v > s1v ? geti(t, xb, 0) : geti(t, yb, 1)) + 1);
    KT_CHECK(same(get(t, ob, n_out * N), mx, 0), "%s: scalar chain = %g, want %g", name,
             get(t, ob, n_out * N), mx);
    KT_CHECK(get(KIR_I1, cb, n_cmp * N) == 1, "%s: scalar eq", name);
    KT_CHECK(!bad, "%s: %d element mismatches", name, bad);
    free(xb);
    free(yb);
    free(ob);
    free(cb);
    tk_free(&tk);
}

/* ---- casts: from one dtype to all nine ---- */

static double ref_cast(KirDtype from, KirDtype to, const void *x, int i)
{
    double v = get(from, x, i);
    if (kir_dtype_is_float(from)) {
        if (kir_dtype_is_float(to)) return round_to(to, v);
        if (to == KIR_I1) return v != 0 || isnan(v);
        if (isnan(v)) return 0;
        double lo = to == KIR_I8    ? -128
                    : to == KIR_U8  ? 0
                    : to == KIR_I32 ? -2147483648.0
                                    : -9223372036854775808.0;
        double hi = to == KIR_I8    ? 127
                    : to == KIR_U8  ? 255
                    : to == KIR_I32 ? 2147483647.0
                                    : 9223372036854775807.0;
        v = trunc(v);
        return v < lo ? lo : v > hi ? hi : v;
    }
    int64_t a = geti(from, x, i);
    if (kir_dtype_is_float(to)) {
        float f = from == KIR_U8 || from == KIR_I1 ? (float)(uint64_t)a : (float)a;
        return round_to(to, f);
    }
    if (to == KIR_I1) return a != 0;
    if (from == KIR_U8 || from == KIR_I1) a = (int64_t)((uint64_t)a & (from == KIR_I1 ? 1 : 0xff));
    return (double)wrap(to, (uint64_t)a);
}

static void test_cast(KirDtype from)
{
    enum { BLOCK = 16, N = 48 };
    TK tk;
    char name[64];
    snprintf(name, sizeof name, "cast_from_%s", kir_dtype_name(from));
    KirBuilder *b = tk_begin(&tk, name);
    KirValue *x = kir_param(b, "x", kir_ptr(from), KIR_PARAM_RDONLY);
    KirValue *outs[N_DTYPES];
    for (int j = 0; j < N_DTYPES; j++) {
        char pn[32];
        snprintf(pn, sizeof pn, "out_%s", kir_dtype_name(all_dtypes[j]));
        outs[j] = kir_param(b, pn, kir_ptr(all_dtypes[j]), 0);
    }
    kir_grid_const(b, 0, N / BLOCK);
    KirValue *offs = block_offs(b, BLOCK);
    KirValue *v = kir_load(b, x, offs, NULL, NULL);
    for (int j = 0; j < N_DTYPES; j++)
        kir_store(b, outs[j], offs, kir_cast(b, v, all_dtypes[j]), NULL);
    KirKernel *k = tk_end(&tk);

    void *xb = malloc(bytes_of(from, N)), *ob[N_DTYPES];
    static const double specials[] = {
        0.0,    -0.0,  0.5,          -0.5,  1.5,  2.5,   -2.5,   1e30,  -1e30, NAN, INFINITY, -INFINITY,
        65504,  65519, 65520,        65536, 448,  449,   463,    464,   465,   480, 1e-8,     -3e-8,
        2.9e-5, 1e-3,  0.0009765625, 300,   -300, 127.5, -128.7, 255.9, 256.2, 3e9, -3e9};
    int ns = (int)(sizeof specials / sizeof specials[0]);
    for (int i = 0; i < N; i++) {
        if (from == KIR_F32 && i < ns)
            put(from, xb, i, specials[i]);
        else if (from == KIR_F8E4M3)
            ((uint8_t *)xb)[i] = (uint8_t)(i * 37 % 255 == 0x7f ? 0x42 : i * 37 % 255);
        else
            put_random(from, xb, i, -300, 300);
    }
    if (from == KIR_F8E4M3) ((uint8_t *)xb)[1] = 0x7f; /* NaN */
    KRunArg args[1 + N_DTYPES] = {{.data = xb, .bytes = bytes_of(from, N)}};
    for (int j = 0; j < N_DTYPES; j++) {
        ob[j] = malloc(bytes_of(all_dtypes[j], N));
        poison(ob[j], bytes_of(all_dtypes[j], N));
        args[1 + j] = (KRunArg){.data = ob[j], .bytes = bytes_of(all_dtypes[j], N)};
    }
    run_k(k, args, 0);
    int bad = 0;
    for (int j = 0; j < N_DTYPES; j++)
        for (int i = 0; i < N; i++) {
            KirDtype to = all_dtypes[j];
            double want = ref_cast(from, to, xb, i), got = get(to, ob[j], i);
            if (to == KIR_I64) {
                int64_t gi = geti(to, ob[j], i);
                if ((double)gi == want) continue;
                got = (double)gi;
            }
            if (!same(got, want, 0) && bad++ < 8)
                KT_CHECK(0, "cast %s -> %s of %.9g = %.9g, want %.9g", kir_dtype_name(from),
                         kir_dtype_name(to), get(from, xb, i), got, want);
        }
    KT_CHECK(!bad, "%s: %d mismatches", name, bad);
    free(xb);
    for (int j = 0; j < N_DTYPES; j++)
        free(ob[j]);
    tk_free(&tk);
}

/* ---- masks: masked-off lanes touch no memory (buffers end at a PROT_NONE page) ---- */

/* n floats ending exactly at a page that faults. */
static float *guarded_floats(int n, void **map, size_t *map_len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), need = (size_t)n * sizeof(float);
    size_t data_pages = (need + page - 1) / page;
    *map_len = (data_pages + 1) * page;
    char *p = mmap(NULL, *map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    mprotect(p + data_pages * page, page, PROT_NONE);
    *map = p;
    return (float *)(p + data_pages * page - need);
}

static void test_masks(void)
{
    enum { BLOCK = 64, N = 100 };
    TK tk;
    KirBuilder *b = tk_begin(&tk, "masks");
    KirValue *x = kir_param(b, "x", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *y = kir_param(b, "y", kir_ptr(KIR_F32), 0);
    KirValue *all = kir_param(b, "all", kir_ptr(KIR_F32), 0);
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, n, 1, BLOCK);
    KirValue *offs = block_offs(b, BLOCK);
    KirValue *m = kir_lt(b, offs, n);
    KirValue *v = kir_load(b, x, offs, m, kir_const_f(b, KIR_F32, -7.0));
    kir_store(b, all, offs, v, NULL);
    KirValue *even = kir_binary(b, KIR_OP_EQ, kir_binary(b, KIR_OP_AND, offs, ci(b, 1)), ci(b, 0));
    kir_store(b, y, offs, kir_mul(b, v, kir_const_f(b, KIR_F32, 2.0)), kir_binary(b, KIR_OP_AND, m, even));
    /* scalar masked load past the end, scalar mask false: must read `other` */
    KirValue *past = kir_add(b, n, ci(b, 1000000));
    KirValue *sv = kir_load(b, x, past, kir_lt(b, past, n), kir_const_f(b, KIR_F32, 3.0));
    kir_store(b, all, kir_add(b, kir_mul(b, kir_nprog(b, 0), ci(b, BLOCK)), kir_pid(b, 0)), sv, NULL);
    KirKernel *k = tk_end(&tk);

    void *mx, *my;
    size_t lx, ly;
    float *xb = guarded_floats(N, &mx, &lx), *yb = guarded_floats(N, &my, &ly);
    int nall = 2 * BLOCK + 2;
    float *ab = malloc(sizeof(float) * (size_t)nall);
    KT_CHECK(xb && yb, "mmap");
    if (!xb || !yb) return;
    for (int i = 0; i < N; i++)
        xb[i] = (float)frand(-3, 3), yb[i] = NAN;
    poison(ab, sizeof(float) * (size_t)nall);
    KRunArg args[] = {{.data = xb, .bytes = sizeof(float) * N},
                      {.data = yb, .bytes = sizeof(float) * N},
                      {.data = ab, .bytes = sizeof(float) * (size_t)nall},
                      {.i = N}};
    run_k(k, args, 0);
    int bad = 0;
    for (int i = 0; i < 2 * BLOCK; i++) {
        float want = i < N ? xb[i] : -7.0f;
        if (ab[i] != want) bad++;
        if (i < N && (i % 2 ? !isnan(yb[i]) : yb[i] != 2 * xb[i])) bad++;
    }
    KT_CHECK(!bad, "masks: %d wrong", bad);
    KT_CHECK(ab[2 * BLOCK] == 3.0f && ab[2 * BLOCK + 1] == 3.0f, "masked scalar load: %g %g", ab[2 * BLOCK],
             ab[2 * BLOCK + 1]);
    munmap(mx, lx);
    munmap(my, ly);
    free(ab);
    tk_free(&tk);
}

/* ---- expand / broadcast (f32 and i32), splat ---- */

static void test_broadcast(void)
{
    enum { M = 8, N = 12 };
    TK tk;
    KirBuilder *b = tk_begin(&tk, "broadcast");
    KirValue *x = kir_param(b, "x", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *y = kir_param(b, "y", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *out = kir_param(b, "out", kir_ptr(KIR_F32), 0);
    KirValue *idx = kir_param(b, "idx", kir_ptr(KIR_I32), 0);
    KirValue *xv = kir_load(b, x, kir_arange(b, N), NULL, NULL),
             *yv = kir_load(b, y, kir_arange(b, M), NULL, NULL);
    KirValue *bx = kir_broadcast(b, kir_expand(b, xv, 0), M, N),
             *by = kir_broadcast(b, kir_expand(b, yv, 1), M, N);
    KirValue *o = offs2(b, M, N, N);
    KirValue *sp = kir_splat(b, kir_const_f(b, KIR_F32, 0.25), 2, (int[]){M, N});
    kir_store(b, out, o, kir_add(b, kir_mul(b, bx, by), sp), NULL);
    kir_store(b, idx, o, o, NULL);
    KirKernel *k = tk_end(&tk);
    float xb[N], yb[M], ob[M * N];
    int32_t ib[M * N];
    for (int i = 0; i < N; i++)
        xb[i] = (float)frand(-2, 2);
    for (int i = 0; i < M; i++)
        yb[i] = (float)frand(-2, 2);
    poison(ob, sizeof ob);
    poison(ib, sizeof ib);
    KRunArg args[] = {{.data = xb, .bytes = sizeof xb},
                      {.data = yb, .bytes = sizeof yb},
                      {.data = ob, .bytes = sizeof ob},
                      {.data = ib, .bytes = sizeof ib}};
    run_k(k, args, 0);
    int bad = 0;
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++)
            bad += ob[r * N + c] != xb[c] * yb[r] + 0.25f || ib[r * N + c] != r * N + c;
    KT_CHECK(!bad, "broadcast: %d wrong", bad);
    tk_free(&tk);
}

/* ---- reduce: sum/max/min along both axes and to a scalar ---- */

static void test_reduce(KirDtype t, KirReduce kind)
{
    enum { M = 6, N = 20 };
    static const char *const kn[] = {"sum", "max", "min"};
    TK tk;
    char name[64];
    snprintf(name, sizeof name, "reduce_%s_%s", kn[kind], kir_dtype_name(t));
    KirDtype rt = kir_dtype_is_float(t) ? KIR_F32
                  : kind != KIR_RED_SUM ? t
                  : t == KIR_I64        ? KIR_I64
                                        : KIR_I32;
    KirBuilder *b = tk_begin(&tk, name);
    KirValue *x = kir_param(b, "x", kir_ptr(t), KIR_PARAM_RDONLY);
    KirValue *out1 = kir_param(b, "out1", kir_ptr(rt), 0), *out0 = kir_param(b, "out0", kir_ptr(rt), 0);
    KirValue *outs = kir_param(b, "outs", kir_ptr(rt), 0);
    KirValue *v = kir_load(b, x, offs2(b, M, N, N), NULL, NULL);
    KirValue *r1 = kir_reduce(b, v, kind, 1), *r0 = kir_reduce(b, v, kind, 0),
             *rs = kir_reduce(b, r1, kind, 0);
    kir_store(b, out1, kir_arange(b, M), r1, NULL);
    kir_store(b, out0, kir_arange(b, N), r0, NULL);
    kir_store(b, outs, ci(b, 0), rs, NULL);
    KirKernel *k = tk_end(&tk);
    void *xb = malloc(bytes_of(t, M * N)), *b1 = malloc(bytes_of(rt, M)), *b0 = malloc(bytes_of(rt, N));
    void *bs = malloc(bytes_of(rt, 1));
    for (int i = 0; i < M * N; i++)
        put_random(t, xb, i, -5, 5);
    poison(b1, bytes_of(rt, M));
    poison(b0, bytes_of(rt, N));
    poison(bs, bytes_of(rt, 1));
    KRunArg args[] = {{.data = xb, .bytes = bytes_of(t, M * N)},
                      {.data = b1, .bytes = bytes_of(rt, M)},
                      {.data = b0, .bytes = bytes_of(rt, N)},
                      {.data = bs, .bytes = bytes_of(rt, 1)}};
    run_k(k, args, 1e-5);
    int bad = 0;
    double tot = kind == KIR_RED_SUM ? 0 : kind == KIR_RED_MAX ? -INFINITY : INFINITY;
    for (int axis = 0; axis < 2; axis++) {
        int outer = axis ? M : N, inner = axis ? N : M;
        for (int o = 0; o < outer; o++) {
            double acc = kind == KIR_RED_SUM ? 0 : kind == KIR_RED_MAX ? -INFINITY : INFINITY;
            for (int i = 0; i < inner; i++) {
                double e = axis ? get(t, xb, o * N + i) : get(t, xb, i * N + o);
                acc = kind == KIR_RED_SUM ? acc + e : kind == KIR_RED_MAX ? fmax(acc, e) : fmin(acc, e);
            }
            if (rt == KIR_I32 && kind == KIR_RED_SUM) acc = (double)wrap(KIR_I32, (uint64_t)(int64_t)acc);
            double got = get(rt, axis ? b1 : b0, o);
            if (!same(got, acc, kir_dtype_is_float(rt) ? 1e-5 : 0) && bad++ < 4)
                KT_CHECK(0, "%s axis %d [%d] = %.9g, want %.9g", name, axis, o, got, acc);
            if (axis)
                tot = kind == KIR_RED_SUM ? tot + got : kind == KIR_RED_MAX ? fmax(tot, got) : fmin(tot, got);
            if (axis && rt == KIR_I32 && kind == KIR_RED_SUM)
                tot = (double)wrap(KIR_I32, (uint64_t)(int64_t)tot);
        }
    }
    KT_CHECK(same(get(rt, bs, 0), tot, 1e-5), "%s scalar = %.9g, want %.9g", name, get(rt, bs, 0), tot);
    KT_CHECK(!bad, "%s: %d wrong", name, bad);
    free(xb);
    free(b1);
    free(b0);
    free(bs);
    tk_free(&tk);
}

/* ---- dot ---- */

static void test_dot(KirDtype t)
{
    enum { M = 6, K = 24, N = 10 };
    TK tk;
    char name[64];
    snprintf(name, sizeof name, "dot_%s", kir_dtype_name(t));
    KirDtype acc = t == KIR_I8 ? KIR_I32 : KIR_F32;
    KirBuilder *b = tk_begin(&tk, name);
    KirValue *pa = kir_param(b, "a", kir_ptr(t), KIR_PARAM_RDONLY),
             *pb = kir_param(b, "b", kir_ptr(t), KIR_PARAM_RDONLY);
    KirValue *pc = kir_param(b, "c", kir_ptr(acc), KIR_PARAM_RDONLY),
             *po = kir_param(b, "out", kir_ptr(acc), 0);
    KirValue *a = kir_load(b, pa, offs2(b, M, K, K), NULL, NULL),
             *bm = kir_load(b, pb, offs2(b, K, N, N), NULL, NULL);
    KirValue *oc = offs2(b, M, N, N);
    kir_store(b, po, oc, kir_dot(b, a, bm, kir_load(b, pc, oc, NULL, NULL)), NULL);
    KirKernel *k = tk_end(&tk);
    void *ab = malloc(bytes_of(t, M * K)), *bb = malloc(bytes_of(t, K * N));
    void *cb = malloc(bytes_of(acc, M * N)), *ob = malloc(bytes_of(acc, M * N));
    for (int i = 0; i < M * K; i++)
        put_random(t, ab, i, -2, 2);
    for (int i = 0; i < K * N; i++)
        put_random(t, bb, i, -2, 2);
    for (int i = 0; i < M * N; i++)
        put_random(acc, cb, i, -2, 2);
    poison(ob, bytes_of(acc, M * N));
    KRunArg args[] = {{.data = ab, .bytes = bytes_of(t, M * K)},
                      {.data = bb, .bytes = bytes_of(t, K * N)},
                      {.data = cb, .bytes = bytes_of(acc, M * N)},
                      {.data = ob, .bytes = bytes_of(acc, M * N)}};
    run_k(k, args, 1e-5);
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want;
            if (acc == KIR_F32) {
                float s = (float)get(acc, cb, i * N + j);
                for (int kk = 0; kk < K; kk++)
                    s += (float)get(t, ab, i * K + kk) * (float)get(t, bb, kk * N + j);
                want = s;
            } else {
                uint32_t s = (uint32_t)geti(acc, cb, i * N + j);
                for (int kk = 0; kk < K; kk++)
                    s += (uint32_t)(geti(t, ab, i * K + kk) * geti(t, bb, kk * N + j));
                want = (int32_t)s;
            }
            double got = get(acc, ob, i * N + j);
            if (!same(got, want, 1e-6) && bad++ < 4)
                KT_CHECK(0, "%s [%d,%d] = %.9g, want %.9g", name, i, j, got, want);
        }
    KT_CHECK(!bad, "%s: %d wrong", name, bad);
    free(ab);
    free(bb);
    free(cb);
    free(ob);
    tk_free(&tk);
}

/* ---- for: a blocked matmul with a tile and a scalar carried; nested loops with swapped yields ---- */

static void test_for_matmul(void)
{
    enum { M = 4, BK = 8, N = 8, KT = 3 * BK };
    TK tk;
    KirBuilder *b = tk_begin(&tk, "for_matmul");
    KirValue *pa = kir_param(b, "a", kir_ptr(KIR_BF16), KIR_PARAM_RDONLY);
    KirValue *pb = kir_param(b, "b", kir_ptr(KIR_BF16), KIR_PARAM_RDONLY);
    KirValue *po = kir_param(b, "out", kir_ptr(KIR_BF16), 0);
    KirValue *pn = kir_param(b, "trips", kir_ptr(KIR_I32), 0);
    KirValue *kt = kir_param(b, "k", kir_scalar(KIR_I32), 0);
    KirValue *inits[2] = {kir_splat(b, kir_const_f(b, KIR_F32, 0.0), 2, (int[]){M, N}), ci(b, 0)};
    KirBlock *body = kir_for_begin(b, ci(b, 0), kt, ci(b, BK), inits, 2, 2);
    KirValue *k0 = body->args[0];
    KirValue *a = kir_load(b, pa, kir_add(b, offs2(b, M, BK, KT), k0), NULL, NULL);
    KirValue *bt = kir_load(b, pb, kir_add(b, offs2(b, BK, N, N), kir_mul(b, k0, ci(b, N))), NULL, NULL);
    KirValue *y[2] = {kir_dot(b, a, bt, body->args[1]), kir_add(b, body->args[2], ci(b, 1))};
    KirInst *loop = kir_for_end(b, y, 2);
    kir_store(b, po, offs2(b, M, N, N), kir_cast(b, loop->res[0], KIR_BF16), NULL);
    kir_store(b, pn, ci(b, 0), loop->res[1], NULL);
    KirKernel *k = tk_end(&tk);
    uint16_t ab[M * KT], bb[KT * N], ob[M * N];
    int32_t trips = -1;
    for (int i = 0; i < M * KT; i++)
        put_random(KIR_BF16, ab, i, -1, 1);
    for (int i = 0; i < KT * N; i++)
        put_random(KIR_BF16, bb, i, -1, 1);
    for (int kk = 0; kk <= KT; kk += KT) { /* k = 0: zero trips, results are the inits */
        poison(ob, sizeof ob);
        KRunArg args[] = {{.data = ab, .bytes = sizeof ab},
                          {.data = bb, .bytes = sizeof bb},
                          {.data = ob, .bytes = sizeof ob},
                          {.data = &trips, .bytes = sizeof trips},
                          {.i = kk}};
        run_k(k, args, 1e-6);
        int bad = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float s = 0;
                for (int q = 0; q < kk; q++)
                    s += (float)get(KIR_BF16, ab, i * KT + q) * (float)get(KIR_BF16, bb, q * N + j);
                bad += !same(get(KIR_BF16, ob, i * N + j), round_to(KIR_BF16, s), 0);
            }
        KT_CHECK(!bad && trips == kk / BK, "for_matmul k=%d: %d wrong, trips %d", kk, bad, trips);
    }
    tk_free(&tk);
}

static void test_for_nested(void)
{
    enum { N = 16 };
    TK tk;
    KirBuilder *b = tk_begin(&tk, "for_nested");
    KirValue *px = kir_param(b, "x", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *po = kir_param(b, "out", kir_ptr(KIR_F32), 0);
    KirValue *trips = kir_param(b, "trips", kir_scalar(KIR_I32), 0);
    KirValue *ar = kir_arange(b, N);
    KirValue *x = kir_load(b, px, ar, NULL, NULL);
    KirValue *x2 = kir_load(b, px, kir_add(b, ar, ci(b, N)), NULL, NULL);
    KirValue *inits[4] = {x, x2, kir_splat(b, kir_const_f(b, KIR_F32, 1.0), 1, (int[]){N}),
                          kir_const_f(b, KIR_F32, 0)};
    KirBlock *ob = kir_for_begin(b, ci(b, 0), trips, ci(b, 1), inits, 4, 0);
    KirValue *ta = ob->args[1], *tb = ob->args[2], *tc = ob->args[3], *s = ob->args[4];
    KirValue *ii[1] = {tc};
    KirBlock *ib =
        kir_for_begin(b, ci(b, 0), ci(b, 2), ci(b, 1), ii, 1, 0); /* tc + 2*ta, via an inner loop */
    KirValue *iy[1] = {kir_add(b, ib->args[1], ta)};
    KirInst *inner = kir_for_end(b, iy, 1);
    KirValue *ns = kir_add(b, s, kir_reduce(b, inner->res[0], KIR_RED_SUM, 0));
    KirValue *oy[4] = {tb, ta, inner->res[0], ns}; /* swap a and b */
    KirInst *outer = kir_for_end(b, oy, 4);
    for (int j = 0; j < 3; j++)
        kir_store(b, po, kir_add(b, ar, ci(b, j * N)), outer->res[j], NULL);
    kir_store(b, po, ci(b, 3 * N), outer->res[3], NULL);
    KirKernel *k = tk_end(&tk);
    float xb[2 * N], out[3 * N + 1];
    for (int i = 0; i < 2 * N; i++)
        xb[i] = (float)frand(-1, 1);
    for (int t = 0; t <= 3; t += 3) {
        poison(out, sizeof out);
        KRunArg args[] = {{.data = xb, .bytes = sizeof xb}, {.data = out, .bytes = sizeof out}, {.i = t}};
        run_k(k, args, 1e-6);
        float a[N], bb[N], c[N], total = 0;
        for (int i = 0; i < N; i++)
            a[i] = xb[i], bb[i] = xb[N + i], c[i] = 1;
        for (int it = 0; it < t; it++) {
            float sum = 0;
            for (int i = 0; i < N; i++) {
                c[i] = c[i] + a[i] + a[i];
                sum += c[i];
                float tmp = a[i];
                a[i] = bb[i];
                bb[i] = tmp;
            }
            total += sum;
        }
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad += out[i] != a[i] || out[N + i] != bb[i] || !same(out[2 * N + i], c[i], 1e-6);
        KT_CHECK(!bad && same(out[3 * N], total, 1e-5), "for_nested trips=%d: %d wrong, s %g want %g", t, bad,
                 out[3 * N], total);
    }
    tk_free(&tk);
}

/* ---- atomic_add (f32 and i32), rand, pid/nprog ---- */

static void test_atomic(void)
{
    enum { BLOCK = 32, P = 16, N = P * BLOCK - 5 };
    TK tk;
    KirBuilder *b = tk_begin(&tk, "atomic");
    KirValue *pf = kir_param(b, "f", kir_ptr(KIR_F32), 0), *pi = kir_param(b, "i", kir_ptr(KIR_I32), 0);
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, n, 1, BLOCK);
    KirValue *offs = block_offs(b, BLOCK);
    KirValue *m = kir_lt(b, offs, n), *slot = kir_binary(b, KIR_OP_REM, offs, ci(b, 4));
    kir_atomic_add(b, pf, slot, kir_add(b, kir_cast(b, offs, KIR_F32), kir_const_f(b, KIR_F32, 1.0)), m);
    kir_atomic_add(b, pi, slot, offs, m);
    kir_atomic_add(b, pi, ci(b, 4), ci(b, 1), NULL);
    KirKernel *k = tk_end(&tk);
    float fb[4] = {0};
    int32_t ib[5] = {0};
    KRunArg args[] = {{.data = fb, .bytes = sizeof fb}, {.data = ib, .bytes = sizeof ib}, {.i = N}};
    run_k(k, args, 0);
    double wf[4] = {0};
    int64_t wi[4] = {0};
    for (int i = 0; i < N; i++)
        wf[i % 4] += i + 1, wi[i % 4] += i;
    int bad = 0;
    for (int j = 0; j < 4; j++)
        bad += fb[j] != (float)wf[j] || ib[j] != wi[j];
    KT_CHECK(!bad && ib[4] == P, "atomic_add: %d wrong, count %d", bad, ib[4]);
    tk_free(&tk);
}

/* arrive: programs add pid + 1 into sum[pid % 2], then arrive at cnt[pid % 2]; the last of each half reads
 * the sum (it must see every earlier arrival's add), stores it in got[] and resets the counter. Every
 * output is independent of the arrival order (the GPU replay runs in another order). */
static void test_arrive(void)
{
    enum { P = 37 };
    TK tk;
    KirBuilder *b = tk_begin(&tk, "arrive");
    KirValue *sum = kir_param(b, "sum", kir_ptr(KIR_I32), 0), *cnt = kir_param(b, "cnt", kir_ptr(KIR_I32), 0);
    KirValue *got = kir_param(b, "got", kir_ptr(KIR_I32), 0);
    kir_grid_const(b, 0, P);
    KirValue *pid = kir_pid(b, 0), *half = kir_binary(b, KIR_OP_REM, pid, ci(b, 2));
    kir_atomic_add(b, sum, half, kir_add(b, pid, ci(b, 1)), NULL);
    KirValue *n_half = kir_sub(b, ci(b, P / 2 + 1), half); /* programs with pid % 2 == half */
    KirValue *last = kir_binary(b, KIR_OP_EQ, kir_arrive(b, cnt, half), kir_sub(b, n_half, ci(b, 1)));
    kir_store(b, got, half, kir_load(b, sum, half, last, ci(b, -1)), last);
    kir_store(b, cnt, half, ci(b, 0), last);
    KirKernel *k = tk_end(&tk);
    int32_t s[2] = {0}, c[2] = {0}, g[2] = {-7, -7};
    KRunArg args[] = {
        {.data = s, .bytes = sizeof s}, {.data = c, .bytes = sizeof c}, {.data = g, .bytes = sizeof g}};
    run_k(k, args, 0);
    int32_t want[2] = {0};
    for (int p = 0; p < P; p++)
        want[p % 2] += p + 1;
    KT_CHECK(s[0] == want[0] && s[1] == want[1] && g[0] == want[0] && g[1] == want[1] && !c[0] && !c[1],
             "arrive: sums %d %d, last saw %d %d (want %d %d), counters %d %d", s[0], s[1], g[0], g[1],
             want[0], want[1], c[0], c[1]);
    tk_free(&tk);
}

static void test_rand(void)
{
    enum { BLOCK = 64, N = 300 };
    TK tk;
    KirBuilder *b = tk_begin(&tk, "rand");
    KirValue *po = kir_param(b, "out", kir_ptr(KIR_F32), 0);
    KirValue *seed = kir_param(b, "seed", kir_scalar(KIR_I64), 0);
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, n, 1, BLOCK);
    KirValue *offs = block_offs(b, BLOCK);
    kir_store(b, po, offs, kir_rand(b, seed, offs), kir_lt(b, offs, n));
    KirValue *c = kir_sub(b, ci(b, 0), kir_pid(b, 0));
    kir_store(b, po, kir_add(b, n, kir_pid(b, 0)), kir_rand(b, seed, c), NULL);
    KirKernel *k = tk_end(&tk);
    int grid = (N + BLOCK - 1) / BLOCK;
    float out[N + 8];
    int64_t seeds[] = {0, 42, (int64_t)0x0123456789abcdefll, -5};
    for (unsigned si = 0; si < sizeof seeds / sizeof seeds[0]; si++) {
        poison(out, sizeof out);
        KRunArg args[] = {{.data = out, .bytes = sizeof out}, {.i = seeds[si]}, {.i = N}};
        run_k(k, args, 0);
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad += memcmp(&out[i], &(float){kir_rand_ref(seeds[si], i)}, 4) != 0;
        for (int p = 0; p < grid; p++)
            bad += out[N + p] != kir_rand_ref(seeds[si], -p);
        KT_CHECK(!bad, "rand seed %lld: %d values differ from kir_rand_ref", (long long)seeds[si], bad);
    }
    tk_free(&tk);
}

static void test_grid(void)
{
    enum { GX = 3, GY = 4, GZ = 2 };
    TK tk;
    KirBuilder *b = tk_begin(&tk, "grid3");
    KirValue *po = kir_param(b, "out", kir_ptr(KIR_I32), 0);
    KirValue *ny = kir_param(b, "ny", kir_scalar(KIR_I32), 0);
    kir_grid_const(b, 0, GX);
    kir_grid(b, 1, ny, 2, 2);
    kir_grid_const(b, 2, GZ);
    KirValue *lin = kir_add(
        b, kir_mul(b, kir_nprog(b, 0), kir_add(b, kir_pid(b, 1), kir_mul(b, kir_nprog(b, 1), kir_pid(b, 2)))),
        kir_pid(b, 0));
    KirValue *base = kir_mul(b, lin, ci(b, 6));
    for (int a = 0; a < 3; a++) {
        kir_store(b, po, kir_add(b, base, ci(b, a)), kir_pid(b, a), NULL);
        kir_store(b, po, kir_add(b, base, ci(b, 3 + a)), kir_nprog(b, a), NULL);
    }
    KirKernel *k = tk_end(&tk);
    int32_t out[GX * GY * GZ * 6];
    poison(out, sizeof out);
    KRunArg args[] = {{.data = out, .bytes = sizeof out}, {.i = GY}};
    run_k(k, args, 0);
    int bad = 0;
    for (int z = 0; z < GZ; z++)
        for (int y = 0; y < GY; y++)
            for (int x = 0; x < GX; x++) {
                const int32_t *o = &out[((z * GY + y) * GX + x) * 6];
                bad += o[0] != x || o[1] != y || o[2] != z || o[3] != GX || o[4] != GY || o[5] != GZ;
            }
    KT_CHECK(!bad, "grid3: %d programs wrong", bad);
    tk_free(&tk);
}

/* ---- parallel compiles, shared-library linking, the krun host executor ---- */

typedef struct Job {
    const KirKernel *k;
    const char *target;
    CgBinary bin;
    IrStatus s;
} Job;

static void *compile_job(void *p)
{
    Job *j = p;
    IrDiag d = {0};
    const CgTarget *t = cg_target_find(j->target);
    j->s = cg_backend_for(t, "llvm")->compile(j->k, t, &j->bin, &d);
    return NULL;
}

static KirKernel *saxpy(TK *tk, const char *name, float alpha)
{
    KirBuilder *b = tk_begin(tk, name);
    KirValue *x = kir_param(b, "x", kir_ptr(KIR_F32), KIR_PARAM_RDONLY),
             *y = kir_param(b, "y", kir_ptr(KIR_F32), 0);
    KirValue *n = kir_param(b, "n", kir_scalar(KIR_I32), 0);
    kir_grid(b, 0, n, 1, 16);
    KirValue *offs = block_offs(b, 16), *m = kir_lt(b, offs, n);
    KirValue *v = kir_add(b, kir_mul(b, kir_load(b, x, offs, m, NULL), kir_const_f(b, KIR_F32, alpha)),
                          kir_load(b, y, offs, m, NULL));
    kir_store(b, y, offs, v, m);
    return tk_end(tk);
}

static void test_parallel_and_link(void)
{
    TK t1, t2;
    KirKernel *k1 = saxpy(&t1, "saxpy2", 2.0f), *k2 = saxpy(&t2, "saxpy3", 3.0f);
    if (!k1 || !k2) return;
    static const char *const targets[] = {"host", "sm_90a", "gfx942", "sm_100a", "gfx950", "host"};
    enum { NJ = 12 };
    Job jobs[NJ];
    pthread_t th[NJ];
    for (int i = 0; i < NJ; i++)
        jobs[i] = (Job){i % 2 ? k2 : k1, targets[i % 6], {0}, IR_OK};
    for (int i = 0; i < NJ; i++)
        pthread_create(&th[i], NULL, compile_job, &jobs[i]);
    for (int i = 0; i < NJ; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NJ; i++) {
        CgBinary serial;
        KT_CHECK(jobs[i].s == IR_OK, "parallel compile %d failed", i);
        if (jobs[i].s == IR_OK && compile_for(jobs[i].k, jobs[i].target, &serial)) {
            KT_CHECK(serial.size == jobs[i].bin.size && !memcmp(serial.data, jobs[i].bin.data, serial.size),
                     "parallel compile %d (%s) differs from a serial one", i, jobs[i].target);
            cg_binary_free(&serial);
        }
    }
    /* link the two host objects into one shared library and call both through dlopen */
    char so[128];
    snprintf(so, sizeof so, "%s/kernels.so", tmp_dir);
    CgBinary objs[2]; /* saxpy2 and saxpy3 as host objects */
    IrDiag d = {0};
    IrStatus s = cg_host_object(k1, &objs[0], &d);
    if (s == IR_OK) s = cg_host_object(k2, &objs[1], &d);
    KT_CHECK(s == IR_OK, "host objects: %s", d.msg);
    if (s == IR_OK) s = cg_host_link_shared(objs, 2, so, &d);
    KT_CHECK(s == IR_OK, "link: %s", d.msg);
    void *h = s == IR_OK ? dlopen(so, RTLD_NOW | RTLD_LOCAL) : NULL;
    KT_CHECK(!s && h, "dlopen %s: %s", so, s ? "-" : dlerror());
    if (h) {
        typedef void (*Entry)(void *const *, const int32_t *);
        Entry e2 = (Entry)(uintptr_t)dlsym(h, "saxpy2"), e3 = (Entry)(uintptr_t)dlsym(h, "saxpy3");
        KT_CHECK(e2 && e3, "dlsym");
        if (e2 && e3) {
            float x[40], y[40];
            int32_t n = 37, grid[3] = {3, 1, 1};
            for (int i = 0; i < 40; i++)
                x[i] = (float)i, y[i] = 1;
            float *xp = x, *yp = y;
            void *args[3] = {&xp, &yp, &n};
            e2(args, grid);
            e3(args, grid);
            int bad = 0;
            for (int i = 0; i < 40; i++)
                bad += y[i] != (i < n ? 1 + 5.0f * (float)i : 1);
            KT_CHECK(!bad, "shared library kernels: %d wrong", bad);
        }
        dlclose(h);
    }
    unlink(so);
    d = (IrDiag){0};
    KT_CHECK(cg_host_link_shared(objs, 2, "/nonexistent-dir/x.so", &d) != IR_OK && d.msg[0],
             "link into a missing dir");
    cg_binary_free(&objs[0]);
    cg_binary_free(&objs[1]);
    for (int i = 0; i < NJ; i++)
        cg_binary_free(&jobs[i].bin);

    /* the krun executor (grid 1x1x1 here: its grid comes from kir_grid_eval) */
    char why[128];
    KT_CHECK(krun_host.available(why, sizeof why), "krun_host unavailable: %s", why);
    float x[16], y[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i, y[i] = 0.5f;
    KRunArg a[] = {{.data = x, .bytes = sizeof x}, {.data = y, .bytes = sizeof y}, {.i = 16}};
    d = (IrDiag){0};
    KT_CHECK(krun_host.run(k1, a, &d) == IR_OK, "krun_host: %s", d.msg);
    int bad = 0;
    for (int i = 0; i < 16; i++)
        bad += y[i] != 0.5f + 2.0f * (float)i;
    KT_CHECK(!bad, "krun_host: %d wrong", bad);
    tk_free(&t1);
    tk_free(&t2);
}

static void test_errors(void)
{
    TK tk;
    KirKernel *k = saxpy(&tk, "9bad.name", 1.0f);
    CgBinary b;
    if (k && compile_for(k, "sm_90a", &b)) {
        KT_CHECK(!strcmp(b.entry, "_9bad_name") && strstr(b.data, "_9bad_name"), "symbol %s", b.entry);
        cg_binary_free(&b);
    }
    const CgTarget *t = cg_target_find("sm_90a");
    KT_CHECK(cg_backend_for(t, "llvm") != NULL && cg_backend_for(cg_target_find("gfx950"), NULL) != NULL,
             "registry");
    IrDiag d = {0};
    CgBinary ir = {0};
    KT_CHECK(k && cg_llvm_dump_ir(k, cg_target_find("host"), 1, &ir, &d) == IR_OK &&
                 strstr(ir.data, "define"),
             "dump ir: %s", d.msg);
    if (ir.data) cg_binary_free(&ir);
    tk_free(&tk);
}

int main(void)
{
    if (!cg_host_jit_available()) {
        return kt_skip_toolkit("test_cg_llvm", "this build has no LLVM");
    }
    if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0)
        ptxas_path = "/usr/local/cuda/bin/ptxas";
    else if (system("ptxas --version >/dev/null 2>&1") == 0)
        ptxas_path = "ptxas";
    else
        printf("note: ptxas not found: PTX is generated but not assembled (SKIP of that check)\n");
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/kiln-test-cg-llvm-XXXXXX");
    if (!mkdtemp(tmp_dir)) return 1;
    /* KILN_TEST_SHARD=i/n runs every n-th group (ksweep_mine), so ctest spreads the compiles over cores */
    for (int i = 0; i < N_DTYPES; i++)
        if (ksweep_mine()) test_elementwise(all_dtypes[i]);
    for (int i = 0; i < N_DTYPES; i++)
        if (ksweep_mine()) test_cast(all_dtypes[i]);
    if (ksweep_mine()) test_masks();
    if (ksweep_mine()) test_broadcast();
    static const KirDtype rdt[] = {KIR_F32, KIR_BF16, KIR_I32, KIR_I8, KIR_U8};
    for (unsigned i = 0; i < sizeof rdt / sizeof rdt[0]; i++)
        for (int kind = KIR_RED_SUM; kind <= KIR_RED_MIN; kind++)
            if (ksweep_mine()) test_reduce(rdt[i], (KirReduce)kind);
    static const KirDtype ddt[] = {KIR_BF16, KIR_F16, KIR_F32, KIR_F8E4M3, KIR_I8};
    for (unsigned i = 0; i < sizeof ddt / sizeof ddt[0]; i++)
        if (ksweep_mine()) test_dot(ddt[i]);
    if (ksweep_mine()) test_for_matmul();
    if (ksweep_mine()) test_for_nested();
    if (ksweep_mine()) test_atomic();
    if (ksweep_mine()) test_arrive();
    if (ksweep_mine()) test_rand();
    if (ksweep_mine()) test_grid();
    if (ksweep_mine()) test_parallel_and_link();
    if (ksweep_mine()) test_errors();
    rmdir(tmp_dir);
    for (int i = 0; i < 8 && timing[i].target; i++)
        printf("compile %-8s %4d kernels, %6.1f ms each\n", timing[i].target, timing[i].n,
               timing[i].ms / timing[i].n);
    return kt_done("test_cg_llvm");
}
