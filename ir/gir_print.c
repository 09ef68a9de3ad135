/* gir_print.c — the graph IR's text form, deterministic: values are numbered in order of definition
 * (not by creation id), attributes print in stored order, floats with %.9g. Golden tests diff it and the
 * package stores it; its hash (without locations) identifies the graph. docs/IR.md shows an example.
 *
 *   graph llama model=smollm2-135m
 *   config head_dim=64 hidden_size=576 ...
 *   dims T B P MP R
 *   %0 = input "tokens" : i32[T]
 *   %3, %4 = add_rms_norm %1, %2, %0 {eps=1e-05} : bf16[T,576], bf16[T,576]
 *   output "logits" %52
 */
#include "gir.h"

#include <stdlib.h>
#include <string.h>

static void print_attr_value(const GirAttr *a, IrBuf *b)
{
    switch (a->kind) {
    case GIR_ATTR_INT: ir_buf_printf(b, "%lld", (long long)a->i); break;
    case GIR_ATTR_FLOAT: ir_buf_printf(b, "%.9g", a->f); break;
    case GIR_ATTR_STR: ir_buf_printf(b, "\"%s\"", a->s); break;
    }
}

void gir_number_values(const GirGraph *g, int *num)
{
    int next = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_out; k++) num[g->nodes[i]->out[k]->id] = next++;
}

/* Maps value creation ids to printed numbers. */
typedef struct Numbering {
    int *num;
    int n;
} Numbering;

static int number_values(const GirGraph *g, Numbering *nb)
{
    nb->n = g->n_values;
    nb->num = malloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1));
    if (!nb->num) return 0;
    gir_number_values(g, nb->num);
    return 1;
}

static void print_node(const GirGraph *g, const GirNode *n, const Numbering *nb, int with_locs, IrBuf *b)
{
    if (n->op == GIR_OP_OUTPUT) {
        ir_buf_printf(b, "output \"%s\" %%%d", gir_attr_s(n, "name", ""), nb->num[n->in[0]->id]);
    } else {
        for (int k = 0; k < n->n_out; k++)
            ir_buf_printf(b, "%s%%%d", k ? ", " : "", nb->num[n->out[k]->id]);
        ir_buf_printf(b, " = %s", gir_op_name(n->op));
        if (gir_op_flags(n->op) & GIR_F_LEAF) ir_buf_printf(b, " \"%s\"", gir_attr_s(n, "name", ""));
        for (int k = 0; k < n->n_in; k++)
            ir_buf_printf(b, "%s%%%d", k ? ", " : " ", nb->num[n->in[k]->id]);
        int first = 1;
        for (int k = 0; k < n->n_attr; k++) {
            if ((gir_op_flags(n->op) & GIR_F_LEAF) && strcmp(n->attr[k].key, "name") == 0) continue;
            ir_buf_printf(b, "%s%s=", first ? " {" : ", ", n->attr[k].key);
            print_attr_value(&n->attr[k], b);
            first = 0;
        }
        if (!first) ir_buf_put(b, "}", 1);
        ir_buf_put(b, " : ", 3);
        for (int k = 0; k < n->n_out; k++) {
            if (k) ir_buf_put(b, ", ", 2);
            gir_type_print(g, &n->out[k]->type, b);
        }
    }
    if (with_locs && n->loc.file) { /* the recipe path as given: control characters shown as '?' */
        ir_buf_put(b, "  # ", 4);
        for (const unsigned char *p = (const unsigned char *)n->loc.file; *p; p++)
            ir_buf_put(b, *p < 0x20 || *p == 0x7f ? "?" : (const char *)p, 1);
        ir_buf_printf(b, ":%d", n->loc.line);
    }
    ir_buf_put(b, "\n", 1);
}

void gir_print(const GirGraph *g, int with_locs, IrBuf *b)
{
    Numbering nb;
    if (!number_values(g, &nb)) {
        b->oom = 1;
        return;
    }
    ir_buf_printf(b, "graph %s", g->name);
    if (g->model) ir_buf_printf(b, " model=%s", g->model);
    ir_buf_put(b, "\n", 1);
    if (g->n_cfg) {
        ir_buf_put(b, "config", 6);
        for (int i = 0; i < g->n_cfg; i++) {
            ir_buf_printf(b, " %s=", g->cfg[i].key);
            print_attr_value(&g->cfg[i], b);
        }
        ir_buf_put(b, "\n", 1);
    }
    if (g->n_sym) {
        ir_buf_put(b, "dims", 4);
        for (int i = 0; i < g->n_sym; i++)
            ir_buf_printf(b, " %s", g->sym[i]);
        ir_buf_put(b, "\n", 1);
    }
    for (int i = 0; i < g->n_nodes; i++)
        print_node(g, g->nodes[i], &nb, with_locs, b);
    free(nb.num);
}

uint64_t gir_graph_hash(const GirGraph *g)
{
    IrBuf b = {0};
    gir_print(g, 0, &b);
    uint64_t h = b.oom ? 0 : ir_hash64(b.s, b.len, IR_HASH_SEED);
    ir_buf_free(&b);
    return h;
}
