/* gir.c — graph IR construction: the op/dtype tables, graphs, symbols, types, attributes and the
 * builder (gir_leaf, gir_node_add). Invariant kept by the builder: nodes are in topological order, every
 * value is produced by exactly one node, and every node has passed its schema check and type inference.
 */
#include "gir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int block_elems, block_bytes;
    GirDtypeClass cls;
} dtype_table[] = {
#define X(e, name, be, bb, cls) {name, be, bb, cls},
#include "gir_dtypes.def"
#undef X
};

static const struct {
    const char *name;
    int min_in, max_in, n_out;
    unsigned flags;
    const char *attrs;
} op_table[] = {
#define X(e, name, min_in, max_in, n_out, flags, attrs) {name, min_in, max_in, n_out, flags, attrs},
#include "gir_ops.def"
#undef X
};

const char *gir_dtype_name(GirDtype t)
{
    return (unsigned)t < GIR_DTYPE_COUNT ? dtype_table[t].name : "?";
}

int gir_dtype_parse(const char *name, GirDtype *out)
{
    for (int i = 0; i < GIR_DTYPE_COUNT; i++)
        if (strcmp(name, dtype_table[i].name) == 0) {
            *out = (GirDtype)i;
            return 1;
        }
    return 0;
}

GirDtypeClass gir_dtype_class(GirDtype t)
{
    return dtype_table[t].cls;
}
int gir_dtype_block_elems(GirDtype t)
{
    return dtype_table[t].block_elems;
}
int gir_dtype_block_bytes(GirDtype t)
{
    return dtype_table[t].block_bytes;
}
int gir_dtype_w4(GirDtype t, int *zeros)
{
    const char *n = dtype_table[t].name;
    if (strncmp(n, "w4g", 3)) return 0;
    if (zeros) *zeros = n[strlen(n) - 1] == 'z';
    return dtype_table[t].block_elems;
}

int gir_dtype_f8(GirDtype t)
{
    return strncmp(dtype_table[t].name, "f8g", 3) ? 0 : dtype_table[t].block_elems;
}

const char *gir_op_name(GirOp op)
{
    return (unsigned)op < GIR_OP_COUNT ? op_table[op].name : "?";
}

int gir_op_parse(const char *name, GirOp *out)
{
    for (int i = 0; i < GIR_OP_COUNT; i++)
        if (strcmp(name, op_table[i].name) == 0) {
            *out = (GirOp)i;
            return 1;
        }
    return 0;
}

unsigned gir_op_flags(GirOp op)
{
    return op_table[op].flags;
}
int gir_op_min_in(GirOp op)
{
    return op_table[op].min_in;
}
int gir_op_max_in(GirOp op)
{
    return op_table[op].max_in;
}
int gir_op_n_out(GirOp op)
{
    return op_table[op].n_out;
}
const char *gir_op_attr_schema(GirOp op)
{
    return op_table[op].attrs;
}

GirGraph *gir_graph_create(const char *name)
{
    IrArena *a = ir_arena_create();
    if (!a) return NULL;
    GirGraph *g = ir_arena_alloc(a, sizeof *g);
    if (!g || !(g->name = ir_arena_strdup(a, name ? name : "graph"))) {
        ir_arena_destroy(a);
        return NULL;
    }
    g->arena = a;
    return g;
}

void gir_graph_destroy(GirGraph *g)
{
    if (!g) return;
    free(g->named);
    ir_arena_destroy(g->arena); /* g itself lives in its arena */
}

void gir_graph_set_model(GirGraph *g, const char *model)
{
    g->model = model ? ir_arena_strdup(g->arena, model) : NULL;
}

IrStatus gir_graph_set_config(GirGraph *g, GirAttr a, IrDiag *d)
{
    if (gir_check_key("config key", a.key, strlen(a.key), d)) return IR_ERR_INPUT;
    if (a.kind == GIR_ATTR_STR && gir_check_value(a.key, a.s ? a.s : "", a.s ? strlen(a.s) : 0, d))
        return IR_ERR_INPUT;
    if (a.kind == GIR_ATTR_FLOAT && !isfinite(a.f))
        return ir_diag_set(d, IR_ERR_INPUT, "config '%s' is not a finite number", a.key);
    GirAttr c = a;
    c.key = ir_arena_strdup(g->arena, a.key);
    if (a.kind == GIR_ATTR_STR) c.s = ir_arena_strdup(g->arena, a.s ? a.s : "");
    if (!c.key || (a.kind == GIR_ATTR_STR && !c.s)) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_cfg; i++)
        if (strcmp(g->cfg[i].key, a.key) == 0) {
            g->cfg[i] = c;
            return IR_OK;
        }
    if (!ir_arena_grow(g->arena, (void **)&g->cfg, &g->cap_cfg, g->n_cfg, sizeof(GirAttr)))
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    g->cfg[g->n_cfg++] = c;
    return IR_OK;
}

/* ---- names and sizes ----------------------------------------------------------------------------- */

static const char name_rule[] = "names are 1-256 bytes of A-Z a-z 0-9 _ . - / : +";
static const char key_rule[] = "keys are a letter or _, then letters, digits or _";
static const char value_rule[] = "string values hold no control characters, '\"' or '\\'";

/* s shown in a message: at most 60 bytes, anything but printable ASCII as '?'. */
static const char *shown(const char *s, size_t len, char *buf, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < n; i++) {
        if (o >= 60) {
            memcpy(buf + o, "...", 3), o += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        buf[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    buf[o] = 0;
    return buf;
}

/* Why byte c (at i) is not allowed, for a message. */
static const char *char_why(unsigned char c, char *buf, size_t n, size_t i)
{
    if (c == 0) snprintf(buf, n, "a NUL byte at byte %zu", i);
    else if (c == '\n') snprintf(buf, n, "a newline at byte %zu", i);
    else if (c == '"') snprintf(buf, n, "a quote at byte %zu", i);
    else if (c < 0x20 || c == 0x7f) snprintf(buf, n, "control character 0x%02x at byte %zu", c, i);
    else if (c >= 0x80) snprintf(buf, n, "non-ASCII byte 0x%02x at byte %zu", c, i);
    else snprintf(buf, n, "'%c' at byte %zu", c, i);
    return buf;
}

static int name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("_.-/:+", c));
}

static int key_char(unsigned char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

static IrStatus text_bad(const char *what, const char *s, size_t len, const char *why, const char *rule,
                         IrDiag *d)
{
    char b[80];
    return ir_diag_set(d, IR_ERR_INPUT, "%s '%s': %s (%s)", what, shown(s, len, b, sizeof b), why, rule);
}

IrStatus gir_check_name(const char *what, const char *s, size_t len, IrDiag *d)
{
    char why[64];
    if (!s || len == 0) return text_bad(what, "", 0, "empty", name_rule, d);
    if (len > GIR_NAME_MAX) return text_bad(what, s, len, "too long", name_rule, d);
    for (size_t i = 0; i < len; i++)
        if (!name_char((unsigned char)s[i]))
            return text_bad(what, s, len, char_why((unsigned char)s[i], why, sizeof why, i), name_rule, d);
    return IR_OK;
}

IrStatus gir_check_key(const char *what, const char *s, size_t len, IrDiag *d)
{
    char why[64];
    if (!s || len == 0) return text_bad(what, "", 0, "empty", key_rule, d);
    if (len > GIR_NAME_MAX) return text_bad(what, s, len, "too long", key_rule, d);
    for (size_t i = 0; i < len; i++)
        if (!key_char((unsigned char)s[i], i == 0))
            return text_bad(what, s, len, char_why((unsigned char)s[i], why, sizeof why, i), key_rule, d);
    return IR_OK;
}

IrStatus gir_check_value(const char *what, const char *s, size_t len, IrDiag *d)
{
    char why[64];
    if (len > GIR_VALUE_MAX) return text_bad(what, s, len, "too long", value_rule, d);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\')
            return text_bad(what, s, len, char_why(c, why, sizeof why, i), value_rule, d);
    }
    return IR_OK;
}

int gir_type_bytes(const GirType *t, const int64_t *sym_value, int64_t *bytes)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) {
        int64_t v = t->dim[i].sym >= 0 ? (sym_value ? sym_value[t->dim[i].sym] : 1) : t->dim[i].n;
        if (v < 0 || !ir_mul64(n, v, &n) || n > IR_MAX_BYTES) return 0;
    }
    int be = gir_dtype_block_elems(t->dtype), bb = gir_dtype_block_bytes(t->dtype);
    if (!ir_mul64(n / be, bb, &n) || n > IR_MAX_BYTES) return 0;
    *bytes = n;
    return 1;
}

GirDim gir_dim_const(int64_t n)
{
    return (GirDim){.n = n, .sym = -1};
}

GirDim gir_dim_sym(GirGraph *g, const char *name)
{
    for (int i = 0; i < g->n_sym; i++)
        if (strcmp(g->sym[i], name) == 0) return (GirDim){.n = 0, .sym = i};
    if (g->n_sym == GIR_MAX_SYMS || !name[0]) return (GirDim){.n = 0, .sym = GIR_SYM_BAD};
    const char *s = ir_arena_strdup(g->arena, name);
    if (!s) return (GirDim){.n = 0, .sym = GIR_SYM_NOMEM};
    g->sym[g->n_sym] = s;
    return (GirDim){.n = 0, .sym = g->n_sym++};
}

GirType gir_type(GirDtype t, int rank, const GirDim *dims)
{
    GirType ty = {.dtype = t, .rank = rank};
    KILN_ASSERT(rank >= 0 && rank <= GIR_MAX_RANK);
    for (int i = 0; i < rank; i++)
        ty.dim[i] = dims[i];
    return ty;
}

int gir_dim_eq(GirDim a, GirDim b)
{
    if (a.sym >= 0 || b.sym >= 0) return a.sym == b.sym;
    return a.n == b.n;
}

int gir_type_eq(const GirType *a, const GirType *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (!gir_dim_eq(a->dim[i], b->dim[i])) return 0;
    return 1;
}

void gir_type_print(const GirGraph *g, const GirType *t, IrBuf *b)
{
    ir_buf_printf(b, "%s[", gir_dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++) {
        if (i) ir_buf_put(b, ",", 1);
        if (t->dim[i].sym >= 0)
            ir_buf_printf(b, "%s", g->sym[t->dim[i].sym]);
        else
            ir_buf_printf(b, "%lld", (long long)t->dim[i].n);
    }
    ir_buf_put(b, "]", 1);
}

GirAttr gir_attr_int(const char *key, int64_t v)
{
    return (GirAttr){.key = key, .kind = GIR_ATTR_INT, .i = v};
}
GirAttr gir_attr_float(const char *key, double v)
{
    return (GirAttr){.key = key, .kind = GIR_ATTR_FLOAT, .f = v};
}
GirAttr gir_attr_str(const char *key, const char *v)
{
    return (GirAttr){.key = key, .kind = GIR_ATTR_STR, .s = v};
}

const GirAttr *gir_node_attr(const GirNode *n, const char *key)
{
    for (int i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i].key, key) == 0) return &n->attr[i];
    return NULL;
}

int64_t gir_attr_i(const GirNode *n, const char *key, int64_t dflt)
{
    const GirAttr *a = gir_node_attr(n, key);
    return a && a->kind == GIR_ATTR_INT ? a->i : dflt;
}

double gir_attr_f(const GirNode *n, const char *key, double dflt)
{
    const GirAttr *a = gir_node_attr(n, key);
    return a && a->kind == GIR_ATTR_FLOAT ? a->f : dflt;
}

const char *gir_attr_s(const GirNode *n, const char *key, const char *dflt)
{
    const GirAttr *a = gir_node_attr(n, key);
    return a && a->kind == GIR_ATTR_STR ? a->s : dflt;
}

static GirNode *node_new(GirGraph *g, GirOp op, GirLoc loc)
{
    if (!ir_arena_grow(g->arena, (void **)&g->nodes, &g->cap_nodes, g->n_nodes, sizeof(GirNode *)))
        return NULL;
    GirNode *n = ir_arena_alloc(g->arena, sizeof *n);
    if (!n) return NULL;
    n->op = op;
    n->id = g->n_nodes;
    n->loc.line = loc.line;
    n->loc.file = loc.file; /* callers pass arena-owned or static file names */
    return n;
}

/* Creates the node's n_out output values from inferred types and appends the node. */
static int node_commit(GirGraph *g, GirNode *n, const GirType *types, int n_out)
{
    n->n_out = n_out;
    for (int i = 0; i < n->n_out; i++) {
        GirValue *v = ir_arena_alloc(g->arena, sizeof *v);
        if (!v) return 0;
        v->id = g->n_values++;
        v->type = types[i];
        v->def = n;
        v->index = i;
        n->out[i] = v;
    }
    g->nodes[g->n_nodes++] = n;
    return 1;
}

/* ---- the name index -------------------------------------------------------------------------------
 * Open addressing over (op, name) with linear probing; cap_named a power of two, at most half full. It
 * holds the first node of each key: the builder refuses a second leaf, and the frontend asks about
 * outputs (g:output). A node a pass dropped stays in it but counts as absent (its id no longer points at
 * it); no pass adds named nodes, so the index never needs more than that. The table is malloc'd, not in
 * the arena (the recipe's memory cap counts the arena: the index would lower the cap on nodes), and
 * freed by gir_graph_destroy; it is at most 32 bytes a name. */
static size_t name_slot(GirOp op, const char *name, int cap)
{
    return (size_t)(ir_hash64(name, strlen(name), IR_HASH_SEED + (uint64_t)op) & (uint64_t)(cap - 1));
}

static int node_in_graph(const GirGraph *g, const GirNode *n)
{
    return n->id >= 0 && n->id < g->n_nodes && g->nodes[n->id] == n;
}

/* The slot of (op, name): the node there, or the empty slot where it would go. */
static GirNode **name_find(const GirGraph *g, GirOp op, const char *name)
{
    size_t mask = (size_t)g->cap_named - 1;
    for (size_t i = name_slot(op, name, g->cap_named);; i = (i + 1) & mask) {
        GirNode *o = g->named[i];
        if (!o || (o->op == op && strcmp(gir_attr_s(o, "name", ""), name) == 0)) return &g->named[i];
    }
}

const GirNode *gir_find_named(const GirGraph *g, GirOp op, const char *name)
{
    if (!g->cap_named) return NULL;
    const GirNode *o = *name_find(g, op, name);
    return o && node_in_graph(g, o) ? o : NULL;
}

/* Adds n (a leaf or output, already in the graph) unless a node of its key that is still in the graph is
 * there. 0 when out of memory. */
static int name_index(GirGraph *g, GirNode *n)
{
    if (2 * (g->n_named + 1) > g->cap_named) {
        int cap = g->cap_named ? 2 * g->cap_named : 64;
        GirNode **old = g->named, **t = calloc((size_t)cap, sizeof *t);
        if (!t) return 0;
        g->named = t;
        int old_cap = g->cap_named;
        g->cap_named = cap;
        for (int i = 0; i < old_cap; i++) /* keys are distinct: each goes to an empty slot */
            if (old[i]) *name_find(g, old[i]->op, gir_attr_s(old[i], "name", "")) = old[i];
        free(old);
    }
    GirNode **slot = name_find(g, n->op, gir_attr_s(n, "name", ""));
    if (!*slot) g->n_named++;
    if (!*slot || !node_in_graph(g, *slot)) *slot = n;
    return 1;
}

static const char *loc_prefix(GirLoc loc, char *buf, size_t n)
{
    if (loc.file)
        snprintf(buf, n, "%s:%d: ", loc.file, loc.line);
    else
        buf[0] = 0;
    return buf;
}

GirValue *gir_leaf(GirGraph *g, GirOp op, const char *name, GirType t, GirLoc loc, IrDiag *d)
{
    char where[300];
    loc_prefix(loc, where, sizeof where);
    KILN_ASSERT(op == GIR_OP_INPUT || op == GIR_OP_WEIGHT);
    const char *what = gir_op_name(op);
    if (!name || !name[0]) {
        ir_diag_set(d, IR_ERR_INPUT, "%s%s needs %s", where, what,
                    op == GIR_OP_WEIGHT ? "its checkpoint name" : "a name");
        return NULL;
    }
    IrDiag local = {0};
    if (gir_check_name(what, name, strlen(name), &local)) {
        ir_diag_set(d, local.status, "%s%s", where, local.msg);
        return NULL;
    }
    if (t.rank < 1 || t.rank > GIR_MAX_RANK) {
        ir_diag_set(d, IR_ERR_SHAPE, "%s%s '%s': rank %d (must be 1..%d)", where, what, name, t.rank,
                    GIR_MAX_RANK);
        return NULL;
    }
    for (int i = 0; i < t.rank; i++)
        if (t.dim[i].sym == GIR_SYM_NOMEM) {
            goto oom;
        } else if (t.dim[i].sym < -1 || (t.dim[i].sym == -1 && t.dim[i].n <= 0)) {
            ir_diag_set(d, IR_ERR_SHAPE,
                        "%s%s '%s': dimension %d must be positive or a symbol (at most %d symbols)", where,
                        what, name, i, GIR_MAX_SYMS);
            return NULL;
        }
    for (int i = 0; i < t.rank; i++)
        if (t.dim[i].sym == -1 && t.dim[i].n > IR_MAX_DIM) {
            ir_diag_set(d, IR_ERR_SHAPE, "%s%s '%s': dimension %d is %lld (at most %lld)", where, what, name,
                        i + 1, (long long)t.dim[i].n, (long long)IR_MAX_DIM);
            return NULL;
        }
    for (int i = 0; i < t.rank && op == GIR_OP_WEIGHT; i++)
        if (t.dim[i].sym >= 0) {
            ir_diag_set(d, IR_ERR_SHAPE,
                        "%sweight '%s': dimension %d is symbolic; weights need constant shapes", where, name,
                        i);
            return NULL;
        }
    int be = gir_dtype_block_elems(t.dtype);
    if (be > 1 && (t.dim[t.rank - 1].sym >= 0 || t.dim[t.rank - 1].n % be != 0)) {
        ir_diag_set(d, IR_ERR_SHAPE, "%s%s '%s': %s needs the last dimension to be a multiple of %d", where,
                    what, name, gir_dtype_name(t.dtype), be);
        return NULL;
    }
    int64_t bytes;
    if (!gir_type_bytes(&t, NULL, &bytes)) {
        IrBuf tb = {0};
        gir_type_print(g, &t, &tb);
        ir_diag_set(d, IR_ERR_LIMIT, "%s%s '%s': %s is larger than 2^48 bytes", where, what, name,
                    tb.s && !tb.oom ? tb.s : "its type");
        ir_buf_free(&tb);
        return NULL;
    }
    const GirNode *o = gir_find_named(g, op, name);
    if (o) {
        ir_diag_set(d, IR_ERR_INPUT, "%s%s '%s' is declared twice (first at line %d)", where, what, name,
                    o->loc.line);
        return NULL;
    }
    GirNode *n = node_new(g, op, loc);
    const char *nm = ir_arena_strdup(g->arena, name);
    if (!n || !nm) goto oom;
    n->attr[0] = gir_attr_str("name", nm);
    n->n_attr = 1;
    if (!node_commit(g, n, &t, 1) || !name_index(g, n)) goto oom;
    return n->out[0];
oom:
    ir_diag_set(d, IR_ERR_NOMEM, "%sout of memory", where);
    return NULL;
}

/* Finds `key` in an op's schema; returns its kind letter ('i', 'f', 's') or 0, and whether optional. */
static char schema_find(const char *schema, const char *key, int *optional)
{
    size_t kl = strlen(key);
    for (const char *p = schema; *p;) {
        while (*p == ' ')
            p++;
        const char *colon = strchr(p, ':');
        if (!colon) break;
        if ((size_t)(colon - p) == kl && strncmp(p, key, kl) == 0) {
            *optional = colon[2] == '?';
            return colon[1];
        }
        p = colon + 1;
        while (*p && *p != ' ')
            p++;
    }
    return 0;
}

/* Checks attrs against the op's schema and writes normalized copies (coerced kinds) into out. */
static IrStatus check_attrs(GirOp op, const GirAttr *attrs, int n_attr, GirAttr *out, IrDiag *d)
{
    const char *schema = gir_op_attr_schema(op);
    if (n_attr > GIR_MAX_ATTRS) return ir_diag_set(d, IR_ERR_INPUT, "too many attributes (%d)", n_attr);
    for (int i = 0; i < n_attr; i++) {
        GirAttr a = attrs[i];
        int opt;
        if (gir_check_key("attribute", a.key, strlen(a.key), d)) return IR_ERR_INPUT;
        char kind = schema_find(schema, a.key, &opt);
        if (!kind)
            return ir_diag_set(d, IR_ERR_INPUT, "unknown attribute '%s' (takes: %s)", a.key,
                               schema[0] ? schema : "none");
        for (int j = 0; j < i; j++)
            if (strcmp(attrs[j].key, a.key) == 0)
                return ir_diag_set(d, IR_ERR_INPUT, "attribute '%s' given twice", a.key);
        if (kind == 'f' && a.kind == GIR_ATTR_INT) {
            a.kind = GIR_ATTR_FLOAT;
            a.f = (double)a.i;
        } else if (kind == 'i' && a.kind == GIR_ATTR_FLOAT && a.f == floor(a.f) && fabs(a.f) < 9e15) {
            a.kind = GIR_ATTR_INT;
            a.i = (int64_t)a.f;
        }
        GirAttrKind want = kind == 'i' ? GIR_ATTR_INT : kind == 'f' ? GIR_ATTR_FLOAT : GIR_ATTR_STR;
        if (a.kind != want)
            return ir_diag_set(d, IR_ERR_INPUT, "attribute '%s' must be %s", a.key,
                               kind == 'i'   ? "an integer"
                               : kind == 'f' ? "a number"
                                             : "a string");
        if (a.kind == GIR_ATTR_FLOAT && !isfinite(a.f))
            return ir_diag_set(d, IR_ERR_INPUT, "attribute '%s' must be finite", a.key);
        if (a.kind == GIR_ATTR_INT && (a.i > IR_MAX_DIM || a.i < -IR_MAX_DIM))
            return ir_diag_set(d, IR_ERR_INPUT, "attribute '%s' is %lld (at most %lld in magnitude)", a.key,
                               (long long)a.i, (long long)IR_MAX_DIM);
        if (a.kind == GIR_ATTR_STR) {
            char what[GIR_NAME_MAX + 16];
            snprintf(what, sizeof what, "attribute %s", a.key);
            if (gir_check_value(what, a.s ? a.s : "", a.s ? strlen(a.s) : 0, d)) return IR_ERR_INPUT;
        }
        out[i] = a;
    }
    /* every required key present */
    for (const char *p = schema; *p;) {
        while (*p == ' ')
            p++;
        const char *colon = strchr(p, ':');
        if (!colon) break;
        int opt = colon[2] == '?', found = 0;
        for (int i = 0; i < n_attr && !found; i++)
            found = strlen(attrs[i].key) == (size_t)(colon - p) && strncmp(attrs[i].key, p, colon - p) == 0;
        if (!opt && !found)
            return ir_diag_set(d, IR_ERR_INPUT, "missing attribute '%.*s'", (int)(colon - p), p);
        p = colon + 1;
        while (*p && *p != ' ')
            p++;
    }
    return IR_OK;
}

GirNode *gir_node_add(GirGraph *g, GirOp op, GirValue *const *in, int n_in, const GirAttr *attrs, int n_attr,
                      GirLoc loc, IrDiag *d)
{
    char where[300];
    loc_prefix(loc, where, sizeof where);
    const char *name = gir_op_name(op);
    IrDiag local = {0};
    GirAttr norm[GIR_MAX_ATTRS];
    GirType types[GIR_MAX_OUT];
    int n_out = 0;

    if ((unsigned)op >= GIR_OP_COUNT || (gir_op_flags(op) & GIR_F_LEAF)) {
        ir_diag_set(d, IR_ERR_INPUT, "%s%s cannot be built with gir_node_add", where, name);
        return NULL;
    }
    if (n_in < gir_op_min_in(op) || n_in > gir_op_max_in(op)) {
        if (gir_op_min_in(op) == gir_op_max_in(op))
            ir_diag_set(d, IR_ERR_INPUT, "%s%s takes %d tensor inputs, got %d", where, name,
                        gir_op_min_in(op), n_in);
        else
            ir_diag_set(d, IR_ERR_INPUT, "%s%s takes %d to %d tensor inputs, got %d", where, name,
                        gir_op_min_in(op), gir_op_max_in(op), n_in);
        return NULL;
    }
    for (int i = 0; i < n_in; i++)
        if (!in[i] || !in[i]->def || in[i]->def->id >= g->n_nodes || g->nodes[in[i]->def->id] != in[i]->def) {
            ir_diag_set(d, IR_ERR_INPUT, "%s%s: input %d is not a tensor of this graph", where, name, i + 1);
            return NULL;
        }
    if (check_attrs(op, attrs, n_attr, norm, &local) != IR_OK ||
        gir_infer(g, op, in, n_in, norm, n_attr, types, &n_out, &local) != IR_OK) {
        ir_diag_set(d, local.status, "%s%s: %s", where, name, local.msg);
        return NULL;
    }
    for (int i = 0; op == GIR_OP_OUTPUT && i < n_attr; i++)
        if (!strcmp(norm[i].key, "name") && gir_check_name("output", norm[i].s, strlen(norm[i].s), &local)) {
            ir_diag_set(d, local.status, "%s%s", where, local.msg);
            return NULL;
        }
    for (int k = 0; k < n_out; k++) {
        int64_t bytes;
        if (!gir_type_bytes(&types[k], NULL, &bytes)) {
            ir_diag_set(d, IR_ERR_LIMIT, "%s%s: output %d is larger than 2^48 bytes", where, name, k + 1);
            return NULL;
        }
    }
    GirNode *n = node_new(g, op, loc);
    if (!n) goto oom;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++)
        n->in[i] = in[i];
    n->n_attr = n_attr;
    for (int i = 0; i < n_attr; i++) {
        n->attr[i] = norm[i];
        if (norm[i].kind == GIR_ATTR_STR && !(n->attr[i].s = ir_arena_strdup(g->arena, norm[i].s))) goto oom;
    }
    if (!node_commit(g, n, types, n_out) || (op == GIR_OP_OUTPUT && !name_index(g, n))) goto oom;
    return n;
oom:
    ir_diag_set(d, IR_ERR_NOMEM, "%sout of memory", where);
    return NULL;
}

/* ---- verifier ------------------------------------------------------------------------------------- */

static IrStatus bad(IrDiag *d, const GirNode *n, const char *what)
{
    return ir_diag_set(d, IR_ERR_INTERNAL, "verify: node %d (%s, line %d): %s", n->id, gir_op_name(n->op),
                       n->loc.line, what);
}

static int type_valid(const GirGraph *g, const GirType *t)
{
    if ((unsigned)t->dtype >= GIR_DTYPE_COUNT || t->rank < 0 || t->rank > GIR_MAX_RANK) return 0;
    for (int i = 0; i < t->rank; i++)
        if (t->dim[i].sym >= g->n_sym || t->dim[i].sym < -1 || (t->dim[i].sym == -1 && t->dim[i].n <= 0))
            return 0;
    return 1;
}

/* A leaf and its position, sorted by (op, name, position) for the duplicate check: a sort, not a scan
 * per leaf (O(n log n) where the scan was O(n^2)). */
typedef struct LeafAt {
    const GirNode *n;
    int pos;
} LeafAt;

static int leaf_cmp(const void *pa, const void *pb)
{
    const LeafAt *a = pa, *b = pb;
    if (a->n->op != b->n->op) return a->n->op < b->n->op ? -1 : 1;
    int c = strcmp(gir_attr_s(a->n, "name", ""), gir_attr_s(b->n, "name", ""));
    return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

/* dup[i] = 1 for each leaf at position i whose op and name an earlier leaf has. 0 when out of memory. */
static int mark_dup_leaves(const GirGraph *g, unsigned char *dup)
{
    LeafAt *leaf = malloc(sizeof *leaf * ((size_t)g->n_nodes + 1));
    if (!leaf) return 0;
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const GirNode *o = g->nodes[i];
        if ((unsigned)o->op < GIR_OP_COUNT && (gir_op_flags(o->op) & GIR_F_LEAF)) leaf[n++] = (LeafAt){o, i};
    }
    qsort(leaf, (size_t)n, sizeof *leaf, leaf_cmp);
    for (int i = 1; i < n; i++)
        if (leaf[i].n->op == leaf[i - 1].n->op &&
            !strcmp(gir_attr_s(leaf[i].n, "name", ""), gir_attr_s(leaf[i - 1].n, "name", "")))
            dup[leaf[i].pos] = 1;
    free(leaf);
    return 1;
}

/* gir_verify's checks, dup marking the leaves whose name an earlier leaf of their op has. */
static IrStatus verify_nodes(const GirGraph *g, const unsigned char *dup, IrDiag *d)
{
    IrDiag nd = {0};
    if (gir_check_name("graph", g->name, strlen(g->name), &nd) ||
        (g->model && gir_check_name("model", g->model, strlen(g->model), &nd)))
        return ir_diag_set(d, IR_ERR_INTERNAL, "verify: %s", nd.msg);
    for (int i = 0; i < g->n_cfg; i++)
        if (gir_check_key("config key", g->cfg[i].key, strlen(g->cfg[i].key), &nd) ||
            (g->cfg[i].kind == GIR_ATTR_STR &&
             gir_check_value(g->cfg[i].key, g->cfg[i].s, strlen(g->cfg[i].s), &nd)))
            return ir_diag_set(d, IR_ERR_INTERNAL, "verify: %s", nd.msg);
    for (int i = 0; i < g->n_nodes; i++) {
        const GirNode *n = g->nodes[i];
        IrDiag local = {0};
        GirAttr norm[GIR_MAX_ATTRS];
        GirType types[GIR_MAX_OUT];
        int n_out = 0;
        if (n->id != i) return bad(d, n, "id does not match its position");
        if ((unsigned)n->op >= GIR_OP_COUNT) return bad(d, n, "unknown op");
        if (n->n_out < 0 || n->n_out > GIR_MAX_OUT) return bad(d, n, "wrong number of outputs");
        if (n->n_in < gir_op_min_in(n->op) || n->n_in > gir_op_max_in(n->op)) return bad(d, n, "wrong arity");
        for (int k = 0; k < n->n_in; k++) {
            const GirValue *v = n->in[k];
            if (!v || !v->def || v->def->id >= i || g->nodes[v->def->id] != v->def ||
                v->index >= v->def->n_out || v->def->out[v->index] != v)
                return bad(d, n, "input not defined by an earlier node");
        }
        for (int k = 0; k < n->n_out; k++)
            if (!n->out[k] || n->out[k]->def != n || n->out[k]->index != k ||
                !type_valid(g, &n->out[k]->type))
                return bad(d, n, "malformed output value");
        if (check_attrs(n->op, n->attr, n->n_attr, norm, &local) != IR_OK) return bad(d, n, local.msg);
        if (n->op == GIR_OP_OUTPUT) {
            const char *oname = gir_attr_s(n, "name", "");
            if (gir_check_name("output", oname, strlen(oname), &local)) return bad(d, n, local.msg);
        }
        if (gir_op_flags(n->op) & GIR_F_LEAF) {
            if (n->n_out != 1) return bad(d, n, "wrong number of outputs");
            const char *name = gir_attr_s(n, "name", "");
            if (gir_check_name(gir_op_name(n->op), name, strlen(name), &local)) return bad(d, n, local.msg);
            if (dup[i]) return bad(d, n, "duplicate leaf name");
            continue;
        }
        if (gir_infer(g, n->op, n->in, n->n_in, n->attr, n->n_attr, types, &n_out, &local) != IR_OK)
            return bad(d, n, local.msg);
        if (n->n_out != n_out) return bad(d, n, "wrong number of outputs");
        for (int k = 0; k < n->n_out; k++)
            if (!gir_type_eq(&types[k], &n->out[k]->type))
                return bad(d, n, "output type differs from inference");
    }
    return IR_OK;
}

IrStatus gir_verify(const GirGraph *g, IrDiag *d)
{
    unsigned char *dup = calloc((size_t)g->n_nodes + 1, 1);
    if (!dup || !mark_dup_leaves(g, dup)) {
        free(dup);
        return ir_diag_set(d, IR_ERR_NOMEM, "verify: out of memory");
    }
    IrStatus s = verify_nodes(g, dup, d);
    free(dup);
    return s;
}
