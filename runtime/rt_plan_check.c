/* rt_plan_check.c — a loaded launch plan checked as untrusted data (rt_plan.h, rt_plan_check).
 *
 * rt_plan.c proves each argument is of the right kind; this file proves it is the right thing. A table
 * of the kernel families' param contracts (the shapes at the top of ir/kfam_*.c, restated here because
 * the runtime links nothing of ir/) says, for a kernel's spec, the shape each param is read at, in spec
 * constants and the kernel's i32 params; a launch binds those i32 params to step sizes (sym:T ...), so
 * the expected shape of a buffer argument is symbolic ([T, 64]) and is compared with the buffer table's
 * (element counts as a constant times a multiset of symbols), that of a weight exactly. The same rules
 * re-derive each binary's grid and threads from its config. Dataflow: an activation a launch loads
 * (the kernel IR's loads through that param) must have been stored by an earlier launch.
 * Invariant: a plan that passes never makes a kernel read or write past a buffer the engine allocates
 * from these tables, whatever rows were edited (hashes aside: integrity, not origin; docs/PACKAGE.md).
 */
#define _POSIX_C_SOURCE 200809L
#include "rt_plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_file.h"

enum { MAX_DIMS = 4, MAX_SYMS = 4 };

/* A dim of an expected shape: n, or the value of i32 param `param` (+ plus), or step symbol `sym`. */
typedef struct Dim {
    int64_t n;
    int param, plus, sym; /* -1: unused */
} Dim;

typedef struct Shape {
    int rank; /* -1: no rule for this param */
    Dim d[MAX_DIMS];
} Shape;

/* What a family's rule says of one kernel at one config. */
typedef struct Rule {
    Shape shape[RT_PLAN_MAX_ARGS];
    int64_t plane[RT_PLAN_MAX_ARGS];          /* > 0: the bytes a quantized weight's param reads */
    unsigned char is_plane[RT_PLAN_MAX_ARGS]; /* scales, zeros: at an offset into w's tensor, or a tensor
                                                 of their own (then only the dtype is checked) */
    int64_t at[RT_PLAN_MAX_ARGS];             /* a plane's offset in w's tensor (the planar layout:
                                                 codes, then scales, then zeros) */
    int has_grid;
    RtGridAxis grid[3];
    int threads;      /* > 0: CUDA threads per block (WARPS * 32) */
    char missing[32]; /* a spec or config key the rule needed and did not find */
} Rule;

static int64_t spec_i(const RtPlanKernel *k, Rule *r, const char *key, int64_t dflt)
{
    int64_t v = rt_plan_config_i(k->spec, key, -1);
    if (v >= 0) return v;
    if (dflt < 0 && !r->missing[0]) snprintf(r->missing, sizeof r->missing, "spec %s", key);
    return dflt < 0 ? 1 : dflt;
}

static int64_t cfg_i(const char *config, Rule *r, const char *key)
{
    int64_t v = rt_plan_config_i(config, key, -1);
    if (v < 1 && !r->missing[0]) snprintf(r->missing, sizeof r->missing, "config %s", key);
    return v < 1 ? 1 : v;
}

static const char *spec_s(const RtPlanKernel *k, const char *key, char *buf, size_t n)
{
    size_t kl = strlen(key);
    for (const char *s = k->spec; (s = strstr(s, key)); s += kl)
        if ((s == k->spec || s[-1] == ' ') && s[kl] == '=') {
            size_t len = strcspn(s + kl + 1, " ");
            snprintf(buf, n, "%.*s", (int)len, s + kl + 1);
            return buf;
        }
    return "";
}

static Dim dc(int64_t n)
{
    return (Dim){.n = n, .param = -1, .sym = -1};
}
static Dim dp(int param)
{
    return (Dim){.n = 1, .param = param, .sym = -1};
}

/* Sets the expected shape of param `name` (when the kernel has it). */
static void want(const RtPlanKernel *k, Rule *r, const char *name, int rank, ...)
{
    int i = 0;
    while (i < k->n_params && strcmp(k->param_names[i], name))
        i++;
    if (i == k->n_params || rank > MAX_DIMS) return;
    va_list ap;
    va_start(ap, rank);
    r->shape[i].rank = rank;
    for (int d = 0; d < rank; d++)
        r->shape[i].d[d] = va_arg(ap, Dim);
    va_end(ap);
}

static int pidx(const RtPlanKernel *k, const char *name)
{
    for (int i = 0; i < k->n_params; i++)
        if (!strcmp(k->param_names[i], name)) return i;
    return -1;
}

/* cdiv(param * mul, div), or the constant c (param -1). */
static RtGridAxis ax(int param, int64_t mul, int64_t div)
{
    return (RtGridAxis){param, 0, mul, div};
}
static RtGridAxis axc(int64_t c)
{
    return (RtGridAxis){-1, c, 1, 1};
}
static int64_t cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static void grid(Rule *r, RtGridAxis x, RtGridAxis y, RtGridAxis z)
{
    r->has_grid = 1, r->grid[0] = x, r->grid[1] = y, r->grid[2] = z;
}

/* ---- the families' contracts (ir/kfam_<family>.c) ---- */

static void rule_embedding(const RtPlanKernel *k, const char *cfg, Rule *r)
{
    int64_t C = spec_i(k, r, "C", -1), V = spec_i(k, r, "V", -1);
    int t = pidx(k, "n_tokens");
    want(k, r, "ids", 1, dp(t)), want(k, r, "table", 2, dc(V), dc(C)), want(k, r, "out", 2, dp(t), dc(C));
    grid(r, ax(t, 1, 1), axc(cdiv(C, cfg_i(cfg, r, "BLOCK"))), axc(1));
}

static void rule_rmsnorm(const RtPlanKernel *k, const char *cfg, Rule *r)
{
    int64_t C = spec_i(k, r, "C", -1);
    int n = pidx(k, "n_rows");
    const char *rows[] = {"x", "r", "out", "sum_out"};
    for (int i = 0; i < 4; i++)
        want(k, r, rows[i], 2, dp(n), dc(C));
    want(k, r, "w", 1, dc(C));
    grid(r, ax(n, 1, cfg_i(cfg, r, "ROWS")), axc(1), axc(1));
}

/* matmul and qmatmul: out[M,N] = x[M,K] @ w[N,K]^T (group: w2 [N2,K], w3 [N3,K]). */
static void rule_matmul(const RtPlanKernel *k, const char *cfg, Rule *r)
{
    char ep[24], fmt[16], sd[16], dt[16];
    int64_t N = spec_i(k, r, "N", -1), K = spec_i(k, r, "K", -1);
    int group = !strcmp(spec_s(k, "epilogue", ep, sizeof ep), "group");
    int64_t N2 = group ? spec_i(k, r, "N2", -1) : N, N3 = group ? spec_i(k, r, "N3", 0) : N;
    int m = pidx(k, "M");
    if (!spec_i(k, r, "gather", 0)) want(k, r, "x", 2, dp(m), dc(K));
    want(k, r, "xs", 1, dp(m)), want(k, r, "rows", 1, dp(m));
    want(k, r, "w", 2, dc(N), dc(K)), want(k, r, "w2", 2, dc(N2), dc(K)), want(k, r, "w3", 2, dc(N3), dc(K));
    want(k, r, "bias", 1, dc(N)), want(k, r, "r", 2, dp(m), dc(N));
    want(k, r, "out", 2, dp(m), dc(N)), want(k, r, "out2", 2, dp(m), dc(N2)),
        want(k, r, "out3", 2, dp(m), dc(N3));
    /* quantized formats: the scales (and zeros) may be planes of w's tensor ("weight:NAME@OFFSET") */
    const char *f = spec_s(k, "wfmt", fmt, sizeof fmt), *s = spec_s(k, "sdtype", sd, sizeof sd);
    int64_t G = spec_i(k, r, "group", 128), groups = N * (K / (G > 0 ? G : 1));
    int64_t ssz = !strcmp(*s ? s : spec_s(k, "dtype", dt, sizeof dt), "f32") ? 4 : 2, wb = 0, sb = 0, zb = 0;
    if (!strcmp(f, "w4a16")) wb = N * K / 2, sb = groups * ssz, zb = groups;
    if (!strcmp(f, "w8a16")) wb = N * K, sb = N * ssz;
    static const struct {
        const char *fmt;
        int64_t bytes, per;
    } blocks[] = {
        {"q4_0", 18, 32}, {"q4_1", 20, 32}, {"q8_0", 34, 32}, {"q4_k", 144, 256}, {"q6_k", 210, 256}};
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) /* GGUF blocks: rows of K/per blocks */
        if (!strcmp(f, blocks[b].fmt)) wb = N * (K / blocks[b].per) * blocks[b].bytes;
    if (!strcmp(f, "fp8")) {
        char sc[16];
        wb = N * K, sb = strstr(k->spec, " group=")                             ? groups * 4
                         : !strcmp(spec_s(k, "scale", sc, sizeof sc), "tensor") ? 4
                                                                                : N * 4;
    }
    const char *planes[][3] = {{"w", "scales", "zeros"}, {"w2", "scales2", "zeros2"}};
    for (int p = 0; wb && p < 2; p++) {
        int w = pidx(k, planes[p][0]), sc = pidx(k, planes[p][1]), z = pidx(k, planes[p][2]);
        if (w >= 0) r->plane[w] = wb;
        if (w >= 0 && sc >= 0)
            r->shape[sc] = r->shape[w], r->plane[sc] = sb, r->is_plane[sc] = 1, r->at[sc] = wb;
        if (w >= 0 && z >= 0)
            r->shape[z] = r->shape[w], r->plane[z] = zb, r->is_plane[z] = 1, r->at[z] = wb + sb;
    }
    int64_t BN = cfg_i(cfg, r, "BN"), ny = cdiv(N, BN);
    if (group) ny += cdiv(N2, BN) + (N3 ? cdiv(N3, BN) : 0);
    grid(r, ax(m, 1, cfg_i(cfg, r, "BM")), axc(ny), axc(cfg_i(cfg, r, "SPLIT_K")));
}

static void rule_splitk_epilogue(const RtPlanKernel *k, const char *cfg, Rule *r)
{
    int64_t N = spec_i(k, r, "N", -1);
    int m = pidx(k, "M");
    want(k, r, "ws", 2, dp(m), dc(N)), want(k, r, "bias", 1, dc(N)), want(k, r, "r", 2, dp(m), dc(N));
    want(k, r, "out", 2, dp(m), dc(N));
    grid(r, ax(m, 1, 1), axc(cdiv(N, cfg_i(cfg, r, "BLOCK"))), axc(1));
}

static void rule_kv_write(const RtPlanKernel *k, const char *cfg, Rule *r)
{
    int64_t Hkv = spec_i(k, r, "Hkv", -1), D = spec_i(k, r, "D", -1), S = spec_i(k, r, "page_size", -1);
    int64_t H = spec_i(k, r, "H", 0), BH = cfg_i(cfg, r, "BH");
    int t = pidx(k, "n_tokens");
    Dim P = {.n = 1, .param = -1, .sym = RT_SYM_P};
    want(k, r, "k", 2, dp(t), dc(Hkv * D)), want(k, r, "v", 2, dp(t), dc(Hkv * D));
    want(k, r, "k_cache", 4, P, dc(S), dc(Hkv), dc(D)), want(k, r, "v_cache", 4, P, dc(S), dc(Hkv), dc(D));
    want(k, r, "slots", 1, dp(t)), want(k, r, "positions", 1, dp(t));
    want(k, r, "q", 2, dp(t), dc(H * D)), want(k, r, "q_out", 2, dp(t), dc(H * D));
    grid(r, ax(t, 1, 1), axc(cdiv(Hkv, BH) + cdiv(H, BH)), axc(1));
}

static void rule_attention(const RtPlanKernel *k, const char *cfg, Rule *r)
{
    int64_t H = spec_i(k, r, "H", -1), Hkv = spec_i(k, r, "Hkv", -1), D = spec_i(k, r, "D", -1);
    int64_t S = spec_i(k, r, "page_size", -1), G = H / (Hkv > 0 ? Hkv : 1);
    int t = pidx(k, "n_tokens"), b = pidx(k, "n_seqs"), mp = pidx(k, "max_pages");
    Dim P = {.n = 1, .param = -1, .sym = RT_SYM_P}, B1 = dp(b);
    B1.plus = 1;
    want(k, r, "q", 2, dp(t), dc(H * D)), want(k, r, "out", 2, dp(t), dc(H * D));
    want(k, r, "k_cache", 4, P, dc(S), dc(Hkv), dc(D)), want(k, r, "v_cache", 4, P, dc(S), dc(Hkv), dc(D));
    want(k, r, "block_table", 2, dp(b), dp(mp)), want(k, r, "seq_lens", 1, dp(b));
    want(k, r, "cu_q", 1, B1), want(k, r, "tree_mask", 1, dp(t));
    int ns = pidx(k, "n_splits");
    grid(r, ax(pidx(k, "max_q"), G, cfg_i(cfg, r, "BLOCK_M")),
         spec_i(k, r, "split", 0) && ns >= 0 ? ax(ns, Hkv, 1) : axc(Hkv), ax(b, 1, 1));
}

static void rule_attention_merge(const RtPlanKernel *k, const char *cfg, Rule *r)
{
    (void)cfg;
    int64_t H = spec_i(k, r, "H", -1), D = spec_i(k, r, "D", -1);
    int t = pidx(k, "n_tokens");
    want(k, r, "out", 2, dp(t), dc(H * D));
    grid(r, ax(t, 1, 1), axc(H), axc(1));
}

static void rule_rope(const RtPlanKernel *k, const char *cfg, Rule *r)
{
    int64_t H = spec_i(k, r, "H", -1), D = spec_i(k, r, "D", -1);
    int t = pidx(k, "n_tokens");
    want(k, r, "x", 2, dp(t), dc(H * D)), want(k, r, "out", 2, dp(t), dc(H * D));
    want(k, r, "positions", 1, dp(t));
    grid(r, ax(t, 1, 1), axc(cdiv(H, cfg_i(cfg, r, "BH"))), axc(1));
}

static void rule_rows(const RtPlanKernel *k, const char *cfg, Rule *r, const char *cols_key,
                      const char *const *mats, const char *const *vecs)
{
    (void)cfg;
    int64_t C = spec_i(k, r, cols_key, -1);
    int n = pidx(k, "n_rows");
    for (; *mats; mats++)
        want(k, r, *mats, 2, dp(n), dc(C));
    for (; *vecs; vecs++)
        want(k, r, *vecs, 1, dp(n));
    grid(r, ax(n, 1, 1), axc(1), axc(1));
}

static void rule_sample(const RtPlanKernel *k, const char *cfg, Rule *r)
{
    static const char *const mats[] = {"logits", NULL}, *const vecs[] = {"out_tokens", NULL};
    rule_rows(k, cfg, r, "V", mats, vecs);
    want(k, r, "params", 2, dp(pidx(k, "n_rows")), dc(4));
}

static void rule_quant_rows(const RtPlanKernel *k, const char *cfg, Rule *r)
{
    static const char *const mats[] = {"x", "out", NULL}, *const vecs[] = {"scales", NULL};
    rule_rows(k, cfg, r, "C", mats, vecs);
}

static void rule_spec_verify(const RtPlanKernel *k, const char *cfg, Rule *r)
{
    (void)cfg;
    int b = pidx(k, "n_seqs");
    want(k, r, "draft", 2, dp(b), dc(spec_i(k, r, "k", -1)));
    want(k, r, "accepted", 1, dp(b)), want(k, r, "bonus", 1, dp(b)), want(k, r, "params", 2, dp(b), dc(4));
    grid(r, ax(b, 1, 1), axc(1), axc(1));
}

static const struct {
    const char *family;
    void (*rule)(const RtPlanKernel *k, const char *config, Rule *r);
} rules[] = {
    {"embedding", rule_embedding},
    {"rmsnorm", rule_rmsnorm},
    {"matmul", rule_matmul},
    {"qmatmul", rule_matmul},
    {"matmul_splitk_epilogue", rule_splitk_epilogue},
    {"kv_write", rule_kv_write},
    {"attention", rule_attention},
    {"attention_merge", rule_attention_merge},
    {"rope", rule_rope},
    {"sample", rule_sample},
    {"quant_rows", rule_quant_rows},
    {"spec_verify", rule_spec_verify},
};

/* The rule of k at config (0), or -1 when k's family has none. */
static int rule_of(const RtPlanKernel *k, const char *config, Rule *r)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < RT_PLAN_MAX_ARGS; i++)
        r->shape[i].rank = -1;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (!strcmp(k->family, rules[i].family)) {
            rules[i].rule(k, config, r);
            if (strstr(config, "WARPS=")) r->threads = (int)cfg_i(config, r, "WARPS") * 32;
            return 0;
        }
    return -1;
}

/* ---- grids ---- */

static void grid_text(const RtGridAxis g[3], const RtPlanKernel *k, char *out, size_t n)
{
    size_t at = 0;
    for (int a = 0; a < 3 && at < n; a++) {
        if (g[a].param < 0)
            at += (size_t)snprintf(out + at, n - at, "%s%lld", a ? " " : "", (long long)g[a].c);
        else
            at += (size_t)snprintf(out + at, n - at, "%scdiv(%s*%lld,%lld)", a ? " " : "",
                                   k->param_names[g[a].param], (long long)g[a].mul, (long long)g[a].div);
    }
}

static int64_t axis_at(const RtGridAxis *g, int64_t v)
{
    return g->param < 0 ? g->c : (v * g->mul + g->div - 1) / g->div;
}

int rt_plan_binary_check(const RtPlanKernel *k, const RtPlanBinary *b, char *why, int whylen)
{
    Rule r;
    if (rule_of(k, b->config, &r)) {
        snprintf(why, (size_t)whylen, "family %s has no contract in this runtime", k->family);
        return -1;
    }
    if (!r.has_grid) return 0;
    if (r.missing[0]) {
        snprintf(why, (size_t)whylen, "%s missing", r.missing);
        return -1;
    }
    /* equal as functions: the same param per axis and the same value at sizes around every divisor */
    static const int64_t at[] = {0, 1, 2, 3, 7, 15, 16, 17, 63, 64, 65, 127, 129, 1000, 4097, 65537};
    int same = 1;
    for (int a = 0; a < 3 && same; a++) {
        same = (r.grid[a].param < 0) == (b->grid[a].param < 0) &&
               (r.grid[a].param < 0 || r.grid[a].param == b->grid[a].param);
        for (size_t i = 0; same && i < sizeof at / sizeof at[0]; i++)
            same = axis_at(&r.grid[a], at[i]) == axis_at(&b->grid[a], at[i]);
    }
    char have[160], need[160];
    if (!same) {
        grid_text(b->grid, k, have, sizeof have), grid_text(r.grid, k, need, sizeof need);
        snprintf(why, (size_t)whylen, "grid %s, but its config gives %s", have, need);
        return -1;
    }
    int cuda = !strcmp(b->format, "cubin") || !strcmp(b->format, "ptx");
    int llvm = !strcmp(b->format, "host-so") || !strcmp(b->format, "host-obj");
    if (cuda && r.threads > 0 && b->block != r.threads) {
        snprintf(why, (size_t)whylen, "%d threads per block, but its config gives %d", b->block, r.threads);
        return -1;
    }
    if (llvm && (b->block != 1 || b->smem != 0)) {
        snprintf(why, (size_t)whylen, "block %d, smem %d: a %s binary launches with 1 and 0", b->block,
                 b->smem, b->format);
        return -1;
    }
    return 0;
}

/* ---- arguments ---- */

typedef struct Canon { /* an element count: n times the product of syms */
    int64_t n;
    int n_syms;
    char syms[MAX_DIMS * 2][8];
} Canon;

static int canon_add_sym(Canon *c, const char *s, size_t len)
{
    if (c->n_syms == MAX_DIMS * 2 || len >= sizeof c->syms[0]) return -1;
    int i = c->n_syms++;
    memcpy(c->syms[i], s, len), c->syms[i][len] = 0;
    for (; i > 0 && strcmp(c->syms[i - 1], c->syms[i]) > 0; i--) { /* sorted: a multiset */
        char t[8];
        memcpy(t, c->syms[i], 8), memcpy(c->syms[i], c->syms[i - 1], 8), memcpy(c->syms[i - 1], t, 8);
    }
    return 0;
}

static int canon_mul(Canon *c, int64_t v)
{
    if (v < 0 || (v && c->n > INT64_MAX / v)) return -1;
    c->n *= v;
    return 0;
}

/* A table shape "[T,64]" / "[P,8,2,16]" / "[B+1]": each dim a decimal or a symbol name. */
static int canon_text(const char *shape, Canon *c, int *rank)
{
    memset(c, 0, sizeof *c);
    c->n = 1, *rank = 0;
    const char *s = shape;
    if (*s++ != '[') return -1;
    while (*s && *s != ']') {
        size_t len = strcspn(s, ",]");
        char *end;
        long long v = strtoll(s, &end, 10);
        if (!len) return -1;
        if (end == s + len ? canon_mul(c, v) : canon_add_sym(c, s, len)) return -1;
        s += len, ++*rank;
        if (*s == ',') s++;
    }
    return *s == ']' && !s[1] ? 0 : -1;
}

/* The expected shape with the launch's i32 arguments: 0, or 1 when a dim depends on a per-step runtime
 * value (not checkable statically), -1 when a dim's param is not a step symbol. */
static int canon_want(const Shape *w, const RtPlanLaunch *l, Canon *c)
{
    static const char *const syms[] = {"T", "B", "MP", "R", "P"};
    memset(c, 0, sizeof *c);
    c->n = 1;
    for (int d = 0; d < w->rank; d++) {
        const Dim *x = &w->d[d];
        int sym = x->sym;
        if (x->param >= 0) {
            if (x->param >= l->n_args) return -1;
            const RtPlanArg *a = &l->args[x->param];
            if (a->kind == RT_ARG_RTV && a->index == RT_RTV_N_SPLITS) return 1;
            if (a->kind != RT_ARG_SYM && a->kind != RT_ARG_RTV) return -1;
            sym = a->kind == RT_ARG_SYM ? a->index : RT_SYM_T; /* max_q, split_tokens: the step's tokens
                                                                  at most, and buffers hold T rows */
        }
        if (sym < 0) {
            if (canon_mul(c, x->n)) return -1;
            continue;
        }
        char name[8];
        snprintf(name, sizeof name, "%s%s", syms[sym], x->plus ? "+1" : "");
        if (canon_mul(c, x->n) || canon_add_sym(c, name, strlen(name))) return -1;
    }
    return 0;
}

static void canon_print(const Canon *c, char *out, size_t n)
{
    size_t at = (size_t)snprintf(out, n, "%lld", (long long)c->n);
    for (int i = 0; i < c->n_syms && at < n; i++)
        at += (size_t)snprintf(out + at, n - at, "*%s", c->syms[i]);
}

static int plain_dtype(const char *dt)
{
    static const char *const plain[] = {"f32", "f16", "bf16", "i32", "i64", "i8", "u8", "f8e4m3"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(dt, plain[i])) return 1;
    return 0;
}

typedef struct Check {
    const RtPlan *p;
    const char *path;
    char *err;
    int errlen;
    KilnStatus s;
} Check;

static KilnStatus bad(Check *c, int step, const RtPlanKernel *k, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static KilnStatus bad(Check *c, int step, const RtPlanKernel *k, const char *fmt, ...)
{
    if (c->s) return c->s;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return c->s = rt_file_errf(c->err, c->errlen, KILN_ERR_CORRUPT, "%s: step %d (kernel %s): %s", c->path,
                               step, k->name, msg);
}

/* 1 when kernel k (a qmatmul) reads weights of the quantized package dtype `dt` (ir/gir_dtypes.def):
 * GGUF blocks by name (wfmt=q4_0 ...), w4g<G>[z] as wfmt=w4a16 group=G zeros=0|1, f8g<G> as wfmt=fp8
 * group=G. */
static int quant_fits(const RtPlanKernel *k, const char *dt)
{
    char fmt[16], *end;
    Rule r = {0};
    if (strcmp(k->family, "qmatmul")) return 0;
    spec_s(k, "wfmt", fmt, sizeof fmt);
    if (dt[0] == 'q') return !strcmp(fmt, dt);
    int w4 = !strncmp(dt, "w4g", 3), f8 = !strncmp(dt, "f8g", 3);
    long g = w4 || f8 ? strtol(dt + 3, &end, 10) : 0;
    if (!g || spec_i(k, &r, "group", 128) != g) return 0;
    if (f8) return !*end && !strcmp(fmt, "fp8");
    return !strcmp(fmt, "w4a16") && (!*end || !strcmp(end, "z")) &&
           spec_i(k, &r, "zeros", 0) == (*end == 'z');
}

/* The runtime value an i32 param must be bound to (rt:NAME), or -1 when it takes a step symbol (sym:T ...,
 * which the shapes then tie to the buffers). Only split attention reads runtime values; its workspaces are
 * sized for the runtime's n_splits, so any other binding could write past them. */
static int rtv_of(const RtPlanKernel *k, const char *param)
{
    int att = !strcmp(k->family, "attention"), merge = !strcmp(k->family, "attention_merge");
    if ((att || merge) && !strcmp(param, "n_splits")) return RT_RTV_N_SPLITS;
    if (att && !strcmp(param, "max_q")) return RT_RTV_MAX_Q;
    if (merge && !strcmp(param, "n_tokens")) return RT_RTV_SPLIT_TOKENS;
    return -1;
}

static void check_arg(Check *c, int step, const RtPlanKernel *k, const RtPlanLaunch *l, const Rule *r, int i)
{
    const RtPlanArg *a = &l->args[i];
    const char *pn = k->param_names[i], *pd = k->param_dtype[i];
    if (a->kind == RT_ARG_SYM || a->kind == RT_ARG_RTV) {
        static const char *const rtvs[] = {"max_q", "n_splits", "split_tokens"};
        int want = rtv_of(k, pn);
        if (want < 0 && a->kind == RT_ARG_RTV)
            bad(c, step, k, "param %s takes a step size (sym:), not rt:%s", pn, rtvs[a->index]);
        else if (want >= 0 && (a->kind != RT_ARG_RTV || a->index != want))
            bad(c, step, k, "param %s must be bound to rt:%s", pn, rtvs[want]);
        return;
    }
    if (a->kind == RT_ARG_WEIGHT) {
        const RtPlanWeight *w = &c->p->weights[a->index];
        if (plain_dtype(w->dtype) && strcmp(w->dtype, pd)) {
            bad(c, step, k, "param %s is ptr<%s>, weight %s is %s", pn, pd, w->name, w->dtype);
            return;
        }
        if (!plain_dtype(w->dtype) && (r->plane[i] <= 0 || !quant_fits(k, w->dtype))) {
            bad(c, step, k,
                "param %s is ptr<%s>, weight %s is %s: not the quantized format this kernel reads", pn, pd,
                w->name, w->dtype);
            return;
        }
        if (r->is_plane[i] && !a->offset) return;
        if (r->shape[i].rank >= 0) {
            char need[64] = "[";
            size_t at = 1;
            for (int d = 0; d < r->shape[i].rank; d++) {
                const Dim *x = &r->shape[i].d[d];
                if (x->param >= 0 || x->sym >= 0) {
                    bad(c, step, k, "param %s is sized by the step, not a weight (%s)", pn, w->name);
                    return;
                }
                at += (size_t)snprintf(need + at, sizeof need - at, "%s%lld", d ? "," : "", (long long)x->n);
            }
            snprintf(need + at, sizeof need - at, "]");
            if (strcmp(need, w->shape)) {
                bad(c, step, k, "param %s needs a weight of shape %s, weight %s is %s", pn, need, w->name,
                    w->shape);
                return;
            }
        }
        if (a->offset && (r->is_plane[i] ? a->offset != r->at[i] : r->plane[i] > 0))
            bad(c, step, k, "param %s reads weight %s at offset %lld, but its plane starts at %lld", pn,
                w->name, (long long)a->offset, (long long)(r->is_plane[i] ? r->at[i] : 0));
        else if (r->plane[i] > 0 && (a->offset > w->nbytes || r->plane[i] > w->nbytes - a->offset))
            bad(c, step, k, "param %s reads %lld bytes at offset %lld of weight %s, which has %lld", pn,
                (long long)r->plane[i], (long long)a->offset, w->name, (long long)w->nbytes);
        else if (r->plane[i] <= 0 && a->offset)
            bad(c, step, k, "param %s takes a whole weight, not bytes at offset %lld of %s", pn,
                (long long)a->offset, w->name);
        return;
    }
    if (a->kind != RT_ARG_INPUT && a->kind != RT_ARG_ACT) return;
    const RtPlanBuf *b = &c->p->bufs[a->index];
    if (strcmp(b->dtype, pd)) {
        bad(c, step, k, "param %s is ptr<%s>, buffer %s is %s", pn, pd, b->name, b->dtype);
        return;
    }
    if (r->shape[i].rank < 0) return;
    Canon need, have;
    int rank, w = canon_want(&r->shape[i], l, &need);
    if (w > 0) return;
    if (w < 0 || canon_text(b->shape, &have, &rank)) {
        bad(c, step, k, "param %s: buffer %s has shape %s, which the kernel cannot be checked against", pn,
            b->name, b->shape);
        return;
    }
    int same = need.n == have.n && need.n_syms == have.n_syms;
    for (int s = 0; same && s < need.n_syms; s++)
        same = !strcmp(need.syms[s], have.syms[s]);
    if (!same) {
        char t[64];
        canon_print(&need, t, sizeof t);
        bad(c, step, k, "param %s needs %s elements, buffer %s is %s%s", pn, t, b->name, b->dtype, b->shape);
    }
}

static int dtype_size(const char *dt)
{
    static const struct {
        const char *name;
        int size;
    } sizes[] = {{"f32", 4}, {"i32", 4}, {"f16", 2}, {"bf16", 2},
                 {"i64", 8}, {"i8", 1},  {"u8", 1},  {"f8e4m3", 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (!strcmp(dt, sizes[i].name)) return sizes[i].size;
    return 0;
}

/* The activation table itself: each buffer holds its shape at the plan's maxima (the launches' shapes
 * are symbolic, so this is what makes them fit), and two buffers share bytes only when no launch range
 * that uses one meets the range that uses the other (the planner's rule, docs/PACKAGE.md: its ranges
 * contain these, so a package it made always passes). */
static KilnStatus check_arena(const RtPlan *p, const char *path, char *err, int errlen)
{
    int64_t *first = calloc((size_t)p->n_bufs + 1, sizeof *first),
            *last = calloc((size_t)p->n_bufs + 1, sizeof *last);
    KilnStatus s =
        first && last ? KILN_OK : rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    for (int b = 0; !s && b < p->n_bufs; b++) {
        const RtPlanBuf *x = &p->bufs[b];
        first[b] = INT64_MAX, last[b] = x->output ? p->n_launches : -1;
        if (x->kind != RT_BUF_ACT) continue;
        Canon c;
        int rank, size = dtype_size(x->dtype);
        if (!size || canon_text(x->shape, &c, &rank)) {
            s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: buffer %s: %s %s is no activation type",
                             path, x->name, x->dtype, x->shape);
            break;
        }
        for (int i = 0; !s && i < c.n_syms; i++) {
            const char *y = c.syms[i];
            int64_t v = !strcmp(y, "T")     ? p->max_tokens
                        : !strcmp(y, "B")   ? p->max_seqs
                        : !strcmp(y, "B+1") ? p->max_seqs + 1
                        : !strcmp(y, "R")   ? p->max_rows
                                            : -1;
            if (v < 0 || canon_mul(&c, v))
                s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: buffer %s: shape %s cannot be sized",
                                 path, x->name, x->shape);
        }
        if (!s && (canon_mul(&c, size) || c.n > x->bytes))
            s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                             "%s: buffer %s: %lld bytes hold less than %s %s at the plan's maxima", path,
                             x->name, (long long)x->bytes, x->dtype, x->shape);
    }
    for (int i = 0; !s && i < p->n_launches; i++)
        for (int a = 0; a < p->launches[i].n_args; a++) {
            const RtPlanArg *g = &p->launches[i].args[a];
            if (g->kind != RT_ARG_ACT) continue;
            if (first[g->index] > i) first[g->index] = i;
            if (last[g->index] < i) last[g->index] = i;
        }
    /* split-KV attention writes up to max_split_rows rows of its workspaces (the runtime's split count
     * keeps n_tokens * heads * splits within it) */
    for (int i = 0; !s && i < p->n_launches; i++) {
        const RtPlanLaunch *l = &p->launches[i];
        const RtPlanKernel *k = &p->kernels[l->kernel];
        Rule r;
        memset(&r, 0, sizeof r);
        int64_t D = spec_i(k, &r, "D", 0);
        for (int w = 0; w < 2 && !s && k->family && !strncmp(k->family, "attention", 9); w++) {
            int a = pidx(k, w ? "ws_lse" : "ws_o");
            if (a < 0 || a >= l->n_args || l->args[a].kind != RT_ARG_ACT) continue;
            const RtPlanBuf *x = &p->bufs[l->args[a].index];
            if (x->bytes / 4 / (w ? 1 : (D > 0 ? D : 1)) < p->max_split_rows)
                s = rt_file_errf(
                    err, errlen, KILN_ERR_CORRUPT,
                    "%s: step %d: workspace %s holds fewer than meta plan_max_split_rows %lld rows", path, i,
                    x->name, (long long)p->max_split_rows);
        }
    }
    for (int a = 0; !s && a < p->n_bufs; a++)
        for (int b = a + 1; !s && b < p->n_bufs; b++) {
            const RtPlanBuf *x = &p->bufs[a], *y = &p->bufs[b];
            if (x->kind != RT_BUF_ACT || y->kind != RT_BUF_ACT || !x->bytes || !y->bytes) continue;
            int share = x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
            int live =
                first[a] <= last[a] && first[b] <= last[b] && first[a] <= last[b] && first[b] <= last[a];
            if (share && live)
                s = rt_file_errf(
                    err, errlen, KILN_ERR_CORRUPT,
                    "%s: buffers %s and %s share arena bytes while both are in use (steps %lld..%lld "
                    "and %lld..%lld)",
                    path, x->name, y->name, (long long)first[a], (long long)last[a], (long long)first[b],
                    (long long)last[b]);
        }
    free(first), free(last);
    return s;
}

KilnStatus rt_plan_check(const RtPlan *p, const char *path, char *err, int errlen)
{
    KilnStatus s0 = check_arena(p, path, err, errlen);
    if (s0 != KILN_OK) return s0;
    Check c = {.p = p, .path = path, .err = err, .errlen = errlen};
    unsigned char *written = calloc((size_t)p->n_bufs + 1, 1);
    int *writer = calloc((size_t)p->n_bufs + 1, sizeof *writer);
    if (!written || !writer) {
        free(written), free(writer);
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int i = 0; i < p->n_launches && !c.s; i++) {
        const RtPlanLaunch *l = &p->launches[i];
        const RtPlanKernel *k = &p->kernels[l->kernel];
        Rule r;
        if (rule_of(k, k->n_bins ? k->bins[0].config : "", &r)) {
            bad(&c, i, k, "family %s has no contract in this runtime (a newer kiln's package?)", k->family);
            break;
        }
        if (r.missing[0]) {
            bad(&c, i, k, "%s missing", r.missing);
            break;
        }
        for (int a = 0; a < l->n_args && !c.s; a++)
            check_arg(&c, i, k, l, &r, a);
        /* dataflow: a launch loads an activation only after an earlier one stored it (a param the kernel
         * both loads and stores is its own scratch: split-K slices) */
        for (int a = 0; a < l->n_args && !c.s; a++) {
            const RtPlanArg *x = &l->args[a];
            if (x->kind == RT_ARG_ACT && k->param_mem[a] == RT_PLAN_LOADS && !written[x->index])
                bad(&c, i, k, "param %s reads %s before any step writes it (steps deleted or out of order)",
                    k->param_names[a], p->bufs[x->index].name);
        }
        /* one writer per value: a launch stores into an activation no other launch stores (the graph's
         * values are SSA), except a scratch its params both load and store in every launch that uses it
         * (split-K slices) and split attention's output, which its merge (the next step) writes when the
         * keys were split; and within a launch, a buffer it stores is bound to that param only */
        for (int a = 0; a < l->n_args && !c.s; a++) {
            const RtPlanArg *x = &l->args[a];
            if (x->kind != RT_ARG_ACT || !(k->param_mem[a] & RT_PLAN_STORES)) continue;
            int scratch = k->param_mem[a] == (RT_PLAN_LOADS | RT_PLAN_STORES);
            int merge = !strcmp(k->family, "attention_merge") && writer[x->index] == i - 1 &&
                        !strcmp(p->kernels[p->launches[i - 1].kernel].family, "attention");
            if (written[x->index] && !merge && (written[x->index] != 2 || !scratch))
                bad(&c, i, k, "param %s writes %s, which an earlier step wrote (one writer per value)",
                    k->param_names[a], p->bufs[x->index].name);
            for (int o = 0; o < l->n_args && !c.s; o++)
                if (o != a && l->args[o].kind == RT_ARG_ACT && l->args[o].index == x->index)
                    bad(&c, i, k, "params %s and %s are both bound to %s, which the kernel writes",
                        k->param_names[a], k->param_names[o], p->bufs[x->index].name);
            if (!c.s) written[x->index] = scratch ? 2 : 1, writer[x->index] = i;
        }
    }
    for (int b = 0; b < p->n_bufs && !c.s; b++)
        if (p->bufs[b].output && p->bufs[b].kind == RT_BUF_ACT && !written[b])
            c.s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                               "%s: output %s (buffer %s) is written by no step of the launch plan", path,
                               p->bufs[b].output, p->bufs[b].name);
    free(written), free(writer);
    return c.s;
}
