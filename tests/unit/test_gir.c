/* test_gir.c — the graph IR from C: builder checks, shape inference rules, verifier, printer,
 * passes, and allocation-failure handling (every k-th allocation fails in turn). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/gir.h"
#include "kt.h"

static const GirLoc here = {"test.lua", 1};

typedef struct Mini {
    GirGraph *g;
    GirValue *tokens, *pos, *slots, *bt, *lens, *cuq, *kc, *vc;
} Mini;

static GirDim S(GirGraph *g, const char *n)
{
    return gir_dim_sym(g, n);
}
static GirDim C(int64_t n)
{
    return gir_dim_const(n);
}

static IrDiag leaf_diag; /* the first failure of a leaf, reported by the op that uses it */

static GirValue *leaf(GirGraph *g, GirOp op, const char *name, GirDtype t, int rank, const GirDim *dims)
{
    return gir_leaf(g, op, name, gir_type(t, rank, dims), here, &leaf_diag);
}

static GirValue *W(GirGraph *g, const char *name, int64_t a, int64_t b)
{
    return b ? leaf(g, GIR_OP_WEIGHT, name, GIR_BF16, 2, (GirDim[]){C(a), C(b)})
             : leaf(g, GIR_OP_WEIGHT, name, GIR_BF16, 1, (GirDim[]){C(a)});
}

static GirValue *op1(GirGraph *g, GirOp op, GirValue *const *in, int n, const GirAttr *at, int na, IrDiag *d)
{
    for (int i = 0; i < n; i++)
        if (!in[i]) {
            ir_diag_set(d, leaf_diag.status, "%s", leaf_diag.msg);
            return NULL;
        }
    GirNode *node = gir_node_add(g, op, in, n, at, na, here, d);
    return node ? node->out[0] : NULL;
}

static Mini mini(int hkv, int hd)
{
    Mini m = {.g = gir_graph_create("mini")};
    GirGraph *g = m.g;
    m.tokens = leaf(g, GIR_OP_INPUT, "tokens", GIR_I32, 1, (GirDim[]){S(g, "T")});
    m.pos = leaf(g, GIR_OP_INPUT, "positions", GIR_I32, 1, (GirDim[]){S(g, "T")});
    m.slots = leaf(g, GIR_OP_INPUT, "slots", GIR_I32, 1, (GirDim[]){S(g, "T")});
    m.bt = leaf(g, GIR_OP_INPUT, "block_table", GIR_I32, 2, (GirDim[]){S(g, "B"), S(g, "MP")});
    m.lens = leaf(g, GIR_OP_INPUT, "seq_lens", GIR_I32, 1, (GirDim[]){S(g, "B")});
    m.cuq = leaf(g, GIR_OP_INPUT, "cu_q", GIR_I32, 1, (GirDim[]){S(g, "B+1")});
    GirDim cd[] = {S(g, "P"), C(16), C(hkv), C(hd)};
    m.kc = leaf(g, GIR_OP_INPUT, "k_cache", GIR_BF16, 4, cd);
    m.vc = leaf(g, GIR_OP_INPUT, "v_cache", GIR_BF16, 4, cd);
    return m;
}

/* One attention block of a model with h heads of size hd and hkv kv heads; returns 0 on any error. */
static int block(Mini *m, int h, int hkv, int hd, IrDiag *d)
{
    GirGraph *g = m->g;
    int c = h * hd;
    GirValue *emb = W(g, "embed", 100, c);
    GirValue *x = op1(g, GIR_OP_EMBEDDING, (GirValue *[]){m->tokens, emb}, 2, NULL, 0, d);
    if (!x) return 0;
    GirAttr eps = gir_attr_float("eps", 1e-5);
    GirValue *n = op1(g, GIR_OP_RMS_NORM, (GirValue *[]){x, W(g, "norm", c, 0)}, 2, &eps, 1, d);
    GirValue *q = op1(g, GIR_OP_MATMUL, (GirValue *[]){n, W(g, "wq", c, c)}, 2, NULL, 0, d);
    GirValue *k = op1(g, GIR_OP_MATMUL, (GirValue *[]){n, W(g, "wk", hkv * hd, c)}, 2, NULL, 0, d);
    GirValue *v = op1(g, GIR_OP_MATMUL, (GirValue *[]){n, W(g, "wv", hkv * hd, c)}, 2, NULL, 0, d);
    if (!q || !k || !v) return 0;
    GirAttr rq[] = {gir_attr_int("heads", h), gir_attr_int("head_dim", hd), gir_attr_int("theta", 10000)};
    GirAttr rk[] = {gir_attr_int("heads", hkv), gir_attr_int("head_dim", hd), gir_attr_float("theta", 1e4)};
    q = op1(g, GIR_OP_ROPE, (GirValue *[]){q, m->pos}, 2, rq, 3, d);
    k = op1(g, GIR_OP_ROPE, (GirValue *[]){k, m->pos}, 2, rk, 3, d);
    if (!q || !k) return 0;
    GirAttr kva[] = {gir_attr_int("kv_heads", hkv), gir_attr_int("head_dim", hd),
                     gir_attr_int("page_size", 16)};
    GirNode *kw =
        gir_node_add(g, GIR_OP_KV_WRITE, (GirValue *[]){k, v, m->kc, m->vc, m->slots}, 5, kva, 3, here, d);
    if (!kw) return 0;
    GirAttr aa[] = {gir_attr_str("mode", "mixed"), gir_attr_int("causal", 1),
                    gir_attr_int("heads", h),      gir_attr_int("kv_heads", hkv),
                    gir_attr_int("head_dim", hd),  gir_attr_int("page_size", 16)};
    GirValue *o = op1(g, GIR_OP_ATTENTION, (GirValue *[]){q, kw->out[0], kw->out[1], m->bt, m->lens, m->cuq},
                      6, aa, 6, d);
    if (!o) return 0;
    GirValue *r = op1(g, GIR_OP_ADD, (GirValue *[]){x, o}, 2, NULL, 0, d);
    GirValue *n2 = op1(g, GIR_OP_RMS_NORM, (GirValue *[]){r, W(g, "norm2", c, 0)}, 2, &eps, 1, d);
    GirValue *r2 = op1(g, GIR_OP_ADD, (GirValue *[]){r, n2}, 2, NULL, 0, d);
    GirValue *rows = leaf(g, GIR_OP_INPUT, "rows", GIR_I32, 1, (GirDim[]){S(g, "R")});
    GirValue *lg = op1(g, GIR_OP_LOGITS, (GirValue *[]){r2, emb, rows}, 3, NULL, 0, d);
    if (!lg) return 0;
    GirAttr on = gir_attr_str("name", "logits");
    /* an unused node that dce must remove */
    if (!op1(g, GIR_OP_SILU_MUL, (GirValue *[]){x, x}, 2, NULL, 0, d)) return 0;
    return gir_node_add(g, GIR_OP_OUTPUT, (GirValue *[]){lg}, 1, &on, 1, here, d) != NULL;
}

static void test_build_print_passes(void)
{
    Mini m = mini(2, 8);
    IrDiag d = {0};
    KT_CHECK(block(&m, 4, 2, 8, &d), "block: %s", d.msg);
    KT_CHECK(gir_verify(m.g, &d) == IR_OK, "%s", d.msg);
    IrBuf a = {0}, b = {0};
    gir_print(m.g, 0, &a);
    gir_print(m.g, 0, &b);
    KT_CHECK(a.s && b.s && strcmp(a.s, b.s) == 0, "printing is deterministic");
    KT_CHECK(strstr(a.s, "= attention %") != NULL, "printed attention: %s", a.s);
    KT_CHECK(strstr(a.s, "logits %") && strstr(a.s, ": f32[R,100]"), "logits type");
    int before = m.g->n_nodes;
    uint64_t h0 = gir_graph_hash(m.g);
    KT_CHECK(gir_run_passes(m.g, NULL, &d) == IR_OK, "passes: %s", d.msg);
    IrBuf c = {0};
    gir_print(m.g, 0, &c);
    KT_CHECK(strstr(c.s, "add_rms_norm") != NULL, "fused add+norm:\n%s", c.s);
    KT_CHECK(strstr(c.s, "silu_mul") == NULL, "dce removed the unused node");
    KT_CHECK(strstr(c.s, "{epilogue=\"group\"} : bf16[T,32], bf16[T,16], bf16[T,16]") != NULL,
             "q, k, v grouped:\n%s", c.s);
    KT_CHECK(
        strstr(c.s, "page_size=16, theta=10000, heads=4} : bf16[P,16,2,8], bf16[P,16,2,8], bf16[T,32]") &&
            !strstr(c.s, "rope %"),
        "rope k and rope q fused into kv_write:\n%s", c.s);
    /* add into norm, the unused silu_mul, q with k and v, rope k and rope q into kv_write */
    KT_CHECK(m.g->n_nodes == before - 6, "nodes %d -> %d", before, m.g->n_nodes);
    KT_CHECK(gir_graph_hash(m.g) != h0, "hash changes with the graph");
    KT_CHECK(gir_verify(m.g, &d) == IR_OK, "%s", d.msg);
    ir_buf_free(&a);
    ir_buf_free(&b);
    ir_buf_free(&c);
    gir_graph_destroy(m.g);
}

static void expect_fail(int h, int hkv, int hd, const char *want)
{
    Mini m = mini(hkv, hd);
    IrDiag d = {0};
    int ok = block(&m, h, hkv, hd, &d);
    KT_CHECK(!ok && strstr(d.msg, want) && strncmp(d.msg, "test.lua:1: ", 12) == 0,
             "h=%d hkv=%d hd=%d: want '%s', got '%s'", h, hkv, hd, want, d.msg);
    gir_graph_destroy(m.g);
}

static void test_inference_errors(void)
{
    expect_fail(32, 5, 8, "not a whole multiple of kv_heads 5");
    expect_fail(4, 2, 7, "head_dim must be even");
    IrDiag d = {0};
    GirGraph *g = gir_graph_create("e");
    GirValue *x = leaf(g, GIR_OP_INPUT, "x", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(64)});
    GirValue *w = W(g, "w", 32, 48);
    KT_CHECK(!op1(g, GIR_OP_MATMUL, (GirValue *[]){x, w}, 2, NULL, 0, &d) && strstr(d.msg, "weight K is 48"),
             "%s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(!op1(g, GIR_OP_MATMUL, (GirValue *[]){x}, 1, NULL, 0, &d) &&
                 strstr(d.msg, "2 to 4 tensor inputs"),
             "%s", d.msg);
    ir_diag_clear(&d);
    GirAttr bad = gir_attr_float("epsilon", 1e-5);
    KT_CHECK(!op1(g, GIR_OP_RMS_NORM, (GirValue *[]){x, W(g, "n", 64, 0)}, 2, &bad, 1, &d) &&
                 strstr(d.msg, "unknown attribute 'epsilon'"),
             "%s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(!op1(g, GIR_OP_RMS_NORM, (GirValue *[]){x, W(g, "n2", 64, 0)}, 2, NULL, 0, &d) &&
                 strstr(d.msg, "missing attribute 'eps'"),
             "%s", d.msg);
    ir_diag_clear(&d);
    GirAttr sv = gir_attr_str("eps", "small");
    KT_CHECK(!op1(g, GIR_OP_RMS_NORM, (GirValue *[]){x, W(g, "n3", 64, 0)}, 2, &sv, 1, &d) &&
                 strstr(d.msg, "must be a number"),
             "%s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(!gir_leaf(g, GIR_OP_WEIGHT, "", gir_type(GIR_BF16, 1, (GirDim[]){C(4)}), here, &d) &&
                 strstr(d.msg, "checkpoint name"),
             "%s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(!gir_leaf(g, GIR_OP_WEIGHT, "w", gir_type(GIR_BF16, 1, (GirDim[]){C(4)}), here, &d) &&
                 strstr(d.msg, "declared twice"),
             "%s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(!gir_leaf(g, GIR_OP_WEIGHT, "q", gir_type(GIR_Q4_0, 2, (GirDim[]){C(4), C(48)}), here, &d) &&
                 strstr(d.msg, "multiple of 32"),
             "%s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(!gir_leaf(g, GIR_OP_WEIGHT, "s", gir_type(GIR_BF16, 1, (GirDim[]){S(g, "T")}), here, &d) &&
                 strstr(d.msg, "symbolic"),
             "%s", d.msg);
    KT_CHECK(gir_verify(g, &d) == IR_OK, "failed adds leave the graph valid: %s", d.msg);
    gir_graph_destroy(g);
}

/* Tree verify: attention's optional 7th input, an i64 ancestor mask per query token, in modes verify and
 * mixed. */
static void test_tree_attention(void)
{
    Mini m = mini(2, 8);
    GirGraph *g = m.g;
    IrDiag d = {0};
    GirValue *q = leaf(g, GIR_OP_INPUT, "q", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(32)});
    GirValue *tree = leaf(g, GIR_OP_INPUT, "tree_mask", GIR_I64, 1, (GirDim[]){S(g, "T")});
    GirValue *bad = leaf(g, GIR_OP_INPUT, "tree32", GIR_I32, 1, (GirDim[]){S(g, "T")});
    GirAttr aa[] = {gir_attr_str("mode", "verify"), gir_attr_int("causal", 1),
                    gir_attr_int("heads", 4),       gir_attr_int("kv_heads", 2),
                    gir_attr_int("head_dim", 8),    gir_attr_int("page_size", 16)};
    GirValue *in[7] = {q, m.kc, m.vc, m.bt, m.lens, m.cuq, tree};
    KT_CHECK(op1(g, GIR_OP_ATTENTION, in, 7, aa, 6, &d) != NULL, "tree verify: %s", d.msg);
    in[6] = bad;
    ir_diag_clear(&d);
    KT_CHECK(!op1(g, GIR_OP_ATTENTION, in, 7, aa, 6, &d) && strstr(d.msg, "tree_mask"), "i32 tree: %s",
             d.msg);
    in[6] = tree;
    aa[0] = gir_attr_str("mode", "mixed"); /* a recipe's one graph for every step (llama.lua tree=true) */
    ir_diag_clear(&d);
    KT_CHECK(op1(g, GIR_OP_ATTENTION, in, 7, aa, 6, &d) != NULL, "tree in mode mixed: %s", d.msg);
    aa[0] = gir_attr_str("mode", "prefill");
    ir_diag_clear(&d);
    KT_CHECK(!op1(g, GIR_OP_ATTENTION, in, 7, aa, 6, &d) && strstr(d.msg, "needs mode verify or mixed"),
             "tree in prefill: %s", d.msg);
    gir_graph_destroy(g);
}

static void test_verifier_catches_corruption(void)
{
    Mini m = mini(2, 8);
    IrDiag d = {0};
    KT_CHECK(block(&m, 4, 2, 8, &d), "%s", d.msg);
    GirNode *att = NULL;
    for (int i = 0; i < m.g->n_nodes; i++)
        if (m.g->nodes[i]->op == GIR_OP_ATTENTION) att = m.g->nodes[i];
    KT_CHECK(att != NULL, "attention present");
    att->attr[3].i = 3; /* kv_heads 3: GQA no longer whole */
    KT_CHECK(gir_verify(m.g, &d) == IR_ERR_INTERNAL && strstr(d.msg, "attention"), "%s", d.msg);
    att->attr[3].i = 2;
    ir_diag_clear(&d);
    GirNode *first = m.g->nodes[0];
    m.g->nodes[0] = m.g->nodes[m.g->n_nodes - 1];
    m.g->nodes[m.g->n_nodes - 1] = first;
    KT_CHECK(gir_verify(m.g, &d) == IR_ERR_INTERNAL, "order broken: %s", d.msg);
    gir_graph_destroy(m.g);
}

/* The name index (gir_find_named) over many names and its growth; the verifier's sorted duplicate check
 * (a duplicate made behind the builder's back, reported at the later leaf); a name that dce dropped is
 * absent and may be declared again. */
static void test_name_index(void)
{
    GirGraph *g = gir_graph_create("names");
    IrDiag d = {0};
    enum { N = 5000 };
    GirValue *x = leaf(g, GIR_OP_INPUT, "x", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(8)});
    for (int i = 0; i < N && x; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%d", i);
        GirValue *in[2] = {x, W(g, name, 8, 0)};
        GirAttr eps = gir_attr_float("eps", 1e-5);
        x = op1(g, GIR_OP_RMS_NORM, in, 2, &eps, 1, &d);
    }
    KT_CHECK(x != NULL, "%s %s", d.msg, leaf_diag.msg);
    GirNode *out = gir_node_add(g, GIR_OP_OUTPUT, &x, 1, (GirAttr[]){gir_attr_str("name", "y")}, 1, here, &d);
    KT_CHECK(out && gir_find_named(g, GIR_OP_OUTPUT, "y") == out, "output indexed: %s", d.msg);
    KT_CHECK(gir_find_named(g, GIR_OP_WEIGHT, "w4321") && !gir_find_named(g, GIR_OP_INPUT, "w4321") &&
                 !gir_find_named(g, GIR_OP_WEIGHT, "w5000"),
             "lookups by op and name");
    KT_CHECK(!W(g, "w17", 8, 0) && strstr(leaf_diag.msg, "'w17' is declared twice"), "%s", leaf_diag.msg);
    ir_diag_clear(&leaf_diag);
    KT_CHECK(gir_verify(g, &d) == IR_OK, "%s", d.msg);
    GirNode *w9 = g->nodes[2 * 9 + 1], *w3 = g->nodes[2 * 3 + 1];
    KT_CHECK(w9->op == GIR_OP_WEIGHT && w3->op == GIR_OP_WEIGHT, "layout");
    const char *keep = w9->attr[0].s;
    w9->attr[0].s = w3->attr[0].s; /* w9 renamed w3 behind the builder */
    KT_CHECK(gir_verify(g, &d) == IR_ERR_INTERNAL && strstr(d.msg, "node 19 ") && strstr(d.msg, "duplicate"),
             "%s", d.msg);
    w9->attr[0].s = keep;
    ir_diag_clear(&d);
    GirValue *u = W(g, "unused", 8, 0);
    KT_CHECK(u && gir_run_passes(g, NULL, &d) == IR_OK, "%s", d.msg);
    KT_CHECK(!gir_find_named(g, GIR_OP_WEIGHT, "unused") && gir_find_named(g, GIR_OP_WEIGHT, "w0"),
             "dce'd weight absent, used one present");
    KT_CHECK(W(g, "unused", 8, 0) != NULL, "a dropped name may be declared again: %s", leaf_diag.msg);
    gir_graph_destroy(g);
}

/* The text rules (gir.h, docs/IR.md): real checkpoint names pass; anything that could forge a line or a
 * field of the text form fails, from the C builder too; sizes are checked, never wrapped. */
static void test_names_and_sizes(void)
{
    IrDiag d = {0};
    static const char *const good[] = {"model.layers.0.self_attn.q_proj.weight",
                                       "blk.0.attn_q.weight",
                                       "token_embd.weight",
                                       "k_cache.3",
                                       "lm_head.weight",
                                       "a/b:c+d-e"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        KT_CHECK(gir_check_name("weight", good[i], strlen(good[i]), &d) == IR_OK, "%s: %s", good[i], d.msg);
    static const char *const bad_names[] = {"a\"b", "a\nb", "a b", "a#b", "a=b", "a,b", "\xc3\xa9", ""};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        ir_diag_clear(&d);
        KT_CHECK(gir_check_name("weight", bad_names[i], strlen(bad_names[i]), &d) == IR_ERR_INPUT &&
                     !strchr(d.msg, '\n') && strstr(d.msg, "names are"),
                 "name %zu accepted or bad message: %s", i, d.msg);
    }
    ir_diag_clear(&d);
    KT_CHECK(gir_check_name("weight", "ab\0cd", 5, &d) == IR_ERR_INPUT && strstr(d.msg, "NUL byte at byte 2"),
             "NUL: %s", d.msg);
    char longname[GIR_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    ir_diag_clear(&d);
    KT_CHECK(gir_check_name("weight", longname, strlen(longname), &d) == IR_ERR_INPUT, "long name accepted");
    ir_diag_clear(&d);
    KT_CHECK(gir_check_name("weight", longname, GIR_NAME_MAX, &d) == IR_OK, "max length: %s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(gir_check_key("attribute", "head_dim", 8, &d) == IR_OK, "key: %s", d.msg);
    KT_CHECK(gir_check_key("attribute", "9x", 2, &d) == IR_ERR_INPUT, "key starting with a digit");
    ir_diag_clear(&d);
    KT_CHECK(gir_check_value("config dtype", "", 0, &d) == IR_OK &&
                 gir_check_value("config p", "gguf:/my models/x.gguf", 22, &d) == IR_OK,
             "values: %s", d.msg);
    KT_CHECK(gir_check_value("config p", "a\"b", 3, &d) == IR_ERR_INPUT, "quote in a value");

    /* the builder refuses them too (not only the frontend), at the location */
    GirGraph *g = gir_graph_create("t");
    ir_diag_clear(&d);
    KT_CHECK(
        !gir_leaf(g, GIR_OP_WEIGHT, "w\n%1 = weight \"x", gir_type(GIR_F32, 1, (GirDim[]){C(4)}), here, &d) &&
            !strncmp(d.msg, "test.lua:1: weight '", 20) && strstr(d.msg, "newline"),
        "forged leaf: %s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(!gir_leaf(g, GIR_OP_INPUT, "x", gir_type(GIR_F32, 2, (GirDim[]){S(g, "T"), C(IR_MAX_DIM + 1)}),
                       here, &d) &&
                 strstr(d.msg, "dimension 2 is 2147483648"),
             "dim past 32 bits: %s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(!gir_leaf(g, GIR_OP_INPUT, "x",
                       gir_type(GIR_F32, 3, (GirDim[]){C(1 << 20), C(1 << 20), C(1 << 20)}), here, &d) &&
                 strstr(d.msg, "larger than 2^48 bytes"),
             "2^62 bytes: %s", d.msg);
    ir_diag_clear(&d);
    GirAttr a = gir_attr_str("dtype", "bf16\"\nx");
    KT_CHECK(gir_graph_set_config(g, a, &d) == IR_ERR_INPUT, "forged config value");
    gir_graph_destroy(g);

    int64_t bytes = 0, sym[GIR_MAX_SYMS] = {8192};
    GirType t = gir_type(GIR_BF16, 2, (GirDim[]){{.sym = 0}, C(4096)});
    KT_CHECK(gir_type_bytes(&t, sym, &bytes) && bytes == 8192LL * 4096 * 2, "bytes %lld", (long long)bytes);
    sym[0] = INT64_MAX;
    KT_CHECK(!gir_type_bytes(&t, sym, &bytes), "overflow not caught");
    GirType q = gir_type(GIR_Q4_0, 2, (GirDim[]){C(64), C(256)});
    KT_CHECK(gir_type_bytes(&q, NULL, &bytes) && bytes == 64 * 256 / 32 * 18, "q4_0 bytes %lld",
             (long long)bytes);
}

/* Fail the k-th arena allocation for every k until the build succeeds: never a crash, always a status. */
static void test_alloc_failures(void)
{
    int completed = 0;
    for (long k = 1; k < 400 && !completed; k++) {
        GirGraph *g = gir_graph_create("oom");
        if (!g) continue;
        ir_arena_fail_after(g->arena, k);
        Mini m = {.g = g};
        IrDiag d = {0};
        ir_diag_clear(&leaf_diag);
        m.tokens = leaf(g, GIR_OP_INPUT, "tokens", GIR_I32, 1, (GirDim[]){S(g, "T")});
        m.pos = leaf(g, GIR_OP_INPUT, "positions", GIR_I32, 1, (GirDim[]){S(g, "T")});
        m.slots = leaf(g, GIR_OP_INPUT, "slots", GIR_I32, 1, (GirDim[]){S(g, "T")});
        m.bt = leaf(g, GIR_OP_INPUT, "block_table", GIR_I32, 2, (GirDim[]){S(g, "B"), S(g, "MP")});
        m.lens = leaf(g, GIR_OP_INPUT, "seq_lens", GIR_I32, 1, (GirDim[]){S(g, "B")});
        m.cuq = leaf(g, GIR_OP_INPUT, "cu_q", GIR_I32, 1, (GirDim[]){S(g, "B+1")});
        GirDim cd[] = {S(g, "P"), C(16), C(2), C(8)};
        m.kc = leaf(g, GIR_OP_INPUT, "k_cache", GIR_BF16, 4, cd);
        m.vc = leaf(g, GIR_OP_INPUT, "v_cache", GIR_BF16, 4, cd);
        int ok =
            m.tokens && m.pos && m.slots && m.bt && m.lens && m.cuq && m.kc && m.vc && block(&m, 4, 2, 8, &d);
        if (!ok && d.status == IR_OK) d = leaf_diag;
        if (ok) {
            completed = 1;
            KT_CHECK(gir_verify(g, &d) == IR_OK, "k=%ld: %s", k, d.msg);
        } else {
            KT_CHECK(d.status == IR_ERR_NOMEM, "k=%ld: status %s: %s", k, ir_status_name(d.status), d.msg);
        }
        gir_graph_destroy(g);
    }
    KT_CHECK(completed, "the build eventually succeeds");
}

static void test_fuse_silu_mul(void)
{
    IrDiag d = {0};
    GirGraph *g = gir_graph_create("mlp");
    GirValue *x = leaf(g, GIR_OP_INPUT, "x", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(64)});
    GirValue *wg = W(g, "wg", 160, 64), *wu = W(g, "wu", 160, 64), *wd = W(g, "wd", 64, 160);
    GirValue *a = op1(g, GIR_OP_MATMUL, (GirValue *[]){x, wg}, 2, NULL, 0, &d);
    GirValue *b = op1(g, GIR_OP_MATMUL, (GirValue *[]){x, wu}, 2, NULL, 0, &d);
    GirValue *m = op1(g, GIR_OP_SILU_MUL, (GirValue *[]){a, b}, 2, NULL, 0, &d);
    GirValue *y = op1(g, GIR_OP_MATMUL, (GirValue *[]){m, wd}, 2, NULL, 0, &d);
    GirAttr on = gir_attr_str("name", "y");
    KT_CHECK(y && gir_node_add(g, GIR_OP_OUTPUT, (GirValue *[]){y}, 1, &on, 1, here, &d), "%s", d.msg);
    KT_CHECK(gir_run_passes(g, NULL, &d) == IR_OK, "%s", d.msg);
    IrBuf p = {0};
    gir_print(g, 0, &p);
    KT_CHECK(strstr(p.s, "matmul %0, %1, %2 {epilogue=\"silu_mul\"} : bf16[T,160]") &&
                 !strstr(p.s, "silu_mul %"),
             "fused:\n%s", p.s);
    KT_CHECK(g->n_nodes == 7, "x, 3 weights, fused matmul, down matmul, output: %d", g->n_nodes);
    ir_buf_free(&p);
    gir_graph_destroy(g);
}

/* Runs the pipeline on g and returns its printed form (caller frees), "" after a failure (reported). */
static char *passes_print(GirGraph *g)
{
    IrDiag d = {0};
    IrBuf p = {0};
    KT_CHECK(gir_run_passes(g, NULL, &d) == IR_OK, "%s", d.msg);
    gir_print(g, 0, &p);
    return p.s ? p.s : calloc(1, 1);
}

static void out(GirGraph *g, const char *name, GirValue *v)
{
    IrDiag d = {0};
    GirAttr on = gir_attr_str("name", name);
    KT_CHECK(v && gir_node_add(g, GIR_OP_OUTPUT, (GirValue *[]){v}, 1, &on, 1, here, &d), "%s", d.msg);
}

/* kv_write(k, v, m's caches, m's slots) {kv_heads=2, head_dim=8, page_size=16}, its k_cache an output
 * "kc"; NULL (checked) when the graph refuses it. */
static GirNode *mini_kv_write(Mini *m, GirValue *k, GirValue *v, IrDiag *d)
{
    GirAttr kva[] = {gir_attr_int("kv_heads", 2), gir_attr_int("head_dim", 8), gir_attr_int("page_size", 16)};
    GirNode *kw =
        gir_node_add(m->g, GIR_OP_KV_WRITE, (GirValue *[]){k, v, m->kc, m->vc, m->slots}, 5, kva, 3, here, d);
    KT_CHECK(kw != NULL, "kv_write: %s", d->msg);
    if (kw) out(m->g, "kc", kw->out[0]);
    return kw;
}

/* kv_write(rope(k)) -> kv_write with positions: fused when the rope's result is used only there and its
 * heads/head_dim are the kv_write's; the 6-input form's inference rules. */
static void test_fuse_rope_kv_write(void)
{
    for (int variant = 0; variant < 3; variant++) { /* fused; rope used twice; rope heads differ */
        Mini m = mini(2, 8);
        GirGraph *g = m.g;
        IrDiag d = {0};
        GirValue *k = leaf(g, GIR_OP_INPUT, "k", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(16)});
        GirValue *v = leaf(g, GIR_OP_INPUT, "v", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(16)});
        int heads = variant == 2 ? 4 : 2, hd = variant == 2 ? 4 : 8;
        GirAttr ra[] = {gir_attr_int("heads", heads), gir_attr_int("head_dim", hd),
                        gir_attr_float("theta", 5e5), gir_attr_str("scaling", "linear"),
                        gir_attr_float("factor", 2)};
        GirValue *kr = op1(g, GIR_OP_ROPE, (GirValue *[]){k, m.pos}, 2, ra, 5, &d);
        if (!mini_kv_write(&m, kr, v, &d)) {
            gir_graph_destroy(g);
            continue;
        }
        if (variant == 1) out(g, "k_roped", kr);
        char *p = passes_print(g);
        const char *fused =
            "= kv_write %4, %5, %2, %3, %1, %0 {kv_heads=2, head_dim=8, page_size=16, theta=500000, "
            "scaling=\"linear\", factor=2}";
        if (variant == 0)
            KT_CHECK(strstr(p, fused) && !strstr(p, "rope %"), "fused:\n%s", p);
        else
            KT_CHECK(!strstr(p, "theta=500000, scaling=\"linear\", factor=2} : bf16[P") &&
                         strstr(p, "rope %"),
                     "variant %d not fused:\n%s", variant, p);
        free(p);
        gir_graph_destroy(g);
    }
    /* rope(q) beside it: fused as the third output when positions and rope attributes match and nothing
     * reads it before the kv_write; not when theta differs, or when it is read in between */
    for (int variant = 0; variant < 3; variant++) {
        Mini m = mini(2, 8);
        GirGraph *g = m.g;
        IrDiag d = {0};
        GirValue *q = leaf(g, GIR_OP_INPUT, "q", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(32)});
        GirValue *k = leaf(g, GIR_OP_INPUT, "k", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(16)});
        GirValue *v = leaf(g, GIR_OP_INPUT, "v", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(16)});
        GirAttr rq[] = {gir_attr_int("heads", 4), gir_attr_int("head_dim", 8),
                        gir_attr_float("theta", variant == 1 ? 1e4 : 5e5)};
        GirAttr rk[] = {gir_attr_int("heads", 2), gir_attr_int("head_dim", 8), gir_attr_float("theta", 5e5)};
        GirValue *qr = op1(g, GIR_OP_ROPE, (GirValue *[]){q, m.pos}, 2, rq, 3, &d);
        if (variant == 2) out(g, "early", qr);
        GirValue *kr = op1(g, GIR_OP_ROPE, (GirValue *[]){k, m.pos}, 2, rk, 3, &d);
        if (!mini_kv_write(&m, kr, v, &d)) {
            gir_graph_destroy(g);
            continue;
        }
        out(g, "q_roped", qr);
        char *p = passes_print(g);
        if (variant == 0)
            KT_CHECK(strstr(p, "= kv_write %5, %6, %2, %3, %1, %0, %4 {kv_heads=2, head_dim=8, page_size=16, "
                               "theta=500000, heads=4} : bf16[P,16,2,8], bf16[P,16,2,8], bf16[T,32]") &&
                         !strstr(p, "rope %") && strstr(p, "output \"q_roped\" %9"),
                     "q fused:\n%s", p);
        else
            KT_CHECK(strstr(p, "= rope %4, %0") && !strstr(p, "heads=4} : bf16[P"),
                     "variant %d: q apart:\n%s", variant, p);
        free(p);
        gir_graph_destroy(g);
    }
    /* a rope the kv_write reads as its v is not its q (the pass would make the node read its own output) */
    {
        Mini m = mini(2, 8);
        GirGraph *g = m.g;
        IrDiag d = {0};
        GirValue *k = leaf(g, GIR_OP_INPUT, "k", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(16)});
        GirAttr ra[] = {gir_attr_int("heads", 2), gir_attr_int("head_dim", 8), gir_attr_float("theta", 5e5)};
        GirValue *vr = op1(g, GIR_OP_ROPE, (GirValue *[]){k, m.pos}, 2, ra, 3, &d);
        GirValue *kr = op1(g, GIR_OP_ROPE, (GirValue *[]){k, m.pos}, 2, ra, 3, &d);
        GirNode *kw = mini_kv_write(&m, kr, vr, &d);
        char *p = kw ? passes_print(g) : NULL;
        KT_CHECK(p && strstr(p, "= rope %4, %0") && !strstr(p, "heads=2} : bf16[P"), "v's rope kept:\n%s",
                 p ? p : d.msg);
        free(p);
        gir_graph_destroy(g);
    }
    /* the 6-input form: positions i32[T], theta, and rope attributes only with positions */
    Mini m = mini(2, 8);
    GirGraph *g = m.g;
    IrDiag d = {0};
    GirValue *k = leaf(g, GIR_OP_INPUT, "k", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(16)});
    GirValue *fpos = leaf(g, GIR_OP_INPUT, "fpos", GIR_F32, 1, (GirDim[]){S(g, "T")});
    GirAttr kva[] = {gir_attr_int("kv_heads", 2), gir_attr_int("head_dim", 8), gir_attr_int("page_size", 16),
                     gir_attr_float("theta", 1e4)};
    GirValue *in6[] = {k, k, m.kc, m.vc, m.slots, m.pos};
    KT_CHECK(gir_node_add(g, GIR_OP_KV_WRITE, in6, 6, kva, 4, here, &d), "kv_write with positions: %s",
             d.msg);
    in6[5] = fpos;
    KT_CHECK(!gir_node_add(g, GIR_OP_KV_WRITE, in6, 6, kva, 4, here, &d) &&
                 strstr(d.msg, "positions must be i32"),
             "f32 positions: %s", d.msg);
    in6[5] = m.pos;
    ir_diag_clear(&d);
    KT_CHECK(!gir_node_add(g, GIR_OP_KV_WRITE, in6, 6, kva, 3, here, &d) && strstr(d.msg, "needs theta"),
             "no theta: %s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(!gir_node_add(g, GIR_OP_KV_WRITE, in6, 5, kva, 4, here, &d) && strstr(d.msg, "needs positions"),
             "theta without positions: %s", d.msg);
    /* the 7-input form: q [T, heads*head_dim] of k's dtype, rotated as a third output; heads only with q */
    GirValue *q = leaf(g, GIR_OP_INPUT, "q", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(32)});
    GirValue *in7[] = {k, k, m.kc, m.vc, m.slots, m.pos, q};
    GirAttr kvq[] = {kva[0], kva[1], kva[2], kva[3], gir_attr_int("heads", 4)};
    ir_diag_clear(&d);
    GirNode *n7 = gir_node_add(g, GIR_OP_KV_WRITE, in7, 7, kvq, 5, here, &d);
    KT_CHECK(n7 && n7->n_out == 3 && gir_dim_eq(n7->out[2]->type.dim[1], C(32)), "kv_write with q: %s",
             d.msg);
    kvq[4] = gir_attr_int("heads", 3);
    ir_diag_clear(&d);
    KT_CHECK(!gir_node_add(g, GIR_OP_KV_WRITE, in7, 7, kvq, 5, here, &d),
             "q of 32 channels is not 3 heads of 8");
    kvq[4] = gir_attr_int("heads", 4);
    ir_diag_clear(&d);
    KT_CHECK(!gir_node_add(g, GIR_OP_KV_WRITE, in6, 6, kvq, 5, here, &d) && strstr(d.msg, "'heads' needs q"),
             "heads without q: %s", d.msg);
    gir_graph_destroy(g);
}

/* Three plain matmuls of one x, weights of one dtype and K -> one matmul {epilogue="group"} with three
 * outputs; two left with weights of one type -> one matmul {epilogue="pair"} with two outputs. */
static void test_fuse_matmul_pair(void)
{
    IrDiag d = {0};
    GirGraph *g = gir_graph_create("gqa");
    GirValue *x = leaf(g, GIR_OP_INPUT, "x", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(64)});
    GirValue *y = leaf(g, GIR_OP_INPUT, "y", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(64)});
    /* q [64,64], k, v [32,64]: one group */
    GirValue *q = op1(g, GIR_OP_MATMUL, (GirValue *[]){x, W(g, "wq", 64, 64)}, 2, NULL, 0, &d);
    GirValue *k = op1(g, GIR_OP_MATMUL, (GirValue *[]){x, W(g, "wk", 32, 64)}, 2, NULL, 0, &d);
    GirValue *v = op1(g, GIR_OP_MATMUL, (GirValue *[]){x, W(g, "wv", 32, 64)}, 2, NULL, 0, &d);
    /* bias matmuls are not plain */
    GirValue *b1 =
        op1(g, GIR_OP_MATMUL, (GirValue *[]){y, W(g, "wb1", 32, 64), W(g, "b1", 32, 0)}, 3, NULL, 0, &d);
    GirValue *b2 =
        op1(g, GIR_OP_MATMUL, (GirValue *[]){y, W(g, "wb2", 32, 64), W(g, "b2", 32, 0)}, 3, NULL, 0, &d);
    /* the first one's result used before the second: not paired */
    GirValue *u1 = op1(g, GIR_OP_MATMUL, (GirValue *[]){y, W(g, "wu1", 64, 64)}, 2, NULL, 0, &d);
    GirValue *s = op1(g, GIR_OP_ADD, (GirValue *[]){u1, y}, 2, NULL, 0, &d);
    GirValue *u2 = op1(g, GIR_OP_MATMUL, (GirValue *[]){y, W(g, "wu2", 64, 64)}, 2, NULL, 0, &d);
    /* weights of another dtype: not paired */
    GirValue *wh = leaf(g, GIR_OP_WEIGHT, "wh", GIR_F16, 2, (GirDim[]){C(64), C(64)});
    GirValue *h = op1(g, GIR_OP_MATMUL, (GirValue *[]){x, wh}, 2, NULL, 0, &d);
    /* two matmuls of z (q's N=40 is not a multiple of 16: no group of three): k2 pairs with v2 */
    GirValue *z = leaf(g, GIR_OP_INPUT, "z", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(64)});
    GirValue *q2 = op1(g, GIR_OP_MATMUL, (GirValue *[]){z, W(g, "wq2", 40, 64)}, 2, NULL, 0, &d);
    GirValue *k2 = op1(g, GIR_OP_MATMUL, (GirValue *[]){z, W(g, "wk2", 32, 64)}, 2, NULL, 0, &d);
    GirValue *v2 = op1(g, GIR_OP_MATMUL, (GirValue *[]){z, W(g, "wv2", 32, 64)}, 2, NULL, 0, &d);
    GirValue *outs[] = {q, k, v, b1, b2, s, u2, h, q2, k2, v2};
    for (int i = 0; i < 11; i++)
        out(g, "o", outs[i]);
    KT_CHECK(d.status == IR_OK, "%s", d.msg);
    char *p = passes_print(g);
    KT_CHECK(strstr(p, "%5, %6, %7 = matmul %0, %2, %3, %4 {epilogue=\"group\"} : bf16[T,64], bf16[T,32], "
                       "bf16[T,32]"),
             "q, k, v:\n%s", p);
    KT_CHECK(strstr(p, "{epilogue=\"pair\"} : bf16[T,32], bf16[T,32]") &&
                 strstr(p, "matmul %21, %22 : bf16[T,40]"),
             "q2 alone, k2 with v2:\n%s", p);
    int pairs = 0, groups = 0;
    for (const char *c = p; (c = strstr(c, "pair")); c++)
        pairs++;
    for (const char *c = p; (c = strstr(c, "group")); c++)
        groups++;
    KT_CHECK(pairs == 1 && groups == 1, "one group, one pair (bias, used-before and f16 matmuls alone):\n%s",
             p);
    KT_CHECK(strstr(p, "output \"o\" %5\noutput \"o\" %6\noutput \"o\" %7\n"),
             "uses read the group's outputs:\n%s", p);
    free(p);
    gir_graph_destroy(g);

    /* MHA: q, k, v of one shape: one group; gate/up stay silu_mul's */
    g = gir_graph_create("mha");
    x = leaf(g, GIR_OP_INPUT, "x", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(64)});
    q = op1(g, GIR_OP_MATMUL, (GirValue *[]){x, W(g, "wq", 64, 64)}, 2, NULL, 0, &d);
    k = op1(g, GIR_OP_MATMUL, (GirValue *[]){x, W(g, "wk", 64, 64)}, 2, NULL, 0, &d);
    v = op1(g, GIR_OP_MATMUL, (GirValue *[]){x, W(g, "wv", 64, 64)}, 2, NULL, 0, &d);
    GirValue *gt = op1(g, GIR_OP_MATMUL, (GirValue *[]){x, W(g, "wg", 64, 64)}, 2, NULL, 0, &d);
    GirValue *up = op1(g, GIR_OP_MATMUL, (GirValue *[]){x, W(g, "wu", 64, 64)}, 2, NULL, 0, &d);
    GirValue *m = op1(g, GIR_OP_SILU_MUL, (GirValue *[]){gt, up}, 2, NULL, 0, &d);
    GirValue *mha[] = {q, k, v, m};
    for (int i = 0; i < 4; i++)
        out(g, "o", mha[i]);
    p = passes_print(g);
    KT_CHECK(strstr(p, "%4, %5, %6 = matmul %0, %1, %2, %3 {epilogue=\"group\"}") &&
                 strstr(p, "{epilogue=\"silu_mul\"}"),
             "q, k, v grouped, silu_mul kept:\n%s", p);
    free(p);
    gir_graph_destroy(g);

    /* a product that is a later matmul's weight is not grouped with it (the node would read its own output)
     */
    g = gir_graph_create("chain");
    GirValue *xc = leaf(g, GIR_OP_INPUT, "x", GIR_BF16, 2, (GirDim[]){C(64), C(64)});
    GirValue *y1 = op1(g, GIR_OP_MATMUL, (GirValue *[]){xc, W(g, "w0", 64, 64)}, 2, NULL, 0, &d);
    GirValue *y2 = op1(g, GIR_OP_MATMUL, (GirValue *[]){xc, W(g, "w2", 64, 64)}, 2, NULL, 0, &d);
    GirValue *y3 = op1(g, GIR_OP_MATMUL, (GirValue *[]){xc, y1}, 2, NULL, 0, &d);
    KT_CHECK(y1 && y2 && y3, "chain: %s", d.msg);
    out(g, "o", y2);
    out(g, "o", y3);
    p = passes_print(g);
    KT_CHECK(p && !strstr(p, "group") && strstr(p, "{epilogue=\"pair\"}"), "y1, y2 paired, y3 apart:\n%s",
             p ? p : "");
    free(p);
    gir_graph_destroy(g);

    /* the pair form's rules: three inputs, one weight type, two outputs (the verifier checks the count) */
    g = gir_graph_create("rules");
    x = leaf(g, GIR_OP_INPUT, "x", GIR_BF16, 2, (GirDim[]){S(g, "T"), C(64)});
    GirValue *w1 = W(g, "w1", 32, 64), *w2 = W(g, "w2", 32, 64), *w3 = W(g, "w3", 16, 64);
    GirAttr pa = gir_attr_str("epilogue", "pair");
    ir_diag_clear(&d);
    GirNode *pn = gir_node_add(g, GIR_OP_MATMUL, (GirValue *[]){x, w1, w2}, 3, &pa, 1, here, &d);
    KT_CHECK(pn && pn->n_out == 2, "matmul pair has two outputs: %s", d.msg);
    KT_CHECK(!gir_node_add(g, GIR_OP_MATMUL, (GirValue *[]){x, w1}, 2, &pa, 1, here, &d) &&
                 strstr(d.msg, "epilogue pair takes x, w, w2"),
             "%s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(!gir_node_add(g, GIR_OP_MATMUL, (GirValue *[]){x, w1, w3}, 3, &pa, 1, here, &d) &&
                 strstr(d.msg, "w and w2 differ"),
             "%s", d.msg);
    ir_diag_clear(&d);
    /* group: two or three weights of one dtype and K, any N; one output each; only group takes four inputs */
    GirAttr ga = gir_attr_str("epilogue", "group");
    GirNode *gn = gir_node_add(g, GIR_OP_MATMUL, (GirValue *[]){x, w1, w3, w2}, 4, &ga, 1, here, &d);
    KT_CHECK(gn && gn->n_out == 3 && gn->out[1]->type.dim[1].n == 16, "group of three: %s", d.msg);
    ir_diag_clear(&d);
    GirValue *wf = leaf(g, GIR_OP_WEIGHT, "wf", GIR_F16, 2, (GirDim[]){C(32), C(64)});
    KT_CHECK(!gir_node_add(g, GIR_OP_MATMUL, (GirValue *[]){x, w1, wf}, 3, &ga, 1, here, &d) &&
                 strstr(d.msg, "group weights differ in dtype"),
             "%s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(!gir_node_add(g, GIR_OP_MATMUL, (GirValue *[]){x, w1, w2, w3}, 4, NULL, 0, here, &d) &&
                 strstr(d.msg, "only epilogue group"),
             "%s", d.msg);
    ir_diag_clear(&d);
    KT_CHECK(gir_verify(g, &d) == IR_OK, "%s", d.msg);
    if (pn) {
        pn->n_out = 1;
        KT_CHECK(gir_verify(g, &d) == IR_ERR_INTERNAL && strstr(d.msg, "wrong number of outputs"), "%s",
                 d.msg);
        pn->n_out = 2;
        pn->attr[0] = gir_attr_str("epilogue", "silu_mul");
        ir_diag_clear(&d);
        KT_CHECK(gir_verify(g, &d) == IR_ERR_INTERNAL && strstr(d.msg, "wrong number of outputs"),
                 "two outputs only for pair: %s", d.msg);
    }
    gir_graph_destroy(g);
}

int main(void)
{
    test_fuse_silu_mul();
    test_fuse_rope_kv_write();
    test_fuse_matmul_pair();
    test_build_print_passes();
    test_inference_errors();
    test_tree_attention();
    test_verifier_catches_corruption();
    test_alloc_failures();
    test_names_and_sizes();
    test_name_index();
    return kt_done("test_gir");
}
