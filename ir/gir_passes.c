/* gir_passes.c — the graph pipeline: a list of passes, each followed by the verifier (QBE-style driver).
 *   fuse-add-norm  add(a, b) feeding rms_norm  ->  add_rms_norm(a, b, w) giving (normed, sum)
 *   fuse-silu-mul  silu_mul of two plain matmuls of one x  ->  matmul {epilogue="silu_mul"}
 *   fuse-rope-kv-write    kv_write(rope(k, positions), ...)  ->  kv_write(k, ..., positions) {rope attrs}
 *   fuse-rope-q-kv-write  rope(q, positions) beside such a kv_write  ->  kv_write(..., positions, q),
 *                         the rotated q its third output
 *   fuse-matmul-group     three plain matmuls of one x, weights of one dtype and K
 *                         ->  matmul {epilogue="group"}
 *   fuse-matmul-pair      two plain matmuls of one x, weights of one type  ->  matmul {epilogue="pair"}
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

/* uses[value id]: how many node inputs read each value (malloc'd, n_values entries); NULL when out of
 * memory. */
static int *count_uses(const GirGraph *g)
{
    int *uses = calloc((size_t)g->n_values + 1, sizeof(int));
    for (int i = 0; uses && i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            uses[g->nodes[i]->in[k]->id]++;
    return uses;
}

/* A pass's scratch: *uses (count_uses) and *dead, a mark per node. IR_ERR_NOMEM, both freed, when either
 * allocation fails. */
static IrStatus pass_scratch(const GirGraph *g, int **uses, unsigned char **dead, const char *pass, IrDiag *d)
{
    *uses = count_uses(g);
    *dead = calloc((size_t)g->n_nodes + 1, 1);
    if (*uses && *dead) return IR_OK;
    free(*uses);
    free(*dead);
    return ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory", pass);
}

/* The rope attributes a kv_write takes over from the rope it absorbs (beside heads and head_dim). */
static const char *const rope_keys[] = {"theta",           "scaling",          "factor",
                                        "low_freq_factor", "high_freq_factor", "original_max_pos"};
enum { N_ROPE_KEYS = sizeof rope_keys / sizeof rope_keys[0] };

static IrStatus pass_fuse_silu_mul(GirGraph *g, IrDiag *d)
{
    int *uses = count_uses(g);
    if (!uses) return ir_diag_set(d, IR_ERR_NOMEM, "fuse-silu-mul: out of memory");
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

/* kv_write(rope(k, positions), v, k_cache, v_cache, slots) -> kv_write(k, v, k_cache, v_cache, slots,
 * positions) with the rope's attributes: the kernel rotates K on its way into the cache (bit-identical:
 * the same f32 math and one rounding, docs/KERNELS.md kv_write). Only when the rope's result has no
 * other use and its heads and head_dim are the kv_write's; dce then drops the rope. */
static IrStatus pass_fuse_rope_kv_write(GirGraph *g, IrDiag *d)
{
    int *uses = count_uses(g);
    if (!uses) return ir_diag_set(d, IR_ERR_NOMEM, "fuse-rope-kv-write: out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        GirNode *n = g->nodes[i];
        if (n->op != GIR_OP_KV_WRITE || n->n_in != 5) continue;
        GirNode *rope = n->in[0]->def;
        if (rope->op != GIR_OP_ROPE || uses[n->in[0]->id] != 1 ||
            gir_attr_i(rope, "heads", 0) != gir_attr_i(n, "kv_heads", -1) ||
            gir_attr_i(rope, "head_dim", 0) != gir_attr_i(n, "head_dim", -1))
            continue;
        n->in[0] = rope->in[0];
        n->in[5] = rope->in[1];
        n->n_in = 6;
        for (int k = 0; k < N_ROPE_KEYS; k++) {
            const GirAttr *a = gir_node_attr(rope, rope_keys[k]);
            if (a) n->attr[n->n_attr++] = *a;
        }
    }
    free(uses);
    return IR_OK;
}

static int same_attr(const GirNode *a, const GirNode *b, const char *key)
{
    const GirAttr *x = gir_node_attr(a, key), *y = gir_node_attr(b, key);
    if (!x || !y) return !x && !y;
    if (x->kind != y->kind) return 0;
    return x->kind == GIR_ATTR_STR   ? !strcmp(x->s, y->s)
           : x->kind == GIR_ATTR_INT ? x->i == y->i
                                     : x->f == y->f;
}

/* rope(q, positions) ... kv_write(k, v, k_cache, v_cache, slots, positions) {rope attrs} -> kv_write(k, v,
 * k_cache, v_cache, slots, positions, q) {heads} whose third output is the rotated q: the kernel rotates Q
 * in the programs after the KV heads' (bit-identical to the rope launch, docs/KERNELS.md kv_write), one
 * launch a layer fewer. Only a used rope (the nearest before the kv_write) of the same positions value,
 * head_dim and rope attributes, whose result nobody reads before the kv_write; the rope's output value
 * becomes the kv_write's, so uses need no rewriting. Runs after fuse-rope-kv-write. */
static IrStatus pass_fuse_rope_q_kv_write(GirGraph *g, IrDiag *d)
{
    int *uses;
    unsigned char *dead;
    if (pass_scratch(g, &uses, &dead, "fuse-rope-q-kv-write", d)) return d->status;
    for (int i = 0; i < g->n_nodes; i++) {
        GirNode *n = g->nodes[i];
        if (n->op != GIR_OP_KV_WRITE || n->n_in != 6 || n->n_attr >= GIR_MAX_ATTRS) continue;
        for (int j = i - 1; j >= 0; j--) {
            GirNode *r = g->nodes[j];
            /* unused ropes (K's, left by fuse-rope-kv-write for dce) do not count */
            if (r->op != GIR_OP_ROPE || dead[j] || !uses[r->out[0]->id] || r->in[1] != n->in[5]) continue;
            int same = same_attr(r, n, "head_dim");
            for (int k = 0; k < N_ROPE_KEYS; k++)
                same &= same_attr(r, n, rope_keys[k]);
            if (!same || used_between(g, r->out[0], j + 1, i + 1))
                break; /* the kv_write too (as its v, say) */
            n->in[6] = r->in[0];
            n->n_in = 7;
            n->attr[n->n_attr++] = gir_attr_int("heads", gir_attr_i(r, "heads", 0));
            n->out[2] = r->out[0];
            n->out[2]->def = n;
            n->out[2]->index = 2;
            n->n_out = 3;
            dead[j] = 1;
            break;
        }
    }
    compact(g, dead);
    free(dead);
    free(uses);
    return IR_OK;
}

/* matmul(x, w), matmul(x, w2) -> one matmul(x, w, w2) {epilogue="pair"} giving both products: one launch
 * reads x once and streams both weights (Llama's k and v projections). Both plain (no bias, no
 * epilogue), used (dead matmuls that earlier fusions left for dce do not count), weights of one type
 * (dtype and shape). Pairs are taken greedily in graph order: each unpaired matmul with the first later
 * one that qualifies, so with q, k, v of one shape (MHA) q pairs with k and v stays alone. The fused node
 * takes the later matmul's place (after both weights), so when the earlier one's result is used in
 * between it is not paired. Its two output values are the two matmuls' own: uses need no rewriting. */
static IrStatus pass_fuse_matmul_pair(GirGraph *g, IrDiag *d)
{
    int *uses;
    unsigned char *dead;
    if (pass_scratch(g, &uses, &dead, "fuse-matmul-pair", d)) return d->status;
    for (int i = 0; i < g->n_nodes; i++) {
        GirNode *a = g->nodes[i];
        if (!is_plain_matmul(a) || !uses[a->out[0]->id]) continue;
        for (int j = i + 1; j < g->n_nodes; j++) {
            GirNode *b = g->nodes[j];
            if (!is_plain_matmul(b) || !uses[b->out[0]->id] || b->in[0] != a->in[0] ||
                !gir_type_eq(&a->in[1]->type, &b->in[1]->type))
                continue;
            if (used_between(g, a->out[0], i + 1, j + 1)) break; /* b too (as its weight) */
            GirValue *first = a->out[0], *second = b->out[0];
            b->in[2] = b->in[1];
            b->in[1] = a->in[1];
            b->n_in = 3;
            b->attr[0] = gir_attr_str("epilogue", "pair");
            b->n_attr = 1;
            first->def = b; /* index 0 already */
            second->index = 1;
            b->out[0] = first;
            b->out[1] = second;
            b->n_out = 2;
            dead[i] = 1;
            break;
        }
    }
    compact(g, dead);
    free(uses);
    free(dead);
    return IR_OK;
}

/* matmul(x, w1), matmul(x, w2), matmul(x, w3) -> one matmul(x, w1, w2, w3) {epilogue="group"}: the three
 * products' column tiles in one grid (Llama's q, k and v: k and v alone have too few tiles to fill the GPU
 * at decode). All plain and used, weights of one dtype (not block-quantized: the quantized matmul has no
 * group form) and K, N1 and N2 multiples of 16 (a program's tile lies in one product). Taken greedily in
 * graph order; the fused node takes the last matmul's place, so an earlier result used in between stops
 * the group. Its output values are the matmuls' own: uses need no rewriting. */
static IrStatus pass_fuse_matmul_group(GirGraph *g, IrDiag *d)
{
    int *uses;
    unsigned char *dead;
    if (pass_scratch(g, &uses, &dead, "fuse-matmul-group", d)) return d->status;
    for (int i = 0; i < g->n_nodes; i++) {
        GirNode *m[3] = {g->nodes[i], NULL, NULL};
        int at[3] = {i, 0, 0}, n = 1;
        if (!is_plain_matmul(m[0]) || dead[i] || !uses[m[0]->out[0]->id]) continue;
        const GirType *w0 = &m[0]->in[1]->type; /* a plain matmul has its weight */
        if (gir_dtype_class(w0->dtype) == GIR_DC_QUANT || w0->dim[0].sym >= 0 || w0->dim[0].n % 16) continue;
        for (int j = i + 1; j < g->n_nodes && n < 3; j++) {
            GirNode *b = g->nodes[j];
            if (!is_plain_matmul(b) || dead[j] || !uses[b->out[0]->id] || b->in[0] != m[0]->in[0]) continue;
            const GirType *wb = &b->in[1]->type;
            if (wb->dtype != w0->dtype || !gir_dim_eq(wb->dim[1], w0->dim[1]) || wb->dim[0].sym >= 0 ||
                (n == 1 && wb->dim[0].n % 16))
                continue;
            int between = 0;
            for (int k = 0; k < n; k++)
                between |= used_between(g, m[k]->out[0], at[k] + 1, j + 1); /* b too (as its weight) */
            if (between) break;
            m[n] = b, at[n++] = j;
        }
        if (n < 3) continue;
        GirNode *last = m[2];
        GirValue *w[3], *o[3]; /* read before `last` (one of the three) is rewritten */
        for (int k = 0; k < 3; k++)
            w[k] = m[k]->in[1], o[k] = m[k]->out[0];
        for (int k = 0; k < 3; k++) {
            last->in[1 + k] = w[k];
            last->out[k] = o[k];
            o[k]->def = last;
            o[k]->index = k;
        }
        last->n_in = 4;
        last->n_out = 3;
        last->attr[0] = gir_attr_str("epilogue", "group");
        last->n_attr = 1;
        dead[at[0]] = dead[at[1]] = 1;
    }
    compact(g, dead);
    free(uses);
    free(dead);
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
    {"fuse-rope-kv-write", pass_fuse_rope_kv_write},
    {"fuse-rope-q-kv-write", pass_fuse_rope_q_kv_write},
    {"fuse-matmul-group", pass_fuse_matmul_group},
    {"fuse-matmul-pair", pass_fuse_matmul_pair},
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
