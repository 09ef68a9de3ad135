/* kir_interp.c — the kernel-IR interpreter: the executable definition of kir_ops.def.
 *
 * Every value (scalar or tile) lives in one slot of cells, indexed by value id and allocated once per
 * run from the value's static type: float dtypes hold doubles, integer dtypes int64, pointers their
 * address. After every op the result is rounded to its dtype (f32 through float; bf16, f16 to nearest
 * even; f8e4m3fn to nearest even, saturating to +-448; integers wrap to their width), so a value holds
 * exactly what a backend computing in that dtype holds. Programs run one after another in grid order
 * (x fastest), which makes atomic_add deterministic here.
 *
 * Choices the op table leaves open, fixed here (backends should agree where it matters):
 *   - float min/max (and reduce max/min) return the non-NaN operand (C fmin/fmax, CUDA fminf/fmaxf);
 *   - reduce sum accumulates in f32 in index order, rounding after each add;
 *   - dot: per output, k = 0..K-1, acc = round_f32(acc + a*b) (the product is exact);
 *   - cast float -> int truncates and saturates to the type's range, NaN gives 0; cast to i1 is x != 0;
 *   - integer division by zero, shifts by >= the type's width and a pointer that is NULL on an active
 *     lane are errors (IR_ERR_INPUT) that name the program and op: a kernel that does them is wrong.
 */
#include "kir_interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef union Cell {
    double f;
    int64_t i;
} Cell;

typedef struct Interp {
    const KirKernel *k;
    void *const *args;
    const size_t *bytes; /* by param: its buffer's size, 0 (or bytes NULL) when unknown */
    Cell **v;      /* by value id: its numel cells; .f for floats, .i for integers and pointers */
    Cell *scratch; /* for yields: max total numel of one yield */
    int32_t pid[3], nprog[3];
    IrDiag *d;
} Interp;

/* ---- number formats ---- */

/* Rounds finite or infinite x to a binary format with mbits explicit mantissa bits, minimum normal
 * exponent emin and largest finite value maxv; overflow gives inf, or maxv when saturating. */
static double round_fmt(double x, int mbits, int emin, double maxv, int sat)
{
    if (x != x || x == 0) return x;
    double a = fabs(x);
    if (isinf(a)) return sat ? copysign(maxv, x) : x;
    int e;
    frexp(a, &e);
    e -= 1; /* a in [2^e, 2^(e+1)) */
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - mbits);
    double r = rint(a / q) * q;
    if (r > maxv) r = sat ? maxv : INFINITY;
    return copysign(r, x);
}

static double round_dtype(double x, KirDtype t)
{
    switch (t) {
    case KIR_F32: return (double)(float)x;
    case KIR_BF16: return round_fmt(x, 7, -126, ldexp(255.0, 120), 0);
    case KIR_F16: return round_fmt(x, 10, -14, 65504.0, 0);
    case KIR_F8E4M3: return round_fmt(x, 3, -6, 448.0, 1);
    default: return x;
    }
}

static int64_t wrap_int(int64_t x, KirDtype t)
{
    switch (t) {
    case KIR_I1: return x & 1;
    case KIR_I8: return (int8_t)(uint8_t)(uint64_t)x;
    case KIR_U8: return (uint8_t)(uint64_t)x;
    case KIR_I32: return (int32_t)(uint32_t)(uint64_t)x;
    default: return x;
    }
}

/* Magnitude bits of a representable |x| in a small float format (mbits, bias); decode is the inverse. */
static unsigned enc_mag(double a, int mbits, int bias)
{
    if (a < ldexp(1.0, 1 - bias)) return (unsigned)(a * ldexp(1.0, bias + mbits - 1));
    int e;
    double m = frexp(a, &e);
    return ((unsigned)(e - 1 + bias) << mbits) | (unsigned)((2 * m - 1) * ldexp(1.0, mbits));
}

static double dec_mag(unsigned exp_bits, unsigned mant, int mbits, int bias)
{
    if (exp_bits == 0) return ldexp((double)mant, 1 - bias - mbits);
    return ldexp((double)((1u << mbits) + mant), (int)exp_bits - bias - mbits);
}

static void mem_read(const void *base, int64_t idx, KirDtype t, Cell *out)
{
    const unsigned char *p = (const unsigned char *)base + idx * kir_dtype_bytes(t);
    switch (t) {
    case KIR_F32: {
        float f;
        memcpy(&f, p, 4);
        out->f = f;
        return;
    }
    case KIR_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        out->f = f;
        return;
    }
    case KIR_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        unsigned e = (h >> 10) & 31, m = h & 1023;
        double v = e == 31 ? (m ? NAN : INFINITY) : dec_mag(e, m, 10, 15);
        out->f = (h >> 15) ? -v : v;
        return;
    }
    case KIR_F8E4M3: {
        unsigned b = *p, e = (b >> 3) & 15, m = b & 7;
        double v = (e == 15 && m == 7) ? NAN : dec_mag(e, m, 3, 7);
        out->f = (b >> 7) ? -v : v;
        return;
    }
    case KIR_I1: out->i = *p != 0; return;
    case KIR_I8: out->i = (int8_t)*p; return;
    case KIR_U8: out->i = *p; return;
    case KIR_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        out->i = v;
        return;
    }
    case KIR_I64: memcpy(&out->i, p, 8); return;
    case KIR_DTYPE_COUNT: break;
    }
    UNREACHABLE();
}

/* Writes a value already rounded to t. */
static void mem_write(void *base, int64_t idx, KirDtype t, Cell v)
{
    unsigned char *p = (unsigned char *)base + idx * kir_dtype_bytes(t);
    switch (t) {
    case KIR_F32: {
        float f = (float)v.f;
        memcpy(p, &f, 4);
        return;
    }
    case KIR_BF16: {
        float f = (float)v.f;
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = v.f != v.f ? (uint16_t)(0x7fc0 | ((u >> 16) & 0x8000)) : (uint16_t)(u >> 16);
        memcpy(p, &h, 2);
        return;
    }
    case KIR_F16: {
        double a = fabs(v.f);
        unsigned s = signbit(v.f) ? 0x8000 : 0;
        unsigned h = a != a ? 0x7e00 : isinf(a) ? 0x7c00 : enc_mag(a, 10, 15);
        uint16_t hh = (uint16_t)(h | s);
        memcpy(p, &hh, 2);
        return;
    }
    case KIR_F8E4M3: {
        double a = fabs(v.f);
        *p = (unsigned char)((a != a ? 0x7f : enc_mag(a, 3, 7)) | (signbit(v.f) ? 0x80 : 0));
        return;
    }
    case KIR_I1:
    case KIR_I8:
    case KIR_U8: *p = (unsigned char)v.i; return;
    case KIR_I32: {
        int32_t x = (int32_t)v.i;
        memcpy(p, &x, 4);
        return;
    }
    case KIR_I64: memcpy(p, &v.i, 8); return;
    case KIR_DTYPE_COUNT: break;
    }
    UNREACHABLE();
}

/* ---- helpers ---- */

static IrStatus fail(Interp *I, const KirInst *in, const char *what)
{
    return ir_diag_set(I->d, IR_ERR_INPUT, "kernel %s: program (%d,%d,%d): %s: %s", I->k->name, I->pid[0],
                       I->pid[1], I->pid[2], kir_op_name(in->op), what);
}

static Cell *cells(Interp *I, const KirValue *v)
{
    return I->v[v->id];
}

static int stride(const KirValue *v)
{
    return v->type.rank ? 1 : 0;
}

static int numel(const KirValue *v)
{
    return kir_type_numel(&v->type);
}

static int is_float(const KirValue *v)
{
    return kir_dtype_is_float(v->type.dtype);
}

static int dtype_bits(KirDtype t)
{
    return t == KIR_I1 ? 1 : 8 * kir_dtype_bytes(t);
}

/* ---- element-wise ops ---- */

static IrStatus binary(Interp *I, const KirInst *in)
{
    const KirValue *x = in->ops[0], *y = in->ops[1];
    KirDtype t = x->type.dtype, rt = in->res[0]->type.dtype;
    const Cell *a = cells(I, x), *b = cells(I, y);
    Cell *r = cells(I, in->res[0]);
    int n = numel(in->res[0]), sa = stride(x), sb = stride(y), fl = is_float(x);
    for (int j = 0; j < n; j++) {
        Cell u = a[j * sa], w = b[j * sb], o;
        if (fl) {
            double p = u.f, q = w.f;
            switch (in->op) {
            case KIR_OP_ADD: o.f = p + q; break;
            case KIR_OP_SUB: o.f = p - q; break;
            case KIR_OP_MUL: o.f = p * q; break;
            case KIR_OP_DIV: o.f = p / q; break;
            case KIR_OP_MIN: o.f = fmin(p, q); break;
            case KIR_OP_MAX: o.f = fmax(p, q); break;
            case KIR_OP_LT: o.i = p < q; break;
            case KIR_OP_LE: o.i = p <= q; break;
            case KIR_OP_GT: o.i = p > q; break;
            case KIR_OP_GE: o.i = p >= q; break;
            case KIR_OP_EQ: o.i = p == q; break;
            case KIR_OP_NE: o.i = p != q; break;
            default: return fail(I, in, "not a float op");
            }
            if (rt != KIR_I1) o.f = round_dtype(o.f, rt);
        } else {
            int64_t p = u.i, q = w.i;
            uint64_t up = (uint64_t)p, uq = (uint64_t)q;
            switch (in->op) {
            case KIR_OP_ADD: o.i = (int64_t)(up + uq); break;
            case KIR_OP_SUB: o.i = (int64_t)(up - uq); break;
            case KIR_OP_MUL: o.i = (int64_t)(up * uq); break;
            case KIR_OP_DIV:
            case KIR_OP_REM:
                if (q == 0) return fail(I, in, "integer division by zero");
                if (q == -1)
                    o.i = in->op == KIR_OP_DIV ? (int64_t)(0 - up) : 0;
                else
                    o.i = in->op == KIR_OP_DIV ? p / q : p % q;
                break;
            case KIR_OP_MIN: o.i = p < q ? p : q; break;
            case KIR_OP_MAX: o.i = p > q ? p : q; break;
            case KIR_OP_AND: o.i = p & q; break;
            case KIR_OP_OR: o.i = p | q; break;
            case KIR_OP_XOR: o.i = p ^ q; break;
            case KIR_OP_SHL:
            case KIR_OP_SHR:
                if (q < 0 || q >= dtype_bits(t)) return fail(I, in, "shift amount out of range");
                o.i = in->op == KIR_OP_SHL ? (int64_t)(up << q) : p >> q; /* u8 values are >= 0 */
                break;
            case KIR_OP_LT: o.i = p < q; break;
            case KIR_OP_LE: o.i = p <= q; break;
            case KIR_OP_GT: o.i = p > q; break;
            case KIR_OP_GE: o.i = p >= q; break;
            case KIR_OP_EQ: o.i = p == q; break;
            case KIR_OP_NE: o.i = p != q; break;
            default: return fail(I, in, "not an integer op");
            }
            o.i = wrap_int(o.i, rt);
        }
        r[j] = o;
    }
    return IR_OK;
}

static IrStatus unary(Interp *I, const KirInst *in)
{
    const KirValue *x = in->ops[0];
    KirDtype t = x->type.dtype;
    const Cell *a = cells(I, x);
    Cell *r = cells(I, in->res[0]);
    int n = numel(in->res[0]), s = stride(x);
    for (int j = 0; j < n; j++) {
        Cell u = a[j * s];
        if (!is_float(x)) {
            int neg = in->op == KIR_OP_NEG || u.i < 0;
            r[j].i = wrap_int(neg ? (int64_t)(0 - (uint64_t)u.i) : u.i, t);
            continue;
        }
        double p = u.f, o;
        switch (in->op) {
        case KIR_OP_NEG: o = -p; break;
        case KIR_OP_ABS: o = fabs(p); break;
        case KIR_OP_EXP: o = exp(p); break;
        case KIR_OP_EXP2: o = exp2(p); break;
        case KIR_OP_LOG: o = log(p); break;
        case KIR_OP_SQRT: o = sqrt(p); break;
        case KIR_OP_RSQRT: o = 1.0 / sqrt(p); break;
        case KIR_OP_SIN: o = sin(p); break;
        case KIR_OP_COS: o = cos(p); break;
        case KIR_OP_FLOOR: o = floor(p); break;
        default: return fail(I, in, "not a unary op");
        }
        r[j].f = round_dtype(o, t);
    }
    return IR_OK;
}

static int64_t float_to_int(double x, KirDtype t)
{
    if (x != x) return 0;
    x = trunc(x);
    double lo = t == KIR_I64 ? -9223372036854775808.0 : t == KIR_I32 ? -2147483648.0 : t == KIR_I8 ? -128 : 0;
    double hi = t == KIR_I64 ? 9223372036854775807.0 : t == KIR_I32 ? 2147483647.0 : t == KIR_I8 ? 127 : 255;
    if (x <= lo) return t == KIR_I64 ? INT64_MIN : (int64_t)lo;
    if (x >= hi) return t == KIR_I64 ? INT64_MAX : (int64_t)hi;
    return (int64_t)x;
}

static void cast(Interp *I, const KirInst *in)
{
    const KirValue *x = in->ops[0];
    KirDtype rt = in->res[0]->type.dtype;
    const Cell *a = cells(I, x);
    Cell *r = cells(I, in->res[0]);
    int n = numel(in->res[0]), s = stride(x), from_f = is_float(x), to_f = kir_dtype_is_float(rt);
    for (int j = 0; j < n; j++) {
        Cell u = a[j * s];
        if (rt == KIR_I1)
            r[j].i = from_f ? u.f != 0 : u.i != 0;
        else if (from_f && to_f)
            r[j].f = round_dtype(u.f, rt);
        else if (from_f)
            r[j].i = float_to_int(u.f, rt);
        else if (to_f)
            r[j].f = rt == KIR_F32 ? (double)(float)u.i : round_dtype((double)u.i, rt);
        else
            r[j].i = wrap_int(u.i, rt);
    }
}

/* ---- tiles ---- */

static void broadcast(Interp *I, const KirInst *in)
{
    const KirValue *x = in->ops[0];
    const Cell *a = cells(I, x);
    Cell *r = cells(I, in->res[0]);
    int m = (int)in->i, n = (int)in->i2, row = x->type.shape[0] == 1;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            r[i * n + j] = a[row ? j : i];
}

static void reduce(Interp *I, const KirInst *in)
{
    const KirValue *x = in->ops[0];
    const Cell *a = cells(I, x);
    Cell *r = cells(I, in->res[0]);
    KirDtype rt = in->res[0]->type.dtype;
    int M = x->type.rank == 2 ? x->type.shape[0] : 1,
        N = x->type.rank == 2 ? x->type.shape[1] : x->type.shape[0];
    int axis = (int)in->i2, kind = (int)in->i, fl = is_float(x);
    /* for an output o and a step j along the reduced axis: input index */
    int outs = x->type.rank == 1 ? 1 : axis == 1 ? M : N, len = x->type.rank == 1 ? N : axis == 1 ? N : M;
    for (int o = 0; o < outs; o++) {
        Cell acc = {0};
        for (int j = 0; j < len; j++) {
            int idx = x->type.rank == 1 ? j : axis == 1 ? o * N + j : j * N + o;
            Cell v = a[idx];
            if (fl) {
                if (j == 0) acc.f = kind == KIR_RED_SUM ? 0.0 : v.f;
                if (kind == KIR_RED_SUM)
                    acc.f = (double)(float)(acc.f + v.f);
                else if (kind == KIR_RED_MAX)
                    acc.f = fmax(acc.f, v.f);
                else
                    acc.f = fmin(acc.f, v.f);
            } else {
                if (j == 0) acc.i = kind == KIR_RED_SUM ? 0 : v.i;
                if (kind == KIR_RED_SUM)
                    acc.i = wrap_int((int64_t)((uint64_t)acc.i + (uint64_t)v.i), rt);
                else if (kind == KIR_RED_MAX)
                    acc.i = v.i > acc.i ? v.i : acc.i;
                else
                    acc.i = v.i < acc.i ? v.i : acc.i;
            }
        }
        r[o] = acc;
    }
}

static void dot(Interp *I, const KirInst *in)
{
    const KirValue *A = in->ops[0], *B = in->ops[1];
    const Cell *a = cells(I, A), *b = cells(I, B), *c = cells(I, in->ops[2]);
    Cell *r = cells(I, in->res[0]);
    int M = A->type.shape[0], K = A->type.shape[1], N = B->type.shape[1], fl = is_float(A);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            Cell acc = c[m * N + n];
            for (int k = 0; k < K; k++) {
                if (fl)
                    acc.f = (double)(float)(acc.f + a[m * K + k].f * b[k * N + n].f);
                else
                    acc.i =
                        (int32_t)(uint32_t)((uint64_t)acc.i + (uint64_t)(a[m * K + k].i * b[k * N + n].i));
            }
            r[m * N + n] = acc;
        }
}

/* ---- memory ---- */

/* Is element idx of dtype t inside the buffer of the pointer param `ptr` (when its size is known)? */
static int in_bounds(const Interp *I, const KirValue *ptr, int64_t idx, KirDtype t)
{
    const KirInst *pd = ptr->def;
    if (!I->bytes || !pd || pd->op != KIR_OP_PARAM || !I->bytes[pd->i]) return 1;
    int64_t w = kir_dtype_bytes(t);
    return idx >= 0 && (uint64_t)idx * (uint64_t)w + (uint64_t)w <= I->bytes[pd->i];
}

static IrStatus out_of_bounds(Interp *I, const KirInst *in, int64_t idx)
{
    char what[128];
    snprintf(what, sizeof what, "element %lld outside the %zu-byte buffer of param %s", (long long)idx,
             I->bytes[in->ops[0]->def->i], I->k->params[in->ops[0]->def->i].name);
    return fail(I, in, what);
}

static IrStatus memory(Interp *I, const KirInst *in)
{
    void *base = (void *)(uintptr_t)cells(I, in->ops[0])[0].i;
    KirDtype t = in->ops[0]->type.dtype;
    const KirValue *offs = in->ops[1];
    const Cell *o = cells(I, offs);
    int n = numel(offs), so = stride(offs);
    int has_mask = in->op == KIR_OP_LOAD ? in->n_ops >= 3 : in->n_ops == 4;
    const KirValue *mv = has_mask ? in->ops[in->op == KIR_OP_LOAD ? 2 : 3] : NULL;
    const Cell *mask = mv ? cells(I, mv) : NULL;
    int sm = mv ? stride(mv) : 0;
    if (in->op == KIR_OP_LOAD) {
        Cell other = {0};
        if (in->n_ops == 4) other = cells(I, in->ops[3])[0];
        Cell *r = cells(I, in->res[0]);
        for (int j = 0; j < n; j++) {
            if (mask && !mask[j * sm].i) {
                r[j] = other;
                continue;
            }
            if (!base) return fail(I, in, "NULL pointer");
            if (!in_bounds(I, in->ops[0], o[j * so].i, t)) return out_of_bounds(I, in, o[j * so].i);
            mem_read(base, o[j * so].i, t, &r[j]);
        }
        return IR_OK;
    }
    const Cell *val = cells(I, in->ops[2]);
    int sv = stride(in->ops[2]);
    for (int j = 0; j < n; j++) {
        if (mask && !mask[j * sm].i) continue;
        if (!base) return fail(I, in, "NULL pointer");
        if (!in_bounds(I, in->ops[0], o[j * so].i, t)) return out_of_bounds(I, in, o[j * so].i);
        Cell v = val[j * sv];
        if (in->op == KIR_OP_ATOMIC_ADD) {
            Cell old;
            mem_read(base, o[j * so].i, t, &old);
            if (t == KIR_F32)
                v.f = (double)(float)(old.f + v.f);
            else
                v.i = wrap_int((int64_t)((uint64_t)old.i + (uint64_t)v.i), t);
        }
        mem_write(base, o[j * so].i, t, v);
    }
    return IR_OK;
}

/* ---- blocks ---- */

static IrStatus run_block(Interp *I, const KirBlock *blk);

static void copy_value(Interp *I, const KirValue *dst, const Cell *src)
{
    memcpy(cells(I, dst), src, sizeof(Cell) * (size_t)numel(dst));
}

static IrStatus run_for(Interp *I, const KirInst *in)
{
    const KirBlock *body = in->body;
    int64_t lo = cells(I, in->ops[0])[0].i, hi = cells(I, in->ops[1])[0].i, step = cells(I, in->ops[2])[0].i;
    int n = in->n_ops - 3;
    for (int i = 0; i < n; i++)
        copy_value(I, body->args[1 + i], cells(I, in->ops[3 + i]));
    if (lo < hi && step <= 0) return fail(I, in, "step must be positive");
    for (int64_t iv = lo; iv < hi; iv += step) {
        cells(I, body->args[0])[0].i = iv;
        IrStatus s = run_block(I, body);
        if (s != IR_OK) return s;
    }
    for (int i = 0; i < in->n_res; i++)
        copy_value(I, in->res[i], cells(I, body->args[1 + i]));
    return IR_OK;
}

/* Stages the next trip's iter values in scratch (operands may be the body's own arguments, as in a
 * swap); run_block copies them into the arguments once the body is done. */
static IrStatus yield(Interp *I, const KirInst *in)
{
    size_t at = 0;
    for (int i = 0; i < in->n_ops; i++) {
        int n = numel(in->ops[i]);
        memcpy(I->scratch + at, cells(I, in->ops[i]), sizeof(Cell) * (size_t)n);
        at += (size_t)n;
    }
    return IR_OK;
}

static void param(Interp *I, const KirInst *in)
{
    const KirType *t = &I->k->params[in->i].type;
    const void *a = I->args[in->i];
    Cell *r = cells(I, in->res[0]);
    if (t->is_ptr) {
        void *p;
        memcpy(&p, a, sizeof p);
        r[0].i = (int64_t)(uintptr_t)p;
        return;
    }
    if (t->dtype == KIR_F32) {
        float f;
        memcpy(&f, a, 4);
        r[0].f = f;
    } else {
        mem_read(a, 0, t->dtype, &r[0]);
    }
}

static IrStatus run_inst(Interp *I, const KirInst *in)
{
    Cell *r = in->n_res && in->op != KIR_OP_FOR ? cells(I, in->res[0]) : NULL;
    if (kir_op_flags(in->op) & KIR_F_BINARY) return binary(I, in);
    if (kir_op_flags(in->op) & KIR_F_UNARY) return unary(I, in);
    switch (in->op) {
    case KIR_OP_PARAM: param(I, in); return IR_OK;
    case KIR_OP_CONST: {
        KirDtype t = (KirDtype)in->i2;
        if (kir_dtype_is_float(t))
            r[0].f = round_dtype(in->f, t);
        else
            r[0].i = wrap_int(in->i, t);
        return IR_OK;
    }
    case KIR_OP_PID: r[0].i = I->pid[in->i]; return IR_OK;
    case KIR_OP_NPROG: r[0].i = I->nprog[in->i]; return IR_OK;
    case KIR_OP_ARANGE:
        for (int j = 0; j < in->i; j++)
            r[j].i = j;
        return IR_OK;
    case KIR_OP_SPLAT:
    case KIR_OP_EXPAND: {
        const Cell *a = cells(I, in->ops[0]);
        int n = numel(in->res[0]), s = stride(in->ops[0]);
        for (int j = 0; j < n; j++)
            r[j] = a[j * s];
        return IR_OK;
    }
    case KIR_OP_SELECT: {
        const Cell *c = cells(I, in->ops[0]), *a = cells(I, in->ops[1]), *b = cells(I, in->ops[2]);
        int n = numel(in->res[0]), sc = stride(in->ops[0]), sa = stride(in->ops[1]), sb = stride(in->ops[2]);
        for (int j = 0; j < n; j++)
            r[j] = c[j * sc].i ? a[j * sa] : b[j * sb];
        return IR_OK;
    }
    case KIR_OP_CAST: cast(I, in); return IR_OK;
    case KIR_OP_BROADCAST: broadcast(I, in); return IR_OK;
    case KIR_OP_REDUCE: reduce(I, in); return IR_OK;
    case KIR_OP_LOAD:
    case KIR_OP_STORE:
    case KIR_OP_ATOMIC_ADD: return memory(I, in);
    case KIR_OP_ARRIVE: {
        int32_t *base = (int32_t *)(uintptr_t)cells(I, in->ops[0])[0].i;
        if (!base) return fail(I, in, "NULL pointer");
        if (!in_bounds(I, in->ops[0], cells(I, in->ops[1])[0].i, KIR_I32))
            return out_of_bounds(I, in, cells(I, in->ops[1])[0].i);
        r[0].i = __atomic_fetch_add(base + cells(I, in->ops[1])[0].i, 1, __ATOMIC_SEQ_CST);
        return IR_OK;
    }
    case KIR_OP_DOT: dot(I, in); return IR_OK;
    case KIR_OP_RAND: {
        int64_t seed = cells(I, in->ops[0])[0].i;
        const Cell *o = cells(I, in->ops[1]);
        int n = numel(in->res[0]);
        for (int j = 0; j < n; j++)
            r[j].f = kir_rand_ref(seed, (int32_t)o[j].i);
        return IR_OK;
    }
    case KIR_OP_FOR: return run_for(I, in);
    case KIR_OP_YIELD: return yield(I, in);
    case KIR_OP_RET: return IR_OK;
    default: break; /* KIR_F_BINARY and KIR_F_UNARY ops are dispatched above */
    }
    return fail(I, in, "unknown op");
}

static IrStatus run_block(Interp *I, const KirBlock *blk)
{
    for (int i = 0; i < blk->n_insts; i++) {
        IrStatus s = run_inst(I, blk->insts[i]);
        if (s != IR_OK) return s;
    }
    if (blk->parent) { /* the yield staged the next iter values in scratch */
        size_t at = 0;
        for (int i = 1; i < blk->n_args; i++) {
            int n = numel(blk->args[i]);
            memcpy(cells(I, blk->args[i]), I->scratch + at, sizeof(Cell) * (size_t)n);
            at += (size_t)n;
        }
    }
    return IR_OK;
}

/* ---- setup ---- */

typedef struct Sizes {
    size_t cells, yield;
} Sizes;

static void size_value(const KirValue *v, Sizes *s)
{
    s->cells += (size_t)kir_type_numel(&v->type);
}

static void size_block(const KirBlock *blk, Sizes *s)
{
    for (int i = 0; i < blk->n_args; i++)
        size_value(blk->args[i], s);
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        for (int r = 0; r < in->n_res; r++)
            size_value(in->res[r], s);
        if (in->op == KIR_OP_FOR) size_block(in->body, s);
        if (in->op == KIR_OP_YIELD) {
            size_t y = 0;
            for (int k = 0; k < in->n_ops; k++)
                y += (size_t)kir_type_numel(&in->ops[k]->type);
            if (y > s->yield) s->yield = y;
        }
    }
}

static void place_value(Interp *I, const KirValue *v, Cell **next)
{
    I->v[v->id] = *next;
    *next += kir_type_numel(&v->type);
}

static void place_block(Interp *I, const KirBlock *blk, Cell **next)
{
    for (int i = 0; i < blk->n_args; i++)
        place_value(I, blk->args[i], next);
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        for (int r = 0; r < in->n_res; r++)
            place_value(I, in->res[r], next);
        if (in->op == KIR_OP_FOR) place_block(I, in->body, next);
    }
}

void kir_grid_eval(const KirKernel *k, void *const *args, int32_t grid[3])
{
    for (int i = 0; i < 3; i++) {
        const KirGridDim *g = &k->grid[i];
        if (g->param < 0) {
            grid[i] = (int32_t)g->c;
            continue;
        }
        Cell v;
        mem_read(args[g->param], 0, k->params[g->param].type.dtype, &v);
        int64_t x = v.i * g->mul;
        grid[i] = x <= 0 ? 0 : (int32_t)((x + g->div - 1) / g->div);
    }
}

IrStatus kir_interp_run(const KirKernel *k, void *const *args, const int32_t grid[3], IrDiag *d)
{
    return kir_interp_run_checked(k, args, NULL, grid, d);
}

IrStatus kir_interp_run_checked(const KirKernel *k, void *const *args, const size_t *bytes, const int32_t grid[3],
                                IrDiag *d)
{
    Sizes sz = {0, 0};
    size_block(k->body, &sz);
    Interp I = {.k = k, .args = args, .bytes = bytes, .d = d};
    I.v = calloc((size_t)k->n_values + 1, sizeof(Cell *));
    Cell *pool = calloc(sz.cells + 1, sizeof(Cell));
    I.scratch = calloc(sz.yield + 1, sizeof(Cell));
    IrStatus s = IR_OK;
    if (!I.v || !pool || !I.scratch) {
        s = ir_diag_set(d, IR_ERR_NOMEM, "kernel %s: interpreter: out of memory", k->name);
        goto done;
    }
    Cell *next = pool;
    place_block(&I, k->body, &next);
    for (int i = 0; i < 3; i++)
        I.nprog[i] = grid[i];
    for (int z = 0; z < grid[2] && s == IR_OK; z++)
        for (int y = 0; y < grid[1] && s == IR_OK; y++)
            for (int x = 0; x < grid[0] && s == IR_OK; x++) {
                I.pid[0] = x;
                I.pid[1] = y;
                I.pid[2] = z;
                s = run_block(&I, k->body);
            }
done:
    free(I.v);
    free(pool);
    free(I.scratch);
    return s;
}
