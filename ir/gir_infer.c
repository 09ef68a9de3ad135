/* gir_infer.c — shape and dtype inference, one rule per op. The builder calls it when a node is added
 * (so errors point at the recipe line) and the verifier calls it again to check a rewritten graph.
 * Messages carry no location; the caller prefixes it. Layout conventions: see gir_ops.def.
 */
#include "gir.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct Ctx {
    const GirGraph *g;
    GirValue *const *in;
    int n_in;
    const GirAttr *attrs;
    int n_attr;
    IrDiag *d;
} Ctx;

static const GirAttr *attr(const Ctx *c, const char *key)
{
    for (int i = 0; i < c->n_attr; i++)
        if (strcmp(c->attrs[i].key, key) == 0) return &c->attrs[i];
    return NULL;
}

static int64_t ai(const Ctx *c, const char *key, int64_t dflt)
{
    const GirAttr *a = attr(c, key);
    return a && a->kind == GIR_ATTR_INT ? a->i : dflt;
}

static const char *as(const Ctx *c, const char *key, const char *dflt)
{
    const GirAttr *a = attr(c, key);
    return a && a->kind == GIR_ATTR_STR ? a->s : dflt;
}

static const GirType *T(const Ctx *c, int i)
{
    return &c->in[i]->type;
}

/* "bf16[T,4096]" into a small static-free buffer owned by the caller. */
static const char *tstr(const Ctx *c, const GirType *t, char *buf, size_t n)
{
    IrBuf b = {0};
    gir_type_print(c->g, t, &b);
    snprintf(buf, n, "%s", b.s ? b.s : "?");
    ir_buf_free(&b);
    return buf;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static IrStatus
fail(const Ctx *c, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ir_diag_set(c->d, IR_ERR_SHAPE, "%s", msg);
}

static int is_float(GirDtype t)
{
    return gir_dtype_class(t) == GIR_DC_FLOAT;
}

static int is_act(GirDtype t) /* activation dtypes the kernels take */
{
    return t == GIR_F32 || t == GIR_F16 || t == GIR_BF16;
}

/* dim printed as text for messages */
static const char *dstr(const Ctx *c, GirDim d, char *buf, size_t n)
{
    if (d.sym >= 0)
        snprintf(buf, n, "%s", c->g->sym[d.sym]);
    else
        snprintf(buf, n, "%lld", (long long)d.n);
    return buf;
}

static IrStatus want_rank(const Ctx *c, int i, int rank, const char *what)
{
    char tb[96];
    if (T(c, i)->rank == rank) return IR_OK;
    return fail(c, "%s must have rank %d, got %s", what, rank, tstr(c, T(c, i), tb, sizeof tb));
}

static IrStatus want_dtype(const Ctx *c, int i, GirDtype dt, const char *what)
{
    char tb[96];
    if (T(c, i)->dtype == dt) return IR_OK;
    return fail(c, "%s must be %s, got %s", what, gir_dtype_name(dt), tstr(c, T(c, i), tb, sizeof tb));
}

static IrStatus want_act(const Ctx *c, int i, const char *what)
{
    char tb[96];
    if (is_act(T(c, i)->dtype)) return IR_OK;
    return fail(c, "%s must be an f32/f16/bf16 activation, got %s", what, tstr(c, T(c, i), tb, sizeof tb));
}

static IrStatus want_dim(const Ctx *c, GirDim got, GirDim want, const char *what)
{
    char a[48], b[48];
    if (gir_dim_eq(got, want)) return IR_OK;
    return fail(c, "%s is %s, expected %s", what, dstr(c, got, a, sizeof a), dstr(c, want, b, sizeof b));
}

static int64_t cdim(GirDim d) /* constant value, or -1 for a symbol */
{
    return d.sym >= 0 ? -1 : d.n;
}

#define TRY(x)                                                                                               \
    do {                                                                                                     \
        IrStatus s_ = (x);                                                                                   \
        if (s_ != IR_OK) return s_;                                                                          \
    } while (0)

static IrStatus heads_fit(const Ctx *c, GirDim channels, int64_t heads, int64_t head_dim, const char *what)
{
    if (heads <= 0 || head_dim <= 0)
        return ir_diag_set(c->d, IR_ERR_SHAPE, "%s heads (%lld) and head_dim (%lld) must be positive", what,
                           (long long)heads, (long long)head_dim);
    if (cdim(channels) != heads * head_dim)
        return ir_diag_set(c->d, IR_ERR_SHAPE,
                           "%s has %lld channels, which is not %lld heads x head_dim %lld", what,
                           (long long)cdim(channels), (long long)heads, (long long)head_dim);
    return IR_OK;
}

static IrStatus infer_embedding(const Ctx *c, GirType *out)
{
    TRY(want_rank(c, 0, 1, "ids"));
    TRY(want_dtype(c, 0, GIR_I32, "ids"));
    TRY(want_rank(c, 1, 2, "table"));
    GirDtype dt = T(c, 1)->dtype;
    out[0] = gir_type(is_act(dt) ? dt : GIR_BF16, 2, (GirDim[]){T(c, 0)->dim[0], T(c, 1)->dim[1]});
    return IR_OK;
}

static IrStatus infer_rms_norm(const Ctx *c, GirType *out, int fused)
{
    int w = fused ? 2 : 1;
    TRY(want_rank(c, 0, 2, "x"));
    TRY(want_act(c, 0, "x"));
    TRY(want_rank(c, w, 1, "weight"));
    if (!is_float(T(c, w)->dtype)) return fail(c, "weight must be a float tensor");
    TRY(want_dim(c, T(c, w)->dim[0], T(c, 0)->dim[1], "weight length"));
    if (fused && !gir_type_eq(T(c, 0), T(c, 1))) {
        char a[96], b[96];
        return fail(c, "residual %s does not match x %s", tstr(c, T(c, 1), a, sizeof a),
                    tstr(c, T(c, 0), b, sizeof b));
    }
    out[0] = *T(c, 0);
    out[1] = *T(c, 0);
    return IR_OK;
}

/* Epilogues "pair" (two products of one x, weights of one type) and "group" (two or three products of one
 * x, weights of one dtype and K, any N) are the op forms with more than one output. */
static IrStatus infer_matmul(const Ctx *c, GirType *out, int *n_out)
{
    TRY(want_rank(c, 0, 2, "x"));
    TRY(want_act(c, 0, "x"));
    TRY(want_rank(c, 1, 2, "weight [N,K]"));
    TRY(want_dim(c, T(c, 1)->dim[1], T(c, 0)->dim[1], "weight K"));
    const char *epi = as(c, "epilogue", "none");
    int pair = !strcmp(epi, "pair");
    if (!strcmp(epi, "group")) {
        if (c->n_in < 3 || c->n_in > 4) return fail(c, "epilogue group takes x and two or three weights");
        for (int i = 1; i < c->n_in; i++) {
            TRY(want_rank(c, i, 2, "weight [N,K]"));
            TRY(want_dim(c, T(c, i)->dim[1], T(c, 0)->dim[1], "weight K"));
            if (T(c, i)->dtype != T(c, 1)->dtype) return fail(c, "group weights differ in dtype");
            out[i - 1] = gir_type(T(c, 0)->dtype, 2, (GirDim[]){T(c, 0)->dim[0], T(c, i)->dim[0]});
        }
        *n_out = c->n_in - 1;
        return IR_OK;
    }
    if (c->n_in > 3) return fail(c, "only epilogue group takes more than one weight and a bias");
    if (pair || !strcmp(epi, "silu_mul")) {
        if (c->n_in != 3)
            return fail(c, pair ? "epilogue pair takes x, w, w2" : "epilogue silu_mul takes x, w_gate, w_up");
        if (!gir_type_eq(T(c, 1), T(c, 2)))
            return fail(c, pair ? "w and w2 differ" : "w_gate and w_up differ");
    } else if (strcmp(epi, "none")) {
        return fail(c, "unknown epilogue '%s' (none, silu_mul, pair, group)", epi);
    } else if (c->n_in == 3) {
        TRY(want_rank(c, 2, 1, "bias"));
        TRY(want_dim(c, T(c, 2)->dim[0], T(c, 1)->dim[0], "bias length"));
    }
    out[0] = gir_type(T(c, 0)->dtype, 2, (GirDim[]){T(c, 0)->dim[0], T(c, 1)->dim[0]});
    out[1] = out[0];
    *n_out = pair ? 2 : 1;
    return IR_OK;
}

/* Input p: positions i32[T] for the tokens of input x; the rope attributes (theta, scaling and what the
 * scaling needs) for head_dim. Shared by rope and kv_write with positions. */
static IrStatus check_rope(const Ctx *c, int x, int p)
{
    TRY(want_rank(c, p, 1, "positions"));
    TRY(want_dtype(c, p, GIR_I32, "positions"));
    TRY(want_dim(c, T(c, p)->dim[0], T(c, x)->dim[0], "positions length"));
    if (ai(c, "head_dim", 0) % 2) return fail(c, "head_dim must be even for rotary embedding");
    if (!attr(c, "theta")) return fail(c, "rotary embedding needs theta");
    const char *sc = as(c, "scaling", "none");
    if (strcmp(sc, "none") && strcmp(sc, "llama3") && strcmp(sc, "linear"))
        return fail(c, "unknown rope scaling '%s' (none, linear, llama3)", sc);
    if (strcmp(sc, "none") && !attr(c, "factor")) return fail(c, "rope scaling '%s' needs factor", sc);
    if (!strcmp(sc, "llama3") &&
        (!attr(c, "low_freq_factor") || !attr(c, "high_freq_factor") || !attr(c, "original_max_pos")))
        return fail(c, "llama3 scaling needs low_freq_factor, high_freq_factor, original_max_pos");
    return IR_OK;
}

static IrStatus infer_rope(const Ctx *c, GirType *out)
{
    TRY(want_rank(c, 0, 2, "x"));
    TRY(want_act(c, 0, "x"));
    TRY(heads_fit(c, T(c, 0)->dim[1], ai(c, "heads", 0), ai(c, "head_dim", 0), "x"));
    TRY(check_rope(c, 0, 1));
    out[0] = *T(c, 0);
    return IR_OK;
}

/* Checks a KV cache [P, page_size, kv_heads, head_dim] against attrs. */
static IrStatus check_cache(const Ctx *c, int i, const char *what)
{
    TRY(want_rank(c, i, 4, what));
    TRY(want_act(c, i, what));
    int64_t ps = ai(c, "page_size", 0), hkv = ai(c, "kv_heads", 0), hd = ai(c, "head_dim", 0);
    if (ps <= 0 || (ps & (ps - 1)))
        return ir_diag_set(c->d, IR_ERR_SHAPE, "page_size %lld must be a power of two", (long long)ps);
    const GirType *t = T(c, i);
    TRY(want_dim(c, t->dim[1], gir_dim_const(ps), "cache page size"));
    TRY(want_dim(c, t->dim[2], gir_dim_const(hkv), "cache kv heads"));
    TRY(want_dim(c, t->dim[3], gir_dim_const(hd), "cache head_dim"));
    return IR_OK;
}

static IrStatus infer_kv_write(const Ctx *c, GirType *out, int *n_out)
{
    int64_t hkv = ai(c, "kv_heads", 0), hd = ai(c, "head_dim", 0);
    TRY(want_rank(c, 0, 2, "k"));
    TRY(want_rank(c, 1, 2, "v"));
    TRY(heads_fit(c, T(c, 0)->dim[1], hkv, hd, "k"));
    TRY(heads_fit(c, T(c, 1)->dim[1], hkv, hd, "v"));
    TRY(want_dim(c, T(c, 1)->dim[0], T(c, 0)->dim[0], "v tokens"));
    TRY(check_cache(c, 2, "k_cache"));
    TRY(check_cache(c, 3, "v_cache"));
    if (!gir_type_eq(T(c, 2), T(c, 3))) return fail(c, "k_cache and v_cache differ");
    TRY(want_rank(c, 4, 1, "slots"));
    TRY(want_dtype(c, 4, GIR_I32, "slots"));
    TRY(want_dim(c, T(c, 4)->dim[0], T(c, 0)->dim[0], "slots length"));
    if (c->n_in >= 6) { /* K rotated on the way (fuse-rope-kv-write) */
        TRY(check_rope(c, 0, 5));
    } else {
        static const char *const rope_keys[] = {"theta",           "scaling",          "factor",
                                                "low_freq_factor", "high_freq_factor", "original_max_pos"};
        for (int i = 0; i < 6; i++)
            if (attr(c, rope_keys[i])) return fail(c, "rope attribute '%s' needs positions", rope_keys[i]);
    }
    out[0] = *T(c, 2);
    out[1] = *T(c, 3);
    if (c->n_in == 7) { /* and the queries (fuse-rope-q-kv-write): rope(q, positions), a third output */
        int64_t h = ai(c, "heads", 0);
        TRY(want_rank(c, 6, 2, "q"));
        TRY(heads_fit(c, T(c, 6)->dim[1], h, hd, "q"));
        TRY(want_dim(c, T(c, 6)->dim[0], T(c, 0)->dim[0], "q tokens"));
        if (T(c, 6)->dtype != T(c, 0)->dtype) return fail(c, "q and k differ in dtype");
        out[2] = *T(c, 6);
        *n_out = 3;
    } else if (attr(c, "heads")) {
        return fail(c, "attribute 'heads' needs q");
    }
    return IR_OK;
}

static IrStatus infer_attention(const Ctx *c, GirType *out)
{
    int64_t h = ai(c, "heads", 0), hkv = ai(c, "kv_heads", 0), hd = ai(c, "head_dim", 0);
    const char *mode = as(c, "mode", "");
    if (strcmp(mode, "prefill") && strcmp(mode, "decode") && strcmp(mode, "verify") && strcmp(mode, "mixed"))
        return fail(c, "unknown mode '%s' (prefill, decode, verify, mixed)", mode);
    if (hkv <= 0 || h <= 0 || h % hkv)
        return ir_diag_set(c->d, IR_ERR_SHAPE,
                           "heads %lld is not a whole multiple of kv_heads %lld (GQA ratio)", (long long)h,
                           (long long)hkv);
    if (ai(c, "window", 0) < 0) return fail(c, "window must be >= 0 (0: none)");
    TRY(want_rank(c, 0, 2, "q"));
    TRY(want_act(c, 0, "q"));
    TRY(heads_fit(c, T(c, 0)->dim[1], h, hd, "q"));
    TRY(check_cache(c, 1, "k_cache"));
    TRY(check_cache(c, 2, "v_cache"));
    TRY(want_rank(c, 3, 2, "block_table"));
    TRY(want_dtype(c, 3, GIR_I32, "block_table"));
    TRY(want_rank(c, 4, 1, "seq_lens"));
    TRY(want_dtype(c, 4, GIR_I32, "seq_lens"));
    TRY(want_dim(c, T(c, 4)->dim[0], T(c, 3)->dim[0], "seq_lens length"));
    TRY(want_rank(c, 5, 1, "cu_q"));
    TRY(want_dtype(c, 5, GIR_I32, "cu_q"));
    if (c->n_in == 7) { /* tree verify: one i64 ancestor mask per query token */
        if (strcmp(mode, "verify") && strcmp(mode, "mixed"))
            return fail(c, "a tree_mask input needs mode verify or mixed (got '%s')", mode);
        TRY(want_rank(c, 6, 1, "tree_mask"));
        TRY(want_dtype(c, 6, GIR_I64, "tree_mask"));
        TRY(want_dim(c, T(c, 6)->dim[0], T(c, 0)->dim[0], "tree_mask length"));
    }
    out[0] = *T(c, 0);
    return IR_OK;
}

static IrStatus infer_same2(const Ctx *c, GirType *out)
{
    TRY(want_rank(c, 0, 2, "a"));
    TRY(want_act(c, 0, "a"));
    if (!gir_type_eq(T(c, 0), T(c, 1))) {
        char a[96], b[96];
        return fail(c, "operands differ: %s vs %s", tstr(c, T(c, 0), a, sizeof a),
                    tstr(c, T(c, 1), b, sizeof b));
    }
    out[0] = *T(c, 0);
    return IR_OK;
}

static IrStatus infer_logits(const Ctx *c, GirType *out)
{
    TRY(want_rank(c, 0, 2, "x"));
    TRY(want_act(c, 0, "x"));
    TRY(want_rank(c, 1, 2, "weight [V,C]"));
    TRY(want_dim(c, T(c, 1)->dim[1], T(c, 0)->dim[1], "weight C"));
    TRY(want_rank(c, 2, 1, "rows"));
    TRY(want_dtype(c, 2, GIR_I32, "rows"));
    out[0] = gir_type(GIR_F32, 2, (GirDim[]){T(c, 2)->dim[0], T(c, 1)->dim[0]});
    return IR_OK;
}

static IrStatus infer_sample(const Ctx *c, GirType *out)
{
    TRY(want_rank(c, 0, 2, "logits"));
    TRY(want_dtype(c, 0, GIR_F32, "logits"));
    if (c->n_in == 2) {
        TRY(want_rank(c, 1, 2, "params"));
        TRY(want_dtype(c, 1, GIR_F32, "params"));
        TRY(want_dim(c, T(c, 1)->dim[0], T(c, 0)->dim[0], "params rows"));
        TRY(want_dim(c, T(c, 1)->dim[1], gir_dim_const(4), "params columns"));
    }
    out[0] = gir_type(GIR_I32, 1, (GirDim[]){T(c, 0)->dim[0]});
    return IR_OK;
}

static IrStatus infer_spec_verify(const Ctx *c, GirType *out)
{
    const char *mode = as(c, "mode", "");
    if (strcmp(mode, "greedy") && strcmp(mode, "sample"))
        return fail(c, "unknown mode '%s' (greedy, sample)", mode);
    int sampling = !strcmp(mode, "sample");
    if (c->n_in != (sampling ? 4 : 2))
        return fail(c, sampling ? "mode sample takes logits, draft, draft_probs and params"
                                : "mode greedy takes logits and draft");
    int64_t k = ai(c, "k", 0);
    if (k < 1 || k > 64) return fail(c, "k must be in 1..64");
    TRY(want_rank(c, 0, 2, "logits"));
    TRY(want_dtype(c, 0, GIR_F32, "logits"));
    TRY(want_rank(c, 1, 2, "draft"));
    TRY(want_dtype(c, 1, GIR_I32, "draft"));
    TRY(want_dim(c, T(c, 1)->dim[1], gir_dim_const(k), "draft length"));
    if (sampling) {
        if (!gir_type_eq(T(c, 2), T(c, 0))) return fail(c, "draft_probs must match logits");
        TRY(want_rank(c, 3, 2, "params"));
        TRY(want_dtype(c, 3, GIR_F32, "params"));
        TRY(want_dim(c, T(c, 3)->dim[0], T(c, 1)->dim[0], "params rows"));
        TRY(want_dim(c, T(c, 3)->dim[1], gir_dim_const(4), "params columns"));
    }
    out[0] = gir_type(GIR_I32, 1, (GirDim[]){T(c, 1)->dim[0]});
    out[1] = out[0];
    return IR_OK;
}

IrStatus gir_infer(const GirGraph *g, GirOp op, GirValue *const *in, int n_in, const GirAttr *attrs,
                   int n_attr, GirType *out, int *n_out, IrDiag *d)
{
    Ctx c = {g, in, n_in, attrs, n_attr, d};
    *n_out = gir_op_n_out(op);
    switch (op) {
    case GIR_OP_INPUT:
    case GIR_OP_WEIGHT: return IR_OK; /* leaves carry their declared type */
    case GIR_OP_EMBEDDING: return infer_embedding(&c, out);
    case GIR_OP_RMS_NORM: return infer_rms_norm(&c, out, 0);
    case GIR_OP_ADD_RMS_NORM: return infer_rms_norm(&c, out, 1);
    case GIR_OP_MATMUL: return infer_matmul(&c, out, n_out);
    case GIR_OP_ROPE: return infer_rope(&c, out);
    case GIR_OP_KV_WRITE: return infer_kv_write(&c, out, n_out);
    case GIR_OP_ATTENTION: return infer_attention(&c, out);
    case GIR_OP_SILU_MUL:
    case GIR_OP_ADD: return infer_same2(&c, out);
    case GIR_OP_LOGITS: return infer_logits(&c, out);
    case GIR_OP_SAMPLE: return infer_sample(&c, out);
    case GIR_OP_SPEC_VERIFY: return infer_spec_verify(&c, out);
    case GIR_OP_OUTPUT: return IR_OK;
    case GIR_OP_COUNT: break;
    }
    UNREACHABLE();
}
