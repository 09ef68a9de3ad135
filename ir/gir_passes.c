/* gir_passes.c — the graph pipeline: a list of passes, each followed by the verifier (QBE-style driver).
 *   fuse-add-norm  add(a, b) feeding rms_norm  ->  add_rms_norm(a, b, w) giving (normed, sum)
 *   fuse-silu-mul  silu_mul of two plain matmuls of one x  ->  matmul {epilogue="silu_mul"}
 *   dce            drop nodes whose results nobody uses (effects and outputs always stay)
 * Every pass rewrites in place and leaves node ids dense and in topological order.
 */
#include "gir.h"

#include <stdlib.h>
#include <string.h>

typedef IrStatus (*GirPassFn)(GirGraph *g, IrDiag *d);

/* Drops nodes marked in `dead` (indexed by node id) and renumbers the rest. */
static void compact(GirGraph *g, const unsigned char *dead)
{
    int j = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!dead[i]) {
            g->nodes[j] = g->nodes[i];
            g->nodes[j]->id = j;
            j++;
        }
    g->n_nodes = j;
}

/* Replaces every use of `from` by `to` in nodes after position `start`. */
static void replace_uses(GirGraph *g, int start, const GirValue *from, GirValue *to)
{
    for (int i = start; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            if (g->nodes[i]->in[k] == from) g->nodes[i]->in[k] = to;
}

static int used_between(const GirGraph *g, const GirValue *v, int lo, int hi)
{
    for (int i = lo; i < hi; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            if (g->nodes[i]->in[k] == v) return 1;
    return 0;
}

static IrStatus pass_fuse_add_norm(GirGraph *g, IrDiag *d)
{
    unsigned char *dead = calloc((size_t)g->n_nodes + 1, 1);
    if (!dead) return ir_diag_set(d, IR_ERR_NOMEM, "fuse-add-norm: out of memory");
    int fused = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        GirNode *norm = g->nodes[i];
        if (norm->op != GIR_OP_RMS_NORM || norm->in[0]->def->op != GIR_OP_ADD) continue;
        GirNode *add = norm->in[0]->def;
        if (dead[add->id] || used_between(g, add->out[0], add->id + 1, i)) continue;
        /* Rewrite the norm node in place into the fused node; its position is after all three inputs. */
        GirValue *sum = ir_arena_alloc(g->arena, sizeof *sum);
        if (!sum) {
            free(dead);
            return ir_diag_set(d, IR_ERR_NOMEM, "fuse-add-norm: out of memory");
        }
        GirValue *w = norm->in[1];
        norm->op = GIR_OP_ADD_RMS_NORM;
        norm->n_in = 3;
        norm->in[0] = add->in[0];
        norm->in[1] = add->in[1];
        norm->in[2] = w;
        *sum = *add->out[0];
        sum->id = g->n_values++;
        sum->def = norm;
        sum->index = 1;
        norm->out[1] = sum;
        norm->n_out = 2;
        replace_uses(g, i + 1, add->out[0], sum);
        dead[add->id] = 1;
        fused++;
    }
    compact(g, dead);
    free(dead);
    return IR_OK;
}

/* silu_mul(matmul(x, wg), matmul(x, wu)) -> matmul(x, wg, wu) {epilogue="silu_mul"}: the gate and up
 * products never reach memory. Both matmuls must be plain (no bias) and used only here; dce then drops
 * them. The fused node takes the silu_mul's place, after both matmuls' inputs. */
static int is_plain_matmul(const GirNode *n)
{
    return n->op == GIR_OP_MATMUL && n->n_in == 2 && !gir_node_attr(n, "epilogue");
}

static IrStatus pass_fuse_silu_mul(GirGraph *g, IrDiag *d)
{
    int *uses = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!uses) return ir_diag_set(d, IR_ERR_NOMEM, "fuse-silu-mul: out of memory");
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            uses[g->nodes[i]->in[k]->id]++;
    for (int i = 0; i < g->n_nodes; i++) {
        GirNode *n = g->nodes[i];
        if (n->op != GIR_OP_SILU_MUL) continue;
        GirNode *gate = n->in[0]->def, *up = n->in[1]->def;
        if (!is_plain_matmul(gate) || !is_plain_matmul(up) || gate == up || gate->in[0] != up->in[0] ||
            !gir_type_eq(&gate->in[1]->type, &up->in[1]->type) || uses[n->in[0]->id] != 1 ||
            uses[n->in[1]->id] != 1)
            continue;
        n->op = GIR_OP_MATMUL;
        n->in[0] = gate->in[0];
        n->in[1] = gate->in[1];
        n->in[2] = up->in[1];
        n->n_in = 3;
        n->attr[0] = gir_attr_str("epilogue", "silu_mul");
        n->n_attr = 1;
    }
    free(uses);
    return IR_OK;
}

static IrStatus pass_dce(GirGraph *g, IrDiag *d)
{
    unsigned char *live = calloc((size_t)g->n_values + 1, 1);
    unsigned char *dead = calloc((size_t)g->n_nodes + 1, 1);
    if (!live || !dead) {
        free(live);
        free(dead);
        return ir_diag_set(d, IR_ERR_NOMEM, "dce: out of memory");
    }
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        GirNode *n = g->nodes[i];
        int keep = (gir_op_flags(n->op) & GIR_F_EFFECT) != 0;
        for (int k = 0; k < n->n_out && !keep; k++)
            keep = live[n->out[k]->id];
        if (!keep) {
            dead[i] = 1;
            continue;
        }
        for (int k = 0; k < n->n_in; k++)
            live[n->in[k]->id] = 1;
    }
    compact(g, dead);
    free(live);
    free(dead);
    return IR_OK;
}

static const struct {
    const char *name;
    GirPassFn fn;
} pipeline[] = {
    {"fuse-add-norm", pass_fuse_add_norm},
    {"fuse-silu-mul", pass_fuse_silu_mul},
    {"dce", pass_dce},
};

int gir_pass_count(void)
{
    return (int)(sizeof pipeline / sizeof pipeline[0]);
}

const char *gir_pass_name(int i)
{
    return i >= 0 && i < gir_pass_count() ? pipeline[i].name : NULL;
}

IrStatus gir_run_passes(GirGraph *g, const GirPassOptions *opt, IrDiag *d)
{
    IrStatus s = gir_verify(g, d);
    for (size_t i = 0; s == IR_OK && i < sizeof pipeline / sizeof pipeline[0]; i++) {
        s = pipeline[i].fn(g, d);
        if (s == IR_OK) s = gir_verify(g, d);
        if (s == IR_OK && opt && opt->dump_after &&
            (!strcmp(opt->dump_after, "all") || !strcmp(opt->dump_after, pipeline[i].name))) {
            ir_buf_printf(opt->dump, "; after %s\n", pipeline[i].name);
            gir_print(g, 0, opt->dump);
        }
    }
    return s;
}
