/* cg_llvm_emit.c — kernel IR -> LLVM IR: the body of one program, for every target.
 *
 * Lowering model (docs/BACKENDS.md, "LLVM backend"):
 *   - scalars are SSA values in their register type (cg_llvm_reg_type); a tile is a stack array
 *     [numel x mem type] allocated in the function's entry block, one per tile value, row-major;
 *   - every tile op is a counted loop over elements (nested loops for broadcast, reduce, dot), which
 *     LLVM's O2 pipeline unrolls and vectorizes; element math is cg_llvm_math.c;
 *   - expand is free (same storage); a `for` is a while loop whose loop-carried values live in stack
 *     slots (scalars are promoted to phis by mem2reg); yields copy into the slots, staging through a
 *     temporary when one slot's new value is another slot's old one;
 *   - masked load/store/atomic lanes branch around the memory access, so masked-off lanes touch nothing;
 *   - every tile alloca gets llvm.lifetime.start where its value is defined and llvm.lifetime.end after
 *     its storage's last use (a liveness pass over the IR: a value used inside a loop lives to the loop's
 *     end; expand and loop results extend their storage's life), so LLVM's stack coloring reuses stack
 *     (host) and local/scratch memory (GPUs): the frame is the peak of live tiles, not their sum.
 * Invariant: a tile's storage is written only by its defining op (or, for a loop slot, by the loop's
 * init and yields), so aliasing a tile (expand, loop results) is safe.
 */
#ifdef KILN_HAVE_LLVM

#include "cg_llvm_impl.h"

#include <math.h>
#include <stdlib.h>

typedef struct ForCtx {
    const KirInst *in;
    LLVMValueRef *slot; /* per loop-carried value */
} ForCtx;

/* ---- types ---- */

LLVMTypeRef cg_llvm_reg_type(CgLlvmUnit *u, KirDtype t)
{
    switch (t) {
    case KIR_I1: return LLVMInt1TypeInContext(u->ctx);
    case KIR_I8:
    case KIR_U8:
    case KIR_F8E4M3: return LLVMInt8TypeInContext(u->ctx);
    case KIR_I32: return LLVMInt32TypeInContext(u->ctx);
    case KIR_I64: return LLVMInt64TypeInContext(u->ctx);
    case KIR_F16:
    case KIR_BF16: return LLVMInt16TypeInContext(u->ctx);
    case KIR_F32: return LLVMFloatTypeInContext(u->ctx);
    case KIR_DTYPE_COUNT: break;
    }
    UNREACHABLE();
}

LLVMTypeRef cg_llvm_mem_type(CgLlvmUnit *u, KirDtype t)
{
    return t == KIR_I1 ? LLVMInt8TypeInContext(u->ctx) : cg_llvm_reg_type(u, t);
}

LLVMValueRef cg_llvm_from_mem(CgLlvmFn *f, KirDtype t, LLVMValueRef v)
{
    if (t != KIR_I1) return v;
    return LLVMBuildICmp(f->b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
}

LLVMValueRef cg_llvm_to_mem(CgLlvmFn *f, KirDtype t, LLVMValueRef v)
{
    return t == KIR_I1 ? LLVMBuildZExt(f->b, v, LLVMInt8TypeInContext(f->u->ctx), "") : v;
}

static LLVMTypeRef i64t(CgLlvmFn *f)
{
    return LLVMInt64TypeInContext(f->u->ctx);
}

static LLVMValueRef ci64(CgLlvmFn *f, int64_t v)
{
    return LLVMConstInt(i64t(f), (unsigned long long)v, 1);
}

static LLVMBasicBlockRef new_block(CgLlvmFn *f, const char *name)
{
    return LLVMAppendBasicBlockInContext(f->u->ctx, f->fn, name);
}

/* ---- loops ---- */

LLVMValueRef cg_llvm_loop_begin(CgLlvmFn *f, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef step,
                                CgLlvmLoop *l)
{
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(f->b), body;
    l->head = new_block(f, "for");
    body = new_block(f, "body");
    l->exit = new_block(f, "end");
    l->step = step;
    LLVMBuildBr(f->b, l->head);
    LLVMPositionBuilderAtEnd(f->b, l->head);
    l->iv = LLVMBuildPhi(f->b, LLVMTypeOf(lo), "iv");
    LLVMAddIncoming(l->iv, &lo, &pre, 1);
    LLVMBuildCondBr(f->b, LLVMBuildICmp(f->b, LLVMIntSLT, l->iv, hi, ""), body, l->exit);
    LLVMPositionBuilderAtEnd(f->b, body);
    return l->iv;
}

void cg_llvm_loop_end(CgLlvmFn *f, CgLlvmLoop *l)
{
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(f->b);
    LLVMValueRef next = LLVMBuildAdd(f->b, l->iv, l->step, "");
    LLVMBuildBr(f->b, l->head);
    LLVMAddIncoming(l->iv, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(f->b, l->exit);
}

/* A counted element loop, i = 0 .. n-1 (n >= 1), in rotated form (the shape the vectorizer wants). */
typedef struct ELoop {
    LLVMBasicBlockRef body;
    LLVMValueRef i;
    int64_t n;
} ELoop;

static LLVMValueRef eloop_begin(CgLlvmFn *f, int64_t n, ELoop *l)
{
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(f->b);
    LLVMValueRef zero = ci64(f, 0);
    l->body = new_block(f, "e");
    l->n = n;
    LLVMBuildBr(f->b, l->body);
    LLVMPositionBuilderAtEnd(f->b, l->body);
    l->i = LLVMBuildPhi(f->b, i64t(f), "i");
    LLVMAddIncoming(l->i, &zero, &pre, 1);
    return l->i;
}

static void eloop_end(CgLlvmFn *f, ELoop *l)
{
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(f->b), exit = new_block(f, "ex");
    LLVMValueRef next = LLVMBuildNUWAdd(f->b, l->i, ci64(f, 1), "");
    LLVMAddIncoming(l->i, &next, &latch, 1);
    LLVMBuildCondBr(f->b, LLVMBuildICmp(f->b, LLVMIntULT, next, ci64(f, l->n), ""), l->body, exit);
    LLVMPositionBuilderAtEnd(f->b, exit);
}

/* ---- tiles ---- */

static void lifetime(CgLlvmFn *f, int start, LLVMValueRef alloca)
{
    LLVMTypeRef pt = LLVMTypeOf(alloca);
    cg_llvm_call(f, start ? "llvm.lifetime.start" : "llvm.lifetime.end", &pt, 1, &alloca, 1);
}

/* A fresh tile; its life starts here (the caller or the liveness schedule ends it). */
static LLVMValueRef tile_new_n(CgLlvmFn *f, KirDtype t, int64_t numel)
{
    LLVMValueRef p = LLVMBuildAlloca(f->ab, LLVMArrayType2(cg_llvm_mem_type(f->u, t), (uint64_t)numel), "");
    LLVMSetAlignment(p, 64);
    lifetime(f, 1, p);
    return p;
}

static LLVMValueRef tile_new(CgLlvmFn *f, const KirType *t)
{
    return tile_new_n(f, t->dtype, kir_type_numel(t));
}

static LLVMValueRef slot_new(CgLlvmFn *f, LLVMTypeRef t)
{
    return LLVMBuildAlloca(f->ab, t, "");
}

static LLVMValueRef elt(CgLlvmFn *f, KirDtype t, LLVMValueRef base, LLVMValueRef idx)
{
    return LLVMBuildInBoundsGEP2(f->b, cg_llvm_mem_type(f->u, t), base, &idx, 1, "");
}

static LLVMValueRef load_mem(CgLlvmFn *f, KirDtype t, LLVMValueRef p)
{
    LLVMValueRef v = LLVMBuildLoad2(f->b, cg_llvm_mem_type(f->u, t), p, "");
    LLVMSetAlignment(v, (unsigned)kir_dtype_bytes(t));
    return cg_llvm_from_mem(f, t, v);
}

static void store_mem(CgLlvmFn *f, KirDtype t, LLVMValueRef p, LLVMValueRef v)
{
    LLVMValueRef s = LLVMBuildStore(f->b, cg_llvm_to_mem(f, t, v), p);
    LLVMSetAlignment(s, (unsigned)kir_dtype_bytes(t));
}

static LLVMValueRef tget(CgLlvmFn *f, KirDtype t, LLVMValueRef base, LLVMValueRef idx)
{
    return load_mem(f, t, elt(f, t, base, idx));
}

static void tset(CgLlvmFn *f, KirDtype t, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v)
{
    store_mem(f, t, elt(f, t, base, idx), v);
}

/* Operand x at flat element idx: a scalar is splatted. */
static LLVMValueRef opnd(CgLlvmFn *f, const KirValue *x, LLVMValueRef idx)
{
    LLVMValueRef v = f->vals[x->id];
    return x->type.rank ? tget(f, x->type.dtype, v, idx) : v;
}

static void tile_copy(CgLlvmFn *f, KirDtype t, int64_t numel, LLVMValueRef dst, LLVMValueRef src)
{
    ELoop l;
    LLVMValueRef i = eloop_begin(f, numel, &l);
    LLVMTypeRef mt = cg_llvm_mem_type(f->u, t);
    LLVMValueRef v = LLVMBuildLoad2(f->b, mt, elt(f, t, src, i), "");
    LLVMBuildStore(f->b, v, elt(f, t, dst, i));
    eloop_end(f, &l);
}

/* ---- ops ---- */

static LLVMValueRef elem_compute(CgLlvmFn *f, const KirInst *in, LLVMValueRef *x)
{
    KirDtype t = in->ops[0]->type.dtype;
    switch (in->op) {
    case KIR_OP_SELECT: return LLVMBuildSelect(f->b, x[0], x[1], x[2], "");
    case KIR_OP_CAST: return cg_llvm_elem_cast(f, t, (KirDtype)in->i, x[0]);
    case KIR_OP_RAND: return cg_llvm_elem_rand(f, x[0], x[1]);
    default: break;
    }
    if (in->n_ops == 2) return cg_llvm_elem_binary(f, in->op, t, x[0], x[1]);
    return cg_llvm_elem_unary(f, in->op, t, x[0]);
}

/* Element-wise ops and rand: scalar result directly, else a loop over the result tile. */
static void emit_elem(CgLlvmFn *f, const KirInst *in)
{
    const KirType *rt = &in->res[0]->type;
    LLVMValueRef x[3];
    if (rt->rank == 0) {
        for (int k = 0; k < in->n_ops; k++)
            x[k] = f->vals[in->ops[k]->id];
        f->vals[in->res[0]->id] = elem_compute(f, in, x);
        return;
    }
    LLVMValueRef out = tile_new(f, rt);
    ELoop l;
    LLVMValueRef i = eloop_begin(f, kir_type_numel(rt), &l);
    for (int k = 0; k < in->n_ops; k++)
        x[k] = opnd(f, in->ops[k], i);
    tset(f, rt->dtype, out, i, elem_compute(f, in, x));
    eloop_end(f, &l);
    f->vals[in->res[0]->id] = out;
}

static void emit_fill(CgLlvmFn *f, const KirInst *in)
{
    const KirType *rt = &in->res[0]->type;
    LLVMValueRef out = tile_new(f, rt);
    ELoop l;
    LLVMValueRef i = eloop_begin(f, kir_type_numel(rt), &l);
    LLVMValueRef v = in->op == KIR_OP_ARANGE ? LLVMBuildTrunc(f->b, i, cg_llvm_reg_type(f->u, KIR_I32), "")
                                             : f->vals[in->ops[0]->id];
    tset(f, rt->dtype, out, i, v);
    eloop_end(f, &l);
    f->vals[in->res[0]->id] = out;
}

static void emit_broadcast(CgLlvmFn *f, const KirInst *in)
{
    const KirType *xt = &in->ops[0]->type, *rt = &in->res[0]->type;
    LLVMValueRef src = f->vals[in->ops[0]->id], out = tile_new(f, rt);
    int64_t m = rt->shape[0], n = rt->shape[1];
    ELoop lm, ln;
    LLVMValueRef r = eloop_begin(f, m, &lm);
    LLVMValueRef c = eloop_begin(f, n, &ln);
    LLVMValueRef si = xt->shape[0] == 1 ? ci64(f, 0) : r;
    if (xt->shape[1] != 1) si = LLVMBuildAdd(f->b, LLVMBuildMul(f->b, si, ci64(f, xt->shape[1]), ""), c, "");
    LLVMValueRef di = LLVMBuildAdd(f->b, LLVMBuildMul(f->b, r, ci64(f, n), ""), c, "");
    LLVMTypeRef mt = cg_llvm_mem_type(f->u, rt->dtype);
    LLVMBuildStore(f->b, LLVMBuildLoad2(f->b, mt, elt(f, rt->dtype, src, si), ""),
                   elt(f, rt->dtype, out, di));
    eloop_end(f, &ln);
    eloop_end(f, &lm);
    f->vals[in->res[0]->id] = out;
}

/* ---- reduce ---- */

typedef struct Red {
    KirReduce kind;
    KirDtype in, out; /* element dtype of x, of the result */
} Red;

static LLVMValueRef red_identity(CgLlvmFn *f, const Red *r)
{
    LLVMTypeRef t = cg_llvm_reg_type(f->u, r->out);
    if (r->out == KIR_F32) {
        if (r->kind == KIR_RED_SUM) return LLVMConstReal(t, 0.0);
        return LLVMConstReal(t, r->kind == KIR_RED_MAX ? -(double)INFINITY : (double)INFINITY);
    }
    if (r->kind == KIR_RED_SUM) return LLVMConstInt(t, 0, 0);
    int u = r->out == KIR_U8 || r->out == KIR_I1;
    unsigned w = LLVMGetIntTypeWidth(t);
    unsigned long long smax = w == 64 ? 0x7fffffffffffffffull : (1ull << (w - 1)) - 1;
    if (r->kind == KIR_RED_MAX) return u ? LLVMConstInt(t, 0, 0) : LLVMConstInt(t, ~smax, 1);
    return u ? LLVMConstAllOnes(t) : LLVMConstInt(t, smax, 0);
}

/* An element of x in the accumulator's type. */
static LLVMValueRef red_elem(CgLlvmFn *f, const Red *r, LLVMValueRef v)
{
    if (kir_dtype_is_float(r->in)) return cg_llvm_to_f32(f, r->in, v);
    if (r->in == r->out) return v;
    LLVMTypeRef t = cg_llvm_reg_type(f->u, r->out);
    return r->in == KIR_U8 || r->in == KIR_I1 ? LLVMBuildZExt(f->b, v, t, "") : LLVMBuildSExt(f->b, v, t, "");
}

static LLVMValueRef red_combine(CgLlvmFn *f, const Red *r, LLVMValueRef acc, LLVMValueRef v)
{
    if (r->out == KIR_F32 && r->kind == KIR_RED_SUM) {
        LLVMValueRef s = LLVMBuildFAdd(f->b, acc, v, "");
        LLVMSetFastMathFlags(s, LLVMFastMathAllowReassoc); /* kir_ops.def: order unspecified */
        return s;
    }
    if (r->kind == KIR_RED_SUM) return cg_llvm_elem_binary(f, KIR_OP_ADD, r->out, acc, v);
    return cg_llvm_elem_binary(f, r->kind == KIR_RED_MAX ? KIR_OP_MAX : KIR_OP_MIN, r->out, acc, v);
}

static void emit_reduce(CgLlvmFn *f, const KirInst *in)
{
    const KirType *xt = &in->ops[0]->type, *rt = &in->res[0]->type;
    Red r = {(KirReduce)in->i, xt->dtype, rt->dtype};
    LLVMValueRef x = f->vals[in->ops[0]->id];
    LLVMTypeRef at = cg_llvm_reg_type(f->u, r.out);
    ELoop lo, li;
    if (xt->rank == 1 || in->i2 == 1) { /* reduce the contiguous axis: a scalar accumulator per row */
        int64_t rows = xt->rank == 1 ? 1 : xt->shape[0], cols = xt->shape[xt->rank - 1];
        LLVMValueRef acc = slot_new(f, at), out = rt->rank ? tile_new(f, rt) : NULL;
        LLVMValueRef row = rt->rank ? eloop_begin(f, rows, &lo) : ci64(f, 0);
        LLVMBuildStore(f->b, red_identity(f, &r), acc);
        LLVMValueRef c = eloop_begin(f, cols, &li);
        LLVMValueRef v = red_elem(
            f, &r, tget(f, r.in, x, LLVMBuildAdd(f->b, LLVMBuildMul(f->b, row, ci64(f, cols), ""), c, "")));
        LLVMBuildStore(f->b, red_combine(f, &r, LLVMBuildLoad2(f->b, at, acc, ""), v), acc);
        eloop_end(f, &li);
        LLVMValueRef total = LLVMBuildLoad2(f->b, at, acc, "");
        if (!rt->rank) {
            f->vals[in->res[0]->id] = total;
            return;
        }
        tset(f, r.out, out, row, total);
        eloop_end(f, &lo);
        f->vals[in->res[0]->id] = out;
        return;
    }
    /* axis 0 of [M,N]: out[n] = identity, then rows folded in order (vectorizes along n) */
    int64_t m = xt->shape[0], n = xt->shape[1];
    LLVMValueRef out = tile_new(f, rt);
    LLVMValueRef c = eloop_begin(f, n, &li);
    tset(f, r.out, out, c, red_identity(f, &r));
    eloop_end(f, &li);
    LLVMValueRef row = eloop_begin(f, m, &lo);
    c = eloop_begin(f, n, &li);
    LLVMValueRef v =
        red_elem(f, &r, tget(f, r.in, x, LLVMBuildAdd(f->b, LLVMBuildMul(f->b, row, ci64(f, n), ""), c, "")));
    tset(f, r.out, out, c, red_combine(f, &r, tget(f, r.out, out, c), v));
    eloop_end(f, &li);
    eloop_end(f, &lo);
    f->vals[in->res[0]->id] = out;
}

/* ---- dot ---- */

/* x as a tile of the accumulator's element type (f32, or i32 for i8), converted once. */
static LLVMValueRef dot_operand(CgLlvmFn *f, const KirValue *x, KirDtype acc)
{
    LLVMValueRef src = f->vals[x->id];
    if (x->type.dtype == acc) return src;
    int64_t n = kir_type_numel(&x->type);
    LLVMValueRef out = tile_new_n(f, acc, n);
    ELoop l;
    LLVMValueRef i = eloop_begin(f, n, &l);
    LLVMValueRef v = tget(f, x->type.dtype, src, i);
    v = acc == KIR_F32 ? cg_llvm_to_f32(f, x->type.dtype, v)
                       : LLVMBuildSExt(f->b, v, cg_llvm_reg_type(f->u, acc), "");
    tset(f, acc, out, i, v);
    eloop_end(f, &l);
    return out;
}

static void emit_dot(CgLlvmFn *f, const KirInst *in)
{
    const KirType *at = &in->ops[0]->type, *ct = &in->ops[2]->type;
    KirDtype acc = ct->dtype;
    int64_t m = at->shape[0], kk = at->shape[1], n = ct->shape[1];
    LLVMValueRef a = dot_operand(f, in->ops[0], acc), b = dot_operand(f, in->ops[1], acc);
    LLVMValueRef out = tile_new(f, ct);
    tile_copy(f, acc, m * n, out, f->vals[in->ops[2]->id]);
    ELoop lm, lk, ln;
    LLVMValueRef i = eloop_begin(f, m, &lm);
    LLVMValueRef k = eloop_begin(f, kk, &lk);
    LLVMValueRef av = tget(f, acc, a, LLVMBuildAdd(f->b, LLVMBuildMul(f->b, i, ci64(f, kk), ""), k, ""));
    LLVMValueRef j = eloop_begin(f, n, &ln);
    LLVMValueRef bv = tget(f, acc, b, LLVMBuildAdd(f->b, LLVMBuildMul(f->b, k, ci64(f, n), ""), j, ""));
    LLVMValueRef oi = LLVMBuildAdd(f->b, LLVMBuildMul(f->b, i, ci64(f, n), ""), j, "");
    LLVMValueRef cur = tget(f, acc, out, oi), sum;
    if (acc == KIR_F32)
        sum = LLVMBuildFAdd(f->b, cur, LLVMBuildFMul(f->b, av, bv, ""), "");
    else
        sum = LLVMBuildAdd(f->b, cur, LLVMBuildMul(f->b, av, bv, ""), "");
    tset(f, acc, out, oi, sum);
    eloop_end(f, &ln);
    eloop_end(f, &lk);
    eloop_end(f, &lm);
    if (a != f->vals[in->ops[0]->id]) lifetime(f, 0, a);
    if (b != f->vals[in->ops[1]->id]) lifetime(f, 0, b);
    f->vals[in->res[0]->id] = out;
}

/* ---- memory ---- */

/* One lane of load/store/atomic_add at flat index idx (NULL: scalar offsets). Returns the loaded value. */
static LLVMValueRef mem_lane(CgLlvmFn *f, const KirInst *in, LLVMValueRef idx)
{
    KirDtype t = in->ops[0]->type.dtype;
    int is_load = in->op == KIR_OP_LOAD;
    const KirValue *mask =
        is_load ? (in->n_ops >= 3 ? in->ops[2] : NULL) : (in->n_ops == 4 ? in->ops[3] : NULL);
    LLVMValueRef off = opnd(f, in->ops[1], idx);
    if (LLVMGetIntTypeWidth(LLVMTypeOf(off)) < 64) off = LLVMBuildSExt(f->b, off, i64t(f), "");
    LLVMValueRef p = elt(f, t, f->vals[in->ops[0]->id], off);
    LLVMValueRef val = is_load ? NULL : opnd(f, in->ops[2], idx);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(f->b), then = NULL, join = NULL;
    if (mask) {
        then = new_block(f, "m");
        join = new_block(f, "mj");
        LLVMBuildCondBr(f->b, opnd(f, mask, idx), then, join);
        pre = LLVMGetInsertBlock(f->b);
        LLVMPositionBuilderAtEnd(f->b, then);
    }
    LLVMValueRef got = NULL;
    if (is_load) {
        got = load_mem(f, t, p);
    } else if (in->op == KIR_OP_STORE) {
        store_mem(f, t, p, val);
    } else {
        LLVMAtomicRMWBinOp op = t == KIR_F32 ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd;
        LLVMValueRef a = LLVMBuildAtomicRMW(f->b, op, p, val, LLVMAtomicOrderingMonotonic, 0);
        LLVMSetAlignment(a, 4);
    }
    if (!mask) return got;
    LLVMBasicBlockRef then_end = LLVMGetInsertBlock(f->b);
    LLVMBuildBr(f->b, join);
    LLVMPositionBuilderAtEnd(f->b, join);
    if (!is_load) return NULL;
    LLVMValueRef other = in->n_ops == 4 ? f->vals[in->ops[3]->id] : LLVMConstNull(cg_llvm_reg_type(f->u, t));
    LLVMValueRef phi = LLVMBuildPhi(f->b, cg_llvm_reg_type(f->u, t), "");
    LLVMValueRef inv[2] = {got, other};
    LLVMBasicBlockRef inb[2] = {then_end, pre};
    LLVMAddIncoming(phi, inv, inb, 2);
    return phi;
}

static void emit_mem(CgLlvmFn *f, const KirInst *in)
{
    const KirType *ot = &in->ops[1]->type;
    if (ot->rank == 0) {
        LLVMValueRef v = mem_lane(f, in, NULL);
        if (in->op == KIR_OP_LOAD) f->vals[in->res[0]->id] = v;
        return;
    }
    LLVMValueRef out = in->op == KIR_OP_LOAD ? tile_new(f, &in->res[0]->type) : NULL;
    ELoop l;
    LLVMValueRef i = eloop_begin(f, kir_type_numel(ot), &l);
    LLVMValueRef v = mem_lane(f, in, i);
    if (out) tset(f, in->res[0]->type.dtype, out, i, v);
    eloop_end(f, &l);
    if (out) f->vals[in->res[0]->id] = out;
}

/* arrive: every lane of a program is this one thread, so a sequentially consistent fence, the counter's
 * atomic increment and a second fence give the op's release/acquire meaning (kir_ops.def). */
static LLVMValueRef emit_arrive(CgLlvmFn *f, const KirInst *in)
{
    LLVMValueRef off = f->vals[in->ops[1]->id];
    if (LLVMGetIntTypeWidth(LLVMTypeOf(off)) < 64) off = LLVMBuildSExt(f->b, off, i64t(f), "");
    LLVMValueRef p = elt(f, KIR_I32, f->vals[in->ops[0]->id], off);
    LLVMBuildFence(f->b, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
    LLVMValueRef one = LLVMConstInt(cg_llvm_reg_type(f->u, KIR_I32), 1, 0);
    LLVMValueRef a =
        LLVMBuildAtomicRMW(f->b, LLVMAtomicRMWBinOpAdd, p, one, LLVMAtomicOrderingSequentiallyConsistent, 0);
    LLVMSetAlignment(a, 4);
    LLVMBuildFence(f->b, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
    return a;
}

/* ---- structure ---- */

static IrStatus emit_block(CgLlvmFn *f, const KirBlock *blk, const ForCtx *fc);

/* Ends the life of the tiles whose storage dies at walk position p. */
static void kill_at(CgLlvmFn *f, int p)
{
    for (int id = f->dead_head[p]; id >= 0; id = f->dead_next[id])
        if (f->vals[id]) lifetime(f, 0, f->vals[id]);
}

static void emit_yield(CgLlvmFn *f, const KirInst *y, const ForCtx *fc)
{
    int n = y->n_ops;
    LLVMValueRef src[KIR_MAX_PARAMS * 4];
    LLVMValueRef *srcs = n <= (int)(sizeof src / sizeof src[0]) ? src : calloc((size_t)n, sizeof *srcs);
    KILN_ASSERT(srcs);
    for (int j = 0; j < n; j++) { /* stage a tile that is another slot's current value */
        const KirValue *v = y->ops[j];
        srcs[j] = f->vals[v->id];
        if (!v->type.rank) continue;
        for (int k = 0; k < n; k++)
            if (k != j && srcs[j] == fc->slot[k]) {
                LLVMValueRef tmp = tile_new(f, &v->type);
                tile_copy(f, v->type.dtype, kir_type_numel(&v->type), tmp, srcs[j]);
                srcs[j] = tmp;
                break;
            }
    }
    for (int j = 0; j < n; j++) {
        const KirValue *v = y->ops[j];
        if (!v->type.rank)
            LLVMBuildStore(f->b, srcs[j], fc->slot[j]);
        else if (srcs[j] != fc->slot[j])
            tile_copy(f, v->type.dtype, kir_type_numel(&v->type), fc->slot[j], srcs[j]);
        if (v->type.rank && srcs[j] != f->vals[v->id]) lifetime(f, 0, srcs[j]); /* a staging copy */
    }
    if (srcs != src) free(srcs);
}

static IrStatus emit_for(CgLlvmFn *f, const KirInst *in)
{
    int n = in->n_ops - 3;
    LLVMValueRef *slot = calloc((size_t)n + 1, sizeof *slot);
    if (!slot) return ir_diag_set(f->d, IR_ERR_NOMEM, "kernel %s: llvm: out of memory", f->k->name);
    for (int j = 0; j < n; j++) {
        const KirValue *init = in->ops[3 + j];
        if (!init->type.rank) {
            slot[j] = slot_new(f, cg_llvm_reg_type(f->u, init->type.dtype));
            LLVMBuildStore(f->b, f->vals[init->id], slot[j]);
        } else {
            slot[j] = tile_new(f, &init->type);
            tile_copy(f, init->type.dtype, kir_type_numel(&init->type), slot[j], f->vals[init->id]);
        }
    }
    CgLlvmLoop l;
    const KirBlock *body = in->body;
    f->vals[body->args[0]->id] =
        cg_llvm_loop_begin(f, f->vals[in->ops[0]->id], f->vals[in->ops[1]->id], f->vals[in->ops[2]->id], &l);
    for (int j = 0; j < n; j++) {
        const KirValue *a = body->args[1 + j];
        f->vals[a->id] =
            a->type.rank ? slot[j] : LLVMBuildLoad2(f->b, cg_llvm_reg_type(f->u, a->type.dtype), slot[j], "");
    }
    ForCtx fc = {in, slot};
    IrStatus s = emit_block(f, body, &fc);
    if (s == IR_OK) {
        cg_llvm_loop_end(f, &l);
        kill_at(f, f->pos++);
        for (int j = 0; j < in->n_res; j++) {
            const KirValue *r = in->res[j];
            f->vals[r->id] = r->type.rank
                                 ? slot[j]
                                 : LLVMBuildLoad2(f->b, cg_llvm_reg_type(f->u, r->type.dtype), slot[j], "");
        }
    }
    free(slot);
    return s;
}

static IrStatus emit_inst(CgLlvmFn *f, const KirInst *in, const ForCtx *fc)
{
    LLVMValueRef *res = in->n_res && in->op != KIR_OP_FOR ? &f->vals[in->res[0]->id] : NULL;
    if (kir_op_flags(in->op) & KIR_F_ELEM) {
        emit_elem(f, in);
        return IR_OK;
    }
    switch (in->op) {
    case KIR_OP_PARAM: *res = f->param[in->i]; return IR_OK;
    case KIR_OP_CONST:
        if (kir_dtype_is_float((KirDtype)in->i2))
            *res = cg_llvm_const_f(f, (KirDtype)in->i2, in->f);
        else
            *res = LLVMConstInt(cg_llvm_reg_type(f->u, (KirDtype)in->i2), (unsigned long long)in->i, 1);
        return IR_OK;
    case KIR_OP_PID: *res = f->pid[in->i]; return IR_OK;
    case KIR_OP_NPROG: *res = f->nprog[in->i]; return IR_OK;
    case KIR_OP_ARANGE:
    case KIR_OP_SPLAT: emit_fill(f, in); return IR_OK;
    case KIR_OP_RAND: emit_elem(f, in); return IR_OK;
    case KIR_OP_EXPAND: *res = f->vals[in->ops[0]->id]; return IR_OK;
    case KIR_OP_BROADCAST: emit_broadcast(f, in); return IR_OK;
    case KIR_OP_REDUCE: emit_reduce(f, in); return IR_OK;
    case KIR_OP_LOAD:
    case KIR_OP_STORE:
    case KIR_OP_ATOMIC_ADD: emit_mem(f, in); return IR_OK;
    case KIR_OP_ARRIVE: *res = emit_arrive(f, in); return IR_OK;
    case KIR_OP_DOT: emit_dot(f, in); return IR_OK;
    case KIR_OP_FOR: return emit_for(f, in);
    case KIR_OP_YIELD:
        KILN_ASSERT(fc);
        emit_yield(f, in, fc);
        return IR_OK;
    case KIR_OP_RET: return IR_OK;
    default: break;
    }
    return ir_diag_set(f->d, IR_ERR_UNSUPPORTED, "kernel %s: llvm: op %s not lowered", f->k->name,
                       kir_op_name(in->op));
}

static IrStatus emit_block(CgLlvmFn *f, const KirBlock *blk, const ForCtx *fc)
{
    for (int i = 0; i < blk->n_insts; i++) {
        int here = f->pos++;
        IrStatus s = emit_inst(f, blk->insts[i], fc);
        if (s != IR_OK) return s;
        kill_at(f, here);
    }
    return IR_OK;
}

/* ---- tile liveness ----
 * Positions number the instructions in walk order; a `for` takes one before its body and one after
 * (its end). A tile's storage is owned by its root value (expand results and loop results share their
 * operand's / loop slot's storage; a loop slot is rooted at the body argument). Storage dies at the last
 * use of any value sharing it; used inside a loop it was defined outside of, at that loop's end. */
typedef struct Live {
    int *root, *def, *end; /* by value id */
    int pos, n;
} Live;

static int is_tile(const KirValue *v)
{
    return v->type.rank > 0 && !v->type.is_ptr;
}

static void live_use(Live *l, const KirValue *v, int p)
{
    if (!is_tile(v)) return;
    int r = l->root[v->id];
    if (l->end[r] < p) l->end[r] = p;
}

static void live_def(Live *l, const KirValue *v, int root, int p)
{
    l->root[v->id] = root;
    if (root == v->id) l->def[root] = l->end[root] = p;
}

static void live_walk(Live *l, const KirBlock *blk)
{
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        int here = l->pos++;
        for (int k = 0; k < in->n_ops; k++)
            live_use(l, in->ops[k], here);
        if (in->op != KIR_OP_FOR) {
            for (int r = 0; r < in->n_res; r++)
                if (is_tile(in->res[r]))
                    live_def(l, in->res[r],
                             in->op == KIR_OP_EXPAND ? l->root[in->ops[0]->id] : in->res[r]->id, here);
            continue;
        }
        const KirBlock *body = in->body;
        for (int j = 1; j < body->n_args; j++)
            if (is_tile(body->args[j])) live_def(l, body->args[j], body->args[j]->id, here);
        live_walk(l, body);
        int end = l->pos++;
        for (int v = 0; v < l->n; v++)
            if (l->root[v] == v && l->def[v] >= 0 && l->def[v] < here && l->end[v] > here && l->end[v] < end)
                l->end[v] = end;
        for (int j = 1; j < body->n_args; j++) {
            if (!is_tile(body->args[j])) continue;
            int a = body->args[j]->id;
            if (l->end[a] < end) l->end[a] = end;
            if (j - 1 < in->n_res) l->root[in->res[j - 1]->id] = a;
        }
    }
}

IrStatus cg_llvm_emit_body(CgLlvmFn *f)
{
    int n = f->k->n_values;
    Live l = {calloc((size_t)n + 1, sizeof(int)), malloc(((size_t)n + 1) * sizeof(int)),
              malloc(((size_t)n + 1) * sizeof(int)), 0, n};
    IrStatus s = IR_OK;
    if (l.root && l.def && l.end) {
        for (int v = 0; v <= n; v++)
            l.def[v] = l.end[v] = -1;
        live_walk(&l, f->k->body);
        f->dead_head = malloc(((size_t)l.pos + 1) * sizeof(int));
        f->dead_next = malloc(((size_t)n + 1) * sizeof(int));
    }
    if (!f->dead_head || !f->dead_next) {
        s = ir_diag_set(f->d, IR_ERR_NOMEM, "kernel %s: llvm: out of memory", f->k->name);
    } else {
        for (int p = 0; p <= l.pos; p++)
            f->dead_head[p] = -1;
        for (int v = 0; v < n; v++)
            if (l.def[v] >= 0 && l.root[v] == v) {
                f->dead_next[v] = f->dead_head[l.end[v]];
                f->dead_head[l.end[v]] = v;
            }
        f->pos = 0;
        s = emit_block(f, f->k->body, NULL);
    }
    free(l.root);
    free(l.def);
    free(l.end);
    return s;
}

IrStatus cg_llvm_fn_begin(CgLlvmFn *f, CgLlvmUnit *u, const KirKernel *k, LLVMValueRef fn, IrDiag *d)
{
    f->u = u;
    f->k = k;
    f->fn = fn;
    f->d = d;
    f->vals = calloc((size_t)k->n_values + 1, sizeof *f->vals);
    if (!f->vals) return ir_diag_set(d, IR_ERR_NOMEM, "kernel %s: llvm: out of memory", k->name);
    f->entry = LLVMAppendBasicBlockInContext(u->ctx, fn, "entry");
    f->start = LLVMAppendBasicBlockInContext(u->ctx, fn, "start");
    f->ab = LLVMCreateBuilderInContext(u->ctx);
    f->b = LLVMCreateBuilderInContext(u->ctx);
    LLVMPositionBuilderAtEnd(f->ab, f->entry);
    LLVMPositionBuilderAtEnd(f->b, f->start);
    return IR_OK;
}

void cg_llvm_fn_finish(CgLlvmFn *f)
{
    if (f->ab) {
        LLVMPositionBuilderAtEnd(f->ab, f->entry);
        LLVMBuildBr(f->ab, f->start);
        LLVMDisposeBuilder(f->ab);
    }
    if (f->b) LLVMDisposeBuilder(f->b);
    free(f->vals);
    free(f->dead_head);
    free(f->dead_next);
    f->ab = f->b = NULL;
    f->vals = NULL;
    f->dead_head = f->dead_next = NULL;
}

#else
typedef int cg_llvm_emit_unused;
#endif
