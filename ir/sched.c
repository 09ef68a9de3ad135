/* sched.c — graph IR -> kernel schedule, and activation buffer planning.
 *
 * One launch per compute node, in graph order. Each op maps to a family and a spec (shape constants,
 * dtypes, options) in `lower_node`; identical specs share one kernel. Arguments follow the family's
 * documented param order (ir/kfam_<family>.c); their names here are for people reading the plan.
 * kv_write's outputs alias its cache inputs (the caches are updated in place).
 *
 * Buffer planning: every activation's size is taken at the option maxima (T, B, R); its live range runs
 * from the launch that writes it to the last launch that reads it (graph outputs: to the end); offsets
 * are assigned greedily, largest first, at the lowest 256-byte-aligned offset that overlaps no buffer
 * with an intersecting live range.
 *
 * Sizes are checked (ir/base.h): a buffer past IR_MAX_BYTES at the maxima is an error at its node's
 * recipe line, and so is an arena past it; under those bounds no sum or product here can overflow.
 */
#include "sched.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SCHED_ALIGN = 256 };

SchedOptions sched_options_default(void)
{
    return (SchedOptions){.max_tokens = 8192, .max_seqs = 256, .max_rows = 256, .max_split_rows = 65536};
}

typedef struct Lower {
    const GirGraph *g;
    Schedule *s;
    IrArena *a;
    int *buf_of;            /* value id -> buffer index */
    int *num;               /* value id -> printed value number */
    const char *bad_sym;    /* first symbol an activation used that the plan cannot size */
    const GirNode *node;    /* the node being lowered (for messages) */
    const GirNode *too_big; /* first node with a buffer past IR_MAX_BYTES at the maxima (or overflowing) */
    const char *too_big_buf;
    int cap_bufs, cap_launches, cap_kernels;
    int splitk[2]; /* 1 + the buffer index of %splitk_ws, %splitk_sem; 0 before the first */
    IrDiag *d;
} Lower;

static int64_t sym_value(Lower *L, int sym)
{
    const char *n = L->g->sym[sym];
    if (!strcmp(n, "T")) return L->s->opt.max_tokens;
    if (!strcmp(n, "R")) return L->s->opt.max_rows;
    if (!strcmp(n, "B")) return L->s->opt.max_seqs;
    if (!strcmp(n, "B+1")) return L->s->opt.max_seqs + 1;
    if (!L->bad_sym) L->bad_sym = n; /* an activation sized by a symbol the plan has no maximum for */
    return 1;
}

/* Bytes of t at the plan's maxima, checked (gir_type_bytes): past IR_MAX_BYTES, or overflowing, it
 * records the node being lowered in too_big (sched_build reports it at its recipe line) and gives 0. */
static int64_t type_bytes(Lower *L, const GirType *t, const char *name)
{
    int64_t sym[GIR_MAX_SYMS] = {0}, bytes;
    for (int i = 0; i < t->rank; i++)
        if (t->dim[i].sym >= 0) sym[t->dim[i].sym] = sym_value(L, t->dim[i].sym);
    if (gir_type_bytes(t, sym, &bytes)) return bytes;
    if (!L->too_big) L->too_big = L->node, L->too_big_buf = name;
    return 0;
}

/* Appends a buffer (activations sized at the planned maxima, unplaced); returns its index, -1 on OOM. */
static int add_buf(Lower *L, const char *name, SchedBufKind kind, const GirType *t)
{
    Schedule *s = L->s;
    if (!name || !ir_arena_grow(L->a, (void **)&s->bufs, &L->cap_bufs, s->n_bufs, sizeof(SchedBuf)))
        return -1;
    SchedBuf *b = &s->bufs[s->n_bufs];
    memset(b, 0, sizeof *b);
    b->name = name;
    b->kind = kind;
    b->type = *t;
    b->bytes = kind == SCHED_BUF_ACT ? type_bytes(L, t, name) : 0;
    b->offset = -1;
    b->first = b->last = -1;
    return s->n_bufs++;
}

/* The buffer of graph value v. */
static int new_buf(Lower *L, const GirValue *v, SchedBufKind kind, const char *name)
{
    int i = add_buf(L, name, kind, &v->type);
    if (i >= 0) L->buf_of[v->id] = i;
    return i;
}

static int act_buf(Lower *L, const GirValue *v)
{
    char num[24];
    snprintf(num, sizeof num, "%%%d", L->num[v->id]);
    return new_buf(L, v, SCHED_BUF_ACT, ir_arena_strdup(L->a, num));
}

/* A workspace activation that no graph value names ("%<what>.<node id>"): f32 [rows, cols]. */
static int ws_buf(Lower *L, const char *what, int node, int64_t rows, int64_t cols)
{
    char name[48];
    snprintf(name, sizeof name, "%%%s.%d", what, node);
    GirType t = gir_type(GIR_F32, 2, (GirDim[]){{.n = rows, .sym = -1}, {.n = cols, .sym = -1}});
    return add_buf(L, ir_arena_strdup(L->a, name), SCHED_BUF_ACT, &t);
}

/* The pair every ws=1 matmul shares (kfam.h, kfam_matmul.c): "%splitk_ws" (f32 partials) and
 * "%splitk_sem" (i32 tile counters, which each launch leaves zero; the runtime zeroes them once). Both live
 * for the whole step, so no other activation shares their bytes, and grow to the widest N. 0, -1 on OOM. */
static int splitk_bufs(Lower *L, int64_t N, int *ws, int *sem)
{
    static const char *const names[2] = {"%splitk_ws", "%splitk_sem"};
    const int64_t elems[2] = {KFAM_SPLITK_WS(N), KFAM_SPLITK_SEMS(N)};
    int *idx[2] = {ws, sem};
    for (int i = 0; i < 2; i++) {
        Schedule *s = L->s;
        int b = L->splitk[i] - 1;
        GirType t = gir_type(i ? GIR_I32 : GIR_F32, 1, (GirDim[]){{.n = elems[i], .sym = -1}});
        if (b < 0) {
            if ((b = add_buf(L, names[i], SCHED_BUF_ACT, &t)) < 0) return -1;
            L->splitk[i] = b + 1;
            s->bufs[b].first = 0, s->bufs[b].last = 1 << 30;
        } else if (s->bufs[b].type.dim[0].n < elems[i]) {
            s->bufs[b].type = t;
            s->bufs[b].bytes = type_bytes(L, &t, names[i]);
        }
        *idx[i] = b;
    }
    return 0;
}

/* The kernel for spec (deduplicated by its printed form). */
static int kernel_for(Lower *L, const KfamSpec *spec)
{
    Schedule *s = L->s;
    IrBuf want = {0}, have = {0};
    kfam_spec_print(spec, &want);
    int found = -1;
    for (int i = 0; i < s->n_kernels && found < 0 && !want.oom; i++) {
        have.len = 0;
        kfam_spec_print(&s->kernels[i].spec, &have);
        if (!have.oom && have.s && !strcmp(have.s, want.s)) found = i;
    }
    int oom = want.oom || have.oom;
    ir_buf_free(&want);
    ir_buf_free(&have);
    if (oom) return -1;
    if (found >= 0) {
        s->kernels[found].uses++;
        return found;
    }
    if (!ir_arena_grow(L->a, (void **)&s->kernels, &L->cap_kernels, s->n_kernels, sizeof(SchedKernel)))
        return -1;
    SchedKernel *k = &s->kernels[s->n_kernels];
    k->spec = *spec;
    k->fam = kfam_find(spec->family);
    k->name = kfam_spec_name(L->a, spec);
    k->uses = 1;
    return k->name ? s->n_kernels++ : -1;
}

typedef struct Args {
    int n;
    SchedArg a[SCHED_MAX_ARGS];
} Args;

static void arg_buf(Args *x, int buf)
{
    x->a[x->n++] = (SchedArg){.kind = SCHED_ARG_BUF, .buf = buf};
}

/* A weight operand of a linear layer: the weight, or for w4a16 (gir_dtypes.def) its three planes, words
 * at byte 0, scales after them, zeros after the scales (qmatmul's w, scales[, zeros]); for fp8 its two,
 * codes and scales. */
static void arg_weight(Args *x, int buf, const GirType *t)
{
    int zeros = 0, G = gir_dtype_w4(t->dtype, &zeros);
    arg_buf(x, buf);
    if (gir_dtype_f8(t->dtype)) { /* fp8: codes at byte 0, f32 scales after them (qmatmul's w, scales) */
        x->a[x->n++] = (SchedArg){.kind = SCHED_ARG_BUF, .buf = buf, .offset = t->dim[0].n * t->dim[1].n};
        return;
    }
    if (!G) return;
    int64_t N = t->dim[0].n, K = t->dim[1].n, words = N * K / 2, scales = N * (K / G) * 2;
    x->a[x->n++] = (SchedArg){.kind = SCHED_ARG_BUF, .buf = buf, .offset = words};
    if (zeros) x->a[x->n++] = (SchedArg){.kind = SCHED_ARG_BUF, .buf = buf, .offset = words + scales};
}

static void arg_sym(Args *x, GirDim dim)
{
    x->a[x->n++] = (SchedArg){.kind = SCHED_ARG_SYM, .sym = dim.sym};
}

static void arg_runtime(Args *x, const char *name)
{
    x->a[x->n++] = (SchedArg){.kind = SCHED_ARG_RUNTIME, .rt = name};
}

static const char *dtype_of(const GirValue *v)
{
    return gir_dtype_name(v->type.dtype);
}

/* The rope family's keys from a node's rope attributes (rope, and kv_write rotating K): theta, scaling
 * and what the scaling needs. */
static void rope_keys(KfamSpec *sp, const GirNode *n)
{
    kfam_spec_float(sp, "theta", gir_attr_f(n, "theta", 10000));
    const char *sc = gir_attr_s(n, "scaling", "none");
    kfam_spec_str(sp, "scaling", sc);
    if (strcmp(sc, "none")) kfam_spec_float(sp, "factor", gir_attr_f(n, "factor", 1));
    if (!strcmp(sc, "llama3")) {
        kfam_spec_float(sp, "low_freq_factor", gir_attr_f(n, "low_freq_factor", 1));
        kfam_spec_float(sp, "high_freq_factor", gir_attr_f(n, "high_freq_factor", 4));
        kfam_spec_int(sp, "original_max_pos", gir_attr_i(n, "original_max_pos", 8192));
    }
}

/* Fills the specs and arguments of node n's launches (its output buffers already exist) into sp[0..1],
 * x[0..1]. Returns the number of launches (0 for nodes that launch nothing), -1 when out of memory. */
static int lower_node(Lower *L, const GirNode *n, KfamSpec *sp, Args *x)
{
    int in[GIR_MAX_IN], out[GIR_MAX_OUT];
    for (int i = 0; i < n->n_in; i++)
        in[i] = L->buf_of[n->in[i]->id];
    for (int i = 0; i < n->n_out; i++)
        out[i] = L->buf_of[n->out[i]->id];
    const GirType *t0 = n->n_in ? &n->in[0]->type : NULL;
    switch (n->op) {
    case GIR_OP_EMBEDDING:
        *sp = kfam_spec("embedding");
        kfam_spec_int(sp, "C", n->out[0]->type.dim[1].n);
        kfam_spec_int(sp, "V", n->in[1]->type.dim[0].n);
        kfam_spec_str(sp, "dtype", dtype_of(n->out[0]));
        arg_buf(x, in[0]), arg_buf(x, in[1]), arg_buf(x, out[0]), arg_sym(x, t0->dim[0]);
        return 1;
    case GIR_OP_RMS_NORM:
    case GIR_OP_ADD_RMS_NORM: {
        int fused = n->op == GIR_OP_ADD_RMS_NORM;
        *sp = kfam_spec("rmsnorm");
        kfam_spec_int(sp, "C", t0->dim[1].n);
        kfam_spec_float(sp, "eps", gir_attr_f(n, "eps", 1e-5));
        kfam_spec_str(sp, "dtype", dtype_of(n->out[0]));
        kfam_spec_int(sp, "residual", fused);
        arg_buf(x, in[0]);
        if (fused) arg_buf(x, in[1]);
        arg_buf(x, in[fused ? 2 : 1]), arg_buf(x, out[0]);
        if (fused) arg_buf(x, out[1]);
        arg_sym(x, t0->dim[0]);
        return 1;
    }
    case GIR_OP_MATMUL: {
        const char *epi = gir_attr_s(n, "epilogue", n->n_in == 3 ? "bias" : "none");
        /* GGUF block-quantized weights (bytes as stored): the quantized matmul, dequantizing in its K loop */
        int quant = gir_dtype_class(n->in[1]->type.dtype) == GIR_DC_QUANT;
        *sp = kfam_spec(quant ? "qmatmul" : "matmul");
        kfam_spec_int(sp, "N", n->in[1]->type.dim[0].n);
        kfam_spec_int(sp, "K", n->in[1]->type.dim[1].n);
        kfam_spec_str(sp, "dtype", dtype_of(n->out[0]));
        kfam_spec_str(sp, "epilogue", epi);
        if (!strcmp(epi, "group")) /* N is the first product's; N2, N3 the others' */
            for (int i = 2; i < n->n_in; i++)
                kfam_spec_int(sp, i == 2 ? "N2" : "N3", n->in[i]->type.dim[0].n);
        int zeros = 0, G = gir_dtype_w4(n->in[1]->type.dtype, &zeros);
        if (G) { /* w4a16: the group and zero points are the dtype's */
            kfam_spec_str(sp, "wfmt", "w4a16");
            kfam_spec_int(sp, "group", G);
            kfam_spec_int(sp, "zeros", zeros);
            kfam_spec_str(sp, "sdtype", "f16");
        } else if (gir_dtype_f8(n->in[1]->type.dtype)) { /* fp8: block-scaled e4m3 */
            kfam_spec_str(sp, "wfmt", "fp8");
            kfam_spec_int(sp, "group", gir_dtype_f8(n->in[1]->type.dtype));
        } else if (quant) {
            kfam_spec_str(sp, "wfmt", dtype_of(n->in[1]));
        } else if (n->in[1]->type.dtype != n->out[0]->type.dtype) {
            kfam_spec_str(sp, "wdtype", dtype_of(n->in[1]));
        }
        for (int i = 0; i < n->n_in; i++) /* x, the weight(s), a bias */
            arg_weight(x, in[i], &n->in[i]->type);
        for (int i = 0; i < n->n_out; i++) /* epilogue pair: out, out2; group: out, out2, out3 */
            arg_buf(x, out[i]);
        /* long rows: decode variants may split K inside the launch (kfam_matmul.c: one product;
         * kfam_qmatmul.c: silu_mul and pair too) */
        int64_t N = n->in[1]->type.dim[0].n, K = n->in[1]->type.dim[1].n;
        int one = !strcmp(epi, "none") || !strcmp(epi, "bias") || !strcmp(epi, "residual");
        if ((quant || n->in[1]->type.dtype == n->out[0]->type.dtype) && K >= 4096 &&
            KFAM_SPLITK_WS(N) <= INT32_MAX &&
            (one || (quant && (!strcmp(epi, "silu_mul") || !strcmp(epi, "pair"))))) {
            int ws, sem;
            if (splitk_bufs(L, N, &ws, &sem)) return -1;
            kfam_spec_int(sp, "ws", 1);
            arg_buf(x, ws), arg_buf(x, sem);
        }
        arg_sym(x, t0->dim[0]);
        return 1;
    }
    case GIR_OP_ROPE: {
        *sp = kfam_spec("rope");
        kfam_spec_int(sp, "H", gir_attr_i(n, "heads", 0));
        kfam_spec_int(sp, "D", gir_attr_i(n, "head_dim", 0));
        rope_keys(sp, n);
        kfam_spec_str(sp, "dtype", dtype_of(n->out[0]));
        arg_buf(x, in[0]), arg_buf(x, in[1]), arg_buf(x, out[0]), arg_sym(x, t0->dim[0]);
        return 1;
    }
    case GIR_OP_KV_WRITE:
        /* with positions (6 inputs, fuse-rope-kv-write): rope=1, K rotated on the way; positions is the
         * family's param after slots */
        *sp = kfam_spec("kv_write");
        kfam_spec_int(sp, "Hkv", gir_attr_i(n, "kv_heads", 0));
        kfam_spec_int(sp, "D", gir_attr_i(n, "head_dim", 0));
        kfam_spec_int(sp, "page_size", gir_attr_i(n, "page_size", 16));
        kfam_spec_str(sp, "dtype", dtype_of(n->in[2]));
        if (n->n_in >= 6) {
            kfam_spec_int(sp, "rope", 1);
            rope_keys(sp, n);
        }
        if (n->n_in == 7) kfam_spec_int(sp, "H", gir_attr_i(n, "heads", 0)); /* q rotated too */
        for (int i = 0; i < n->n_in; i++)
            arg_buf(x, in[i]);
        if (n->n_in == 7) arg_buf(x, out[2]); /* q_out */
        arg_sym(x, t0->dim[0]);
        return 1;
    case GIR_OP_ATTENTION: {
        /* split-KV capable (flash-decoding): the runtime picks n_splits per step; with 1 the kernel writes
         * out itself and the merge launch has 0 rows */
        int64_t H = gir_attr_i(n, "heads", 0), D = gir_attr_i(n, "head_dim", 0),
                rows = L->s->opt.max_split_rows;
        int ws_o = ws_buf(L, "ws_o", n->id, rows, D), ws_lse = ws_buf(L, "ws_lse", n->id, rows, 1);
        if (ws_o < 0 || ws_lse < 0) return -1;
        *sp = kfam_spec("attention");
        kfam_spec_str(sp, "mode", gir_attr_s(n, "mode", "mixed"));
        kfam_spec_int(sp, "H", gir_attr_i(n, "heads", 0));
        kfam_spec_int(sp, "Hkv", gir_attr_i(n, "kv_heads", 0));
        kfam_spec_int(sp, "D", gir_attr_i(n, "head_dim", 0));
        kfam_spec_int(sp, "page_size", gir_attr_i(n, "page_size", 16));
        kfam_spec_int(sp, "causal", gir_attr_i(n, "causal", 1));
        kfam_spec_int(sp, "window", gir_attr_i(n, "window", 0));
        if (gir_node_attr(n, "scale")) kfam_spec_float(sp, "scale", gir_attr_f(n, "scale", 0));
        kfam_spec_str(sp, "dtype", dtype_of(n->out[0]));
        kfam_spec_int(sp, "split", 1);
        if (n->n_in == 7) kfam_spec_int(sp, "tree", 1);
        for (int i = 0; i < 6; i++)
            arg_buf(x, in[i]);
        arg_buf(x, out[0]), arg_sym(x, t0->dim[0]), arg_sym(x, n->in[4]->type.dim[0]);
        arg_sym(x, n->in[3]->type.dim[1]), arg_runtime(x, "max_q");
        if (n->n_in == 7) arg_buf(x, in[6]);
        arg_buf(x, ws_o), arg_buf(x, ws_lse), arg_runtime(x, "n_splits");
        sp[1] = kfam_spec("attention_merge");
        kfam_spec_int(&sp[1], "H", H);
        kfam_spec_int(&sp[1], "D", D);
        kfam_spec_str(&sp[1], "dtype", dtype_of(n->out[0]));
        arg_buf(&x[1], ws_o), arg_buf(&x[1], ws_lse), arg_buf(&x[1], out[0]);
        arg_runtime(&x[1], "split_tokens"), arg_runtime(&x[1], "n_splits");
        return 2;
    }
    case GIR_OP_LOGITS:
        *sp = kfam_spec("matmul");
        kfam_spec_int(sp, "N", n->in[1]->type.dim[0].n);
        kfam_spec_int(sp, "K", n->in[1]->type.dim[1].n);
        kfam_spec_str(sp, "dtype", dtype_of(n->in[0]));
        kfam_spec_str(sp, "epilogue", "none");
        kfam_spec_str(sp, "out_dtype", "f32");
        kfam_spec_int(sp, "gather", 1);
        arg_buf(x, in[0]), arg_buf(x, in[1]), arg_buf(x, in[2]), arg_buf(x, out[0]);
        arg_sym(x, n->in[2]->type.dim[0]);
        return 1;
    case GIR_OP_SAMPLE:
        *sp = kfam_spec("sample");
        kfam_spec_int(sp, "V", t0->dim[1].n);
        kfam_spec_str(sp, "mode", n->n_in == 2 ? "sample" : "greedy");
        for (int i = 0; i < n->n_in; i++)
            arg_buf(x, in[i]);
        arg_buf(x, out[0]), arg_sym(x, t0->dim[0]);
        return 1;
    case GIR_OP_SPEC_VERIFY:
        *sp = kfam_spec("spec_verify");
        kfam_spec_int(sp, "V", t0->dim[1].n);
        kfam_spec_int(sp, "k", gir_attr_i(n, "k", 1));
        kfam_spec_str(sp, "mode", gir_attr_s(n, "mode", "greedy"));
        for (int i = 0; i < n->n_in; i++)
            arg_buf(x, in[i]);
        arg_buf(x, out[0]), arg_buf(x, out[1]), arg_sym(x, n->in[1]->type.dim[0]);
        return 1;
    case GIR_OP_SILU_MUL:
    case GIR_OP_ADD:
        *sp = kfam_spec("elementwise");
        kfam_spec_str(sp, "op", gir_op_name(n->op));
        kfam_spec_int(sp, "C", t0->dim[1].n);
        kfam_spec_str(sp, "dtype", dtype_of(n->out[0]));
        arg_buf(x, in[0]), arg_buf(x, in[1]), arg_buf(x, out[0]), arg_sym(x, t0->dim[0]);
        return 1;
    case GIR_OP_INPUT:
    case GIR_OP_WEIGHT:
    case GIR_OP_OUTPUT:
    case GIR_OP_COUNT: return 0;
    }
    return 0;
}

static IrStatus oom(Lower *L)
{
    return ir_diag_set(L->d, IR_ERR_NOMEM, "schedule: out of memory");
}

/* Placement order: bytes descending, then index (a total order: deterministic). */
typedef struct ActAt {
    int64_t key; /* bytes (placement order) or first (the live-range index) */
    int buf;
} ActAt;

static int by_bytes_desc(const void *pa, const void *pb)
{
    const ActAt *a = pa, *b = pb;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return (a->buf > b->buf) - (a->buf < b->buf);
}

static int by_key_asc(const void *pa, const void *pb)
{
    const ActAt *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->buf > b->buf) - (a->buf < b->buf);
}

/* The live-range index: activations sorted by first launch, and over them a max-tree (leaves at
 * [size, 2 size)) of the last launch of those already placed (INT_MIN: not placed). Placed buffers whose
 * range meets [first, last] are those among the prefix with first <= last whose last >= first: found
 * by descending only into subtrees whose maximum reaches `first`, so a query costs O((k + 1) log n) for
 * k answers where a scan of every placed buffer cost O(n) (O(n^2) for a graph). */
typedef struct LiveIndex {
    ActAt *byfirst; /* [n] */
    int *pos;       /* buffer index -> position in byfirst */
    int *max_last;  /* [2 size] */
    int n, size;
} LiveIndex;

static void live_place(LiveIndex *x, int buf, int last)
{
    int i = x->size + x->pos[buf];
    x->max_last[i] = last;
    for (i /= 2; i >= 1; i /= 2)
        x->max_last[i] =
            x->max_last[2 * i] > x->max_last[2 * i + 1] ? x->max_last[2 * i] : x->max_last[2 * i + 1];
}

/* Appends to out the placed buffers among positions [lo, hi) of node `node` that are below `prefix`
 * and live at or after `first`. */
static void live_query(const LiveIndex *x, int node, int lo, int hi, int prefix, int first, int *out, int *n)
{
    if (lo >= prefix || x->max_last[node] < first) return;
    if (hi - lo == 1) {
        out[(*n)++] = x->byfirst[lo].buf;
        return;
    }
    int mid = (lo + hi) / 2;
    live_query(x, 2 * node, lo, mid, prefix, first, out, n);
    live_query(x, 2 * node + 1, mid, hi, prefix, first, out, n);
}

/* Greedy placement (largest first) of activations whose live ranges intersect: each at the lowest
 * SCHED_ALIGN-aligned offset where it overlaps no placed buffer whose live range meets its own. */
static IrStatus plan_arena(Lower *L)
{
    Schedule *s = L->s;
    size_t nb = (size_t)s->n_bufs + 1;
    ActAt *order = malloc(sizeof *order * nb);
    LiveIndex x = {.byfirst = malloc(sizeof *x.byfirst * nb), .pos = malloc(sizeof(int) * nb)};
    int *hit = malloc(sizeof(int) * nb);
    ActAt *near = malloc(sizeof *near * nb);
    int n = 0;
    for (int i = 0; i < s->n_bufs; i++)
        if (s->bufs[i].kind == SCHED_BUF_ACT) n++;
    x.size = 1;
    while (x.size < n)
        x.size *= 2;
    x.max_last = malloc(sizeof(int) * 2 * (size_t)x.size);
    IrStatus st = IR_OK;
    if (!order || !x.byfirst || !x.pos || !hit || !near || !x.max_last) {
        st = oom(L);
        goto done;
    }
    n = 0;
    for (int i = 0; i < s->n_bufs; i++)
        if (s->bufs[i].kind == SCHED_BUF_ACT) {
            order[n] = (ActAt){s->bufs[i].bytes, i};
            x.byfirst[n++] = (ActAt){s->bufs[i].first, i};
        }
    x.n = n;
    qsort(order, (size_t)n, sizeof *order, by_bytes_desc);
    qsort(x.byfirst, (size_t)n, sizeof *x.byfirst, by_key_asc);
    for (int i = 0; i < n; i++)
        x.pos[x.byfirst[i].buf] = i;
    for (int i = 0; i < 2 * x.size; i++)
        x.max_last[i] = INT_MIN;
    s->act_bytes = 0;
    for (int i = 0; i < n; i++) {
        SchedBuf *b = &s->bufs[order[i].buf];
        int lo = 0, hi = n; /* prefix: the buffers whose first launch is <= b's last */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (x.byfirst[mid].key <= b->last)
                lo = mid + 1;
            else
                hi = mid;
        }
        int k = 0;
        live_query(&x, 1, 0, x.size, lo, b->first, hit, &k);
        for (int j = 0; j < k; j++)
            near[j] = (ActAt){s->bufs[hit[j]].offset, hit[j]};
        qsort(near, (size_t)k, sizeof *near, by_key_asc);
        int64_t off = 0; /* bump past every overlapping one, in offset order: the lowest gap that fits */
        for (int j = 0; j < k && near[j].key < off + b->bytes; j++) {
            const SchedBuf *o = &s->bufs[near[j].buf];
            if (off < o->offset + o->bytes)
                off = (o->offset + o->bytes + SCHED_ALIGN - 1) / SCHED_ALIGN * SCHED_ALIGN;
        }
        b->offset = off; /* off and bytes are each at most 2^48 + 255 here: the sum cannot overflow */
        live_place(&x, order[i].buf, b->last);
        if (off + b->bytes > s->act_bytes) s->act_bytes = off + b->bytes;
        if (s->act_bytes > IR_MAX_BYTES) {
            st = ir_diag_set(
                L->d, IR_ERR_LIMIT,
                "schedule: the activation arena needs more than 2^48 bytes (T=%lld B=%lld R=%lld)",
                (long long)s->opt.max_tokens, (long long)s->opt.max_seqs, (long long)s->opt.max_rows);
            break;
        }
    }
done:
    free(order), free(x.byfirst), free(x.pos), free(x.max_last), free(hit), free(near);
    return st;
}

IrStatus sched_build(const GirGraph *g, const SchedOptions *o, IrArena *a, Schedule **out, IrDiag *d)
{
    *out = NULL;
    Schedule *s = ir_arena_alloc(a, sizeof *s);
    int *buf_of = s ? ir_arena_alloc(a, sizeof(int) * (size_t)(g->n_values + 1)) : NULL;
    int *num = buf_of ? ir_arena_alloc(a, sizeof(int) * (size_t)(g->n_values + 1)) : NULL;
    if (!num) return ir_diag_set(d, IR_ERR_NOMEM, "schedule: out of memory");
    gir_number_values(g, num);
    s->g = g;
    s->opt = o ? *o : sched_options_default();
    const int64_t maxima[] = {s->opt.max_tokens, s->opt.max_seqs, s->opt.max_rows, s->opt.max_split_rows};
    for (int i = 0; i < 4; i++)
        if (maxima[i] < 1 || maxima[i] > IR_MAX_DIM)
            return ir_diag_set(d, IR_ERR_INPUT,
                               "schedule: plan maxima (T=%lld B=%lld R=%lld split rows=%lld) "
                               "must be 1..%lld",
                               (long long)s->opt.max_tokens, (long long)s->opt.max_seqs,
                               (long long)s->opt.max_rows, (long long)s->opt.max_split_rows,
                               (long long)IR_MAX_DIM);
    Lower L = {.g = g, .s = s, .a = a, .buf_of = buf_of, .num = num, .d = d};
    for (int i = 0; i < g->n_nodes; i++) {
        const GirNode *n = g->nodes[i];
        L.node = n;
        if (n->op == GIR_OP_INPUT || n->op == GIR_OP_WEIGHT) {
            if (new_buf(&L, n->out[0], n->op == GIR_OP_INPUT ? SCHED_BUF_INPUT : SCHED_BUF_WEIGHT,
                        gir_attr_s(n, "name", "")) < 0)
                return oom(&L);
            continue;
        }
        if (n->op == GIR_OP_OUTPUT) {
            SchedBuf *b = &s->bufs[buf_of[n->in[0]->id]];
            b->output = gir_attr_s(n, "name", "");
            b->last = 1 << 30;
            continue;
        }
        for (int k = 0; k < n->n_out; k++) {
            if (n->op == GIR_OP_KV_WRITE && k < 2) {
                buf_of[n->out[k]->id] = buf_of[n->in[2 + k]->id]; /* updated in place */
            } else if (act_buf(&L, n->out[k]) < 0) {
                return oom(&L);
            }
        }
        KfamSpec spec[2];
        Args x[2] = {{0}, {0}};
        int nl = lower_node(&L, n, spec, x);
        if (nl < 0) return oom(&L);
        for (int li = 0; li < nl; li++) {
            int kern = kernel_for(&L, &spec[li]);
            if (kern < 0 ||
                !ir_arena_grow(a, (void **)&s->launches, &L.cap_launches, s->n_launches, sizeof(SchedLaunch)))
                return oom(&L);
            SchedLaunch *l = &s->launches[s->n_launches];
            l->kernel = kern;
            l->node = n->id;
            l->n_args = x[li].n;
            memcpy(l->args, x[li].a, sizeof(SchedArg) * (size_t)x[li].n);
            for (int k = 0; k < x[li].n; k++) {
                if (x[li].a[k].kind != SCHED_ARG_BUF) continue;
                SchedBuf *b = &s->bufs[x[li].a[k].buf];
                if (b->kind != SCHED_BUF_ACT) continue;
                if (b->first < 0) b->first = s->n_launches;
                if (b->last < s->n_launches) b->last = s->n_launches;
            }
            s->n_launches++;
        }
    }
    if (L.too_big) {
        const GirNode *n = L.too_big;
        return ir_diag_set(d, IR_ERR_LIMIT,
                           "%s:%d: schedule: %s: buffer %s needs more than 2^48 bytes at the plan's maxima "
                           "(T=%lld B=%lld R=%lld)",
                           n->loc.file ? n->loc.file : g->name, n->loc.line, gir_op_name(n->op),
                           L.too_big_buf ? L.too_big_buf : "?", (long long)s->opt.max_tokens,
                           (long long)s->opt.max_seqs, (long long)s->opt.max_rows);
    }
    if (L.bad_sym)
        return ir_diag_set(
            d, IR_ERR_UNSUPPORTED,
            "schedule: an activation is sized by symbol '%s'; only T, B, B+1 and R are planned", L.bad_sym);
    IrStatus st = plan_arena(&L);
    if (st == IR_OK) *out = s;
    return st;
}

static const char *const kind_names[] = {"input", "weight", "act"};

void sched_launch_args(const Schedule *s, const SchedLaunch *l, IrBuf *b)
{
    for (int k = 0; k < l->n_args; k++) {
        const SchedArg *a = &l->args[k];
        if (k) ir_buf_put(b, " ", 1);
        if (a->kind == SCHED_ARG_SYM) {
            ir_buf_printf(b, "sym:%s", s->g->sym[a->sym]);
        } else if (a->kind == SCHED_ARG_RUNTIME) {
            ir_buf_printf(b, "rt:%s", a->rt);
        } else {
            const SchedBuf *buf = &s->bufs[a->buf];
            ir_buf_printf(b, "%s:%s", kind_names[buf->kind], buf->name);
            if (a->offset) ir_buf_printf(b, "@%lld", (long long)a->offset);
        }
    }
}

void sched_print(const Schedule *s, IrBuf *b)
{
    ir_buf_printf(
        b, "schedule %s: %d kernels, %d launches, activation arena %lld bytes (T=%lld B=%lld R=%lld)\n",
        s->g->name, s->n_kernels, s->n_launches, (long long)s->act_bytes, (long long)s->opt.max_tokens,
        (long long)s->opt.max_seqs, (long long)s->opt.max_rows);
    for (int i = 0; i < s->n_kernels; i++) {
        const SchedKernel *k = &s->kernels[i];
        ir_buf_printf(b, "kernel %d %s x%d%s: ", i, k->name, k->uses,
                      k->fam ? "" : " (family not implemented)");
        kfam_spec_print(&k->spec, b);
        ir_buf_put(b, "\n", 1);
    }
    for (int i = 0; i < s->n_launches; i++) {
        const SchedLaunch *l = &s->launches[i];
        ir_buf_printf(b, "launch %d kernel %d: ", i, l->kernel);
        sched_launch_args(s, l, b);
        ir_buf_put(b, "\n", 1);
    }
    for (int i = 0; i < s->n_bufs; i++) {
        const SchedBuf *buf = &s->bufs[i];
        if (buf->kind != SCHED_BUF_ACT) continue;
        ir_buf_printf(b, "act %s offset %lld bytes %lld live %d..%d%s%s\n", buf->name, (long long)buf->offset,
                      (long long)buf->bytes, buf->first, buf->last == 1 << 30 ? s->n_launches : buf->last,
                      buf->output ? " output " : "", buf->output ? buf->output : "");
    }
}
