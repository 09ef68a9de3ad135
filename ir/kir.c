/* kir.c — kernel IR: op/dtype tables, types, configs, and the builder. The typing rule of every op lives
 * in one function, kir_infer_inst (kir_verify.c), which the builder calls as it adds an instruction and
 * the verifier calls again; so a builder cannot create what the verifier would reject, except scoping.
 */
#include "kir.h"
#include "kir_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int n_ops;
    unsigned flags;
} op_table[] = {
#define X(e, name, n_ops, flags) {name, n_ops, flags},
#include "kir_ops.def"
#undef X
};

static const struct {
    const char *name;
    int bytes;
} dtype_table[] = {
    {"i1", 1},  {"i8", 1},   {"u8", 1},  {"i32", 4},    {"i64", 8},
    {"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f8e4m3", 1},
};

const char *kir_op_name(KirOp op)
{
    return (unsigned)op < KIR_OP_COUNT ? op_table[op].name : "?";
}

int kir_op_parse(const char *name, KirOp *out)
{
    for (int i = 0; i < KIR_OP_COUNT; i++)
        if (!strcmp(op_table[i].name, name)) {
            *out = (KirOp)i;
            return 1;
        }
    return 0;
}

unsigned kir_op_flags(KirOp op)
{
    return op_table[op].flags;
}

int kir_op_n_ops(KirOp op)
{
    return op_table[op].n_ops;
}

const char *kir_dtype_name(KirDtype t)
{
    return (unsigned)t < KIR_DTYPE_COUNT ? dtype_table[t].name : "?";
}

int kir_dtype_bytes(KirDtype t)
{
    return dtype_table[t].bytes;
}

int kir_dtype_is_float(KirDtype t)
{
    return t == KIR_F16 || t == KIR_BF16 || t == KIR_F32 || t == KIR_F8E4M3;
}

int kir_dtype_is_int(KirDtype t)
{
    return !kir_dtype_is_float(t);
}

KirType kir_scalar(KirDtype t)
{
    return (KirType){.dtype = t};
}

KirType kir_ptr(KirDtype t)
{
    return (KirType){.dtype = t, .is_ptr = 1};
}

KirType kir_tile1(KirDtype t, int n)
{
    return (KirType){.dtype = t, .rank = 1, .shape = {n, 0}};
}

KirType kir_tile2(KirDtype t, int m, int n)
{
    return (KirType){.dtype = t, .rank = 2, .shape = {m, n}};
}

int kir_type_eq(const KirType *a, const KirType *b)
{
    if (a->dtype != b->dtype || a->is_ptr != b->is_ptr || a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

int kir_type_numel(const KirType *t)
{
    int n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

void kir_type_print(const KirType *t, IrBuf *b)
{
    if (t->is_ptr) {
        ir_buf_printf(b, "ptr<%s>", kir_dtype_name(t->dtype));
        return;
    }
    ir_buf_printf(b, "%s", kir_dtype_name(t->dtype));
    if (t->rank == 1) ir_buf_printf(b, "[%d]", t->shape[0]);
    if (t->rank == 2) ir_buf_printf(b, "[%d,%d]", t->shape[0], t->shape[1]);
}

void kir_config_set(KirConfig *c, const char *key, int64_t v)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->key[i], key)) {
            c->val[i] = v;
            return;
        }
    KILN_ASSERT(c->n < KIR_MAX_CFG);
    c->key[c->n] = key;
    c->val[c->n++] = v;
}

int64_t kir_config_get(const KirConfig *c, const char *key, int64_t dflt)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->key[i], key)) return c->val[i];
    return dflt;
}

void kir_params_print(const KirKernel *k, IrBuf *b)
{
    for (int i = 0; i < k->n_params; i++) {
        ir_buf_printf(b, "%s%s:", i ? " " : "", k->params[i].name);
        kir_type_print(&k->params[i].type, b);
    }
}

void kir_grid_print(const KirKernel *k, IrBuf *b)
{
    for (int i = 0; i < 3; i++) {
        const KirGridDim *g = &k->grid[i];
        if (i) ir_buf_put(b, " ", 1);
        if (g->param < 0)
            ir_buf_printf(b, "%lld", (long long)g->c);
        else
            ir_buf_printf(b, "cdiv(%s*%lld,%lld)", k->params[g->param].name, (long long)g->mul,
                          (long long)g->div);
    }
}

void kir_config_print(const KirConfig *c, IrBuf *b)
{
    for (int i = 0; i < c->n; i++)
        ir_buf_printf(b, "%s%s=%lld", i ? " " : "", c->key[i], (long long)c->val[i]);
}

uint32_t kir_mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

float kir_rand_ref(int64_t seed, int32_t counter)
{
    uint32_t s = (uint32_t)(uint64_t)seed, hi = (uint32_t)((uint64_t)seed >> 32);
    uint32_t h = kir_mix32((uint32_t)counter ^ kir_mix32(s ^ 0x9e3779b9u) ^ hi);
    return (float)(h >> 8) * (1.0f / 16777216.0f);
}

KirKernel *kir_kernel_create(IrArena *a, const char *name, const char *family, const KirConfig *cfg)
{
    KirKernel *k = ir_arena_alloc(a, sizeof *k);
    if (!k) return NULL;
    k->arena = a;
    k->name = ir_arena_strdup(a, name);
    k->family = ir_arena_strdup(a, family);
    k->body = ir_arena_alloc(a, sizeof *k->body);
    if (!k->name || !k->family || !k->body) return NULL;
    if (cfg) k->cfg = *cfg;
    k->warps = (int)kir_config_get(&k->cfg, "WARPS", 4);
    k->min_blocks = (int)kir_config_get(&k->cfg, "MIN_BLOCKS", 0);
    for (int i = 0; i < 3; i++)
        k->grid[i] = (KirGridDim){.param = -1, .mul = 1, .div = 1, .c = 1};
    return k;
}

void kir_builder_init(KirBuilder *b, KirKernel *k, IrDiag *d)
{
    memset(b, 0, sizeof *b);
    b->k = k;
    b->cur = k->body;
    b->d = d;
}

static int failed(const KirBuilder *b)
{
    return b->d->status != IR_OK;
}

static KirValue *new_value(KirBuilder *b, KirType t)
{
    KirValue *v = ir_arena_alloc(b->k->arena, sizeof *v);
    if (!v) {
        ir_diag_set(b->d, IR_ERR_NOMEM, "kernel %s: out of memory", b->k->name);
        return NULL;
    }
    v->id = b->k->n_values++;
    v->type = t;
    return v;
}

/* A typed stand-in returned after an error, so callers can go on without checks. */
static KirValue *poison(KirBuilder *b, KirType t)
{
    static KirValue dummy;
    KirValue *v = b->k ? ir_arena_alloc(b->k->arena, sizeof *v) : NULL;
    if (!v) v = &dummy;
    v->type = t;
    v->id = -1;
    return v;
}

static int block_push(KirBuilder *b, KirBlock *blk, KirInst *in)
{
    if (blk->n_insts == blk->cap) {
        int cap = blk->cap ? blk->cap * 2 : 16;
        KirInst **p = ir_arena_alloc(b->k->arena, sizeof(KirInst *) * (size_t)cap);
        if (!p) return 0;
        if (blk->insts) memcpy(p, blk->insts, sizeof(KirInst *) * (size_t)blk->n_insts);
        blk->insts = p;
        blk->cap = cap;
    }
    blk->insts[blk->n_insts++] = in;
    return 1;
}

/* Appends an instruction with the given operands; infers its result (at most one here; `for` is built
 * separately) and returns it, or a poison value of type `fallback` after an error. */
static KirValue *emit(KirBuilder *b, KirOp op, KirValue *const *ops, int n_ops, int64_t i, int64_t i2,
                      double f, KirType fallback)
{
    if (failed(b)) return poison(b, fallback);
    for (int k = 0; k < n_ops; k++)
        if (!ops[k] || ops[k]->id < 0) {
            ir_diag_set(b->d, IR_ERR_INTERNAL, "kernel %s: %s: operand %d is missing", b->k->name,
                        kir_op_name(op), k);
            return poison(b, fallback);
        }
    KirInst *in = ir_arena_alloc(b->k->arena, sizeof *in);
    KirValue **o = n_ops ? ir_arena_alloc(b->k->arena, sizeof(KirValue *) * (size_t)n_ops) : NULL;
    if (!in || (n_ops && !o)) {
        ir_diag_set(b->d, IR_ERR_NOMEM, "kernel %s: out of memory", b->k->name);
        return poison(b, fallback);
    }
    in->op = op;
    in->n_ops = n_ops;
    in->ops = o;
    for (int k = 0; k < n_ops; k++)
        o[k] = ops[k];
    in->i = i;
    in->i2 = i2;
    in->f = f;
    KirType rt;
    int has_res = 0;
    IrDiag local = {0};
    if (kir_infer_inst(b->k, in, &rt, &has_res, &local) != IR_OK) {
        ir_diag_set(b->d, IR_ERR_INTERNAL, "kernel %s: %s: %s", b->k->name, kir_op_name(op), local.msg);
        return poison(b, fallback);
    }
    KirValue *r = NULL;
    if (has_res) {
        KirValue **res = ir_arena_alloc(b->k->arena, sizeof(KirValue *));
        if (!res || !(r = new_value(b, rt))) return poison(b, fallback);
        r->def = in;
        in->res = res;
        in->res[0] = r;
        in->n_res = 1;
    }
    if (!block_push(b, b->cur, in)) {
        ir_diag_set(b->d, IR_ERR_NOMEM, "kernel %s: out of memory", b->k->name);
        return poison(b, fallback);
    }
    return r ? r : poison(b, fallback);
}

KirValue *kir_param(KirBuilder *b, const char *name, KirType t, unsigned flags)
{
    KirKernel *k = b->k;
    if (failed(b)) return poison(b, t);
    if (b->depth || k->n_params == KIR_MAX_PARAMS || k->body->n_insts != k->n_params || t.rank) {
        ir_diag_set(b->d, IR_ERR_INTERNAL,
                    "kernel %s: param %s: params come first, at top level, scalar or pointer", k->name, name);
        return poison(b, t);
    }
    KirParam *p = &k->params[k->n_params];
    p->name = ir_arena_strdup(k->arena, name);
    p->type = t;
    p->flags = flags;
    KirValue *v = emit(b, KIR_OP_PARAM, NULL, 0, k->n_params, 0, 0, t);
    if (failed(b)) return v;
    v->type = t;
    p->value = v;
    k->n_params++;
    return v;
}

void kir_grid(KirBuilder *b, int axis, const KirValue *param, int64_t mul, int64_t div)
{
    KILN_ASSERT(axis >= 0 && axis < 3 && mul > 0 && div > 0);
    int idx = -1;
    for (int i = 0; param && i < b->k->n_params; i++)
        if (b->k->params[i].value == param) idx = i;
    if (param && (idx < 0 || b->k->params[idx].type.is_ptr || !kir_dtype_is_int(param->type.dtype))) {
        ir_diag_set(b->d, IR_ERR_INTERNAL, "kernel %s: grid: not an integer parameter", b->k->name);
        return;
    }
    b->k->grid[axis] = (KirGridDim){.param = idx, .mul = mul, .div = div, .c = 1};
}

void kir_grid_const(KirBuilder *b, int axis, int64_t c)
{
    KILN_ASSERT(axis >= 0 && axis < 3 && c > 0);
    b->k->grid[axis] = (KirGridDim){.param = -1, .mul = 1, .div = 1, .c = c};
}

KirValue *kir_const_i32(KirBuilder *b, int64_t v)
{
    return emit(b, KIR_OP_CONST, NULL, 0, v, KIR_I32, 0, kir_scalar(KIR_I32));
}

KirValue *kir_const_i64(KirBuilder *b, int64_t v)
{
    return emit(b, KIR_OP_CONST, NULL, 0, v, KIR_I64, 0, kir_scalar(KIR_I64));
}

KirValue *kir_const_f(KirBuilder *b, KirDtype t, double v)
{
    return emit(b, KIR_OP_CONST, NULL, 0, 0, t, v, kir_scalar(t));
}

KirValue *kir_pid(KirBuilder *b, int axis)
{
    return emit(b, KIR_OP_PID, NULL, 0, axis, 0, 0, kir_scalar(KIR_I32));
}

KirValue *kir_nprog(KirBuilder *b, int axis)
{
    return emit(b, KIR_OP_NPROG, NULL, 0, axis, 0, 0, kir_scalar(KIR_I32));
}

KirValue *kir_arange(KirBuilder *b, int n)
{
    return emit(b, KIR_OP_ARANGE, NULL, 0, n, 0, 0, kir_tile1(KIR_I32, n > 0 ? n : 1));
}

KirValue *kir_splat(KirBuilder *b, KirValue *x, int rank, const int *shape)
{
    KirType t = {.dtype = x ? x->type.dtype : KIR_F32, .rank = (unsigned char)rank};
    for (int i = 0; i < rank && i < KIR_MAX_RANK; i++)
        t.shape[i] = shape[i];
    int64_t packed = rank == 2 ? ((int64_t)shape[0] << 32) | (uint32_t)shape[1] : rank == 1 ? shape[0] : 0;
    return emit(b, KIR_OP_SPLAT, &x, 1, packed, rank, 0, t);
}

static KirType elem_fallback(KirOp op, KirValue *x, KirValue *y)
{
    KirType t = x ? x->type : kir_scalar(KIR_F32);
    if (y && y->type.rank > t.rank)
        t.shape[0] = y->type.shape[0], t.shape[1] = y->type.shape[1], t.rank = y->type.rank;
    if (op >= KIR_OP_LT && op <= KIR_OP_NE) t.dtype = KIR_I1;
    return t;
}

KirValue *kir_binary(KirBuilder *b, KirOp op, KirValue *x, KirValue *y)
{
    KirValue *ops[2] = {x, y};
    return emit(b, op, ops, 2, 0, 0, 0, elem_fallback(op, x, y));
}

KirValue *kir_unary(KirBuilder *b, KirOp op, KirValue *x)
{
    return emit(b, op, &x, 1, 0, 0, 0, elem_fallback(op, x, NULL));
}

KirValue *kir_select(KirBuilder *b, KirValue *c, KirValue *x, KirValue *y)
{
    KirValue *ops[3] = {c, x, y};
    KirType t = elem_fallback(KIR_OP_SELECT, x, y);
    if (c && c->type.rank > t.rank)
        t.rank = c->type.rank, t.shape[0] = c->type.shape[0], t.shape[1] = c->type.shape[1];
    return emit(b, KIR_OP_SELECT, ops, 3, 0, 0, 0, t);
}

KirValue *kir_cast(KirBuilder *b, KirValue *x, KirDtype t)
{
    KirType ft = x ? x->type : kir_scalar(t);
    ft.dtype = t;
    return emit(b, KIR_OP_CAST, &x, 1, t, 0, 0, ft);
}

KirValue *kir_expand(KirBuilder *b, KirValue *x, int axis)
{
    int n = x ? x->type.shape[0] : 1;
    return emit(b, KIR_OP_EXPAND, &x, 1, axis, 0, 0,
                kir_tile2(x ? x->type.dtype : KIR_F32, axis ? n : 1, axis ? 1 : n));
}

KirValue *kir_broadcast(KirBuilder *b, KirValue *x, int m, int n)
{
    return emit(b, KIR_OP_BROADCAST, &x, 1, m, n, 0, kir_tile2(x ? x->type.dtype : KIR_F32, m, n));
}

KirValue *kir_reduce(KirBuilder *b, KirValue *x, KirReduce kind, int axis)
{
    KirType t = kir_scalar(KIR_F32);
    return emit(b, KIR_OP_REDUCE, &x, 1, kind, axis, 0, t);
}

KirValue *kir_load(KirBuilder *b, KirValue *ptr, KirValue *offs, KirValue *mask, KirValue *other)
{
    KirValue *ops[4] = {ptr, offs, mask, other};
    int n = other ? 4 : mask ? 3 : 2;
    if (other && !mask) {
        ir_diag_set(b->d, IR_ERR_INTERNAL, "kernel %s: load: `other` needs a mask", b->k->name);
        n = 2;
    }
    KirType t = offs ? offs->type : kir_scalar(KIR_F32);
    t.dtype = ptr ? ptr->type.dtype : KIR_F32;
    t.is_ptr = 0;
    return emit(b, KIR_OP_LOAD, ops, n, 0, 0, 0, t);
}

void kir_store(KirBuilder *b, KirValue *ptr, KirValue *offs, KirValue *val, KirValue *mask)
{
    KirValue *ops[4] = {ptr, offs, val, mask};
    emit(b, KIR_OP_STORE, ops, mask ? 4 : 3, 0, 0, 0, kir_scalar(KIR_I32));
}

void kir_atomic_add(KirBuilder *b, KirValue *ptr, KirValue *offs, KirValue *val, KirValue *mask)
{
    KirValue *ops[4] = {ptr, offs, val, mask};
    emit(b, KIR_OP_ATOMIC_ADD, ops, mask ? 4 : 3, 0, 0, 0, kir_scalar(KIR_I32));
}

KirValue *kir_arrive(KirBuilder *b, KirValue *ptr, KirValue *offs)
{
    KirValue *ops[2] = {ptr, offs};
    return emit(b, KIR_OP_ARRIVE, ops, 2, 0, 0, 0, kir_scalar(KIR_I32));
}

KirValue *kir_dot(KirBuilder *b, KirValue *a, KirValue *bm, KirValue *acc)
{
    KirValue *ops[3] = {a, bm, acc};
    return emit(b, KIR_OP_DOT, ops, 3, 0, 0, 0, acc ? acc->type : kir_scalar(KIR_F32));
}

KirValue *kir_rand(KirBuilder *b, KirValue *seed, KirValue *offs)
{
    KirValue *ops[2] = {seed, offs};
    KirType t = offs ? offs->type : kir_scalar(KIR_F32);
    t.dtype = KIR_F32;
    return emit(b, KIR_OP_RAND, ops, 2, 0, 0, 0, t);
}

/* What loops give builders after a failure (args, results): poison values (id -1), for the induction
 * variable and up to 16 carried values. Never written, so concurrent builds share them safely. */
enum { KIR_MAX_DEAD = 17 };
static KirValue kir_dead = {.id = -1};
static KirValue *kir_dead_values[KIR_MAX_DEAD] = {
    &kir_dead, &kir_dead, &kir_dead, &kir_dead, &kir_dead, &kir_dead, &kir_dead, &kir_dead, &kir_dead,
    &kir_dead, &kir_dead, &kir_dead, &kir_dead, &kir_dead, &kir_dead, &kir_dead, &kir_dead};

KirBlock *kir_for_begin(KirBuilder *b, KirValue *lo, KirValue *hi, KirValue *step, KirValue *const *inits,
                        int n, int pipeline)
{
    /* after a failure: a block whose args are poison, so builders may read them and go on */
    static KirBlock dead_block = {.args = kir_dead_values};
    KirKernel *k = b->k;
    if (failed(b)) return &dead_block;
    if (b->depth + 1 >= KIR_MAX_DEPTH) {
        ir_diag_set(b->d, IR_ERR_INTERNAL, "kernel %s: loops nested too deeply", k->name);
        return &dead_block;
    }
    KirValue **ops = ir_arena_alloc(k->arena, sizeof(KirValue *) * (size_t)(3 + n));
    KirInst *in = ir_arena_alloc(k->arena, sizeof *in);
    KirBlock *body = ir_arena_alloc(k->arena, sizeof *body);
    KirValue **args = ir_arena_alloc(k->arena, sizeof(KirValue *) * (size_t)(1 + n));
    if (!ops || !in || !body || !args) {
        ir_diag_set(b->d, IR_ERR_NOMEM, "kernel %s: out of memory", k->name);
        return &dead_block;
    }
    ops[0] = lo;
    ops[1] = hi;
    ops[2] = step;
    for (int i = 0; i < n; i++)
        ops[3 + i] = inits[i];
    for (int i = 0; i < 3 + n; i++)
        if (!ops[i] || ops[i]->id < 0) {
            ir_diag_set(b->d, IR_ERR_INTERNAL, "kernel %s: for: operand %d is missing", k->name, i);
            return &dead_block;
        }
    in->op = KIR_OP_FOR;
    in->n_ops = 3 + n;
    in->ops = ops;
    in->body = body;
    in->pipeline = pipeline;
    body->parent = in;
    body->n_args = 1 + n;
    body->args = args;
    for (int i = 0; i <= n; i++) {
        KirValue *v = new_value(b, i ? inits[i - 1]->type : kir_scalar(KIR_I32));
        if (!v) return &dead_block;
        v->arg_of = body;
        v->index = i;
        args[i] = v;
    }
    b->stack[b->depth] = b->cur;
    b->loops[b->depth] = in;
    b->depth++;
    b->cur = body;
    return body;
}

KirInst *kir_for_end(KirBuilder *b, KirValue *const *yields, int n)
{
    static KirInst dead_inst = {.res = kir_dead_values, .n_res = KIR_MAX_DEAD};
    if (failed(b) || b->depth == 0) {
        if (!failed(b))
            ir_diag_set(b->d, IR_ERR_INTERNAL, "kernel %s: for_end without for_begin", b->k->name);
        return &dead_inst;
    }
    KirInst *loop = b->loops[b->depth - 1];
    emit(b, KIR_OP_YIELD, yields, n, 0, 0, 0, kir_scalar(KIR_I32));
    b->depth--;
    b->cur = b->stack[b->depth];
    if (failed(b)) return &dead_inst;
    KirValue **res = n ? ir_arena_alloc(b->k->arena, sizeof(KirValue *) * (size_t)n) : NULL;
    if (n && !res) {
        ir_diag_set(b->d, IR_ERR_NOMEM, "kernel %s: out of memory", b->k->name);
        return &dead_inst;
    }
    loop->res = res;
    loop->n_res = n;
    for (int i = 0; i < n; i++) {
        if (!(res[i] = new_value(b, loop->ops[3 + i]->type))) return &dead_inst;
        res[i]->def = loop;
        res[i]->index = i;
    }
    IrDiag local = {0};
    KirType rt;
    int has_res;
    if (kir_infer_inst(b->k, loop, &rt, &has_res, &local) != IR_OK) {
        ir_diag_set(b->d, IR_ERR_INTERNAL, "kernel %s: for: %s", b->k->name, local.msg);
        return &dead_inst;
    }
    if (!block_push(b, b->cur, loop)) {
        ir_diag_set(b->d, IR_ERR_NOMEM, "kernel %s: out of memory", b->k->name);
        return &dead_inst;
    }
    return loop;
}

void kir_ret(KirBuilder *b)
{
    if (b->depth) {
        ir_diag_set(b->d, IR_ERR_INTERNAL, "kernel %s: ret inside a loop", b->k->name);
        return;
    }
    emit(b, KIR_OP_RET, NULL, 0, 0, 0, 0, kir_scalar(KIR_I32));
}

IrStatus kir_builder_done(KirBuilder *b)
{
    if (failed(b)) return b->d->status;
    KirBlock *body = b->k->body;
    if (b->depth || !body->n_insts || body->insts[body->n_insts - 1]->op != KIR_OP_RET)
        return ir_diag_set(b->d, IR_ERR_INTERNAL, "kernel %s: unterminated (open loop or no ret)",
                           b->k->name);
    return IR_OK;
}
