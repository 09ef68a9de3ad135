/* kir_verify.c — the kernel IR's typing rules (kir_infer_inst, used by the builder and the verifier), the
 * verifier (types, SSA scoping in structured blocks, terminators, parameters) and the resource estimates
 * behind per-target budgets. Budgets are estimates with a documented model (docs/KERNEL_IR.md): tile
 * registers = peak bytes of live tiles / threads / 4; shared memory = dot operand tiles x pipeline stages
 * (the largest of loops that run one after another) plus one reduction buffer.
 */
#include "kir_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_scalar(const KirType *t)
{
    return !t->is_ptr && t->rank == 0;
}

static int same_shape(const KirType *a, const KirType *b)
{
    if (a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

static const char *tstr(const KirType *t, char *buf, size_t n)
{
    IrBuf b = {0};
    kir_type_print(t, &b);
    snprintf(buf, n, "%s", b.s ? b.s : "?");
    ir_buf_free(&b);
    return buf;
}

static IrStatus bad(IrDiag *d, const char *what, const KirType *t)
{
    char tb[64] = "";
    if (t) tstr(t, tb, sizeof tb);
    return ir_diag_set(d, IR_ERR_INTERNAL, "%s%s%s", what, t ? ": " : "", tb);
}

/* Result shape of an element-wise op over operands that are scalars or tiles of one shape. */
static IrStatus elem_shape(const KirInst *in, int first, KirType *out, IrDiag *d)
{
    *out = in->ops[first]->type;
    for (int k = first; k < in->n_ops; k++) {
        const KirType *t = &in->ops[k]->type;
        if (t->is_ptr) return bad(d, "pointer operand", t);
        if (t->rank == 0) continue;
        if (out->rank == 0) {
            out->rank = t->rank;
            out->shape[0] = t->shape[0];
            out->shape[1] = t->shape[1];
        } else if (!same_shape(out, t)) {
            return bad(d, "tile shapes differ (use expand/broadcast)", t);
        }
    }
    return IR_OK;
}

static IrStatus check_offsets(const KirInst *in, IrDiag *d)
{
    const KirType *p = &in->ops[0]->type, *o = &in->ops[1]->type;
    if (!p->is_ptr) return bad(d, "first operand must be a pointer", p);
    if (o->is_ptr || (o->dtype != KIR_I32 && o->dtype != KIR_I64))
        return bad(d, "offsets must be i32 or i64", o);
    if (in->op == KIR_OP_LOAD) {
        if (in->n_ops < 2 || in->n_ops > 4) return bad(d, "load takes ptr, offs [, mask [, other]]", NULL);
        if (in->n_ops >= 3) {
            const KirType *m = &in->ops[2]->type;
            if (m->dtype != KIR_I1 || (m->rank && !same_shape(m, o)))
                return bad(d, "mask must be i1 like offs", m);
        }
        if (in->n_ops == 4 && (!is_scalar(&in->ops[3]->type) || in->ops[3]->type.dtype != p->dtype))
            return bad(d, "other must be a scalar of the pointer's dtype", &in->ops[3]->type);
        return IR_OK;
    }
    if (in->n_ops < 3 || in->n_ops > 4) return bad(d, "store takes ptr, offs, val [, mask]", NULL);
    const KirType *v = &in->ops[2]->type;
    if (v->is_ptr || v->dtype != p->dtype || !same_shape(v, o))
        return bad(d, "value must have the pointer's dtype and the offsets' shape", v);
    if (in->op == KIR_OP_ATOMIC_ADD && v->dtype != KIR_F32 && v->dtype != KIR_I32)
        return bad(d, "atomic_add takes f32 or i32", v);
    if (in->n_ops == 4) {
        const KirType *m = &in->ops[3]->type;
        if (m->dtype != KIR_I1 || (m->rank && !same_shape(m, o)))
            return bad(d, "mask must be i1 like offs", m);
    }
    return IR_OK;
}

static IrStatus infer_for(const KirInst *in, IrDiag *d)
{
    for (int k = 0; k < 3; k++)
        if (!is_scalar(&in->ops[k]->type) || in->ops[k]->type.dtype != KIR_I32)
            return bad(d, "lo, hi and step must be i32 scalars", &in->ops[k]->type);
    int n = in->n_ops - 3;
    const KirBlock *body = in->body;
    if (!body || body->n_args != n + 1 || body->parent != in) return bad(d, "malformed body", NULL);
    if (!is_scalar(&body->args[0]->type) || body->args[0]->type.dtype != KIR_I32)
        return bad(d, "induction variable must be i32", NULL);
    for (int i = 0; i < n; i++) {
        /* the backends keep carried values in registers of the element type */
        if (in->ops[3 + i]->type.is_ptr)
            return bad(d, "a loop cannot carry a pointer", &in->ops[3 + i]->type);
        if (!kir_type_eq(&body->args[1 + i]->type, &in->ops[3 + i]->type))
            return bad(d, "loop-carried value changes type", &body->args[1 + i]->type);
    }
    const KirInst *y = body->n_insts ? body->insts[body->n_insts - 1] : NULL;
    if (!y || y->op != KIR_OP_YIELD || y->n_ops != n)
        return bad(d, "body must end with a yield of every iter value", NULL);
    for (int i = 0; i < n; i++)
        if (!kir_type_eq(&y->ops[i]->type, &in->ops[3 + i]->type))
            return bad(d, "yield type differs from the loop-carried value", &y->ops[i]->type);
    if (in->n_res != n && in->n_res != 0) return bad(d, "wrong number of results", NULL);
    return IR_OK;
}

IrStatus kir_infer_inst(const KirKernel *k, const KirInst *in, KirType *res, int *has_res, IrDiag *d)
{
    int want = kir_op_n_ops(in->op);
    if (want >= 0 && in->n_ops != want) return bad(d, "wrong number of operands", NULL);
    *has_res = 1;
    const KirType *a = in->n_ops ? &in->ops[0]->type : NULL;
    if (kir_op_flags(in->op) & KIR_F_BINARY) {
        const KirType *b = &in->ops[1]->type;
        if (a->dtype != b->dtype) return bad(d, "operand dtypes differ (cast first)", b);
        if ((kir_op_flags(in->op) & KIR_F_INTOP) && !kir_dtype_is_int(a->dtype))
            return bad(d, "integer op on a float", a);
        if (a->dtype == KIR_I1 && !(in->op == KIR_OP_AND || in->op == KIR_OP_OR || in->op == KIR_OP_XOR ||
                                    in->op == KIR_OP_EQ || in->op == KIR_OP_NE))
            return bad(d, "arithmetic on i1", a);
        if (elem_shape(in, 0, res, d)) return IR_ERR_INTERNAL;
        if (kir_op_flags(in->op) & KIR_F_CMP) res->dtype = KIR_I1;
        return IR_OK;
    }
    if (kir_op_flags(in->op) & KIR_F_UNARY) {
        if ((kir_op_flags(in->op) & KIR_F_F32) && a->dtype != KIR_F32)
            return bad(d, "transcendental ops take f32 (cast first)", a);
        if (a->dtype == KIR_I1 || a->dtype == KIR_U8) return bad(d, "neg/abs of an unsigned type", a);
        return elem_shape(in, 0, res, d);
    }
    switch (in->op) {
    case KIR_OP_PARAM:
        if (in->i < 0 || in->i >= KIR_MAX_PARAMS) return bad(d, "bad param index", NULL);
        *res = k->params[in->i].type;
        return IR_OK;
    case KIR_OP_CONST:
        if (in->i2 < 0 || in->i2 >= KIR_DTYPE_COUNT) return bad(d, "bad const dtype", NULL);
        *res = kir_scalar((KirDtype)in->i2);
        return IR_OK;
    case KIR_OP_PID:
    case KIR_OP_NPROG:
        if (in->i < 0 || in->i > 2) return bad(d, "axis must be 0..2", NULL);
        *res = kir_scalar(KIR_I32);
        return IR_OK;
    case KIR_OP_ARANGE:
        if (in->i < 1 || in->i > (1 << 20)) return bad(d, "arange length must be 1..2^20", NULL);
        *res = kir_tile1(KIR_I32, (int)in->i);
        return IR_OK;
    case KIR_OP_SPLAT: {
        if (!is_scalar(a)) return bad(d, "splat takes a scalar", a);
        int rank = (int)in->i2;
        int m = rank == 2 ? (int)(in->i >> 32) : (int)in->i, n = (int)(uint32_t)in->i;
        if (rank < 1 || rank > 2 || m < 1 || (rank == 2 && n < 1)) return bad(d, "bad splat shape", NULL);
        *res = rank == 1 ? kir_tile1(a->dtype, m) : kir_tile2(a->dtype, m, n);
        return IR_OK;
    }
    case KIR_OP_SELECT:
        if (a->dtype != KIR_I1 || a->is_ptr) return bad(d, "select condition must be i1", a);
        if (in->ops[1]->type.is_ptr || in->ops[2]->type.is_ptr) { /* a scalar choice between two pointers */
            if (a->rank || !in->ops[1]->type.is_ptr || !in->ops[2]->type.is_ptr ||
                in->ops[1]->type.dtype != in->ops[2]->type.dtype)
                return bad(d, "select of pointers takes a scalar condition and two pointers of one type", a);
            *res = in->ops[1]->type;
            return IR_OK;
        }
        if (in->ops[1]->type.dtype != in->ops[2]->type.dtype)
            return bad(d, "select arms differ", &in->ops[2]->type);
        if (elem_shape(in, 0, res, d)) return IR_ERR_INTERNAL;
        res->dtype = in->ops[1]->type.dtype;
        return IR_OK;
    case KIR_OP_CAST:
        if (in->i < 0 || in->i >= KIR_DTYPE_COUNT) return bad(d, "bad cast dtype", NULL);
        if (elem_shape(in, 0, res, d)) return IR_ERR_INTERNAL;
        res->dtype = (KirDtype)in->i;
        return IR_OK;
    case KIR_OP_EXPAND:
        if (a->rank != 1 || a->is_ptr || (in->i != 0 && in->i != 1))
            return bad(d, "expand takes a 1-D tile, axis 0/1", a);
        *res = in->i ? kir_tile2(a->dtype, a->shape[0], 1) : kir_tile2(a->dtype, 1, a->shape[0]);
        return IR_OK;
    case KIR_OP_BROADCAST:
        if (a->rank != 2 || (a->shape[0] != 1 && a->shape[1] != 1))
            return bad(d, "broadcast takes [1,N] or [M,1]", a);
        if ((a->shape[0] != 1 && a->shape[0] != in->i) || (a->shape[1] != 1 && a->shape[1] != in->i2) ||
            in->i < 1 || in->i2 < 1)
            return bad(d, "broadcast to an incompatible shape", a);
        *res = kir_tile2(a->dtype, (int)in->i, (int)in->i2);
        return IR_OK;
    case KIR_OP_REDUCE: {
        if (a->rank < 1 || a->is_ptr || in->i < KIR_RED_SUM || in->i > KIR_RED_MIN)
            return bad(d, "bad reduce", a);
        if (in->i2 < 0 || in->i2 >= a->rank) return bad(d, "reduce axis out of range", a);
        KirDtype dt = kir_dtype_is_float(a->dtype) ? KIR_F32 : a->dtype == KIR_I64 ? KIR_I64 : KIR_I32;
        if (in->i != KIR_RED_SUM) dt = kir_dtype_is_float(a->dtype) ? KIR_F32 : a->dtype;
        if (a->rank == 1)
            *res = kir_scalar(dt);
        else
            *res = kir_tile1(dt, a->shape[in->i2 ? 0 : 1]);
        return IR_OK;
    }
    case KIR_OP_LOAD:
        if (check_offsets(in, d)) return IR_ERR_INTERNAL;
        *res = in->ops[1]->type;
        res->dtype = a->dtype;
        return IR_OK;
    case KIR_OP_STORE:
    case KIR_OP_ATOMIC_ADD: *has_res = 0; return check_offsets(in, d);
    case KIR_OP_ARRIVE:
        if (!a->is_ptr || a->dtype != KIR_I32) return bad(d, "arrive counts in a ptr<i32>", a);
        if (!is_scalar(&in->ops[1]->type) ||
            (in->ops[1]->type.dtype != KIR_I32 && in->ops[1]->type.dtype != KIR_I64))
            return bad(d, "arrive takes one scalar i32/i64 offset", &in->ops[1]->type);
        *res = kir_scalar(KIR_I32);
        return IR_OK;
    case KIR_OP_DOT: {
        const KirType *b = &in->ops[1]->type, *c = &in->ops[2]->type;
        if (a->rank != 2 || b->rank != 2 || c->rank != 2) return bad(d, "dot takes 2-D tiles", NULL);
        if (a->dtype != b->dtype) return bad(d, "dot operand dtypes differ", b);
        int intop = a->dtype == KIR_I8;
        if (!intop && a->dtype != KIR_F16 && a->dtype != KIR_BF16 && a->dtype != KIR_F8E4M3 &&
            a->dtype != KIR_F32)
            return bad(d, "dot operands must be f16, bf16, f8e4m3, f32 or i8", a);
        if (c->dtype != (intop ? KIR_I32 : KIR_F32))
            return bad(d, "dot accumulator must be f32 (i32 for i8)", c);
        if (a->shape[1] != b->shape[0] || c->shape[0] != a->shape[0] || c->shape[1] != b->shape[1])
            return bad(d, "dot shapes do not chain ([M,K] @ [K,N] + [M,N])", b);
        *res = *c;
        return IR_OK;
    }
    case KIR_OP_RAND:
        if (!is_scalar(a) || a->dtype != KIR_I64) return bad(d, "rand seed must be an i64 scalar", a);
        if (in->ops[1]->type.dtype != KIR_I32 || in->ops[1]->type.is_ptr)
            return bad(d, "rand counter must be i32", NULL);
        *res = in->ops[1]->type;
        res->dtype = KIR_F32;
        return IR_OK;
    case KIR_OP_FOR: *has_res = 0; return infer_for(in, d);
    case KIR_OP_YIELD:
    case KIR_OP_RET: *has_res = 0; return IR_OK;
    default: break; /* KIR_F_BINARY and KIR_F_UNARY ops are checked above */
    }
    return bad(d, "unknown op", NULL);
}

/* ---- verifier ---- */

typedef struct VCtx {
    const KirKernel *k;
    unsigned char *defined; /* by value id: 1 while in scope */
    IrDiag *d;
} VCtx;

static IrStatus vfail(VCtx *c, const KirInst *in, const char *what)
{
    return ir_diag_set(c->d, IR_ERR_INTERNAL, "verify: kernel %s: %s: %s", c->k->name, kir_op_name(in->op),
                       what);
}

static int valid_id(const VCtx *c, const KirValue *v)
{
    return v && v->id >= 0 && v->id < c->k->n_values;
}

static IrStatus verify_block(VCtx *c, const KirBlock *blk, int top)
{
    IrStatus s = IR_OK;
    for (int i = 0; i < blk->n_args; i++) {
        if (!valid_id(c, blk->args[i]) || c->defined[blk->args[i]->id])
            return vfail(c, blk->parent, "bad block argument");
        c->defined[blk->args[i]->id] = 1;
    }
    for (int i = 0; i < blk->n_insts && s == IR_OK; i++) {
        const KirInst *in = blk->insts[i];
        if ((unsigned)in->op >= KIR_OP_COUNT) return ir_diag_set(c->d, IR_ERR_INTERNAL, "verify: unknown op");
        for (int k = 0; k < in->n_ops; k++)
            if (!valid_id(c, in->ops[k]) || !c->defined[in->ops[k]->id])
                return vfail(c, in, "operand used out of scope");
        int last = i == blk->n_insts - 1;
        if ((kir_op_flags(in->op) & KIR_F_TERM) && !last)
            return vfail(c, in, "terminator before the end of a block");
        if (last && in->op != (top ? KIR_OP_RET : KIR_OP_YIELD))
            return vfail(c, in, "block must end with ret/yield");
        if (in->op == KIR_OP_PARAM && (!top || i != in->i || in->i >= c->k->n_params))
            return vfail(c, in, "params come first, in order, at top level");
        if (in->op == KIR_OP_FOR && (s = verify_block(c, in->body, 0)) != IR_OK) return s;
        KirType rt;
        int has_res;
        IrDiag local = {0};
        if (kir_infer_inst(c->k, in, &rt, &has_res, &local) != IR_OK) return vfail(c, in, local.msg);
        if (in->op == KIR_OP_FOR) {
            for (int r = 0; r < in->n_res; r++) {
                if (!valid_id(c, in->res[r]) || in->res[r]->def != in) return vfail(c, in, "bad loop result");
                c->defined[in->res[r]->id] = 1;
            }
            continue;
        }
        if (has_res != (in->n_res == 1)) return vfail(c, in, "result count");
        if (has_res) {
            const KirValue *v = in->res[0];
            if (!valid_id(c, v) || v->def != in || c->defined[v->id])
                return vfail(c, in, "result defined twice");
            if (!kir_type_eq(&rt, &v->type)) return vfail(c, in, "result type differs from inference");
            c->defined[v->id] = 1;
        }
    }
    /* leaving the block: its values go out of scope (loop results were marked by the parent) */
    for (int i = 0; i < blk->n_args; i++)
        c->defined[blk->args[i]->id] = 0;
    for (int i = 0; i < blk->n_insts && !top; i++)
        if (blk->insts[i]->n_res && blk->insts[i]->op != KIR_OP_FOR)
            c->defined[blk->insts[i]->res[0]->id] = 0;
        else if (blk->insts[i]->op == KIR_OP_FOR)
            for (int r = 0; r < blk->insts[i]->n_res; r++)
                c->defined[blk->insts[i]->res[r]->id] = 0;
    return s;
}

static int64_t estimate(const KirKernel *k, int all);

IrStatus kir_verify(const KirKernel *k, const KirLimits *lim, IrDiag *d)
{
    VCtx c = {k, calloc((size_t)k->n_values + 1, 1), d};
    if (!c.defined) return ir_diag_set(d, IR_ERR_NOMEM, "verify: out of memory");
    IrStatus s = verify_block(&c, k->body, 1);
    free(c.defined);
    if (s != IR_OK) return s;
    for (int i = 0; i < 3; i++) {
        const KirGridDim *g = &k->grid[i];
        if (g->param >= k->n_params || (g->param >= 0 && k->params[g->param].type.is_ptr) || g->mul < 1 ||
            g->div < 1 || g->c < 1)
            return ir_diag_set(d, IR_ERR_INTERNAL, "verify: kernel %s: bad grid axis %d", k->name, i);
    }
    if (k->warps < 1) return ir_diag_set(d, IR_ERR_INTERNAL, "verify: kernel %s: warps < 1", k->name);
    if (k->min_blocks < 0 || k->min_blocks > 32)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: MIN_BLOCKS=%d is outside [0, 32]", k->name,
                           k->min_blocks);
    if (!lim) return IR_OK;
    int threads = 32 * k->warps;
    if (threads > lim->max_threads)
        return ir_diag_set(d, IR_ERR_LIMIT, "kernel %s: %d threads exceed %s's %d", k->name, threads,
                           lim->name, lim->max_threads);
    int64_t smem = kir_estimate_smem_bytes(k);
    if (smem > lim->smem_bytes)
        return ir_diag_set(d, IR_ERR_LIMIT, "kernel %s: ~%lld bytes of shared memory exceed %s's %d", k->name,
                           (long long)smem, lim->name, lim->smem_bytes);
    int64_t tiles = kir_estimate_tile_bytes(k), all_tiles = lim->program_bytes ? estimate(k, 1) : 0;
    if (lim->program_bytes && all_tiles > lim->program_bytes)
        return ir_diag_set(d, IR_ERR_LIMIT,
                           "kernel %s: ~%lld bytes of live tiles exceed %s's %lld per program", k->name,
                           (long long)all_tiles, lim->name, (long long)lim->program_bytes);
    int64_t regs = tiles / threads / 4;
    if (regs > lim->regs_per_thread)
        return ir_diag_set(d, IR_ERR_LIMIT, "kernel %s: ~%lld tile registers per thread exceed %s's %d",
                           k->name, (long long)regs, lim->name, lim->regs_per_thread);
    return IR_OK;
}

/* ---- estimates ---- */

static int64_t tile_bytes(const KirType *t)
{
    if (t->rank == 0 || t->is_ptr) return 0;
    return (int64_t)kir_type_numel(t) * kir_dtype_bytes(t->dtype); /* 16-bit values pack two per register */
}

/* Peak live tile bytes. Instructions are numbered in a flattened walk; a value lives from its definition
 * to its last use, and a value used inside a loop (or carried by it) lives to the loop's end.
 * What counts is what a backend must hold in registers: not index or mask tiles (integer tiles that no
 * load produced: backends evaluate them where they are consumed), not splats, expands and broadcasts
 * (read from their source where used), and not tiles used only as dot operands (staged through shared
 * memory). A loop's init moves into its iter arg, and an operand's registers go to the result. A tile
 * that repeats along its columns (col_repeats) counts one copy per distinct element, but at least one
 * per COPY_COLS columns: a backend spreads a row's columns over threads (an mma quad's lanes hold 2 of
 * every 8, a blocked layout chunks of 8) and each thread keeps its own copy. */
typedef struct Live {
    int n;
    int all;         /* count every tile (a lowering that keeps all tiles in memory: the LLVM GPU path) */
    int *def, *last; /* by value id */
    int64_t *bytes;
    unsigned char *dot_only;
    int *run; /* by value id: col_repeats' run, 0 until computed */
} Live;

enum {
    EVAL_WORK = 256, /* instructions eval_vec / col_part look at, at most (shared sub-trees count again) */
    COPY_COLS = 8,   /* columns a thread's copy of a repeated element covers, at most (below) */
};

/* One integer op of eval_vec on values in i32's range, with C's semantics; 0 when the result leaves that
 * range or the op is undefined there (the interpreter's errors) or not one of these. */
static int eval_op(KirOp op, int64_t x, int64_t y, int64_t *r)
{
    switch (op) {
    case KIR_OP_ADD: *r = x + y; break;
    case KIR_OP_SUB: *r = x - y; break;
    case KIR_OP_MUL: *r = x * y; break; /* |x|, |y| < 2^31: no overflow */
    case KIR_OP_DIV:
    case KIR_OP_REM:
        if (y == 0 || (x == INT32_MIN && y == -1)) return 0;
        *r = op == KIR_OP_DIV ? x / y : x % y;
        break;
    case KIR_OP_SHR:
        if (x < 0 || y < 0 || y > 31) return 0;
        *r = x >> y;
        break;
    case KIR_OP_SHL:
        if (x < 0 || y < 0 || y > 31) return 0;
        *r = x << y; /* below 2^62 */
        break;
    case KIR_OP_AND: *r = x & y; break;
    case KIR_OP_OR: *r = x | y; break;
    case KIR_OP_XOR: *r = x ^ y; break;
    case KIR_OP_MIN: *r = x < y ? x : y; break;
    case KIR_OP_MAX: *r = x > y ? x : y; break;
    default: return 0;
    }
    return *r >= INT32_MIN && *r <= INT32_MAX;
}

/* The values of a rank-1 integer tile of n elements (a scalar: n copies) built from arange, constants and
 * the integer ops of eval_op, into out; 0 when it depends on anything else (a program id, a loop variable,
 * a load, a param) or leaves i32's range. */
static int eval_vec(const KirValue *v, int64_t *out, int n, int *work)
{
    const KirInst *d = v->def;
    if (!d || ++*work > EVAL_WORK || !kir_dtype_is_int(v->type.dtype) || v->type.is_ptr) return 0;
    if (v->type.rank == 1 && d->op == KIR_OP_SPLAT) return eval_vec(d->ops[0], out, n, work);
    if (v->type.rank == 0) {
        if (d->op != KIR_OP_CONST || d->i < INT32_MIN || d->i > INT32_MAX) return 0;
        for (int j = 0; j < n; j++)
            out[j] = d->i;
        return 1;
    }
    if (v->type.rank != 1 || v->type.shape[0] != n) return 0;
    if (d->op == KIR_OP_ARANGE) {
        for (int j = 0; j < n; j++)
            out[j] = j;
        return 1;
    }
    if (d->n_ops != 2) return 0;
    int64_t *b = malloc(sizeof *b * (size_t)n);
    int ok = b && eval_vec(d->ops[0], out, n, work) && eval_vec(d->ops[1], b, n, work);
    for (int j = 0; ok && j < n; j++)
        ok = eval_op(d->op, out[j], b[j], &out[j]);
    free(b);
    return ok;
}

/* How a 2-D offset tile varies along dim 1: 0 not at all (rows, scalars), 1 as the rank-1 tile *col
 * broadcast along dim 0, -1 otherwise (or not known). Sums and differences of one varying part and
 * constant ones vary as that part. */
static int col_part(const KirValue *v, const KirValue **col, int *work)
{
    const KirInst *d = v->def;
    if (v->type.rank == 0) return 0;
    if (!d || ++*work > EVAL_WORK) return -1;
    if (d->op == KIR_OP_BROADCAST && d->ops[0]->def && d->ops[0]->def->op == KIR_OP_EXPAND) {
        if (d->ops[0]->def->i == 1) return 0; /* [M] -> [M,1] -> [M,N]: constant along dim 1 */
        *col = d->ops[0]->def->ops[0];
        return 1;
    }
    if (d->op != KIR_OP_ADD && d->op != KIR_OP_SUB) return -1;
    const KirValue *c0 = NULL, *c1 = NULL;
    int a = col_part(d->ops[0], &c0, work), b = col_part(d->ops[1], &c1, work);
    if (a < 0 || b < 0 || (a && b)) return -1;
    *col = a ? c0 : c1;
    return a | b;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Runs along dim 1 of a compile-time column vector: the largest power of two R dividing n such that
 * v[j] = v[j - j % R]; and its distinct values (*distinct; v is sorted for them). Runs are powers of two
 * dividing C, so the shortest of several is their common run. */
static int vec_runs(int64_t *v, int n, int64_t *distinct)
{
    int R = n & -n;
    for (; R > 1; R /= 2) {
        int ok = 1;
        for (int j = 0; j < n && ok; j++)
            ok = v[j] == v[j - j % R];
        if (ok) break;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    *distinct = n > 0;
    for (int j = 1; j < n; j++)
        *distinct += v[j] != v[j - 1];
    return R;
}

/* How a rank-2 value repeats along dim 1 (C columns): *run, the aligned runs (a power of two dividing C)
 * it is constant over, and *distinct, its distinct columns: a load at offsets of rows plus a compile-time
 * column vector by that vector (qmatmul's w4a16 words repeat over 8 columns that are not one run, its group
 * scales and zero points over runs of G), under its mask's runs; an element-wise result keeps the
 * shortest run of its operands (memoized in l->run: operands are defined first). 1 and C when not known. */
static void col_repeats(Live *l, const KirValue *v, int *run, int64_t *distinct)
{
    const KirInst *d = v->def;
    int C = v->type.rank == 2 ? v->type.shape[1] : 1;
    *run = 1;
    *distinct = C;
    if (!d || v->type.rank != 2) return;
    if (d->op == KIR_OP_LOAD || d->op == KIR_OP_BROADCAST) {
        const KirValue *col = NULL;
        int work = 0, how = col_part(d->op == KIR_OP_LOAD ? d->ops[1] : v, &col, &work);
        int64_t *vals = how > 0 ? malloc(sizeof *vals * (size_t)C) : NULL;
        if (how == 0) {
            *run = C & -C;
            *distinct = 1;
        }
        work = 0;
        if (vals && eval_vec(col, vals, C, &work)) *run = vec_runs(vals, C, distinct);
        free(vals);
        if (d->op == KIR_OP_LOAD && d->n_ops > 2) { /* a mask that changes inside a run ends it */
            int mr = l->run[d->ops[2]->id];
            int64_t md;
            if (!mr) col_repeats(l, d->ops[2], &mr, &md);
            if (mr < *run) {
                *run = mr;
                *distinct = C / mr;
            }
        }
        return;
    }
    if (!(kir_op_flags(d->op) & KIR_F_ELEM)) return;
    *run = C & -C;
    for (int k = 0; k < d->n_ops; k++) {
        if (d->ops[k]->type.rank == 0) continue;
        int r = l->run[d->ops[k]->id];
        int64_t dd;
        if (!r) col_repeats(l, d->ops[k], &r, &dd);
        if (r < *run) *run = r;
    }
    *distinct = C / *run;
}

static void live_value(Live *l, const KirValue *v, int pos)
{
    KirOp op = v->def ? v->def->op : KIR_OP_COUNT;
    int index_like = kir_dtype_is_int(v->type.dtype) && op != KIR_OP_LOAD;
    int view = op == KIR_OP_SPLAT || op == KIR_OP_EXPAND || op == KIR_OP_BROADCAST; /* read at use */
    l->def[v->id] = pos;
    l->last[v->id] = pos;
    l->bytes[v->id] = !l->all && (index_like || view || l->dot_only[v->id] == 1) ? 0 : tile_bytes(&v->type);
    if (!l->all && v->type.rank == 2) { /* one copy of a repeated element per COPY_COLS columns */
        int64_t distinct, C = v->type.shape[1];
        col_repeats(l, v, &l->run[v->id], &distinct);
        if (distinct < C / COPY_COLS) distinct = C / COPY_COLS;
        l->bytes[v->id] = l->bytes[v->id] * distinct / C;
    }
}

/* dot_only[v]: 1 while every use of v seen is as a dot's a or b operand, 2 once another use is seen. */
static void mark_uses(const KirBlock *blk, unsigned char *dot_only)
{
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        for (int k = 0; k < in->n_ops; k++) {
            int as_operand = in->op == KIR_OP_DOT && k < 2;
            unsigned char *u = &dot_only[in->ops[k]->id];
            *u = as_operand && *u != 2 ? 1 : 2;
        }
        if (in->op == KIR_OP_FOR) mark_uses(in->body, dot_only);
    }
}

static void live_walk(const KirBlock *blk, int *pos, Live *l)
{
    for (int i = 0; i < blk->n_args; i++)
        live_value(l, blk->args[i], *pos);
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        int here = (*pos)++;
        for (int k = 0; k < in->n_ops; k++)
            if (l->last[in->ops[k]->id] < here) l->last[in->ops[k]->id] = here;
        int defined_at = here;
        if (in->op == KIR_OP_FOR) {
            /* inits move into the iter args, which live through the body; the yields move into the
             * results, which appear at the loop's end; outer values the body reads live to the end */
            int start = *pos;
            live_walk(in->body, pos, l);
            for (int v = 0; v < l->n; v++)
                if (l->def[v] < here && l->last[v] >= start && l->last[v] < *pos) l->last[v] = *pos;
            defined_at = *pos;
        }
        for (int r = 0; r < in->n_res; r++)
            live_value(l, in->res[r], defined_at);
    }
}

static int64_t estimate(const KirKernel *k, int all)
{
    int n = k->n_values;
    Live l = {n,
              all,
              calloc((size_t)n + 1, sizeof(int)),
              calloc((size_t)n + 1, sizeof(int)),
              calloc((size_t)n + 1, sizeof(int64_t)),
              calloc((size_t)n + 1, 1),
              calloc((size_t)n + 1, sizeof(int))};
    int64_t peak = 0;
    if (l.def && l.last && l.bytes && l.dot_only && l.run) {
        mark_uses(k->body, l.dot_only);
        int positions = 0;
        live_walk(k->body, &positions, &l);
        for (int p = 0; p < positions; p++) {
            int64_t live = 0;
            for (int v = 0; v < n; v++)
                if (l.def[v] <= p && (p < l.last[v] || p == l.def[v]))
                    live += l.bytes[v]; /* operands die into results */
            if (live > peak) peak = live;
        }
    }
    free(l.def);
    free(l.last);
    free(l.bytes);
    free(l.dot_only);
    free(l.run);
    return peak;
}

int64_t kir_estimate_tile_bytes(const KirKernel *k)
{
    return estimate(k, 0);
}

/* A pipelined loop's dot tiles live together: a loaded operand x the loop's stages (copied trips ahead),
 * a computed one (a dequantized weight tile) once, an operand of several dots once; loops one after
 * another reuse one region. */
static int64_t smem_walk(const KirBlock *blk, int stages)
{
    int64_t own = 0, nested = 0;
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        for (int k = 0; in->op == KIR_OP_DOT && k < 2; k++) {
            const KirValue *v = in->ops[k];
            int seen = 0;
            for (int j = 0; j < i && !seen; j++)
                seen = blk->insts[j]->op == KIR_OP_DOT &&
                       (blk->insts[j]->ops[0] == v || blk->insts[j]->ops[1] == v);
            seen |= k == 1 && in->ops[0] == v;
            int copies = v->def && v->def->op == KIR_OP_LOAD && stages ? stages : 1;
            if (!seen) own += (int64_t)kir_type_numel(&v->type) * kir_dtype_bytes(v->type.dtype) * copies;
        }
        if (in->op == KIR_OP_FOR) {
            int64_t n = smem_walk(in->body, in->pipeline);
            if (n > nested) nested = n;
        }
    }
    return own + nested;
}

int64_t kir_estimate_smem_bytes(const KirKernel *k)
{
    return smem_walk(k->body, 0) + 32 * 4 * 2; /* plus a cross-warp reduction buffer */
}
