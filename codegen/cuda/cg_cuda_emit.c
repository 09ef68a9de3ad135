/* cg_cuda_emit.c — kernel IR -> CUDA C: the program text, scalars, element-wise ops, loops. Loads and
 * stores are in cg_cuda_mem.c, reductions, broadcasts and layout conversions in cg_cuda_reduce.c, dots
 * and pipelined dot loops in cg_cuda_dot.c.
 *
 * Shape of the output: a header comment (kiln version, kernel IR hash, config, launch), one
 * `L<i>_at(s, r, c)` function per layout, then one `extern "C" __global__` kernel whose body follows the
 * IR instruction by instruction: a scalar is `const T s<N> = ...;`, a REG tile `T v<N>[slots];` filled by
 * a fully unrolled loop over the thread's slots (register arrays indexed by constants only), a VIRT tile
 * nothing until a consumer evaluates it at its own coordinates. Names follow kir_print's numbering (%12
 * is s12 / v12 / e12), so the source reads beside the IR.
 *
 * Numerics (kir_ops.def): float values of every dtype are f32 registers holding already-rounded values;
 * each op computes in f32 (exact for bf16/f16 since f32 has more than twice their precision) and rounds
 * to its dtype; NVRTC runs with --fmad=false so f32 mul+add is never contracted. Invariants: control flow
 * is uniform (all threads run every statement; predication is per element), so __syncthreads and warp
 * shuffles are legal anywhere; a global store followed by a load of possibly the same memory gets a
 * barrier first (programs are sequential in the IR's semantics, threads are not).
 */
#include "cg_cuda_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- text ---- */

static void vline(CgCudaGen *g, const char *fmt, va_list ap)
{
    ir_buf_printf(&g->body, "%*s", 4 * g->ind, "");
    ir_buf_vprintf(&g->body, fmt, ap);
    ir_buf_put(&g->body, "\n", 1);
}

void cg_cuda_line(CgCudaGen *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(g, fmt, ap);
    va_end(ap);
}

const char *cg_cuda_fmt(CgCudaGen *g, const char *fmt, ...)
{
    IrBuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    ir_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    char *s = b.oom ? NULL : ir_arena_strdup(g->a, b.s ? b.s : "");
    ir_buf_free(&b);
    if (!s) {
        g->oom = 1;
        return "?";
    }
    return s;
}

void cg_cuda_open(CgCudaGen *g, const char *fmt, ...)
{
    IrBuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    ir_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (b.s && b.s[0])
        cg_cuda_line(g, "%s {", b.s);
    else
        cg_cuda_line(g, "{");
    ir_buf_free(&b);
    g->ind++;
    KILN_ASSERT(g->depth < (int)(sizeof g->scope_stack / sizeof g->scope_stack[0]));
    g->scope_stack[g->depth++] = ++g->scope;
}

void cg_cuda_begin(CgCudaGen *g)
{
    cg_cuda_open(g, "%s", "");
}

void cg_cuda_close(CgCudaGen *g)
{
    int sc = g->scope_stack[--g->depth];
    for (int i = 0; i < g->n_conv;) /* conversions and memoized values made in this scope end with it */
        if (g->conv[i].scope == sc)
            g->conv[i] = g->conv[--g->n_conv];
        else
            i++;
    for (int i = 0; i < g->n_memo;)
        if (g->memo[i].scope == sc)
            g->memo[i] = g->memo[--g->n_memo];
        else
            i++;
    for (int i = 0; i < g->n_apk;)
        if (g->apk_scope[i] == sc) {
            g->n_apk--;
            g->apk[i] = g->apk[g->n_apk];
            g->apk_scope[i] = g->apk_scope[g->n_apk];
        } else {
            i++;
        }
    g->ind--;
    cg_cuda_line(g, "}");
}

/* ---- types and numbers ---- */

const char *cg_cuda_reg_type(KirDtype t)
{
    switch (t) {
    case KIR_I1: return "bool";
    case KIR_I8: return "signed char";
    case KIR_U8: return "unsigned char";
    case KIR_I32: return "int";
    case KIR_I64: return "long long";
    default: return "float";
    }
}

const char *cg_cuda_mem_type(KirDtype t)
{
    switch (t) {
    case KIR_I1: return "unsigned char";
    case KIR_F16: return "kd_f16";
    case KIR_BF16: return "kd_bf16";
    case KIR_F8E4M3: return "kd_f8";
    default: return cg_cuda_reg_type(t);
    }
}

const char *cg_cuda_from_mem(CgCudaGen *g, KirDtype t, const char *x)
{
    switch (t) {
    case KIR_BF16: return cg_cuda_fmt(g, "kd_bf16_to_f32(%s)", x);
    case KIR_F16: return cg_cuda_fmt(g, "kd_f16_to_f32(%s)", x);
    case KIR_F8E4M3: return cg_cuda_fmt(g, "kd_f8_to_f32(%s)", x);
    case KIR_I1: return cg_cuda_fmt(g, "(%s != 0)", x);
    default: return x;
    }
}

const char *cg_cuda_to_mem(CgCudaGen *g, KirDtype t, const char *x)
{
    switch (t) {
    case KIR_BF16: return cg_cuda_fmt(g, "kd_f32_to_bf16(%s)", x);
    case KIR_F16: return cg_cuda_fmt(g, "kd_f32_to_f16(%s)", x);
    case KIR_F8E4M3: return cg_cuda_fmt(g, "kd_f32_to_f8(%s)", x);
    case KIR_I1: return cg_cuda_fmt(g, "(unsigned char)(%s)", x);
    default: return x;
    }
}

/* f32 result of an op -> the value a register of dtype t holds. */
static const char *rnd(CgCudaGen *g, KirDtype t, const char *x)
{
    switch (t) {
    case KIR_BF16: return cg_cuda_fmt(g, "kd_rbf16(%s)", x);
    case KIR_F16: return cg_cuda_fmt(g, "kd_rf16(%s)", x);
    case KIR_F8E4M3: return cg_cuda_fmt(g, "kd_rf8(%s)", x);
    default: return cg_cuda_fmt(g, "(%s)", x);
    }
}

/* int result of an op (C promotes small types to int) -> dtype t with wrap-around. */
static const char *wrap(CgCudaGen *g, KirDtype t, const char *x)
{
    switch (t) {
    case KIR_I8: return cg_cuda_fmt(g, "(signed char)(%s)", x);
    case KIR_U8: return cg_cuda_fmt(g, "(unsigned char)(%s)", x);
    case KIR_I1: return cg_cuda_fmt(g, "(bool)(%s)", x);
    default: return cg_cuda_fmt(g, "(%s)", x);
    }
}

/* Host copy of the interpreter's rounding of a constant to a float format (exactly representable in
 * f32 afterwards, so the literal is exact). */
static double round_fmt(double x, int mbits, int emin, double maxv, int sat)
{
    if (x != x || x == 0) return x;
    double a = fabs(x);
    if (isinf(a)) return sat ? copysign(maxv, x) : x;
    int e;
    frexp(a, &e);
    e -= 1;
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - mbits);
    double r = rint(a / q) * q;
    if (r > maxv) r = sat ? maxv : INFINITY;
    return copysign(r, x);
}

static const char *float_literal(CgCudaGen *g, KirDtype t, double v)
{
    switch (t) {
    case KIR_BF16: v = round_fmt(v, 7, -126, ldexp(255.0, 120), 0); break;
    case KIR_F16: v = round_fmt(v, 10, -14, 65504.0, 0); break;
    case KIR_F8E4M3: v = round_fmt(v, 3, -6, 448.0, 1); break;
    default: v = (float)v; break;
    }
    float f = (float)v;
    if (f != f) return "__int_as_float(0x7fc00000)";
    if (isinf(f)) return f > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
    return cg_cuda_fmt(g, "%af", (double)f);
}

static const char *int_literal(CgCudaGen *g, KirDtype t, int64_t v)
{
    switch (t) {
    case KIR_I1: return v & 1 ? "true" : "false";
    case KIR_I8: return cg_cuda_fmt(g, "(signed char)%d", (int)(int8_t)(uint8_t)(uint64_t)v);
    case KIR_U8: return cg_cuda_fmt(g, "(unsigned char)%d", (int)(uint8_t)(uint64_t)v);
    case KIR_I32: {
        int32_t x = (int32_t)(uint32_t)(uint64_t)v;
        return x == INT32_MIN ? "(-2147483647 - 1)" : cg_cuda_fmt(g, "%d", (int)x);
    }
    default: return v == INT64_MIN ? "(-9223372036854775807LL - 1)" : cg_cuda_fmt(g, "%lldLL", (long long)v);
    }
}

/* ---- element-wise expressions ---- */

/* At most how many low bits integer value x can have set (x >= 0), or 64 when unknown: constants, u8
 * widened, and / or / xor of such (and with a nonnegative operand bounds the result whatever the other). */
static int int_bits(const CgCudaGen *g, const KirValue *x, int depth)
{
    const KirInst *d = g->v[x->id].def;
    if (!d || depth > 8) return 64;
    switch (d->op) {
    case KIR_OP_CONST: {
        if (kir_dtype_is_float(x->type.dtype) || d->i < 0) return 64;
        int n = 0;
        while (n < 63 && (d->i >> n))
            n++;
        return n;
    }
    case KIR_OP_SPLAT:
    case KIR_OP_EXPAND:
    case KIR_OP_BROADCAST: return int_bits(g, d->ops[0], depth + 1);
    case KIR_OP_CAST: /* u8 or i1 widened to i32 or i64 */
        return (d->ops[0]->type.dtype == KIR_U8 || d->ops[0]->type.dtype == KIR_I1) &&
                       (x->type.dtype == KIR_I32 || x->type.dtype == KIR_I64)
                   ? 8
                   : 64;
    case KIR_OP_AND: {
        int a = int_bits(g, d->ops[0], depth + 1), b = int_bits(g, d->ops[1], depth + 1);
        return a < b ? a : b;
    }
    case KIR_OP_OR:
    case KIR_OP_XOR: {
        int a = int_bits(g, d->ops[0], depth + 1), b = int_bits(g, d->ops[1], depth + 1);
        return a > b ? a : b;
    }
    default: return 64;
    }
}

static const char *elem_expr(CgCudaGen *g, const KirInst *in, const char *const *o)
{
    /* an i32 of at most 23 bits to f32: 2^23 + x by its bits, less 2^23 (exact; two integer-pipe ops
     * instead of the int-to-float unit's quarter rate: dequantized nibbles) */
    if (in->op == KIR_OP_CAST && in->ops[0]->type.dtype == KIR_I32 &&
        kir_dtype_is_float(in->res[0]->type.dtype) && int_bits(g, in->ops[0], 0) <= 23)
        return rnd(g, in->res[0]->type.dtype, cg_cuda_fmt(g, "kd_u23_to_f32(%s)", o[0]));
    KirDtype t = in->ops[in->op == KIR_OP_SELECT ? 1 : 0]->type.dtype, rt = in->res[0]->type.dtype;
    int fl = kir_dtype_is_float(t), b1 = t == KIR_I1;
    const char *a = o[0], *b = in->n_ops > 1 ? o[1] : NULL;
    static const char *const sym[KIR_OP_COUNT] = {
        [KIR_OP_ADD] = "+",  [KIR_OP_SUB] = "-",  [KIR_OP_MUL] = "*", [KIR_OP_DIV] = "/",
        [KIR_OP_REM] = "%",  [KIR_OP_AND] = "&",  [KIR_OP_OR] = "|",  [KIR_OP_XOR] = "^",
        [KIR_OP_SHL] = "<<", [KIR_OP_SHR] = ">>", [KIR_OP_LT] = "<",  [KIR_OP_LE] = "<=",
        [KIR_OP_GT] = ">",   [KIR_OP_GE] = ">=",  [KIR_OP_EQ] = "==", [KIR_OP_NE] = "!=",
    };
    switch (in->op) {
    case KIR_OP_ADD:
    case KIR_OP_SUB:
    case KIR_OP_MUL:
    case KIR_OP_DIV: {
        const char *e = cg_cuda_fmt(g, "%s %s %s", a, sym[in->op], b);
        return fl ? rnd(g, rt, e) : wrap(g, rt, e);
    }
    case KIR_OP_REM:
    case KIR_OP_SHL:
    case KIR_OP_SHR: return wrap(g, rt, cg_cuda_fmt(g, "%s %s %s", a, sym[in->op], b));
    case KIR_OP_AND:
    case KIR_OP_OR:
    case KIR_OP_XOR:
        if (b1)
            return cg_cuda_fmt(g, "(%s %s %s)", a,
                               in->op == KIR_OP_AND  ? "&&"
                               : in->op == KIR_OP_OR ? "||"
                                                     : "!=",
                               b);
        return wrap(g, rt, cg_cuda_fmt(g, "%s %s %s", a, sym[in->op], b));
    case KIR_OP_MIN: return cg_cuda_fmt(g, "kd_min(%s, %s)", a, b);
    case KIR_OP_MAX: return cg_cuda_fmt(g, "kd_max(%s, %s)", a, b);
    case KIR_OP_LT:
    case KIR_OP_LE:
    case KIR_OP_GT:
    case KIR_OP_GE:
    case KIR_OP_EQ:
    case KIR_OP_NE: return cg_cuda_fmt(g, "(%s %s %s)", a, sym[in->op], b);
    case KIR_OP_SELECT: return cg_cuda_fmt(g, "(%s ? %s : %s)", a, b, o[2]);
    case KIR_OP_NEG: return fl ? cg_cuda_fmt(g, "(-%s)", a) : wrap(g, rt, cg_cuda_fmt(g, "-%s", a));
    case KIR_OP_ABS:
        return fl ? cg_cuda_fmt(g, "fabsf(%s)", a)
                  : wrap(g, rt, cg_cuda_fmt(g, "%s < 0 ? -%s : %s", a, a, a));
    case KIR_OP_EXP: return cg_cuda_fmt(g, "expf(%s)", a);
    case KIR_OP_EXP2: return cg_cuda_fmt(g, "kd_exp2(%s)", a);
    case KIR_OP_LOG: return cg_cuda_fmt(g, "logf(%s)", a);
    case KIR_OP_SQRT: return cg_cuda_fmt(g, "sqrtf(%s)", a);
    case KIR_OP_RSQRT: return cg_cuda_fmt(g, "(1.0f / sqrtf(%s))", a);
    case KIR_OP_SIN: return cg_cuda_fmt(g, "kd_sin(%s)", a);
    case KIR_OP_COS: return cg_cuda_fmt(g, "kd_cos(%s)", a);
    case KIR_OP_FLOOR: return cg_cuda_fmt(g, "floorf(%s)", a);
    case KIR_OP_RAND: return cg_cuda_fmt(g, "kd_rand(%s, %s)", a, b);
    case KIR_OP_CAST: {
        int to_f = kir_dtype_is_float(rt);
        if (rt == KIR_I1) return cg_cuda_fmt(g, "(%s != %s)", a, fl ? "0.0f" : "0");
        if (fl && to_f) return rt == KIR_F32 ? a : rnd(g, rt, a);
        if (fl) {
            switch (rt) {
            case KIR_I8: return cg_cuda_fmt(g, "kd_f2i8(%s)", a);
            case KIR_U8: return cg_cuda_fmt(g, "kd_f2u8(%s)", a);
            case KIR_I64: return cg_cuda_fmt(g, "kd_f2i64(%s)", a);
            default: return cg_cuda_fmt(g, "kd_f2i32(%s)", a);
            }
        }
        if (to_f) return rnd(g, rt, cg_cuda_fmt(g, "(float)%s", a));
        if (rt == KIR_I32) return cg_cuda_fmt(g, "(int)%s", a);
        if (rt == KIR_I64) return cg_cuda_fmt(g, "(long long)%s", a);
        return wrap(g, rt, a);
    }
    default: break;
    }
    UNREACHABLE();
}

/* ---- values ---- */

static CgCudaVal *val(CgCudaGen *g, const KirValue *v)
{
    return &g->v[v->id];
}

static const char *memo_find(CgCudaGen *g, int vid, int rs, int cs, int subst)
{
    for (int i = g->memo_floor; i < g->n_memo; i++) {
        const CgCudaMemo *m = &g->memo[i];
        if (m->vid == vid && m->rsrc == rs && m->csrc == cs && m->subst == subst) return m->name;
    }
    return NULL;
}

static void memo_add(CgCudaGen *g, int vid, int rs, int cs, int subst, const char *name)
{
    if (g->n_memo == g->cap_memo) {
        int cap = g->cap_memo ? 2 * g->cap_memo : 32;
        CgCudaMemo *p = ir_arena_alloc(g->a, sizeof *p * (size_t)cap);
        if (!p) {
            g->oom = 1;
            return;
        }
        if (g->n_memo) memcpy(p, g->memo, sizeof *p * (size_t)g->n_memo);
        g->memo = p;
        g->cap_memo = cap;
    }
    g->memo[g->n_memo++] =
        (CgCudaMemo){vid, rs, cs, subst, g->depth ? g->scope_stack[g->depth - 1] : 0, name};
}

/* Is v recomputed under the cp.async issue substitution (defined in the pipelined loop's body)? */
static int substituted(const CgCudaGen *g, const KirValue *v)
{
    return g->subst_body && (v == g->subst_iv || g->v[v->id].blk == g->subst_body);
}

static const char *scalar_expr(CgCudaGen *g, const KirInst *in);

const char *cg_cuda_scalar(CgCudaGen *g, const KirValue *v)
{
    const CgCudaVal *V = val(g, v);
    if (!substituted(g, v)) return V->name;
    if (v == g->subst_iv) return g->subst_name;
    const char *name = memo_find(g, v->id, 0, 0, 1);
    if (name) return name;
    KILN_ASSERT(V->def); /* the pipeline planner admits only recomputable scalars */
    const char *e = scalar_expr(g, V->def);
    name = cg_cuda_fmt(g, "e%d_n", V->num);
    cg_cuda_line(g, "const %s %s = %s;", cg_cuda_reg_type(v->type.dtype), name, e);
    memo_add(g, v->id, 0, 0, 1, name);
    return name;
}

static const char *const src_name[] = {"r", "c", "0"};

/* For an expand or broadcast, the sources its operand is read at (into *rs, *cs); 0 for any other op. */
static int reshape_srcs(const KirInst *in, int *rs, int *cs)
{
    int r = *rs, c = *cs, xm, xn;
    if (in->op == KIR_OP_EXPAND) {
        *rs = in->i == 0 ? r : CG_CUDA_SRC_0, *cs = in->i == 0 ? c : r;
        return 1;
    }
    if (in->op != KIR_OP_BROADCAST) return 0;
    cg_cuda_shape(&in->ops[0]->type, &xm, &xn);
    *rs = xm == 1 ? CG_CUDA_SRC_0 : r, *cs = xm == 1 ? c : CG_CUDA_SRC_0;
    return 1;
}

/* VIRT value v at the point whose row is src `rs` and column is src `cs` (cg_cuda_impl.h). */
static const char *virt(CgCudaGen *g, const KirValue *v, int rs, int cs)
{
    const CgCudaVal *V = val(g, v);
    const KirInst *in = V->def;
    int m, n;
    cg_cuda_shape(&v->type, &m, &n);
    if (m == 1) rs = CG_CUDA_SRC_0;
    if (n == 1) cs = CG_CUDA_SRC_0;
    switch (in->op) {
    case KIR_OP_ARANGE: return src_name[cs];
    case KIR_OP_SPLAT: return cg_cuda_scalar(g, in->ops[0]);
    default: break;
    }
    if (reshape_srcs(in, &rs, &cs)) return virt(g, in->ops[0], rs, cs);
    int subst = g->subst_body != NULL;
    const char *name = memo_find(g, v->id, rs, cs, subst);
    if (name) return name;
    if (in->op == KIR_OP_LOAD) { /* a gather or a broadcast vector (cg_cuda_layout.c: virt_load) */
        const char *off = virt(g, in->ops[1], rs, cs);
        const char *ld = cg_cuda_from_mem(
            g, v->type.dtype, cg_cuda_fmt(g, "__ldg(%s + %s)", cg_cuda_scalar(g, in->ops[0]), off));
        const char *e = ld;
        if (in->n_ops > 2) {
            const KirValue *mk = in->ops[2];
            e = cg_cuda_fmt(g, "(%s ? %s : %s)", mk->type.rank ? virt(g, mk, rs, cs) : cg_cuda_scalar(g, mk),
                            ld, in->n_ops > 3 ? cg_cuda_scalar(g, in->ops[3]) : "0");
        }
        name = cg_cuda_fmt(g, "e%d_%s%s%s", V->num, src_name[rs], src_name[cs], subst ? "_n" : "");
        cg_cuda_line(g, "const %s %s = %s;", cg_cuda_reg_type(v->type.dtype), name, e);
        memo_add(g, v->id, rs, cs, subst, name);
        return name;
    }
    const char *o[3] = {NULL, NULL, NULL};
    for (int k = 0; k < in->n_ops && k < 3; k++)
        o[k] = in->ops[k]->type.rank ? virt(g, in->ops[k], rs, cs) : cg_cuda_scalar(g, in->ops[k]);
    const char *e = elem_expr(g, in, o);
    int ident = (m == 1 || rs == CG_CUDA_SRC_R) && (n == 1 || cs == CG_CUDA_SRC_C);
    name = ident ? cg_cuda_fmt(g, "e%d%s", V->num, subst ? "_n" : "")
                 : cg_cuda_fmt(g, "e%d_%s%s%s", V->num, src_name[rs], src_name[cs], subst ? "_n" : "");
    cg_cuda_line(g, "const %s %s = %s;", cg_cuda_reg_type(v->type.dtype), name, e);
    memo_add(g, v->id, rs, cs, subst, name);
    return name;
}

/* Evaluates (memoized in the current scope) the parts of VIRT value v, read at row src rs and column src
 * cs, that do not depend on source `pos`: what a line of a tile shares, computed once per line. */
static void virt_line(CgCudaGen *g, const KirValue *v, int rs, int cs, int pos, int depth)
{
    if (!v->type.rank || val(g, v)->form != CG_CUDA_VIRT || depth > 64) return;
    const KirInst *in = val(g, v)->def;
    int m, n;
    cg_cuda_shape(&v->type, &m, &n);
    if (m == 1) rs = CG_CUDA_SRC_0;
    if (n == 1) cs = CG_CUDA_SRC_0;
    if (rs != pos && cs != pos) {
        virt(g, v, rs, cs);
        return;
    }
    if (in->op == KIR_OP_ARANGE || in->op == KIR_OP_SPLAT) return;
    if (reshape_srcs(in, &rs, &cs)) {
        virt_line(g, in->ops[0], rs, cs, pos, depth + 1);
        return;
    }
    for (int k = 0; k < in->n_ops && k < 3; k++)
        virt_line(g, in->ops[k], rs, cs, pos, depth + 1);
}

void cg_cuda_at_line(CgCudaGen *g, const KirValue *v, int line_dim)
{
    if (val(g, v)->form == CG_CUDA_VIRT)
        virt_line(g, v, CG_CUDA_SRC_R, CG_CUDA_SRC_C, line_dim ? CG_CUDA_SRC_R : CG_CUDA_SRC_C, 0);
}

int cg_cuda_has_gather(const CgCudaGen *g, const KirValue *v, int depth)
{
    const CgCudaVal *V = &g->v[v->id];
    if (V->form != CG_CUDA_VIRT || !V->def || depth > 64) return 0;
    if (V->def->op == KIR_OP_LOAD) return 1;
    for (int k = 0; k < V->def->n_ops; k++)
        if (cg_cuda_has_gather(g, V->def->ops[k], depth + 1)) return 1;
    return 0;
}

const char *cg_cuda_conv_find(CgCudaGen *g, int vid, int lay)
{
    for (int i = 0; i < g->n_conv; i++)
        if (g->conv[i].vid == vid && g->conv[i].lay == lay) return g->conv[i].name;
    return NULL;
}

void cg_cuda_prepare(CgCudaGen *g, const KirValue *v, int lay)
{
    const CgCudaVal *V = val(g, v);
    if (V->form != CG_CUDA_REG || V->lay == lay || cg_cuda_conv_find(g, v->id, lay)) return;
    const char *name = cg_cuda_fmt(g, "%s_L%d", V->name, lay);
    cg_cuda_emit_convert(g, v, lay, name);
    if (g->n_conv == g->cap_conv) {
        int cap = g->cap_conv ? 2 * g->cap_conv : 16;
        CgCudaConv *p = ir_arena_alloc(g->a, sizeof *p * (size_t)cap);
        if (!p) {
            g->oom = 1;
            return;
        }
        if (g->n_conv) memcpy(p, g->conv, sizeof *p * (size_t)g->n_conv);
        g->conv = p;
        g->cap_conv = cap;
    }
    g->conv[g->n_conv++] = (CgCudaConv){v->id, lay, g->depth ? g->scope_stack[g->depth - 1] : 0, name};
}

const char *cg_cuda_at(CgCudaGen *g, const KirValue *v, int lay)
{
    const CgCudaVal *V = val(g, v);
    switch (V->form) {
    case CG_CUDA_PTR:
    case CG_CUDA_SCALAR: return cg_cuda_scalar(g, v);
    case CG_CUDA_VIRT: return virt(g, v, CG_CUDA_SRC_R, CG_CUDA_SRC_C);
    case CG_CUDA_REG: {
        if (V->lay == lay) return cg_cuda_fmt(g, "%s[s]", V->name);
        const char *name = cg_cuda_conv_find(g, v->id, lay);
        KILN_ASSERT(name); /* cg_cuda_prepare first */
        return cg_cuda_fmt(g, "%s[s]", name);
    }
    default: UNREACHABLE();
    }
}

void cg_cuda_slot_loop(CgCudaGen *g, int lay, int step)
{
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_open(g, "for (int s = 0; s < %d; s += %d)", g->lay[lay].slots, step);
    cg_cuda_line(g, "int r, c;");
    cg_cuda_line(g, "const bool ok = L%d_at(s, r, c);", lay);
}

const char *cg_cuda_materialize(CgCudaGen *g, const KirValue *v, int lay)
{
    const char *name = cg_cuda_fmt(g, "%s_L%d", val(g, v)->name, lay);
    cg_cuda_line(g, "%s %s[%d];", cg_cuda_reg_type(v->type.dtype), name, g->lay[lay].slots);
    cg_cuda_slot_loop(g, lay, 1);
    cg_cuda_line(g, "%s[s] = %s;", name, cg_cuda_at(g, v, lay));
    cg_cuda_close(g);
    return name;
}

void cg_cuda_declare(CgCudaGen *g, const KirValue *v)
{
    const CgCudaVal *V = val(g, v);
    cg_cuda_line(g, "%s %s[%d];", cg_cuda_reg_type(v->type.dtype), V->name, g->lay[V->lay].slots);
}

void cg_cuda_scratch(CgCudaGen *g, int64_t bytes)
{
    if (bytes > g->scratch_bytes) g->scratch_bytes = bytes > (1 << 30) ? (1 << 30) : (int)bytes;
    cg_cuda_line(g, "__syncthreads();");
}

/* ---- scalars ---- */

static const char *scalar_expr(CgCudaGen *g, const KirInst *in)
{
    KirDtype rt = in->res[0]->type.dtype;
    switch (in->op) {
    case KIR_OP_CONST:
        return kir_dtype_is_float(rt) ? float_literal(g, rt, in->f) : int_literal(g, rt, in->i);
    case KIR_OP_PID:
    case KIR_OP_NPROG:
        return cg_cuda_fmt(g, "(int)%s.%c", in->op == KIR_OP_PID ? "blockIdx" : "gridDim", "xyz"[in->i]);
    default: {
        const char *o[3] = {NULL, NULL, NULL};
        for (int k = 0; k < in->n_ops && k < 3; k++)
            o[k] = cg_cuda_scalar(g, in->ops[k]);
        return elem_expr(g, in, o);
    }
    }
}

/* ---- instructions ---- */

static void emit_elem(CgCudaGen *g, const KirInst *in)
{
    const KirValue *res = in->res[0];
    const CgCudaVal *R = val(g, res);
    if (R->form == CG_CUDA_VIRT) return;
    if (R->form == CG_CUDA_PTR) { /* select between two pointers (const-ness follows the arms) */
        cg_cuda_line(g, "auto const %s = %s;", R->name, scalar_expr(g, in));
        return;
    }
    if (R->form == CG_CUDA_SCALAR) {
        cg_cuda_line(g, "const %s %s = %s;", cg_cuda_reg_type(res->type.dtype), R->name, scalar_expr(g, in));
        return;
    }
    int lay = R->lay;
    for (int k = 0; k < in->n_ops; k++)
        cg_cuda_prepare(g, in->ops[k], lay);
    cg_cuda_declare(g, res);
    cg_cuda_slot_loop(g, lay, 1);
    const char *o[3] = {NULL, NULL, NULL};
    for (int k = 0; k < in->n_ops && k < 3; k++)
        o[k] = cg_cuda_at(g, in->ops[k], lay);
    cg_cuda_line(g, "%s[s] = %s;", R->name, elem_expr(g, in, o));
    cg_cuda_close(g);
}

/* Copies value x (any form) into the REG array `dst` of layout lay, or assigns a scalar. */
void cg_cuda_assign(CgCudaGen *g, const char *dst, const KirValue *x, const KirValue *like)
{
    const CgCudaVal *D = val(g, like);
    if (!strcmp(dst, val(g, x)->name) && (D->form != CG_CUDA_REG || val(g, x)->lay == D->lay))
        return; /* itself */
    if (D->form != CG_CUDA_REG) {
        cg_cuda_line(g, "%s = %s;", dst, cg_cuda_scalar(g, x));
        return;
    }
    cg_cuda_prepare(g, x, D->lay);
    cg_cuda_slot_loop(g, D->lay, 1);
    cg_cuda_line(g, "%s[s] = %s;", dst, cg_cuda_at(g, x, D->lay));
    cg_cuda_close(g);
}

static void declare_like(CgCudaGen *g, const char *name, const KirValue *like, const char *init)
{
    const CgCudaVal *D = val(g, like);
    const char *ty = like->type.is_ptr ? cg_cuda_fmt(g, "%s *", cg_cuda_mem_type(like->type.dtype))
                                       : cg_cuda_reg_type(like->type.dtype);
    if (D->form == CG_CUDA_REG)
        cg_cuda_line(g, "%s %s[%d];", ty, name, g->lay[D->lay].slots);
    else if (init)
        cg_cuda_line(g, "%s %s = %s;", ty, name, init);
    else
        cg_cuda_line(g, "%s %s;", ty, name);
}

/* The loop-carried variables of a for, initialized from its inits. */
static void emit_iter_init(CgCudaGen *g, const KirInst *in)
{
    const KirBlock *body = in->body;
    for (int i = 1; i < body->n_args; i++) {
        const KirValue *arg = body->args[i], *init = in->ops[2 + i];
        const CgCudaVal *A = val(g, arg);
        if (A->form == CG_CUDA_REG) {
            declare_like(g, A->name, arg, NULL);
            cg_cuda_assign(g, A->name, init, arg);
        } else {
            declare_like(g, A->name, arg, cg_cuda_scalar(g, init));
        }
    }
}

/* The yield: next trip's loop-carried values, through temporaries when there are several (a yield may
 * read a carried value that an earlier assignment would overwrite). */
void cg_cuda_emit_yield(CgCudaGen *g, const KirInst *loop)
{
    const KirBlock *body = loop->body;
    const KirInst *y = body->insts[body->n_insts - 1];
    int n = y->n_ops;
    if (n == 0) return;
    if (n == 1) {
        if (y->ops[0] != body->args[1])
            cg_cuda_assign(g, val(g, body->args[1])->name, y->ops[0], body->args[1]);
        return;
    }
    cg_cuda_begin(g);
    const char *tmp[64];
    KILN_ASSERT(n <= 64);
    for (int i = 0; i < n; i++) {
        const KirValue *arg = body->args[1 + i];
        tmp[i] = cg_cuda_fmt(g, "y%d", i);
        if (val(g, arg)->form == CG_CUDA_REG) {
            declare_like(g, tmp[i], arg, NULL);
            cg_cuda_assign(g, tmp[i], y->ops[i], arg);
        } else {
            declare_like(g, tmp[i], arg, cg_cuda_scalar(g, y->ops[i]));
        }
    }
    for (int i = 0; i < n; i++) {
        const KirValue *arg = body->args[1 + i];
        const CgCudaVal *A = val(g, arg);
        if (A->form == CG_CUDA_REG) {
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_line(g, "for (int s = 0; s < %d; s++) %s[s] = %s[s];", g->lay[A->lay].slots, A->name,
                         tmp[i]);
        } else {
            cg_cuda_line(g, "%s = %s;", A->name, tmp[i]);
        }
    }
    cg_cuda_close(g);
}

static void emit_for(CgCudaGen *g, const KirInst *in)
{
    const KirBlock *body = in->body;
    const CgCudaPipe *p = cg_cuda_pipe_of(g, in);
    emit_iter_init(g, in);
    if (p) {
        cg_cuda_emit_pipelined_for(g, in, p);
        return;
    }
    int stores = cg_cuda_has_store(body);
    cg_cuda_open(g, "for (int %s = %s; %s < %s; %s += %s)", val(g, body->args[0])->name,
                 cg_cuda_scalar(g, in->ops[0]), val(g, body->args[0])->name, cg_cuda_scalar(g, in->ops[1]),
                 val(g, body->args[0])->name, cg_cuda_scalar(g, in->ops[2]));
    if (stores) g->pending_store = 1;
    cg_cuda_emit_block(g, body);
    cg_cuda_emit_yield(g, in);
    cg_cuda_close(g);
    if (stores) g->pending_store = 1;
}

/* arrive (kir_ops.def): every thread fences its earlier writes and meets the others at a barrier; thread 0
 * takes the ticket; a second barrier hands it to all, and a fence orders their later loads after it. */
static void emit_arrive(CgCudaGen *g, const KirInst *in)
{
    const char *r = val(g, in->res[0])->name;
    cg_cuda_line(g, "__shared__ int %s_sh;", r);
    cg_cuda_line(g, "__threadfence();");
    cg_cuda_line(g, "__syncthreads();");
    cg_cuda_line(g, "if (threadIdx.x == 0) %s_sh = atomicAdd(%s + %s, 1);", r, cg_cuda_scalar(g, in->ops[0]),
                 cg_cuda_scalar(g, in->ops[1]));
    cg_cuda_line(g, "__syncthreads();");
    cg_cuda_line(g, "const int %s = %s_sh;", r, r);
    cg_cuda_line(g, "__threadfence();");
    g->pending_store = 0;
}

static void emit_inst(CgCudaGen *g, const KirInst *in)
{
    const CgCudaVal *R = in->n_res && in->op != KIR_OP_FOR ? val(g, in->res[0]) : NULL;
    switch (in->op) {
    case KIR_OP_PARAM:
    case KIR_OP_ARANGE:
    case KIR_OP_SPLAT:
    case KIR_OP_RET: return;
    case KIR_OP_CONST:
    case KIR_OP_PID:
    case KIR_OP_NPROG:
        cg_cuda_line(g, "const %s %s = %s;", cg_cuda_reg_type(in->res[0]->type.dtype), R->name,
                     scalar_expr(g, in));
        return;
    case KIR_OP_EXPAND:
        if (R->form == CG_CUDA_REG) /* the same registers: [N] is [1, N], and [N, 1] chunks along dim 0 */
            g->v[in->res[0]->id].name = val(g, in->ops[0])->name;
        return;
    case KIR_OP_BROADCAST:
        if (R->form == CG_CUDA_REG) cg_cuda_emit_broadcast(g, in);
        return;
    case KIR_OP_REDUCE: cg_cuda_emit_reduce(g, in); return;
    case KIR_OP_LOAD:
        if (R->form != CG_CUDA_PIPE && R->form != CG_CUDA_VIRT) cg_cuda_emit_load(g, in, g->nc_ok);
        return;
    case KIR_OP_STORE:
    case KIR_OP_ATOMIC_ADD: cg_cuda_emit_store(g, in); return;
    case KIR_OP_ARRIVE: emit_arrive(g, in); return;
    case KIR_OP_DOT: cg_cuda_emit_dot(g, in); return;
    case KIR_OP_FOR: emit_for(g, in); return;
    case KIR_OP_YIELD: return; /* by the loop */
    default: emit_elem(g, in); return;
    }
}

void cg_cuda_emit_block(CgCudaGen *g, const KirBlock *blk)
{
    for (int i = 0; i < blk->n_insts; i++)
        emit_inst(g, blk->insts[i]);
}

/* ---- the program ---- */

/* Does every slot of every one of the T threads hold an element of BLOCKED or MMA layout L (so L<i>_at
 * can return true)? Checked by evaluating L<i>_at's own formulas for every thread and slot. */
static int layout_full(const CgCudaLayout *L, int T)
{
    for (int t = 0; t < T; t++)
        for (int s = 0; s < L->slots; s++) {
            if (L->kind == CG_CUDA_BLOCKED) {
                if (t + (s / L->vec) * T >= L->chunks) return 0;
                continue;
            }
            int lane = t % 32, warp = t / 32, f = s / 4, i = s % 4;
            int r = (warp / L->wn) * L->fm * 16 + (f / L->fn) * 16 + lane / 4 + (i / 2) * 8;
            int c = (warp % L->wn) * L->fn * 8 + (f % L->fn) * 8 + (lane % 4) * 2 + i % 2;
            if (warp >= L->wm * L->wn || r >= L->m || c >= L->n) return 0;
        }
    return 1;
}

static void print_layout(CgCudaGen *g, IrBuf *o, int i)
{
    const CgCudaLayout *L = &g->lay[i];
    int T = g->threads;
    if (L->kind == CG_CUDA_BLOCKED) {
        ir_buf_printf(
            o,
            "/* L%d: [%d,%d] blocked: chunks of %d along dim %d, %d chunks round-robin over %d threads; %d "
            "slots */\n",
            i, L->m, L->n, L->vec, L->order, L->chunks, T, L->slots);
        ir_buf_printf(o, "__device__ __forceinline__ bool L%d_at(int s, int &r, int &c)\n{\n", i);
        ir_buf_printf(o, "    const int q = (int)threadIdx.x + (s / %d) * %d, e = q * %d + s %% %d;\n",
                      L->vec, T, L->vec, L->vec);
        if (L->order)
            ir_buf_printf(o, "    r = e / %d;\n    c = e %% %d;\n", L->n, L->n);
        else
            ir_buf_printf(o, "    r = e %% %d;\n    c = e / %d;\n", L->m, L->m);
        if (layout_full(L, T)) /* every slot of every thread holds an element */
            ir_buf_printf(o, "    return true;\n}\n");
        else
            ir_buf_printf(o, "    return q < %d;\n}\n", L->chunks);
        return;
    }
    if (L->kind == CG_CUDA_ROWS) {
        int len = L->order ? L->n : L->m;
        ir_buf_printf(
            o, "/* L%d: [%d,%d] rows of mma.sync accumulators: %dx%d warps, %d row fragments; %d slots */\n",
            i, L->m, L->n, L->wm, L->wn, L->fm, L->slots);
        ir_buf_printf(o, "__device__ __forceinline__ bool L%d_at(int s, int &r, int &c)\n{\n", i);
        ir_buf_printf(o, "    const int lane = (int)threadIdx.x %% 32, warp = (int)threadIdx.x / 32;\n");
        ir_buf_printf(o, "    const int e = (warp / %d) * %d + (s / 2) * 16 + lane / 4 + (s %% 2) * 8;\n",
                      L->wn, L->fm * 16);
        ir_buf_printf(o, "    %s = e;\n    %s = 0;\n", L->order ? "c" : "r", L->order ? "r" : "c");
        ir_buf_printf(o, "    return warp < %d && e < %d;\n}\n", L->wm * L->wn, len);
        return;
    }
    ir_buf_printf(
        o,
        "/* L%d: [%d,%d] mma.sync m16n8 accumulators: %dx%d warps, %dx%d fragments per warp; %d slots */\n",
        i, L->m, L->n, L->wm, L->wn, L->fm, L->fn, L->slots);
    ir_buf_printf(o, "__device__ __forceinline__ bool L%d_at(int s, int &r, int &c)\n{\n", i);
    ir_buf_printf(o, "    const int lane = (int)threadIdx.x %% 32, warp = (int)threadIdx.x / 32, f = s / 4, "
                     "i = s %% 4;\n");
    ir_buf_printf(o, "    r = (warp / %d) * %d + (f / %d) * 16 + lane / 4 + (i / 2) * 8;\n", L->wn,
                  L->fm * 16, L->fn);
    ir_buf_printf(o, "    c = (warp %% %d) * %d + (f %% %d) * 8 + (lane %% 4) * 2 + i %% 2;\n", L->wn,
                  L->fn * 8, L->fn);
    if (layout_full(L, T)) /* the fragments tile the block's warps and the tile */
        ir_buf_printf(o, "    return true;\n}\n");
    else
        ir_buf_printf(o, "    return warp < %d && r < %d && c < %d;\n}\n", L->wm * L->wn, L->m, L->n);
}

static void print_params(CgCudaGen *g, IrBuf *o, int nc_ok)
{
    const KirKernel *k = g->k;
    for (int i = 0; i < k->n_params; i++) {
        const KirParam *p = &k->params[i];
        const char *name = g->pname[i];
        ir_buf_printf(o, "%s", i ? ",\n    " : "\n    ");
        if (p->type.is_ptr) {
            int ro = p->flags & KIR_PARAM_RDONLY;
            int restrict_ = ro && ((p->flags & KIR_PARAM_NOALIAS) || nc_ok);
            ir_buf_printf(o, "%s%s *%s%s", ro ? "const " : "", cg_cuda_mem_type(p->type.dtype),
                          restrict_ ? "__restrict__ " : "", name);
        } else if (kir_dtype_is_float(p->type.dtype) && p->type.dtype != KIR_F32) {
            ir_buf_printf(o, "%s %s", cg_cuda_mem_type(p->type.dtype), name);
        } else {
            ir_buf_printf(o, "%s %s",
                          p->type.dtype == KIR_I1 ? "unsigned char" : cg_cuda_reg_type(p->type.dtype), name);
        }
        ir_buf_printf(o, " /* %s%s */", kir_dtype_name(p->type.dtype), p->type.is_ptr ? "*" : "");
    }
}

void cg_cuda_entry_name(const KirKernel *k, char *out, size_t n)
{
    size_t j = 0;
    if (!n) return;
    if (k->name[0] >= '0' && k->name[0] <= '9')
        for (const char *p = "k_"; *p && j + 1 < n; p++)
            out[j++] = *p;
    for (const char *p = k->name; *p && j + 1 < n; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        out[j++] = ok ? c : '_';
    }
    out[j] = 0;
}

IrStatus cg_cuda_emit_kernel(CgCudaGen *g, IrBuf *out, CgCudaLaunch *launch)
{
    const KirKernel *k = g->k;
    g->ind = 1;
    g->nc_ok = cg_cuda_stores_noalias(g, k->body);
    g->pname = ir_arena_alloc(g->a, sizeof *g->pname * (size_t)(k->n_params + 1));
    if (!g->pname) return ir_diag_set(g->d, IR_ERR_NOMEM, "kernel %s: out of memory", k->name);
    for (int i = 0; i < k->n_params; i++) { /* narrow float and i1 scalars arrive as their encodings */
        const KirParam *p = &k->params[i];
        CgCudaVal *V = &g->v[p->value->id];
        g->pname[i] = V->name;
        if (p->type.is_ptr ||
            (p->type.dtype != KIR_I1 && !(kir_dtype_is_float(p->type.dtype) && p->type.dtype != KIR_F32)))
            continue;
        V->name = cg_cuda_fmt(g, "s%d", V->num);
        cg_cuda_line(g, "const %s %s = %s;", cg_cuda_reg_type(p->type.dtype), V->name,
                     cg_cuda_from_mem(g, p->type.dtype, g->pname[i]));
    }
    cg_cuda_emit_block(g, k->body);
    if (g->oom || g->body.oom) return ir_diag_set(g->d, IR_ERR_NOMEM, "kernel %s: out of memory", k->name);

    const KirLimits *lim = cg_target_limits(g->t);
    int64_t smem = (int64_t)g->pipe_bytes + g->scratch_bytes;
    smem = (smem + 15) / 16 * 16;
    if (g->threads > 1024 || (lim && g->threads > lim->max_threads))
        return ir_diag_set(g->d, IR_ERR_LIMIT, "kernel %s: %d threads per block exceed %s's limit", k->name,
                           g->threads, g->t->name);
    if (lim && smem > lim->smem_bytes)
        return ir_diag_set(g->d, IR_ERR_LIMIT, "kernel %s: needs %lld bytes of shared memory, %s has %d",
                           k->name, (long long)smem, g->t->name, lim->smem_bytes);
    launch->threads = g->threads;
    launch->smem_bytes = (int)smem;

    char hash[17], entry[256];
    ir_hash64_hex(kir_hash(k), hash);
    cg_cuda_entry_name(k, entry, sizeof entry);
    IrBuf cfg = {0};
    kir_config_print(&k->cfg, &cfg);
    ir_buf_printf(out, "/* Generated by kiln %s (CUDA backend) for %s. Do not edit.\n", KILN_VERSION_STRING,
                  g->t->name);
    ir_buf_printf(out, " * kernel %s (family %s), kernel IR hash %s\n", k->name, k->family, hash);
    ir_buf_printf(out, " * config %s\n", cfg.s ? cfg.s : "");
    ir_buf_free(&cfg);
    ir_buf_printf(out, " * launch: grid");
    for (int i = 0; i < 3; i++) {
        const KirGridDim *gd = &k->grid[i];
        if (gd->param < 0)
            ir_buf_printf(out, " %lld", (long long)gd->c);
        else
            ir_buf_printf(out, " cdiv(%s*%lld,%lld)", k->params[gd->param].name, (long long)gd->mul,
                          (long long)gd->div);
    }
    ir_buf_printf(out, "; block %d threads; %d bytes of dynamic shared memory\n */\n", g->threads,
                  launch->smem_bytes);
    ir_buf_printf(out, "#include \"kiln_device.cuh\"\n\n");
    ir_buf_printf(
        out, "/* Layouts: L<i>_at(s, r, c) maps a thread's slot s to its tile element (r, c); false when "
             "the slot holds none. */\n");
    for (int i = 0; i < g->n_lay; i++)
        print_layout(g, out, i);
    int nc_ok = g->nc_ok;
    if (k->min_blocks > 0) /* ptxas caps registers so that many programs fit an SM (spilling if it must) */
        ir_buf_printf(out, "\nextern \"C\" __global__ void __launch_bounds__(%d, %d) %s(", g->threads,
                      k->min_blocks, entry);
    else
        ir_buf_printf(out, "\nextern \"C\" __global__ void __launch_bounds__(%d) %s(", g->threads, entry);
    print_params(g, out, nc_ok);
    ir_buf_printf(out, ")\n{\n");
    ir_buf_printf(out, "    extern __shared__ __align__(128) unsigned char kd_smem[];\n");
    ir_buf_printf(out, "    unsigned char *const kd_scratch = kd_smem + %d;\n", g->pipe_bytes);
    ir_buf_put(out, g->body.s ? g->body.s : "", g->body.len);
    ir_buf_printf(out, "}\n");
    if (out->oom) return ir_diag_set(g->d, IR_ERR_NOMEM, "kernel %s: out of memory", k->name);
    return IR_OK;
}
