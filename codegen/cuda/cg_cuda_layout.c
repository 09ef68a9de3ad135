/* cg_cuda_layout.c — the CUDA backend's analysis: value numbering, axis info, forms and layouts.
 *
 * Forms (cg_cuda_impl.h): scalars are uniform C variables; tiles built only from arange, splat and
 * cheap element-wise ops are VIRT (recomputed from coordinates where used, so index arithmetic, masks and
 * broadcasts of them cost no registers and no shared memory); every other tile (including
 * transcendentals and float division of VIRT tiles) is REG, distributed by a layout. Layout choice, forward
 * over the IR: loads take the BLOCKED layout of their offsets' contiguous dimension (coalesced, 16-byte
 * vectors) or, when they only feed dots' A operands through element-wise ops (a weight tile dequantized
 * from its loads, count_afeeds), the MMA layout, so the whole chain runs in the A fragments' registers;
 * dot results the mma.sync accumulator layout, reduce and broadcast results the canonical BLOCKED
 * layout, element-wise results the layout of their first MMA operand, else of their first REG operand (others
 * are converted at use). Loop-carried values iterate to a fixed point: a carried tile takes the layout its
 * yield produces.
 *
 * Axis info (contiguity, constancy, divisibility per dimension, Triton's AxisInfo in spirit) is what lets
 * a load or store use vector accesses and a dot loop use cp.async; every rule is conservative.
 */
#include "cg_cuda_impl.h"

#include <stdint.h>
#include <string.h>

static int imin(int a, int b)
{
    return a < b ? a : b;
}

static int imax(int a, int b)
{
    return a > b ? a : b;
}

/* Largest power of two dividing x, capped at BIG (0 gives BIG). */
static int pow2_div(int64_t x)
{
    if (x == 0) return CG_CUDA_BIG;
    uint64_t u = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
    int p = 1;
    while (!(u & 1) && p < CG_CUDA_BIG) {
        u >>= 1;
        p <<= 1;
    }
    return p;
}

void cg_cuda_shape(const KirType *t, int *m, int *n)
{
    *m = t->rank == 2 ? t->shape[0] : 1;
    *n = t->rank == 2 ? t->shape[1] : t->rank == 1 ? t->shape[0] : 1;
}

int cg_cuda_dot_is_mma(KirDtype t)
{
    return t == KIR_BF16 || t == KIR_F16 || t == KIR_F8E4M3;
}

/* ---- layouts ---- */

int cg_cuda_layout_intern(CgCudaGen *g, const CgCudaLayout *l)
{
    for (int i = 0; i < g->n_lay; i++)
        if (!memcmp(&g->lay[i], l, sizeof *l)) return i;
    if (g->n_lay == g->cap_lay) {
        int cap = g->cap_lay ? 2 * g->cap_lay : 16;
        CgCudaLayout *p = ir_arena_alloc(g->a, sizeof *p * (size_t)cap);
        if (!p) {
            g->oom = 1;
            return -1;
        }
        if (g->n_lay) memcpy(p, g->lay, sizeof *p * (size_t)g->n_lay);
        g->lay = p;
        g->cap_lay = cap;
    }
    g->lay[g->n_lay] = *l;
    return g->n_lay++;
}

int cg_cuda_layout_blocked(CgCudaGen *g, int m, int n, const CgCudaAxis *ax)
{
    CgCudaLayout l;
    memset(&l, 0, sizeof l);
    l.kind = CG_CUDA_BLOCKED;
    l.m = m;
    l.n = n;
    l.order = 1;
    /* chunks along dim 0 when the values run (contiguous, or constant: packed words, group scales) along
     * dim 0 only */
    if (m > 1 && (n == 1 ||
                  (ax && ax->contig[1] < 2 && (ax->contig[0] >= 2 || (ax->cnst[0] >= 2 && ax->cnst[1] < 2)))))
        l.order = 0;
    int len = l.order ? n : m, numel = m * n;
    /* 8 elements per chunk (16-byte accesses for 2-byte dtypes) unless that leaves threads idle */
    l.vec = 8;
    while (l.vec > 1 && (len % l.vec || numel / l.vec < g->threads))
        l.vec /= 2;
    l.chunks = numel / l.vec;
    l.slots = l.vec * ((l.chunks + g->threads - 1) / g->threads);
    return cg_cuda_layout_intern(g, &l);
}

int cg_cuda_layout_mma(CgCudaGen *g, int m, int n)
{
    int mt = (m + 15) / 16, nt = (n + 7) / 8, bw = 1, bh = 1, best_used = 0, best_cost = 0;
    for (int wm = 1; wm <= g->warps; wm++)
        for (int wn = 1; wm * wn <= g->warps; wn++) {
            if (mt % wm || nt % wn || (g->mma_rows && wn > 1)) continue;
            int used = wm * wn, cost = (mt / wm) * 16 + (nt / wn) * 8;
            if (used > best_used || (used == best_used && cost < best_cost)) {
                best_used = used;
                best_cost = cost;
                bw = wm;
                bh = wn;
            }
        }
    CgCudaLayout l;
    memset(&l, 0, sizeof l);
    l.kind = CG_CUDA_MMA;
    l.m = m;
    l.n = n;
    l.order = 1;
    l.vec = 2;
    l.wm = bw;
    l.wn = bh;
    l.fm = mt / bw;
    l.fn = nt / bh;
    l.slots = l.fm * l.fn * 4;
    return cg_cuda_layout_intern(g, &l);
}

int cg_cuda_layout_rows(CgCudaGen *g, int mma, int order)
{
    CgCudaLayout l, p = g->lay[mma];
    memset(&l, 0, sizeof l);
    l.kind = CG_CUDA_ROWS;
    l.m = order ? 1 : p.m;
    l.n = order ? p.m : 1;
    l.order = order;
    l.vec = 1;
    l.wm = p.wm;
    l.wn = p.wn;
    l.fm = p.fm;
    l.slots = 2 * p.fm;
    return cg_cuda_layout_intern(g, &l);
}

int cg_cuda_layout_mma_of_rows(CgCudaGen *g, int rows, int n)
{
    CgCudaLayout l, p = g->lay[rows];
    memset(&l, 0, sizeof l);
    l.kind = CG_CUDA_MMA;
    l.m = p.order ? p.n : p.m;
    l.n = n;
    l.order = 1;
    l.vec = 2;
    l.wm = p.wm;
    l.wn = p.wn;
    l.fm = p.fm;
    l.fn = ((n + 7) / 8 + p.wn - 1) / p.wn;
    l.slots = l.fm * l.fn * 4;
    return cg_cuda_layout_intern(g, &l);
}

static int lay_kind(const CgCudaGen *g, const KirValue *v)
{
    const CgCudaVal *V = &g->v[v->id];
    return V->form == CG_CUDA_REG ? (int)g->lay[V->lay].kind : -1;
}

/* ---- column facts ---- */

int cg_cuda_col_value(const KirValue *v, int64_t c, int64_t *out)
{
    const KirInst *d = v->def;
    if (!d || kir_dtype_is_float(v->type.dtype)) return 0;
    if (d->op == KIR_OP_CONST) return *out = d->i, 1;
    if (d->op == KIR_OP_ARANGE) return *out = c, 1;
    if (d->op == KIR_OP_SPLAT) return cg_cuda_col_value(d->ops[0], c, out);
    if (d->op == KIR_OP_EXPAND) return d->i == 0 && cg_cuda_col_value(d->ops[0], c, out);
    if (d->op == KIR_OP_BROADCAST) /* of a row [1, N], or of [1, 1] */
        return d->ops[0]->type.rank == 2 && d->ops[0]->type.shape[0] == 1 &&
               cg_cuda_col_value(d->ops[0], d->ops[0]->type.shape[1] == 1 ? 0 : c, out);
    if (!(kir_op_flags(d->op) & KIR_F_BINARY) || (kir_op_flags(d->op) & KIR_F_CMP)) return 0;
    int64_t a, b, r;
    if (!cg_cuda_col_value(d->ops[0], c, &a) || !cg_cuda_col_value(d->ops[1], c, &b)) return 0;
    switch (d->op) {
    case KIR_OP_ADD: r = a + b; break;
    case KIR_OP_SUB: r = a - b; break;
    case KIR_OP_MUL: r = a * b; break;
    case KIR_OP_DIV:
    case KIR_OP_REM:
        if (!b) return 0;
        r = d->op == KIR_OP_DIV ? a / b : a % b; /* C's truncation, as the IR's */
        break;
    case KIR_OP_AND: r = a & b; break;
    case KIR_OP_OR: r = a | b; break;
    case KIR_OP_SHL:
    case KIR_OP_SHR:
        if (b < 0 || b >= 32 || a < 0) return 0;
        r = d->op == KIR_OP_SHL ? a << b : a >> b;
        break;
    default: return 0;
    }
    if (r < INT32_MIN || r > INT32_MAX) return 0; /* the i32 arithmetic would wrap: give up */
    return *out = r, 1;
}

int64_t cg_cuda_col_div(const CgCudaGen *g, const KirValue *v, int64_t c)
{
    const KirInst *d = v->def;
    int64_t x;
    if (c >= 0 && cg_cuda_col_value(v, c, &x)) return pow2_div(x);
    if (!d || (v->type.rank == 0 && d->op == KIR_OP_CONST)) /* a loop's iv: its axis info */
        return v->type.rank ? 1 : d ? pow2_div(d->i) : g->v[v->id].ax.div[0];
    switch (d->op) {
    case KIR_OP_SPLAT: return cg_cuda_col_div(g, d->ops[0], c);
    case KIR_OP_EXPAND: return cg_cuda_col_div(g, d->ops[0], d->i == 0 ? c : -1); /* -1: every index */
    case KIR_OP_BROADCAST: return cg_cuda_col_div(g, d->ops[0], d->ops[0]->type.shape[1] == 1 ? 0 : c);
    case KIR_OP_ADD:
    case KIR_OP_SUB:
        return imin((int)cg_cuda_col_div(g, d->ops[0], c), (int)cg_cuda_col_div(g, d->ops[1], c));
    case KIR_OP_MUL: {
        int64_t a = cg_cuda_col_div(g, d->ops[0], c) * cg_cuda_col_div(g, d->ops[1], c);
        return a < CG_CUDA_BIG ? a : CG_CUDA_BIG;
    }
    case KIR_OP_SHR:
    case KIR_OP_DIV: { /* by a power of two q: x / q keeps the rest of x's divisor */
        const KirInst *k = d->ops[1]->def;
        int64_t a = cg_cuda_col_div(g, d->ops[0], c), q = k && k->op == KIR_OP_CONST ? k->i : 0;
        if (d->op == KIR_OP_SHR) q = q >= 0 && q < 31 ? (int64_t)1 << q : 0;
        return q > 0 && pow2_div(q) == q && a >= q ? a / q : 1;
    }
    default: return v->type.rank ? 1 : g->v[v->id].ax.div[0]; /* arange at every index: 1 */
    }
}

int cg_cuda_col_delta(const KirValue *v, int64_t c1, int64_t c2, int64_t *out)
{
    const KirInst *d = v->def;
    int64_t a, b;
    if (v->type.rank == 0) return *out = 0, 1;
    if (cg_cuda_col_value(v, c1, &a) && cg_cuda_col_value(v, c2, &b)) return *out = b - a, 1;
    if (!d) return 0;
    if (d->op == KIR_OP_EXPAND) return d->i == 1 ? (*out = 0, 1) : cg_cuda_col_delta(d->ops[0], c1, c2, out);
    if (d->op == KIR_OP_BROADCAST) /* of a column [M, 1]: constant along the columns */
        return d->ops[0]->type.shape[1] == 1 ? (*out = 0, 1) : cg_cuda_col_delta(d->ops[0], c1, c2, out);
    if (d->op != KIR_OP_ADD && d->op != KIR_OP_SUB) return 0;
    if (!cg_cuda_col_delta(d->ops[0], c1, c2, &a) || !cg_cuda_col_delta(d->ops[1], c1, c2, &b)) return 0;
    return *out = d->op == KIR_OP_ADD ? a + b : a - b, 1;
}

/* ---- axis info ---- */

static CgCudaAxis ax_scalar(int div)
{
    CgCudaAxis a = {{1, 1}, {CG_CUDA_BIG, CG_CUDA_BIG}, {div, div}};
    return a;
}

static CgCudaAxis ax_unknown(const KirType *t)
{
    CgCudaAxis a = {{1, 1}, {1, 1}, {1, 1}};
    int m, n;
    cg_cuda_shape(t, &m, &n);
    if (t->rank == 0) return ax_scalar(1);
    if (m == 1) a.cnst[0] = CG_CUDA_BIG;
    if (n == 1) a.cnst[1] = CG_CUDA_BIG;
    return a;
}

/* Divisibility of every value. */
static int ax_all(const CgCudaAxis *a)
{
    return imax(a->contig[0] == 1 ? a->div[0] : 1, a->contig[1] == 1 ? a->div[1] : 1);
}

static CgCudaAxis ax_meet(const CgCudaAxis *a, const CgCudaAxis *b)
{
    CgCudaAxis r;
    for (int d = 0; d < 2; d++) {
        r.contig[d] = imin(a->contig[d], b->contig[d]);
        r.cnst[d] = imin(a->cnst[d], b->cnst[d]);
        r.div[d] = imin(a->div[d], b->div[d]);
    }
    return r;
}

static const CgCudaAxis *axv(const CgCudaGen *g, const KirValue *v)
{
    return &g->v[v->id].ax;
}

static CgCudaAxis ax_binary(KirOp op, const CgCudaAxis *a, const CgCudaAxis *b)
{
    CgCudaAxis r;
    for (int d = 0; d < 2; d++) {
        int ca = a->contig[d], cb = b->contig[d], ka = a->cnst[d], kb = b->cnst[d];
        int c = 1, k = imin(ka, kb), div = 1;
        if (op == KIR_OP_ADD || op == KIR_OP_SUB) {
            c = imax(imin(ca, kb), op == KIR_OP_ADD ? imin(ka, cb) : 1);
            if (c == 1) {
                div = imin(ax_all(a), ax_all(b));
            } else {
                int da = ca > 1 ? imin(a->div[d], c) : a->div[d],
                    db = cb > 1 ? imin(b->div[d], c) : b->div[d];
                div = imin(da, db);
            }
        } else if (op == KIR_OP_MUL) {
            int64_t p = (int64_t)ax_all(a) * ax_all(b);
            div = p > CG_CUDA_BIG ? CG_CUDA_BIG : (int)p;
        } else if (op == KIR_OP_LT || op == KIR_OP_GE || op == KIR_OP_GT || op == KIR_OP_LE) {
            /* x < B with x contiguous from a multiple of L and B a multiple of L flips only at
             * multiples of L (likewise x >= B; and B > x, B <= x) */
            const CgCudaAxis *x = (op == KIR_OP_LT || op == KIR_OP_GE) ? a : b, *y = x == a ? b : a;
            if (x->contig[d] >= 2 && y->cnst[d] >= 2) {
                int l = imin(imin(x->contig[d], y->cnst[d]), imin(x->div[d], y->div[d]));
                k = imax(k, l);
            }
        }
        r.contig[d] = c;
        r.cnst[d] = k;
        r.div[d] = div;
    }
    return r;
}

static CgCudaAxis axis_of(CgCudaGen *g, const KirInst *in)
{
    const KirType *rt = &in->res[0]->type;
    const CgCudaAxis *x = in->n_ops ? axv(g, in->ops[0]) : NULL;
    CgCudaAxis r = ax_unknown(rt);
    if (kir_op_flags(in->op) & KIR_F_BINARY) {
        if (kir_dtype_is_float(in->ops[0]->type.dtype)) {
            if (rt->rank == 0) return ax_scalar(1);
            r = ax_binary(KIR_OP_EQ, x, axv(g, in->ops[1])); /* constancy only */
            return r;
        }
        r = ax_binary(in->op, x, axv(g, in->ops[1]));
        const KirInst *rhs = g->v[in->ops[1]->id].def;
        int64_t cv = rhs && rhs->op == KIR_OP_CONST && rt->rank > 0 ? rhs->i : 0; /* a constant operand */
        if (in->op == KIR_OP_SHR && cv >= 1 && cv < 16)
            for (int d = 0; d < 2; d++) { /* x >> s floors: constant over runs of 2^s contiguous from a
                                           * multiple of 2^s (also below zero; x / 2^s is not) */
                int l = imin(imin(x->contig[d], x->div[d]), 1 << cv);
                if (l >= 2) r.cnst[d] = imax(r.cnst[d], l);
            }
        if (in->op == KIR_OP_AND && cv >= 1 && cv < (1 << 16) && !(cv & (cv + 1)))
            for (int d = 0; d < 2; d++) { /* x & (2^s - 1): x's runs, cut at multiples of 2^s */
                int l = imin(imin(x->contig[d], x->div[d]), (int)cv + 1);
                if (l >= 2) r.contig[d] = imax(r.contig[d], l), r.div[d] = imax(r.div[d], l);
            }
        return rt->rank == 0 ? ax_scalar(r.div[0]) : r;
    }
    switch (in->op) {
    case KIR_OP_CONST: return ax_scalar(kir_dtype_is_int((KirDtype)in->i2) ? pow2_div(in->i) : 1);
    case KIR_OP_ARANGE: {
        int n = (int)in->i, c = pow2_div(n);
        if (c > n) c = n;
        r.contig[1] = c;
        r.cnst[1] = 1;
        r.div[1] = c == n ? CG_CUDA_BIG : c;
        r.cnst[0] = CG_CUDA_BIG;
        r.div[0] = n == 1 ? CG_CUDA_BIG : 1;
        return r;
    }
    case KIR_OP_SPLAT: return ax_scalar(x->div[0]);
    case KIR_OP_EXPAND:
        if (in->i == 0) return *x;
        r.contig[0] = x->contig[1];
        r.cnst[0] = x->cnst[1];
        r.div[0] = x->div[1];
        r.contig[1] = 1;
        r.cnst[1] = CG_CUDA_BIG;
        r.div[1] = ax_all(x);
        return r;
    case KIR_OP_BROADCAST: {
        int m, n;
        cg_cuda_shape(&in->ops[0]->type, &m, &n);
        r = *x;
        int d = m == 1 ? 0 : 1;
        r.contig[d] = 1;
        r.cnst[d] = CG_CUDA_BIG;
        r.div[d] = ax_all(x);
        return r;
    }
    case KIR_OP_SELECT: {
        const CgCudaAxis *a = axv(g, in->ops[1]), *b = axv(g, in->ops[2]);
        for (int d = 0; d < 2; d++) {
            r.contig[d] = 1;
            r.cnst[d] = imin(x->cnst[d], imin(a->cnst[d], b->cnst[d]));
            r.div[d] = kir_dtype_is_int(rt->dtype) ? imin(ax_all(a), ax_all(b)) : 1;
        }
        return rt->rank == 0 ? ax_scalar(r.div[0]) : r;
    }
    case KIR_OP_CAST: {
        KirDtype from = in->ops[0]->type.dtype, to = rt->dtype;
        int keep = (from == KIR_I32 || from == KIR_I64) && (to == KIR_I32 || to == KIR_I64);
        if (keep) return *x;
        if (rt->rank == 0) return ax_scalar(1);
        for (int d = 0; d < 2; d++) {
            r.contig[d] = 1;
            r.cnst[d] = x->cnst[d];
            r.div[d] = 1;
        }
        return r;
    }
    case KIR_OP_NEG:
    case KIR_OP_ABS:
    case KIR_OP_EXP:
    case KIR_OP_EXP2:
    case KIR_OP_LOG:
    case KIR_OP_SQRT:
    case KIR_OP_RSQRT:
    case KIR_OP_SIN:
    case KIR_OP_COS:
    case KIR_OP_FLOOR:
    case KIR_OP_RAND:
    case KIR_OP_LOAD: {
        const CgCudaAxis *c = in->op == KIR_OP_RAND || in->op == KIR_OP_LOAD ? axv(g, in->ops[1]) : x;
        if (rt->rank == 0) return ax_scalar(1);
        for (int d = 0; d < 2; d++)
            r.cnst[d] = c->cnst[d];
        return r;
    }
    default: return r;
    }
}

/* ---- forms and layouts ---- */

static CgCudaVal *val(CgCudaGen *g, const KirValue *v)
{
    return &g->v[v->id];
}

static int is_reg(const CgCudaGen *g, const KirValue *v)
{
    return g->v[v->id].form == CG_CUDA_REG;
}

/* Ops too costly to re-evaluate at every use (a virtual tile is recomputed per consumer and per element
 * of a broadcast): their tiles are computed once, in registers. */
static int expensive(const KirInst *in)
{
    switch (in->op) {
    case KIR_OP_EXP:
    case KIR_OP_EXP2:
    case KIR_OP_LOG:
    case KIR_OP_SQRT:
    case KIR_OP_RSQRT:
    case KIR_OP_SIN:
    case KIR_OP_COS: return 1;
    case KIR_OP_DIV: return kir_dtype_is_float(in->ops[0]->type.dtype);
    default: return 0;
    }
}

/* A load cheaper to redo at every use than to hold, from a read-only param that nothing in the kernel may
 * write, at VIRT offsets: an index gather (integers: a block table looked up by key position; as a VIRT
 * value it keeps the addresses computed from it VIRT, so a dot loop can issue its cp.async copies for any
 * trip, cg_cuda_dot.c), or a vector that is only broadcast (an epilogue's row or column scales: each
 * element of the accumulator reads its own, in the accumulator's layout, instead of the vector going
 * through shared memory twice to reach that layout). Each use re-reads it (an L1 hit). */
static int virt_load(const CgCudaGen *g, const KirInst *in)
{
    const CgCudaVal *P = &g->v[in->ops[0]->id], *V = &g->v[in->res[0]->id];
    int bcast = in->res[0]->type.rank == 1 && V->uses && V->expand_uses == V->uses;
    if (in->res[0]->type.rank == 0 || (!kir_dtype_is_int(in->res[0]->type.dtype) && !bcast) || !P->def ||
        P->def->op != KIR_OP_PARAM)
        return 0;
    unsigned f = g->k->params[P->def->i].flags;
    if (!(f & KIR_PARAM_RDONLY) || !(f & KIR_PARAM_NOALIAS)) return 0;
    for (int k = 1; k < in->n_ops; k++)
        if (g->v[in->ops[k]->id].form != CG_CUDA_VIRT && g->v[in->ops[k]->id].form != CG_CUDA_SCALAR)
            return 0;
    return in->n_ops < 4 || in->ops[3]->type.rank == 0;
}

/* Form and layout of an instruction's result (not `for`). */
static void assign(CgCudaGen *g, const KirInst *in)
{
    const KirValue *res = in->res[0];
    CgCudaVal *V = val(g, res);
    int m, n;
    cg_cuda_shape(&res->type, &m, &n);
    V->lay = -1;
    if (res->type.is_ptr) {
        V->form = CG_CUDA_PTR;
        return;
    }
    if (res->type.rank == 0) {
        V->form = CG_CUDA_SCALAR;
        return;
    }
    V->form = CG_CUDA_REG;
    switch (in->op) {
    case KIR_OP_ARANGE:
    case KIR_OP_SPLAT: V->form = CG_CUDA_VIRT; return;
    case KIR_OP_EXPAND: {
        const CgCudaVal *x = val(g, in->ops[0]);
        if (x->form != CG_CUDA_REG) {
            V->form = CG_CUDA_VIRT;
            return;
        }
        CgCudaLayout l = g->lay[x->lay]; /* a 1-D tile's layout is [1, N] with chunks along dim 1 */
        if (in->i == 1) {
            l.m = l.n;
            l.n = 1;
            l.order = 0;
        }
        V->lay = cg_cuda_layout_intern(g, &l);
        return;
    }
    case KIR_OP_BROADCAST:
        if (!is_reg(g, in->ops[0]))
            V->form = CG_CUDA_VIRT;
        else if (lay_kind(g, in->ops[0]) == CG_CUDA_ROWS && g->lay[val(g, in->ops[0])->lay].order == 0)
            V->lay = cg_cuda_layout_mma_of_rows(g, val(g, in->ops[0])->lay, n); /* [M,1] -> [M,N] in place */
        else
            V->lay = cg_cuda_layout_blocked(g, m, n, NULL);
        return;
    case KIR_OP_REDUCE: {
        const KirValue *x = in->ops[0];
        if (x->type.rank == 2 && in->i2 == 1 && lay_kind(g, x) == CG_CUDA_MMA &&
            g->lay[val(g, x)->lay].wn == 1)
            V->lay = cg_cuda_layout_rows(g, val(g, x)->lay, 1); /* a row reduction by quad shuffles */
        else
            V->lay = cg_cuda_layout_blocked(g, m, n, NULL);
        return;
    }
    case KIR_OP_DOT:
        V->lay = cg_cuda_dot_is_mma(in->ops[0]->type.dtype) ? cg_cuda_layout_mma(g, m, n)
                                                            : cg_cuda_layout_blocked(g, m, n, NULL);
        for (int i = 0; i < g->n_forced; i++)
            if (g->forced_dot[i] == in) V->lay = g->forced_lay[i];
        return;
    case KIR_OP_LOAD:
        if (virt_load(g, in))
            V->form = CG_CUDA_VIRT;
        else if (g->mma_rows && V->uses && V->dot_a_uses == V->uses && m % 16 == 0 && n % 16 == 0 &&
                 (res->type.dtype == KIR_BF16 || res->type.dtype == KIR_F16))
            V->lay = cg_cuda_layout_mma(g, m, n); /* only an A operand: loaded as mma fragments (dot.c) */
        else if (V->uses && V->afeed_uses == V->uses && !V->dot_a_uses && m % 16 == 0 && n % 16 == 0)
            V->lay = cg_cuda_layout_mma(g, m, n); /* computed into an A operand: in its fragments' layout */
        else if (is_reg(g, in->ops[1]))
            V->lay = val(g, in->ops[1])->lay;
        else
            V->lay = cg_cuda_layout_blocked(g, m, n, axv(g, in->ops[1]));
        return;
    default: break;
    }
    /* element-wise (and rand): the first MMA operand's layout, else the first ROWS operand's, else the
     * first REG operand's */
    int lay = -1;
    for (int pass = 0; pass < 2 && lay < 0; pass++)
        for (int k = 0; k < in->n_ops; k++)
            if (lay_kind(g, in->ops[k]) == (pass ? CG_CUDA_ROWS : CG_CUDA_MMA)) {
                lay = val(g, in->ops[k])->lay;
                break;
            }
    for (int k = 0; k < in->n_ops && lay < 0; k++)
        if (is_reg(g, in->ops[k])) lay = val(g, in->ops[k])->lay;
    if (lay < 0 && expensive(in))
        lay = cg_cuda_layout_blocked(g, m, n, NULL); /* computed once, not per use */
    if (lay < 0) V->form = CG_CUDA_VIRT;
    V->lay = lay;
}

static void analyze_block(CgCudaGen *g, const KirBlock *blk);

/* A loop-carried value: its form, axis info and layout from the init and the yield. */
static int carry(CgCudaGen *g, const KirValue *arg, const KirValue *init, const KirValue *y, CgCudaAxis ax)
{
    CgCudaVal *A = val(g, arg);
    CgCudaVal old = *A;
    int m, n;
    cg_cuda_shape(&arg->type, &m, &n);
    A->ax = ax;
    A->lay = -1;
    if (arg->type.is_ptr)
        A->form = CG_CUDA_PTR;
    else if (arg->type.rank == 0)
        A->form = CG_CUDA_SCALAR;
    else {
        A->form = CG_CUDA_REG;
        if (y && is_reg(g, y))
            A->lay = val(g, y)->lay;
        else if (is_reg(g, init))
            A->lay = val(g, init)->lay;
        else
            A->lay = cg_cuda_layout_blocked(g, m, n, &ax);
    }
    return memcmp(&old.ax, &A->ax, sizeof ax) || old.lay != A->lay || old.form != A->form;
}

static void analyze_for(CgCudaGen *g, const KirInst *in)
{
    const KirBlock *body = in->body;
    int n = in->n_ops - 3;
    const KirInst *y = body->insts[body->n_insts - 1];
    int dlo = ax_all(axv(g, in->ops[0])), dstep = ax_all(axv(g, in->ops[2]));
    CgCudaVal *iv = val(g, body->args[0]);
    iv->form = CG_CUDA_SCALAR;
    iv->ax = ax_scalar(imin(dlo, dstep));
    for (int i = 0; i < n; i++)
        carry(g, body->args[1 + i], in->ops[3 + i], NULL, *axv(g, in->ops[3 + i]));
    for (int round = 0;; round++) {
        analyze_block(g, body);
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const KirValue *init = in->ops[3 + i], *yv = y->ops[i];
            CgCudaAxis ax = ax_meet(axv(g, init), axv(g, yv));
            if (round >= 64) ax = ax_unknown(&init->type); /* give up precision, stay sound */
            changed |= carry(g, body->args[1 + i], init, yv, ax);
        }
        if (!changed || round > 64) break;
    }
    for (int i = 0; i < in->n_res; i++) {
        CgCudaVal *R = val(g, in->res[i]);
        const CgCudaVal *A = val(g, body->args[1 + i]);
        R->form = A->form;
        R->lay = A->lay;
        R->ax = A->ax;
    }
}

static void analyze_block(CgCudaGen *g, const KirBlock *blk)
{
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        if (in->op == KIR_OP_FOR) {
            analyze_for(g, in);
            continue;
        }
        if (!in->n_res) continue;
        CgCudaVal *V = val(g, in->res[0]);
        if (in->op == KIR_OP_PARAM) {
            V->form = in->res[0]->type.is_ptr ? CG_CUDA_PTR : CG_CUDA_SCALAR;
            V->ax = ax_scalar(1);
            continue;
        }
        V->ax = axis_of(g, in);
        assign(g, in);
    }
}

/* ---- numbering: kir_print's order, so generated names match the printed IR ---- */

static void number_value(CgCudaGen *g, const KirValue *v, int *next, const KirInst *def, const KirBlock *blk)
{
    CgCudaVal *V = val(g, v);
    V->num = (*next)++;
    V->def = def;
    V->blk = blk;
}

static void number_block(CgCudaGen *g, const KirBlock *blk, int *next)
{
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        for (int k = 0; k < in->n_ops; k++)
            val(g, in->ops[k])->uses++;
        if (in->op == KIR_OP_DOT) val(g, in->ops[0])->dot_a_uses++;
        if (in->op == KIR_OP_EXPAND) val(g, in->ops[0])->expand_uses++;
        if (in->op == KIR_OP_FOR) {
            for (int r = 0; r < in->n_res; r++)
                number_value(g, in->res[r], next, in, blk);
            for (int a = 0; a < in->body->n_args; a++)
                number_value(g, in->body->args[a], next, NULL, in->body);
            number_block(g, in->body, next);
        } else if (in->n_res) {
            number_value(g, in->res[0], next, in, blk);
        }
    }
}

/* A rank-1 cast whose every use is an expand counts as expand uses of its operand (a vector converted only
 * to be broadcast), last instruction first so that chains of casts count through. */
static void count_broadcasts(CgCudaGen *g, const KirBlock *blk)
{
    for (int i = blk->n_insts - 1; i >= 0; i--) {
        const KirInst *in = blk->insts[i];
        if (in->op == KIR_OP_FOR) count_broadcasts(g, in->body);
        if (in->op != KIR_OP_CAST || in->res[0]->type.rank != 1) continue;
        const CgCudaVal *R = val(g, in->res[0]);
        if (R->uses && R->expand_uses == R->uses) val(g, in->ops[0])->expand_uses++;
    }
}

/* A tile that only feeds tensor-core dots' A operands, through element-wise ops of its own shape (a
 * weight tile dequantized from its loads: qmatmul SWAP=1): counted back from the dots so that its loads
 * can take the A fragment's layout and the whole chain runs in it, no layout change before the dot. A dot
 * whose A operand is computed element-wise keeps one row fragment per warp in its accumulator (wn 1,
 * mma_rows: the A fragment's row split). */
static void count_afeeds(CgCudaGen *g, const KirBlock *blk)
{
    for (int i = blk->n_insts - 1; i >= 0; i--) {
        const KirInst *in = blk->insts[i];
        if (in->op == KIR_OP_FOR) count_afeeds(g, in->body);
        if (in->op == KIR_OP_DOT && cg_cuda_dot_is_mma(in->ops[0]->type.dtype)) {
            const KirInst *d = val(g, in->ops[0])->def;
            if (d && d->op != KIR_OP_LOAD && (kir_op_flags(d->op) & KIR_F_ELEM)) g->mma_rows = 1;
            val(g, in->ops[0])->afeed_uses++;
            continue;
        }
        if (!(kir_op_flags(in->op) & KIR_F_ELEM) || in->res[0]->type.rank != 2) continue;
        const CgCudaVal *R = val(g, in->res[0]);
        if (!R->uses || R->afeed_uses != R->uses) continue;
        for (int k = 0; k < in->n_ops; k++)
            if (in->ops[k]->type.rank == 2) val(g, in->ops[k])->afeed_uses++;
    }
}

/* C names: params "p_<name>" (made unique), scalars and pointers "s<N>", tiles "v<N>"; a loop's results
 * share their loop-carried variables. */
static void name_values(CgCudaGen *g, const KirBlock *blk)
{
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        if (in->op == KIR_OP_FOR) {
            for (int a = 0; a < in->body->n_args; a++) {
                CgCudaVal *A = val(g, in->body->args[a]);
                A->name = cg_cuda_fmt(g, "%c%d", A->form == CG_CUDA_REG ? 'v' : 's', A->num);
            }
            for (int r = 0; r < in->n_res; r++)
                val(g, in->res[r])->name = val(g, in->body->args[1 + r])->name;
            name_values(g, in->body);
            continue;
        }
        if (!in->n_res) continue;
        CgCudaVal *V = val(g, in->res[0]);
        if (in->op == KIR_OP_PARAM) {
            IrBuf b = {0};
            ir_buf_printf(&b, "p_");
            for (const char *p = g->k->params[in->i].name; *p; p++) {
                char c = *p;
                int ok =
                    (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
                ir_buf_put(&b, ok ? &c : "_", 1);
            }
            for (int j = 0; j < in->i; j++) /* a clash after sanitizing: suffix the index */
                if (g->v[g->k->params[j].value->id].name &&
                    !strcmp(g->v[g->k->params[j].value->id].name, b.s))
                    ir_buf_printf(&b, "_%lld", (long long)in->i);
            V->name = b.oom ? NULL : cg_cuda_fmt(g, "%s", b.s);
            ir_buf_free(&b);
            if (!V->name) g->oom = 1;
            continue;
        }
        V->name = cg_cuda_fmt(g, "%c%d", V->form == CG_CUDA_REG ? 'v' : 's', V->num);
    }
}

/* Does v derive (through element-wise ops and casts) from a dot's result? */
static int from_dot(const CgCudaGen *g, const KirValue *v, int depth)
{
    const KirInst *d = g->v[v->id].def;
    if (!d || depth > 16) return 0;
    if (d->op == KIR_OP_DOT) return 1;
    if (!(kir_op_flags(d->op) & KIR_F_ELEM)) return 0;
    for (int k = 0; k < d->n_ops; k++)
        if (d->ops[k]->type.rank == 2 && from_dot(g, d->ops[k], depth + 1)) return 1;
    return 0;
}

/* Sets g->mma_rows when a row reduction reads a dot's result (softmax over attention scores). */
static void find_row_reductions(CgCudaGen *g, const KirBlock *blk)
{
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        if (in->op == KIR_OP_FOR) find_row_reductions(g, in->body);
        if (in->op == KIR_OP_REDUCE && in->ops[0]->type.rank == 2 && in->i2 == 1 &&
            from_dot(g, in->ops[0], 0))
            g->mma_rows = 1;
    }
}

IrStatus cg_cuda_analyze(CgCudaGen *g)
{
    const KirKernel *k = g->k;
    g->v = ir_arena_alloc(g->a, sizeof *g->v * ((size_t)k->n_values + 1));
    if (!g->v) return ir_diag_set(g->d, IR_ERR_NOMEM, "kernel %s: out of memory", k->name);
    int next = 0;
    number_block(g, k->body, &next);
    count_broadcasts(g, k->body);
    count_afeeds(g, k->body);
    find_row_reductions(g, k->body);
    analyze_block(g, k->body);
    cg_cuda_plan_pipes(g);
    if (g->n_forced) { /* a wgmma pipeline fixed some accumulator layouts: propagate them */
        analyze_block(g, k->body);
        cg_cuda_mark_pipes(g);
    }
    name_values(g, k->body);
    if (g->oom) return ir_diag_set(g->d, IR_ERR_NOMEM, "kernel %s: out of memory", k->name);
    return IR_OK;
}
