/* kir_print.c — the kernel IR's text form. Deterministic: values are numbered in the order a walk
 * defines them (block arguments when their block opens), so identical kernels print identically no
 * matter how they were built. The header carries name, family, config and grid.
 *
 *   kernel rmsnorm_bf16_c64 family=rmsnorm
 *   config BLOCK=64 WARPS=1
 *   grid %3 1 1
 *   %0 = param "x" : ptr<bf16> rdonly
 *   %5 = arange 64 : i32[64]
 *   %9:1 = for %6, %7, %8, %4 pipeline=2 (%10, %11) {
 *     ...
 *     yield %14
 *   }
 *   ret
 */
#include "kir_impl.h"

#include <stdlib.h>

typedef struct PCtx {
    const KirKernel *k;
    int *num; /* value id -> printed number */
    int next;
    IrBuf *b;
} PCtx;

static void name_value(PCtx *c, const KirValue *v)
{
    c->num[v->id] = c->next++;
}

static void ref(PCtx *c, const KirValue *v)
{
    ir_buf_printf(c->b, "%%%d", c->num[v->id]);
}

static const char *const reduce_names[] = {"sum", "max", "min"};

static void print_block(PCtx *c, const KirBlock *blk, int indent);

static void print_inst(PCtx *c, const KirInst *in, int indent)
{
    IrBuf *b = c->b;
    ir_buf_printf(b, "%*s", indent, "");
    if (in->op == KIR_OP_FOR) {
        for (int r = 0; r < in->n_res; r++) name_value(c, in->res[r]);
        if (in->n_res) ir_buf_printf(b, "%%%d:%d = ", c->num[in->res[0]->id], in->n_res);
        ir_buf_put(b, "for ", 4);
        for (int k = 0; k < in->n_ops; k++) {
            if (k) ir_buf_put(b, ", ", 2);
            ref(c, in->ops[k]);
        }
        if (in->pipeline) ir_buf_printf(b, " pipeline=%d", in->pipeline);
        ir_buf_put(b, " (", 2);
        for (int a = 0; a < in->body->n_args; a++) {
            name_value(c, in->body->args[a]);
            if (a) ir_buf_put(b, ", ", 2);
            ref(c, in->body->args[a]);
        }
        ir_buf_put(b, ") {\n", 4);
        print_block(c, in->body, indent + 2);
        ir_buf_printf(b, "%*s}\n", indent, "");
        return;
    }
    if (in->n_res) {
        name_value(c, in->res[0]);
        ref(c, in->res[0]);
        ir_buf_put(b, " = ", 3);
    }
    ir_buf_printf(b, "%s", kir_op_name(in->op));
    switch (in->op) {
    case KIR_OP_PARAM: ir_buf_printf(b, " \"%s\"", c->k->params[in->i].name); break;
    case KIR_OP_CONST:
        if (kir_dtype_is_float((KirDtype)in->i2)) ir_buf_printf(b, " %.9g", in->f);
        else ir_buf_printf(b, " %lld", (long long)in->i);
        break;
    case KIR_OP_PID:
    case KIR_OP_NPROG:
    case KIR_OP_EXPAND:
    case KIR_OP_ARANGE: ir_buf_printf(b, " %lld", (long long)in->i); break;
    case KIR_OP_REDUCE: ir_buf_printf(b, " %s axis=%lld", reduce_names[in->i], (long long)in->i2); break;
    default: break;
    }
    for (int k = 0; k < in->n_ops; k++) {
        ir_buf_put(b, k ? ", " : " ", k ? 2 : 1);
        ref(c, in->ops[k]);
    }
    if (in->n_res) {
        ir_buf_put(b, " : ", 3);
        kir_type_print(&in->res[0]->type, b);
    }
    if (in->op == KIR_OP_PARAM) {
        unsigned f = c->k->params[in->i].flags;
        if (f & KIR_PARAM_RDONLY) ir_buf_put(b, " rdonly", 7);
        if (f & KIR_PARAM_NOALIAS) ir_buf_put(b, " noalias", 8);
    }
    ir_buf_put(b, "\n", 1);
}

static void print_block(PCtx *c, const KirBlock *blk, int indent)
{
    for (int i = 0; i < blk->n_insts; i++) print_inst(c, blk->insts[i], indent);
}

void kir_print(const KirKernel *k, IrBuf *b)
{
    PCtx c = {k, calloc((size_t)k->n_values + 1, sizeof(int)), 0, b};
    if (!c.num) {
        b->oom = 1;
        return;
    }
    ir_buf_printf(b, "kernel %s family=%s warps=%d\nconfig ", k->name, k->family, k->warps);
    kir_config_print(&k->cfg, b);
    ir_buf_put(b, "\ngrid", 5);
    for (int i = 0; i < 3; i++) {
        const KirGridDim *g = &k->grid[i];
        if (g->param < 0) ir_buf_printf(b, " %lld", (long long)g->c);
        else ir_buf_printf(b, " cdiv(%s*%lld,%lld)", k->params[g->param].name, (long long)g->mul, (long long)g->div);
    }
    ir_buf_put(b, "\n", 1);
    print_block(&c, k->body, 0);
    free(c.num);
}

uint64_t kir_hash(const KirKernel *k)
{
    IrBuf b = {0};
    kir_print(k, &b);
    uint64_t h = b.oom ? 0 : ir_hash64(b.s, b.len, IR_HASH_SEED);
    ir_buf_free(&b);
    return h;
}
