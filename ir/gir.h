/* gir.h — the graph IR: ops at transformer-block granularity on tensors with dtypes and symbolic dims.
 *
 * A graph is a list of nodes in topological order (a node can only use values that already exist).
 * Each node has up to GIR_MAX_OUT output values. Everything a graph owns lives in its arena and is freed
 * by gir_graph_destroy. Ops, dtypes and attribute schemas come from gir_ops.def / gir_dtypes.def.
 *
 * Usage (what the frontend does):
 *     GirGraph *g = gir_graph_create("llama");
 *     GirType t = gir_type(GIR_I32, 1, (GirDim[]){gir_dim_sym(g, "T")});
 *     GirValue *ids = gir_leaf(g, GIR_OP_INPUT, "tokens", t, loc, &diag);
 *     GirAttr eps = gir_attr_float("eps", 1e-5);
 *     GirNode *n = gir_node_add(g, GIR_OP_RMS_NORM, (GirValue *[]){x, w}, 2, &eps, 1, loc, &diag);
 *     if (!n) report(diag.msg);   // "recipes/llama.lua:40: rms_norm: weight has 4000 channels, x has 4096"
 *     gir_print(g, &buf);  gir_verify(g, &diag);  gir_graph_destroy(g);
 */
#ifndef KILN_IR_GIR_H
#define KILN_IR_GIR_H

#include "base.h"

enum { GIR_MAX_RANK = 4, GIR_MAX_IN = 7, GIR_MAX_OUT = 3, GIR_MAX_SYMS = 16, GIR_MAX_ATTRS = 12 };

typedef enum GirDtype {
#define X(e, name, be, bb, cls) GIR_##e,
#include "gir_dtypes.def"
#undef X
    GIR_DTYPE_COUNT
} GirDtype;

typedef enum GirDtypeClass { GIR_DC_FLOAT, GIR_DC_INT, GIR_DC_QUANT } GirDtypeClass;

typedef enum GirOp {
#define X(e, name, min_in, max_in, n_out, flags, attrs) GIR_OP_##e,
#include "gir_ops.def"
#undef X
    GIR_OP_COUNT
} GirOp;

/* Op flag bits (column 6 of gir_ops.def). */
enum {
    GIR_F_LEAF = 1 << 0,     /* no inputs: a runtime input or a weight */
    GIR_F_ELEMWISE = 1 << 1, /* pointwise over its inputs */
    GIR_F_NORM = 1 << 2,     /* a normalization */
    GIR_F_MATMUL = 1 << 3,   /* reads a weight matrix */
    GIR_F_ATTN = 1 << 4,     /* attention */
    GIR_F_EFFECT = 1 << 5,   /* writes state or marks a result: never removed as dead */
    GIR_F_FUSED = 1 << 6,    /* produced by a fusion pass (may also be written directly) */
};

/* A dimension: a constant (sym < 0, value n) or a symbol of the graph (sym >= 0, n unused). */
typedef struct GirDim {
    int64_t n;
    int sym;
} GirDim;

typedef struct GirType {
    GirDtype dtype;
    int rank;
    GirDim dim[GIR_MAX_RANK];
} GirType;

typedef enum GirAttrKind { GIR_ATTR_INT, GIR_ATTR_FLOAT, GIR_ATTR_STR } GirAttrKind;

typedef struct GirAttr {
    const char *key; /* static or arena-owned */
    GirAttrKind kind;
    int64_t i;
    double f;
    const char *s;
} GirAttr;

/* Where a node came from: recipe file and line (file NULL when built from C). */
typedef struct GirLoc {
    const char *file;
    int line;
} GirLoc;

typedef struct GirNode GirNode;

typedef struct GirValue {
    int id; /* printed as %id; dense, in creation order */
    GirType type;
    GirNode *def; /* producing node */
    int index;    /* which output of def */
} GirValue;

struct GirNode {
    int id;
    GirOp op;
    int n_in, n_out, n_attr;
    GirValue *in[GIR_MAX_IN];
    GirValue *out[GIR_MAX_OUT];
    GirAttr attr[GIR_MAX_ATTRS];
    GirLoc loc;
};

typedef struct GirGraph {
    IrArena *arena;
    const char *name;  /* recipe name */
    const char *model; /* named config, or NULL */
    int n_sym;
    const char *sym[GIR_MAX_SYMS];
    int n_nodes, cap_nodes;
    GirNode **nodes; /* topological order */
    int n_values;
    int n_cfg, cap_cfg;
    GirAttr *cfg;    /* resolved model config, in the order set */
    GirNode **named; /* [cap_named] index of leaves and outputs by (op, name): gir_find_named */
    int n_named, cap_named;
} GirGraph;

/* Text that enters the graph (docs/IR.md, "Names"), so that no name can forge a line or a field of the
 * text form, the launch plan or the package:
 *   names  (weights, inputs, outputs, the graph's name and model): 1..GIR_NAME_MAX bytes of
 *          A-Z a-z 0-9 and _ . - / : +   (HF "model.layers.0.self_attn.q_proj.weight", GGUF "blk.0.attn_q.weight")
 *   keys   (attributes, config entries): a letter or '_', then letters, digits and '_', at most GIR_NAME_MAX
 *   values (string attributes and config values, printed in quotes): up to GIR_VALUE_MAX bytes, none of
 *          them a control character (newline, tab, NUL, ...), '"' or '\'; UTF-8 is fine
 * Each check takes the string's length (a Lua string may hold a NUL, which must not cut it short) and
 * returns IR_OK, or IR_ERR_INPUT with "<what> '<shown>': <why> (<the rule>)" in d, the string shown with
 * anything unprintable as '?'. */
enum { GIR_NAME_MAX = 256, GIR_VALUE_MAX = 4096 };
IrStatus gir_check_name(const char *what, const char *s, size_t len, IrDiag *d);
IrStatus gir_check_key(const char *what, const char *s, size_t len, IrDiag *d);
IrStatus gir_check_value(const char *what, const char *s, size_t len, IrDiag *d);

/* Bytes of a tensor of type t with every symbol at sym_value[sym] (NULL: at 1), checked: 1 with *bytes,
 * 0 when a product overflows or the size passes IR_MAX_BYTES. */
int gir_type_bytes(const GirType *t, const int64_t *sym_value, int64_t *bytes);

/* Tables (from the .def files). */
const char *gir_dtype_name(GirDtype t);
int gir_dtype_parse(const char *name, GirDtype *out); /* 1 when known */
GirDtypeClass gir_dtype_class(GirDtype t);
int gir_dtype_block_elems(GirDtype t);
int gir_dtype_block_bytes(GirDtype t);
/* w4a16 dtypes (w4g32 .. w4g128z): the group size, and *zeros = 1 for the "z" ones; 0 for other dtypes. */
int gir_dtype_w4(GirDtype t, int *zeros);
/* fp8 weight dtypes (f8g32 .. f8g128): the group size; 0 for other dtypes. */
int gir_dtype_f8(GirDtype t);
const char *gir_op_name(GirOp op);
int gir_op_parse(const char *name, GirOp *out); /* 1 when known */
unsigned gir_op_flags(GirOp op);
int gir_op_min_in(GirOp op), gir_op_max_in(GirOp op), gir_op_n_out(GirOp op);
const char *gir_op_attr_schema(GirOp op);

/* Graph lifetime. Returns NULL on allocation failure. */
GirGraph *gir_graph_create(const char *name);
void gir_graph_destroy(GirGraph *g);
void gir_graph_set_model(GirGraph *g, const char *model);
/* Appends a config entry (copied into the arena); replaces an entry with the same key. */
IrStatus gir_graph_set_config(GirGraph *g, GirAttr a, IrDiag *d);

/* Symbols and types. gir_dim_sym finds or adds a symbol; on failure the dim's sym is GIR_SYM_NOMEM
 * (allocation failed) or GIR_SYM_BAD (empty name, or more than GIR_MAX_SYMS symbols). */
enum { GIR_SYM_NOMEM = -2, GIR_SYM_BAD = -3 };
GirDim gir_dim_const(int64_t n);
GirDim gir_dim_sym(GirGraph *g, const char *name);
GirType gir_type(GirDtype t, int rank, const GirDim *dims);
int gir_dim_eq(GirDim a, GirDim b);
int gir_type_eq(const GirType *a, const GirType *b);
/* Prints "bf16[T,4096]" (symbols by name). */
void gir_type_print(const GirGraph *g, const GirType *t, IrBuf *b);

/* Attribute constructors (the key is not copied: pass a literal or arena string). */
GirAttr gir_attr_int(const char *key, int64_t v);
GirAttr gir_attr_float(const char *key, double v);
GirAttr gir_attr_str(const char *key, const char *v);
const GirAttr *gir_node_attr(const GirNode *n, const char *key); /* NULL when absent */
int64_t gir_attr_i(const GirNode *n, const char *key, int64_t dflt);
double gir_attr_f(const GirNode *n, const char *key, double dflt);
const char *gir_attr_s(const GirNode *n, const char *key, const char *dflt);

/* Adds a leaf (GIR_OP_INPUT or GIR_OP_WEIGHT) named `name` with type `t`. Weight names must be
 * non-empty and unique; input names unique. Returns its value, or NULL with `d` set. */
GirValue *gir_leaf(GirGraph *g, GirOp op, const char *name, GirType t, GirLoc loc, IrDiag *d);

/* The first leaf (GIR_OP_INPUT, GIR_OP_WEIGHT) or output of op `op` named `name` that the builder
 * added and that is still in the graph, or NULL: one hash lookup (the builder keeps the index), so that
 * declaring n names costs O(n), not O(n^2). */
const GirNode *gir_find_named(const GirGraph *g, GirOp op, const char *name);

/* Adds a node: checks arity, attributes against the op's schema (unknown, missing, wrong kind), and
 * infers output types (gir_infer.c). Strings in attrs are copied. Returns the node, or NULL with `d`
 * set to "file:line: op: reason". */
GirNode *gir_node_add(GirGraph *g, GirOp op, GirValue *const *in, int n_in, const GirAttr *attrs, int n_attr,
                      GirLoc loc, IrDiag *d);

/* Shape/dtype inference for one node from its inputs and attributes: sets *n_out to the node's output
 * count (the op table's, or 2 for matmul {epilogue="pair"}) and fills out_types[0..*n_out).
 * Returns IR_OK or an error (message without location) in d. Used by the builder and the verifier. */
IrStatus gir_infer(const GirGraph *g, GirOp op, GirValue *const *in, int n_in, const GirAttr *attrs,
                   int n_attr, GirType *out_types, int *n_out, IrDiag *d);

/* Checks every invariant: order, ids, arity, schemas, inferred types, unique names, symbols.
 * Returns IR_OK or IR_ERR_INTERNAL with the first broken invariant in d. */
IrStatus gir_verify(const GirGraph *g, IrDiag *d);

/* Deterministic text form (see docs/IR.md). `with_locs` appends "# file:line" to each node. */
void gir_print(const GirGraph *g, int with_locs, IrBuf *b);

/* The printed number of every value (num[value id], n_values entries): definition order. */
void gir_number_values(const GirGraph *g, int *num);

/* Hash of the printed graph (without locations): identifies the graph in the package. */
uint64_t gir_graph_hash(const GirGraph *g);

/* Passes (gir_passes.c). Each rewrites the graph in place and keeps it valid. */
typedef struct GirPassOptions {
    const char *dump_after; /* pass name, or "all"; NULL for none */
    IrBuf *dump;            /* where dumps go (required when dump_after is set) */
} GirPassOptions;
/* Runs the standard pipeline (with a verify after each pass). */
IrStatus gir_run_passes(GirGraph *g, const GirPassOptions *opt, IrDiag *d);
int gir_pass_count(void);
const char *gir_pass_name(int i); /* in pipeline order; NULL outside 0..count-1 */

#endif
