/* kfam.c — kernel families: the spec helpers, the registry table and the small building blocks the
 * family files share (kfam_impl.h). A family is one file, kfam_<name>.c, exporting one KfamFamily;
 * adding a family is adding its file and one line to `families` below. docs/KERNELS.md describes each.
 */
#include "kfam_impl.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const KfamFamily kfam_embedding;
extern const KfamFamily kfam_rmsnorm;
extern const KfamFamily kfam_rope;
extern const KfamFamily kfam_matmul;
extern const KfamFamily kfam_matmul_splitk_epilogue;
extern const KfamFamily kfam_sample;
extern const KfamFamily kfam_attention;
extern const KfamFamily kfam_attention_merge;
extern const KfamFamily kfam_kv_write;
extern const KfamFamily kfam_spec_verify;
extern const KfamFamily kfam_qmatmul;
extern const KfamFamily kfam_quant_rows;

static const KfamFamily *const families[] = {
    &kfam_embedding, &kfam_rmsnorm,    &kfam_rope,      &kfam_matmul,          &kfam_matmul_splitk_epilogue,
    &kfam_sample,    &kfam_kv_write,   &kfam_attention, &kfam_attention_merge, &kfam_spec_verify,
    &kfam_qmatmul,   &kfam_quant_rows,
};

const KfamFamily *kfam_find(const char *name)
{
    for (unsigned i = 0; i < sizeof families / sizeof families[0]; i++)
        if (!strcmp(families[i]->name, name)) return families[i];
    return NULL;
}

const KfamFamily *const *kfam_all(int *n)
{
    *n = (int)(sizeof families / sizeof families[0]);
    return families;
}

/* ---- specs ---- */

KfamSpec kfam_spec(const char *family)
{
    KfamSpec s;
    memset(&s, 0, sizeof s);
    s.family = family;
    return s;
}

static GirAttr *spec_slot(KfamSpec *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->attr[i].key, key)) return &s->attr[i];
    KILN_ASSERT(s->n < KFAM_MAX_SPEC);
    return &s->attr[s->n++];
}

static const GirAttr *spec_find(const KfamSpec *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->attr[i].key, key)) return &s->attr[i];
    return NULL;
}

void kfam_spec_int(KfamSpec *s, const char *key, int64_t v)
{
    *spec_slot(s, key) = (GirAttr){.key = key, .kind = GIR_ATTR_INT, .i = v};
}

void kfam_spec_float(KfamSpec *s, const char *key, double v)
{
    *spec_slot(s, key) = (GirAttr){.key = key, .kind = GIR_ATTR_FLOAT, .f = v};
}

void kfam_spec_str(KfamSpec *s, const char *key, const char *v)
{
    *spec_slot(s, key) = (GirAttr){.key = key, .kind = GIR_ATTR_STR, .s = v};
}

int64_t kfam_spec_i(const KfamSpec *s, const char *key, int64_t dflt)
{
    const GirAttr *a = spec_find(s, key);
    if (!a || a->kind == GIR_ATTR_STR) return dflt;
    return a->kind == GIR_ATTR_INT ? a->i : (int64_t)a->f;
}

double kfam_spec_f(const KfamSpec *s, const char *key, double dflt)
{
    const GirAttr *a = spec_find(s, key);
    if (!a || a->kind == GIR_ATTR_STR) return dflt;
    return a->kind == GIR_ATTR_FLOAT ? a->f : (double)a->i;
}

const char *kfam_spec_s(const KfamSpec *s, const char *key, const char *dflt)
{
    const GirAttr *a = spec_find(s, key);
    return a && a->kind == GIR_ATTR_STR && a->s ? a->s : dflt;
}

static void attr_value(const GirAttr *a, IrBuf *b)
{
    if (a->kind == GIR_ATTR_INT)
        ir_buf_printf(b, "%lld", (long long)a->i);
    else if (a->kind == GIR_ATTR_FLOAT)
        ir_buf_printf(b, "%.9g", a->f);
    else
        ir_buf_printf(b, "%s", a->s ? a->s : "");
}

void kfam_spec_print(const KfamSpec *s, IrBuf *b)
{
    ir_buf_printf(b, "%s", s->family);
    for (int i = 0; i < s->n; i++) {
        ir_buf_printf(b, " %s=", s->attr[i].key);
        attr_value(&s->attr[i], b);
    }
}

const char *kfam_spec_name(IrArena *a, const KfamSpec *s)
{
    IrBuf b = {0};
    ir_buf_printf(&b, "%s", s->family);
    for (int i = 0; i < s->n; i++) {
        ir_buf_put(&b, "_", 1);
        attr_value(&s->attr[i], &b);
    }
    if (b.oom) {
        ir_buf_free(&b);
        return NULL;
    }
    for (size_t i = 0; i < b.len; i++) {
        char c = b.s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) b.s[i] = '_';
    }
    char *name = ir_arena_strdup(a, b.s);
    ir_buf_free(&b);
    return name;
}

/* ---- shared by the family files ---- */

IrStatus kfam_spec_dtype(const KfamSpec *s, KirDtype *t, IrDiag *d)
{
    const char *n = kfam_spec_s(s, "dtype", NULL);
    if (n && !strcmp(n, "bf16"))
        *t = KIR_BF16;
    else if (n && !strcmp(n, "f16"))
        *t = KIR_F16;
    else if (n && !strcmp(n, "f32"))
        *t = KIR_F32;
    else
        return ir_diag_set(d, IR_ERR_INPUT, "%s: dtype must be bf16, f16 or f32 (got %s)", s->family,
                           n ? n : "none");
    return IR_OK;
}

IrStatus kfam_spec_need(const KfamSpec *s, const char *key, int64_t lo, int64_t hi, int64_t *v, IrDiag *d)
{
    const GirAttr *a = spec_find(s, key);
    if (!a || a->kind != GIR_ATTR_INT)
        return ir_diag_set(d, IR_ERR_INPUT, "%s: spec needs an integer %s", s->family, key);
    if (a->i < lo || a->i > hi)
        return ir_diag_set(d, IR_ERR_INPUT, "%s: %s=%lld is outside [%lld, %lld]", s->family, key,
                           (long long)a->i, (long long)lo, (long long)hi);
    *v = a->i;
    return IR_OK;
}

void kfam_config_merge(const KfamFamily *f, const KfamSpec *s, const KfamFacts *t, const KirConfig *cfg,
                       KirConfig *out)
{
    memset(out, 0, sizeof *out);
    f->defaults(s, t, out);
    for (int i = 0; cfg && i < cfg->n; i++)
        kir_config_set(out, cfg->key[i], cfg->val[i]);
}

IrStatus kfam_config_pow2(const KfamSpec *s, const KirConfig *cfg, const char *key, int64_t max, IrDiag *d)
{
    int64_t v = kir_config_get(cfg, key, 0);
    if (v < 1 || v > max || (v & (v - 1)))
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s: config %s=%lld is not a power of two in [1, %lld]",
                           s->family, key, (long long)v, (long long)max);
    return IR_OK;
}

IrStatus kfam_kernel_begin(IrArena *a, const KfamSpec *s, const KirConfig *cfg, KirKernel **k, KirBuilder *b,
                           IrDiag *d)
{
    const char *name = kfam_spec_name(a, s);
    *k = name ? kir_kernel_create(a, name, s->family, cfg) : NULL;
    if (!*k) return ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory", s->family);
    kir_builder_init(b, *k, d);
    return IR_OK;
}

IrStatus kfam_kernel_end(KirBuilder *b, KirKernel **out)
{
    kir_ret(b);
    IrStatus st = kir_builder_done(b);
    if (st == IR_OK) st = kir_verify(b->k, NULL, b->d);
    if (st == IR_OK) *out = b->k;
    return st;
}

int64_t kfam_pow2_ceil(int64_t x)
{
    int64_t p = 1;
    while (p < x)
        p *= 2;
    return p;
}

int64_t kfam_clamp(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

int64_t kfam_cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

KirValue *kfam_rows(KirBuilder *b, KirValue *x, int n)
{
    return kir_broadcast(b, kir_expand(b, x, 1), x->type.shape[0], n);
}

KirValue *kfam_cols(KirBuilder *b, KirValue *y, int m)
{
    return kir_broadcast(b, kir_expand(b, y, 0), m, y->type.shape[0]);
}

KirValue *kfam_outer(KirBuilder *b, KirOp op, KirValue *x, KirValue *y)
{
    return kir_binary(b, op, kfam_rows(b, x, y->type.shape[0]), kfam_cols(b, y, x->type.shape[0]));
}

KirValue *kfam_outer_mask(KirBuilder *b, KirValue *mrow, KirValue *mcol, int m, int n)
{
    if (mrow && mcol) return kfam_outer(b, KIR_OP_AND, mrow, mcol);
    if (mrow) return kfam_rows(b, mrow, n);
    if (mcol) return kfam_cols(b, mcol, m);
    return NULL;
}

KirValue *kfam_and(KirBuilder *b, KirValue *m1, KirValue *m2)
{
    if (m1 && m2) return kir_binary(b, KIR_OP_AND, m1, m2);
    return m1 ? m1 : m2;
}

/* ---- config candidates ---------------------------------------------------------------------------- */

typedef struct Cand {
    KirConfig cfg;
    int64_t idx;   /* enumeration order: the tie-break, so the order is the same everywhere */
    int dist;      /* keys that differ from the default */
    double spread; /* sum of |log2(value / default)| over those keys */
} Cand;

static int same_params(const KirKernel *a, const KirKernel *b)
{
    if (a->n_params != b->n_params) return 0;
    for (int i = 0; i < a->n_params; i++)
        if (strcmp(a->params[i].name, b->params[i].name) ||
            !kir_type_eq(&a->params[i].type, &b->params[i].type))
            return 0;
    return 1;
}

static int cand_cmp(const void *x, const void *y)
{
    const Cand *a = x, *b = y;
    if (a->dist != b->dist) return a->dist - b->dist;
    if (a->spread != b->spread) return a->spread < b->spread ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

int kfam_config_candidates(const KfamFamily *f, const KfamSpec *s, const KfamFacts *t, const KirLimits *lim,
                           KirConfig *out, int max)
{
    KirConfig dflt = {0};
    f->defaults(s, t, &dflt);
    int64_t total = 1;
    for (int i = 0; i < f->n_space; i++)
        total *= f->space[i].n > 0 ? f->space[i].n : 1;
    if (total > (1 << 16))
        total = 1 << 16; /* every config of today's spaces (matmul: 6000); a bound on memory */
    Cand *c = calloc((size_t)total, sizeof *c);
    IrArena *a = ir_arena_create();
    int n = 0, found = 0;
    KirKernel *ref = NULL;
    IrDiag d = {0};
    if (!c || !a || f->build(a, s, t, &dflt, &ref, &d) != IR_OK) goto done;
    for (int64_t idx = 0; idx < total; idx++) {
        Cand *x = &c[n];
        x->cfg = dflt;
        x->idx = idx;
        x->dist = 0;
        x->spread = 0;
        int64_t r = idx;
        for (int i = 0; i < f->n_space; i++) {
            const KfamSpace *sp = &f->space[i];
            if (sp->n <= 0) continue;
            int64_t v = sp->vals[r % sp->n], d0 = kir_config_get(&dflt, sp->key, v);
            r /= sp->n;
            kir_config_set(&x->cfg, sp->key, v);
            if (v != d0) {
                x->dist++;
                x->spread += v > 0 && d0 > 0 ? fabs(log2((double)v / (double)d0)) : 8;
            }
        }
        n++;
    }
    qsort(c, (size_t)n, sizeof *c, cand_cmp);
    for (int i = 0; i < n && found < max; i++) {
        KirKernel *k = NULL;
        IrDiag e = {0};
        if (f->build(a, s, t, &c[i].cfg, &k, &e) == IR_OK && same_params(k, ref) &&
            kir_verify(k, lim, &e) == IR_OK)
            out[found++] = c[i].cfg;
    }
done:
    ir_arena_destroy(a);
    free(c);
    return found;
}

/* ---- RoPE, shared by rope and kv_write (the math: kfam_rope.c's design note) ------------------------ */

IrStatus kfam_rope_check(const KfamSpec *s, int64_t D, IrDiag *d)
{
    const char *scaling = kfam_spec_s(s, "scaling", "none");
    double theta = kfam_spec_f(s, "theta", 10000.0), factor = kfam_spec_f(s, "factor", 1.0);
    int llama3 = !strcmp(scaling, "llama3");
    if (D % 2 || !(theta > 1) || !(factor > 0))
        return ir_diag_set(d, IR_ERR_INPUT, "%s: rope needs an even D, theta > 1 and factor > 0", s->family);
    if (strcmp(scaling, "none") && strcmp(scaling, "linear") && !llama3)
        return ir_diag_set(d, IR_ERR_INPUT, "%s: scaling must be none, linear or llama3 (got %s)", s->family,
                           scaling);
    if (llama3 && !(kfam_spec_f(s, "high_freq_factor", 4) > kfam_spec_f(s, "low_freq_factor", 1) &&
                    kfam_spec_f(s, "low_freq_factor", 1) > 0 && kfam_spec_f(s, "original_max_pos", 8192) > 0))
        return ir_diag_set(d, IR_ERR_INPUT, "%s: llama3 needs high_freq_factor > low_freq_factor > 0",
                           s->family);
    return IR_OK;
}

/* inv_freq as an f32 [hp] tile for pair indices i (i32 [hp]). */
static KirValue *rope_inv_freq(KirBuilder *b, const KfamSpec *s, KirValue *i, int64_t D)
{
    const char *scaling = kfam_spec_s(s, "scaling", "none");
    KirValue *two_i = kir_cast(b, kir_mul(b, i, kir_const_i32(b, 2)), KIR_F32);
    KirValue *e = kir_div(b, two_i, kir_const_f(b, KIR_F32, (double)D));
    KirValue *l2t = kir_const_f(b, KIR_F32, (double)(float)log2(kfam_spec_f(s, "theta", 10000.0)));
    KirValue *inv = kir_unary(b, KIR_OP_EXP2, kir_unary(b, KIR_OP_NEG, kir_mul(b, e, l2t)));
    if (!strcmp(scaling, "none")) return inv;
    KirValue *factor = kir_const_f(b, KIR_F32, kfam_spec_f(s, "factor", 1.0));
    KirValue *scaled = kir_div(b, inv, factor);
    if (!strcmp(scaling, "linear")) return scaled;
    double old = kfam_spec_f(s, "original_max_pos", 8192), lo = kfam_spec_f(s, "low_freq_factor", 1.0),
           hi = kfam_spec_f(s, "high_freq_factor", 4.0);
    KirValue *wavelen = kir_div(b, kir_const_f(b, KIR_F32, 6.283185307179586), inv);
    KirValue *ratio = kir_div(b, kir_const_f(b, KIR_F32, old), wavelen);
    KirValue *smooth =
        kir_div(b, kir_sub(b, ratio, kir_const_f(b, KIR_F32, lo)), kir_const_f(b, KIR_F32, hi - lo));
    KirValue *one_minus = kir_sub(b, kir_const_f(b, KIR_F32, 1.0), smooth);
    KirValue *mid = kir_add(b, kir_div(b, kir_mul(b, one_minus, inv), factor), kir_mul(b, smooth, inv));
    KirValue *is_low = kir_binary(b, KIR_OP_GT, wavelen, kir_const_f(b, KIR_F32, old / lo));
    KirValue *is_high = kir_lt(b, wavelen, kir_const_f(b, KIR_F32, old / hi));
    return kir_select(b, is_low, scaled, kir_select(b, is_high, inv, mid));
}

void kfam_rope_cos_sin(KirBuilder *b, const KfamSpec *s, KirValue *pos, KirValue *i, int64_t D, int rows,
                       KirValue **c, KirValue **sn)
{
    KirValue *angle = kir_mul(b, pos, rope_inv_freq(b, s, i, D));
    *c = kfam_cols(b, kir_unary(b, KIR_OP_COS, angle), rows);
    *sn = kfam_cols(b, kir_unary(b, KIR_OP_SIN, angle), rows);
}

void kfam_rope_rotate(KirBuilder *b, KirValue *x1, KirValue *x2, KirValue *c, KirValue *sn, KirValue **y1,
                      KirValue **y2)
{
    *y1 = kir_sub(b, kir_mul(b, x1, c), kir_mul(b, x2, sn));
    *y2 = kir_add(b, kir_mul(b, x2, c), kir_mul(b, x1, sn));
}

int64_t kfam_row_block(int64_t C)
{
    int64_t block = kfam_pow2_ceil(C);
    return block > 8192 ? 4096 : kfam_clamp(block, 64, 8192);
}
