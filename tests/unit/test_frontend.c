/* test_frontend.c — the recipe frontend: graphs from tiny recipes, config selection and --set overrides,
 * and every sandbox limit, each error checked for its exact "file:line:" prefix. Recipes are written to a
 * fresh temporary directory; run under ASan to prove no path leaks.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/fe.h"
#include "kt.h"

static char dir[256];
static char paths[128][512];
static int n_paths;

/* Writes text to dir/name; returns the path (kept for cleanup). */
static const char *put(const char *name, const char *text)
{
    char *p = paths[n_paths++];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) {
        perror(p);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
    return p;
}

static GirGraph *build(const char *path, const FeOptions *o, IrDiag *d)
{
    GirGraph *g = (GirGraph *)1;
    ir_diag_clear(d);
    IrStatus s = fe_recipe_build(path, o, &g, d);
    KT_CHECK((s == IR_OK) == (g != NULL), "status %d but graph %p", (int)s, (void *)g);
    KT_CHECK(s == d->status, "returned %d, diag %d", (int)s, (int)d->status);
    return g;
}

/* Builds and expects failure: status `want` (0: any), message "path:line: ..." (line 0: "path: ...")
 * containing `sub`, on one line. */
static void expect_err_status(const char *path, const FeOptions *o, IrStatus want, int line, const char *sub)
{
    IrDiag d;
    GirGraph *g = build(path, o, &d);
    KT_CHECK(g == NULL, "%s: expected an error containing '%s'", path, sub);
    if (getenv("KT_VERBOSE")) fprintf(stderr, "  %s\n", d.msg);
    gir_graph_destroy(g);
    char prefix[600];
    if (line > 0)
        snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
    else
        snprintf(prefix, sizeof prefix, "%s: ", path);
    KT_CHECK(strncmp(d.msg, prefix, strlen(prefix)) == 0, "want prefix '%s', got '%s'", prefix, d.msg);
    KT_CHECK(strstr(d.msg, sub) != NULL, "want '%s' in '%s'", sub, d.msg);
    KT_CHECK(strchr(d.msg, '\n') == NULL, "message has a newline: '%s'", d.msg);
    if (want)
        KT_CHECK(d.status == want, "want status %s, got %s (%s)", ir_status_name(want),
                 ir_status_name(d.status), d.msg);
}

static void expect_err(const char *path, const FeOptions *o, int line, const char *sub)
{
    expect_err_status(path, o, 0, line, sub);
}

/* Puts `body` inside a one-config recipe whose build function starts on line 2, so body line k is
 * recipe line k + 1. */
static const char *put_build(const char *name, const char *body)
{
    static char text[8192];
    snprintf(text, sizeof text,
             "recipe { name = 't', configs = { a = { n = 8 } }, build = function(g, cfg)\n%s\nend }\n", body);
    return put(name, text);
}

static const char *tiny_recipe =
    "-- a tiny model: every line number below is checked by the tests\n"                        /* 1 */
    "recipe {\n"                                                                                /* 2 */
    "  name = 'tiny',\n"                                                                        /* 3 */
    "  default = 'small',\n"                                                                    /* 4 */
    "  configs = {\n"                                                                           /* 5 */
    "    small = { hidden = 64, heads = 4, vocab = 100, eps = 1e-5, tied = true,\n"             /* 6 */
    "              act = 'silu', rope = { theta = 10000.0 } },\n"                               /* 7 */
    "    big = { hidden = 128, heads = 8, vocab = 100, eps = 1e-6, tied = false,\n"             /* 8 */
    "            act = 'silu', rope = { theta = 500000.0 } },\n"                                /* 9 */
    "  },\n"                                                                                    /* 10 */
    "  build = function(g, cfg)\n"                                                              /* 11 */
    "    local C, H = cfg.hidden, cfg.heads\n"                                                  /* 12 */
    "    local ids = g:input('tokens', 'i32', {'T'})\n"                                         /* 13 */
    "    local pos = g:input('positions', 'i32', {'T'})\n"                                      /* 14 */
    "    local emb = g:weight('model.embed_tokens.weight', 'bf16', {cfg.vocab, C})\n"           /* 15 */
    "    local x = g:embedding(ids, emb)\n"                                                     /* 16 */
    "    assert(tostring(x) == '%3: bf16[T,' .. C .. ']', tostring(x))\n"                       /* 17 */
    "    assert(x.dtype == 'bf16' and x.rank == 2 and x.shape[1] == 'T' and x.shape[2] == C)\n" /* 18 */
    "    local w = g:weight('norm.weight', 'bf16', {C})\n"                                      /* 19 */
    "    local h = g:rms_norm(x, w, {eps = cfg.eps})\n"                                         /* 20 */
    "    local q = g:matmul(h, g:weight('q.weight', 'bf16', {C, C}))\n"                         /* 21 */
    "    q = g:rope(q, pos, {theta = cfg.rope.theta, head_dim = C // H, heads = H})\n"          /* 22 */
    "    local n, s = g:add_rms_norm(q, x, w, {eps = cfg.eps})\n"                               /* 23 */
    "    assert(n ~= s and n == n and tostring(s):match('bf16%[T,'))\n"                         /* 24 */
    "    local rows = g:input('rows', 'i32', {'R'})\n"                                          /* 25 */
    "    g:output('logits', g:logits(n, emb, rows))\n"                                          /* 26 */
    "    g:output('sum', s)\n"                                                                  /* 27 */
    "    cfg.head_dim = C // H\n"                                                               /* 28 */
    "  end,\n"                                                                                  /* 29 */
    "}\n";

static const GirAttr *cfg_find(const GirGraph *g, const char *key)
{
    for (int i = 0; i < g->n_cfg; i++)
        if (strcmp(g->cfg[i].key, key) == 0) return &g->cfg[i];
    return NULL;
}

static const GirNode *find_op(const GirGraph *g, GirOp op)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == op) return g->nodes[i];
    return NULL;
}

static void test_tiny_graph(void)
{
    const char *p = put("tiny.lua", tiny_recipe);
    FeOptions o = fe_options_default();
    IrDiag d;
    GirGraph *g = build(p, &o, &d);
    KT_CHECK(g != NULL, "tiny: %s", d.msg);
    if (!g) return;
    KT_CHECK(strcmp(g->name, "tiny") == 0 && g->model && strcmp(g->model, "small") == 0, "name/model");
    KT_CHECK(g->n_nodes == 14, "nodes %d", g->n_nodes);
    KT_CHECK(gir_verify(g, &d) == IR_OK, "verify: %s", d.msg);

    const GirNode *rope = find_op(g, GIR_OP_ROPE);
    KT_CHECK(rope && rope->loc.line == 22 && strcmp(rope->loc.file, p) == 0, "rope loc");
    KT_CHECK(rope && gir_attr_i(rope, "heads", 0) == 4 && gir_attr_i(rope, "head_dim", 0) == 16 &&
                 gir_attr_f(rope, "theta", 0) == 10000.0,
             "rope attrs");
    /* attributes are stored in schema order, whatever order the table had */
    KT_CHECK(rope && rope->n_attr == 3 && strcmp(rope->attr[0].key, "heads") == 0 &&
                 strcmp(rope->attr[1].key, "head_dim") == 0 && strcmp(rope->attr[2].key, "theta") == 0,
             "rope attr order");
    const GirNode *arn = find_op(g, GIR_OP_ADD_RMS_NORM);
    KT_CHECK(arn && arn->n_out == 2, "add_rms_norm has two outputs");
    const GirNode *lg = find_op(g, GIR_OP_LOGITS);
    if (lg) {
        IrBuf b = {0};
        gir_type_print(g, &lg->out[0]->type, &b);
        KT_CHECK(b.s && strcmp(b.s, "f32[R,100]") == 0, "logits type %s", b.s ? b.s : "?");
        ir_buf_free(&b);
    }
    /* config: scalars only, sorted, with the entry build() added */
    static const char *keys[] = {"act", "eps", "head_dim", "heads", "hidden", "tied", "vocab"};
    KT_CHECK(g->n_cfg == 7, "n_cfg %d", g->n_cfg);
    for (int i = 0; i < g->n_cfg && i < 7; i++)
        KT_CHECK(strcmp(g->cfg[i].key, keys[i]) == 0, "cfg[%d] = %s", i, g->cfg[i].key);
    const GirAttr *a;
    KT_CHECK((a = cfg_find(g, "hidden")) && a->kind == GIR_ATTR_INT && a->i == 64, "hidden");
    KT_CHECK((a = cfg_find(g, "eps")) && a->kind == GIR_ATTR_FLOAT && a->f == 1e-5, "eps");
    KT_CHECK((a = cfg_find(g, "tied")) && a->kind == GIR_ATTR_INT && a->i == 1, "tied");
    KT_CHECK((a = cfg_find(g, "act")) && a->kind == GIR_ATTR_STR && strcmp(a->s, "silu") == 0, "act");
    KT_CHECK(cfg_find(g, "rope") == NULL, "tables are not recorded");

    /* the printed form is the same on every run (no hash-order dependence) */
    IrBuf b1 = {0}, b2 = {0};
    gir_print(g, 0, &b1);
    GirGraph *g2 = build(p, &o, &d);
    if (g2) gir_print(g2, 0, &b2);
    KT_CHECK(b1.s && b2.s && strcmp(b1.s, b2.s) == 0, "print differs between runs");
    ir_buf_free(&b1);
    ir_buf_free(&b2);
    gir_graph_destroy(g2);
    gir_graph_destroy(g);
}

static void test_models_and_sets(void)
{
    const char *p = put("tiny2.lua", tiny_recipe);
    FeOptions o = fe_options_default();
    IrDiag d;

    o.model = "big";
    GirGraph *g = build(p, &o, &d);
    const GirAttr *a;
    KT_CHECK(g && strcmp(g->model, "big") == 0 && (a = cfg_find(g, "hidden")) && a->i == 128, "model big");
    gir_graph_destroy(g);

    o.model = "huge";
    expect_err(p, &o, 0, "unknown model 'huge' (known: big, small)");
    o.model = NULL;

    const char *sets[] = {"hidden=128", "eps=2.5e-6", "tied=false", "act=gelu", "heads=2"};
    o.sets = sets;
    o.n_sets = 5;
    g = build(p, &o, &d);
    KT_CHECK(g != NULL, "sets: %s", d.msg);
    if (g) {
        KT_CHECK((a = cfg_find(g, "hidden")) && a->kind == GIR_ATTR_INT && a->i == 128, "set int");
        KT_CHECK((a = cfg_find(g, "eps")) && a->kind == GIR_ATTR_FLOAT && a->f == 2.5e-6, "set float");
        KT_CHECK((a = cfg_find(g, "tied")) && a->kind == GIR_ATTR_INT && a->i == 0, "set bool");
        KT_CHECK((a = cfg_find(g, "act")) && a->kind == GIR_ATTR_STR && strcmp(a->s, "gelu") == 0,
                 "set string");
        KT_CHECK((a = cfg_find(g, "head_dim")) && a->i == 64, "build saw the overrides");
    }
    gir_graph_destroy(g);

    const char *s1[] = {"eps=3"}; /* an integer text for a float key stays a float */
    o.sets = s1;
    o.n_sets = 1;
    g = build(p, &o, &d);
    KT_CHECK(g && (a = cfg_find(g, "eps")) && a->kind == GIR_ATTR_FLOAT && a->f == 3.0, "eps=3");
    gir_graph_destroy(g);

    struct {
        const char *set, *msg;
    } bad[] = {
        {"nope=1", "--set: unknown config key 'nope' for model 'small'"},
        {"hidden=12.5", "--set: config key 'hidden' is an integer in -2147483648..2147483647, got '12.5'"},
        {"hidden=", "--set: config key 'hidden' is an integer in -2147483648..2147483647, got ''"},
        {"hidden=99999999999999999999", "is an integer"},
        {"eps=abc", "--set: config key 'eps' is a number, got 'abc'"},
        {"eps=inf", "is a number"},
        {"tied=yes", "--set: config key 'tied' is a boolean (true or false), got 'yes'"},
        {"rope=1", "--set: config key 'rope' is a table and cannot be set from the command line"},
        {"hidden", "--set: expected key=value, got 'hidden'"},
        {"=4", "--set: expected key=value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.sets = &bad[i].set;
        o.n_sets = 1;
        expect_err_status(p, &o, IR_ERR_INPUT, 0, bad[i].msg);
    }

    IrBuf names = {0};
    o = fe_options_default();
    IrDiag dm = {0};
    KT_CHECK(fe_recipe_models(p, &o, &names, &dm) == IR_OK, "models: %s", dm.msg);
    KT_CHECK(names.s && strcmp(names.s, "small (default)\nbig\n") == 0, "models list '%s'",
             names.s ? names.s : "");
    ir_buf_free(&names);

    /* no default: one config is its own default; several need --model */
    const char *one =
        put("one.lua", "recipe { name = 'one', configs = { x = { n = 1 } },\n"
                       "  build = function(g, cfg) g:output('o', g:input('i', 'f32', {4})) end }\n");
    g = build(one, NULL, &d);
    KT_CHECK(g && strcmp(g->model, "x") == 0, "single config is the default");
    gir_graph_destroy(g);
    const char *two =
        put("two.lua", "recipe { name = 'two', configs = { y = {}, x = {} },\n"
                       "  build = function(g, cfg) g:output('o', g:input('i', 'f32', {4})) end }\n");
    expect_err(two, NULL, 0, "no default config; choose one with --model (known: x, y)");
    dm = (IrDiag){0};
    KT_CHECK(fe_recipe_models(two, NULL, &names, &dm) == IR_OK && names.s && strcmp(names.s, "x\ny\n") == 0,
             "models without default '%s'", names.s ? names.s : "");
    ir_buf_free(&names);

    /* limits: --set values and the configs' own values inside the declared ranges and sets */
    const char *lim =
        put("lim.lua", "recipe { name = 'lim', default = 'a',\n"
                       "  configs = { a = { n = 2, eps = 1e-5, dt = 'f32' }, b = { n = 0 } },\n"
                       "  limits = { n = { min = 1, max = 64 }, eps = { min = 1e-9, max = 1.0 },\n"
                       "             dt = { one_of = { 'f32', 'bf16' } } },\n"
                       "  build = function(g, cfg) g:output('o', g:input('i', 'f32', {4})) end }\n");
    struct {
        const char *set, *msg;
    } out[] = {
        {"n=0", "lim.lua: --set n=0: n wants a whole number in 1..64 (the recipe's limits)"},
        {"n=-1", "--set n=-1: n wants a whole number in 1..64"},
        {"n=65", "--set n=65: n wants a whole number in 1..64"},
        {"eps=0", "--set eps=0: eps wants a number in [1e-09, 1]"},
        {"eps=2", "--set eps=2: eps wants a number in [1e-09, 1]"},
        {"dt=i32", "--set dt=i32: dt wants one of f32, bf16 (the recipe's limits)"},
    };
    o = fe_options_default();
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        o.sets = &out[i].set;
        o.n_sets = 1;
        expect_err_status(lim, &o, IR_ERR_INPUT, 0, out[i].msg);
    }
    const char *in[] = {"n=64", "eps=1", "dt=bf16"};
    o.sets = in;
    o.n_sets = 3;
    g = build(lim, &o, &d);
    KT_CHECK(g && (a = cfg_find(g, "n")) && a->i == 64, "sets inside the limits: %s", g ? "" : d.msg);
    gir_graph_destroy(g);
    o = fe_options_default();
    o.model = "b";
    expect_err_status(lim, &o, IR_ERR_INPUT, 1, "config 'b': n = 0 is outside the recipe's limits");
    const char *s_b[] = {"n=3"};
    o.sets = s_b, o.n_sets = 1;
    g = build(lim, &o, &d);
    KT_CHECK(g != NULL, "a --set brings config b inside the limits: %s", d.msg);
    gir_graph_destroy(g);
    expect_err_status(
        put("limtypo.lua",
            "recipe { name = 'x', configs = { a = { n = 1 } }, limits = { m = { min = 1, max = 2 } },\n"
            "  build = function(g, cfg) g:output('o', g:input('i', 'f32', {4})) end }\n"),
        NULL, IR_ERR_INPUT, 1, "recipe: limits name 'm', which no config has");
    expect_err_status(
        put("limform.lua", "recipe { name = 'x', configs = { a = { n = 1 } }, limits = { n = { min = 1 } },\n"
                           "  build = function(g, cfg) g:output('o', g:input('i', 'f32', {4})) end }\n"),
        NULL, IR_ERR_INPUT, 1, "recipe: limits['n'] must be {min = N, max = N} or {one_of = {...}}");
}

static void test_recipe_errors(void)
{
    FeOptions o = fe_options_default();
    expect_err(put("syntax.lua", "recipe {\n  name = 'x',\n  configs = { a = {} }\n  build = 1,\n}\n"), &o, 4,
               "'}' expected");
    expect_err(put("norecipe.lua", "local x = 1\n"), &o, 0, "never calls recipe{...}");
    expect_err(put("twice.lua", "local r = { name = 'x', configs = { a = {} }, build = function() end }\n"
                                "recipe(r)\nrecipe(r)\n"),
               &o, 3, "recipe{...} is called twice (first at line 2)");
    expect_err(put("field.lua", "recipe { name = 'x', configs = { a = {} }, bulid = function() end }\n"), &o,
               1, "unknown field 'bulid'");
    expect_err(put("dflt.lua", "recipe { name = 'x', default = 'c', configs = { a = {}, b = {} },\n"
                               "  build = function() end }\n"),
               &o, 1, "default 'c' is not one of the configs (known: a, b)");
    expect_err(put("noout.lua", "recipe { name = 'x', configs = { a = {} },\n"
                                "  build = function(g, cfg)\n    g:input('i', 'f32', {4})\n  end }\n"),
               &o, 2, "made no outputs");
    expect_err(put("raise.lua", "recipe { name = 'x', configs = { a = {} },\n"
                                "  build = function(g, cfg)\n    error('boom')\n  end }\n"),
               &o, 3, "boom");
    expect_err(put("raise0.lua", "recipe { name = 'x', configs = { a = {} },\n"
                                 "  build = function(g, cfg)\n    error({})\n  end }\n"),
               &o, 3, "error object is a table value");
    expect_err_status(put("bin.lua", "\x1bLua\x54\x00garbage"), &o, IR_ERR_INPUT, 0, "binary chunk");
    char missing[600];
    snprintf(missing, sizeof missing, "%s/missing.lua", dir);
    expect_err_status(missing, &o, IR_ERR_IO, 0, "cannot open");

    /* a long path: Lua shortens chunk names to "...tail", messages still carry the full path */
    char sub[600];
    snprintf(sub, sizeof sub, "%s/a_rather_long_directory_name_to_push_past_sixty_characters", dir);
    if (mkdir(sub, 0700) == 0) {
        char name[400];
        snprintf(name, sizeof name, "a_rather_long_directory_name_to_push_past_sixty_characters/long.lua");
        const char *p = put(name, "recipe { name = 'x', configs = { a = {} },\n"
                                  "  build = function(g, cfg)\n    local x = 1 +\n  end }\n");
        expect_err(p, &o, 4, "unexpected symbol");
        p = put("a_rather_long_directory_name_to_push_past_sixty_characters/long2.lua",
                "recipe { name = 'x', configs = { a = {} },\n  build = function(g, cfg)\n    error('deep')\n"
                "  end }\n");
        expect_err(p, &o, 3, "deep");
    }
}

static void test_build_errors(void)
{
    FeOptions o = fe_options_default();
    expect_err(put_build("unknown_op.lua", "  local x = g:input('x', 'bf16', {'T', 8})\n"
                                           "  local y = g:flash_attn(x)"),
               &o, 3, "unknown op 'flash_attn'");
    expect_err_status(put_build("rope.lua", "  local x = g:input('x', 'bf16', {'T', 4096})\n"
                                            "  local p = g:input('p', 'i32', {'T'})\n"
                                            "  g:rope(x, p, {heads = 32, head_dim = 100, theta = 1e4})"),
                      &o, IR_ERR_SHAPE, 4, "rope: x has 4096 channels, which is not 32 heads x head_dim 100");
    expect_err(put_build("attr.lua", "  local x = g:input('x', 'bf16', {'T', 8})\n"
                                     "  local w = g:weight('w', 'bf16', {8})\n"
                                     "  g:rms_norm(x, w, {eps = 1e-5, bogus = 1})"),
               &o, 4, "rms_norm: unknown attribute 'bogus'");
    expect_err(put_build("attrval.lua", "  local x = g:input('x', 'bf16', {'T', 8})\n"
                                        "  local w = g:weight('w', 'bf16', {8})\n"
                                        "  g:rms_norm(x, w, {eps = {}})"),
               &o, 4, "rms_norm: attribute 'eps' is a table");
    expect_err(put_build("wnil.lua", "  g:weight(nil, 'bf16', {4, 4})"), &o, 2,
               "weight needs its checkpoint name");
    expect_err(put_build("wempty.lua", "\n  g:weight('', 'bf16', {4, 4})"), &o, 3,
               "weight needs its checkpoint name");
    expect_err(put_build("dtype.lua", "  g:input('x', 'bf17', {4})"), &o, 2, "unknown dtype 'bf17'");
    expect_err(put_build("shape.lua", "  g:input('x', 'f32', {4, -1})"), &o, 2, "dimension 2 is -1");
    expect_err(put_build("shape5.lua", "  g:input('x', 'f32', {1, 2, 3, 4, 5})"), &o, 2, "5 dimensions");
    expect_err(put_build("dup.lua", "  g:weight('w', 'f32', {4})\n  g:weight('w', 'f32', {4})"), &o, 3,
               "declared twice");
    expect_err(put_build("notensor.lua", "  local x = g:input('x', 'bf16', {'T', 8})\n  g:add(x, nil)"), &o,
               3, "add: input 2 is nil, not a tensor");
    expect_err(put_build("dot.lua", "  local x = g:input('x', 'bf16', {'T', 8})\n  g.add(x, x)"), &o, 3,
               "call graph methods with ':'");
    expect_err(put_build("tfield.lua", "  local x = g:input('x', 'bf16', {'T', 8})\n  local s = x.shap"), &o,
               3, "tensor has no field 'shap'");
    expect_err(put_build("global.lua", "  local n = cfg.n + undefined_thing"), &o, 2,
               "unknown global 'undefined_thing'");
    expect_err(put_build("arity.lua", "  local x = g:input('x', 'bf16', {'T', 8})\n  g:add(x)"), &o, 3,
               "add takes 2 tensor inputs, got 1");
    expect_err(put_build("gqa.lua", "  local T = 'T'\n"
                                    "  local q = g:input('q', 'bf16', {T, 32 * 8})\n"
                                    "  local kc = g:input('kc', 'bf16', {'P', 16, 5, 8})\n"
                                    "  local vc = g:input('vc', 'bf16', {'P', 16, 5, 8})\n"
                                    "  local bt = g:input('bt', 'i32', {'B', 'MP'})\n"
                                    "  local sl = g:input('sl', 'i32', {'B'})\n"
                                    "  local cq = g:input('cq', 'i32', {'B1'})\n"
                                    "  g:attention(q, kc, vc, bt, sl, cq, {mode = 'decode', causal = true,\n"
                                    "    heads = 32, kv_heads = 5, head_dim = 8, page_size = 16})"),
               &o, 9, "heads 32 is not a whole multiple of kv_heads 5");
    expect_err(put_build("outdup.lua", "  local x = g:input('x', 'bf16', {'T', 8})\n"
                                       "  g:output('o', x)\n  g:output('o', x)"),
               &o, 4, "output 'o' is declared twice (first at line 3)");
}

/* A stand-in for kiln compile's reader: "w.q" is stored q4_k, "w.f" as a float, anything else missing. */
static int fake_file_dtype(void *ctx, const char *path, const char *name, const char *fallback, char *out,
                           int outlen, char *err, int errlen)
{
    ++*(int *)ctx;
    if (!strcmp(name, "w.q") || !strcmp(name, "w.f")) {
        snprintf(out, (size_t)outlen, "%s", !strcmp(name, "w.q") ? "q4_k" : fallback);
        return 0;
    }
    snprintf(err, (size_t)errlen, "%s: missing tensor %s", path, name);
    return -1;
}

/* g:file_dtype(path, name, fallback): the caller's reader decides; without one, an error at the line. */
static void test_file_dtype(void)
{
    const char *body = "  local q = g:weight('w.q', g:file_dtype('m.gguf', 'w.q', 'bf16'), {256, 256})\n"
                       "  local f = g:weight('w.f', g:file_dtype('m.gguf', 'w.f', 'bf16'), {256, 256})\n"
                       "  g:output('o', g:matmul(g:matmul(g:input('x', 'bf16', {'T', 256}), q), f))";
    const char *path = put_build("file_dtype.lua", body);
    FeOptions o = fe_options_default();
    expect_err_status(path, &o, IR_ERR_UNSUPPORTED, 2, "file_dtype: this caller reads no weights files");
    int calls = 0;
    o.file_dtype = fake_file_dtype, o.file_dtype_ctx = &calls;
    IrDiag d;
    GirGraph *g = build(path, &o, &d);
    KT_CHECK(g && calls == 2, "file_dtype: %s (%d calls)", g ? "built" : d.msg, calls);
    int q4k = 0, bf16 = 0;
    for (int i = 0; g && i < g->n_nodes; i++) {
        const GirNode *n = g->nodes[i];
        if (n->op != GIR_OP_WEIGHT) continue;
        const char *dt = gir_dtype_name(n->out[0]->type.dtype);
        q4k += !strcmp(dt, "q4_k"), bf16 += !strcmp(dt, "bf16");
    }
    KT_CHECK(q4k == 1 && bf16 == 1, "file_dtype: weights q4_k %d, bf16 %d", q4k, bf16);
    gir_graph_destroy(g);
    expect_err(put_build("file_dtype_missing.lua",
                         "\n  g:weight('w.x', g:file_dtype('m.gguf', 'w.x', 'bf16'), {4})"),
               &o, 3, "m.gguf: missing tensor w.x");
    expect_err(put_build("file_dtype_args.lua", "  g:file_dtype('m.gguf', 'w.q')"), &o, 2,
               "file_dtype(path, name, fallback): argument 3 must be a non-empty string");
}

static void test_sandbox(void)
{
    FeOptions o = fe_options_default();
    static const struct {
        const char *name, *body, *sub;
    } globals[] = {
        {"io.lua", "  local f = io.open('/etc/passwd')", "unknown global 'io' (recipes run sandboxed"},
        {"os.lua", "  os.execute('true')", "unknown global 'os'"},
        {"require.lua", "  local m = require('os')", "unknown global 'require'"},
        {"dofile.lua", "  dofile('/etc/passwd')", "unknown global 'dofile'"},
        {"loadfile.lua", "  loadfile('/etc/passwd')", "unknown global 'loadfile'"},
        {"load.lua", "  load('\\27Lua')", "unknown global 'load'"},
        {"debug.lua", "  debug.getinfo(1)", "unknown global 'debug'"},
        {"collect.lua", "  collectgarbage()", "unknown global 'collectgarbage'"},
        {"coroutine.lua", "  coroutine.wrap(print)", "unknown global 'coroutine'"},
        {"package.lua", "  local p = package.path", "unknown global 'package'"},
    };
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        expect_err(put_build(globals[i].name, globals[i].body), &o, 2, globals[i].sub);
    expect_err(put_build("dump.lua", "  local s = string.dump(print)"), &o, 2, "attempt to call a nil value");
    expect_err(put_build("random.lua", "  local r = math.random()"), &o, 2, "attempt to call a nil value");
    expect_err(put_build("gc.lua", "  setmetatable({}, {__gc = function() while true do end end})"), &o, 2,
               "__gc metamethods are not allowed");
    expect_err(put_build("gmeta.lua", "  setmetatable(_G, nil)"), &o, 2, "protected metatable");

    /* instruction limit: the default once, a small one otherwise; a recipe pcall cannot swallow it */
    expect_err_status(put_build("loop.lua", "  local i = 0\n  while true do i = i + 1 end"), &o, IR_ERR_LIMIT,
                      3, "instruction limit of 50000000 exceeded (endless loop?)");
    FeOptions small = o;
    small.instr_limit = 200000;
    expect_err_status(put_build("pcall_loop.lua",
                                "  while true do\n    pcall(function() while true do end end)\n"
                                "  end"),
                      &small, IR_ERR_LIMIT, 3, "instruction limit of 200000 exceeded");
    expect_err_status(put_build("xpcall_loop.lua", "  xpcall(function() while true do end end,\n"
                                                   "         function(e) while true do end end)"),
                      &small, IR_ERR_LIMIT, 2, "instruction limit of 200000 exceeded");

    /* memory limit: a table of strings, the default cap; then graph nodes against a small cap */
    expect_err_status(put_build("bomb.lua", "  local t = {}\n  for i = 1, math.huge do\n"
                                            "    t[i] = string.rep('x', 1000) .. i\n  end"),
                      &o, IR_ERR_NOMEM, 4, "memory limit of 64 MiB exceeded");
    expect_err_status(put_build("bomb_pcall.lua",
                                "  local t = {}\n  pcall(function()\n"
                                "    while true do t[#t + 1] = string.rep('y', 4096) .. #t end\n"
                                "  end)\n  g:output('o', g:input('i', 'f32', {4}))"),
                      &o, IR_ERR_NOMEM, 4, "memory limit of 64 MiB exceeded");
    FeOptions tiny = o;
    tiny.mem_limit = 2 * 1024 * 1024;
    expect_err_status(put_build("nodes.lua", "  local x = g:input('x', 'bf16', {'T', 8})\n"
                                             "  for i = 1, 1e7 do\n    x = g:add(x, x)\n  end"),
                      &tiny, IR_ERR_NOMEM, 4, "memory limit of 2 MiB exceeded");
    tiny.mem_limit = 1000;
    expect_err_status(put_build("start.lua", "  g:output('o', g:input('i', 'f32', {4}))"), &tiny,
                      IR_ERR_NOMEM, 0, "memory limit of 1000 bytes");
    expect_err(put_build("recurse.lua", "  local function f(n) return 1 + f(n + 1) end\n  f(1)"), &o, 2,
               "stack overflow");

    /* C loops the count hook cannot see are charged up front */
    expect_err_status(put_build("move.lua", "  table.move({}, 1, 1e12, 1, {})"), &o, IR_ERR_LIMIT, 2,
                      "instruction limit of 50000000 exceeded by table.move");
    expect_err_status(put_build("pattern.lua", "  local s = string.rep('a', 3000)\n"
                                               "  local i = s:find('.-.-.-.-.-.-b')"),
                      &o, IR_ERR_LIMIT, 3, "exceeded by a string pattern");
    expect_err_status(put_build("gsub.lua", "  local s = string.rep('a', 3000)\n"
                                            "  s = s:gsub('(a*)*b', '')"),
                      &o, IR_ERR_LIMIT, 3, "exceeded by a string pattern");

    expect_err_status(
        put_build("insert.lua", "  local t = {}\n  for i = 1, 1e6 do table.insert(t, 1, i) end"), &o,
        IR_ERR_LIMIT, 3, "exceeded by table.insert/remove");
    /* allocation volume is charged: churning through big strings ends, though memory stays low */
    expect_err_status(put_build("churn.lua", "  local n = 0\n"
                                             "  for i = 1, 1e7 do n = n + #string.rep('x', 1 << 20) end"),
                      &o, IR_ERR_LIMIT, 3, "instruction limit of 50000000 exceeded");
    /* the wall-clock backstop (2 s at least): comparing two 1 MiB strings costs one instruction */
    small.instr_limit = 2000000;
    expect_err_status(put_build("clock.lua",
                                "  local a, b = string.rep('x', 1 << 20), string.rep('x', 1 << 20)\n"
                                "  local n = 0\n"
                                "  for i = 1, 1e9 do if a == b then n = n + 1 end end"),
                      &small, IR_ERR_LIMIT, 4, "time limit of 2 s exceeded");

    /* allowed: print, pcall of ordinary errors, string/table/math/utf8 */
    const char *ok = put_build(
        "allowed.lua", "  local okp, e = pcall(error, 'caught')\n"
                       "  assert(not okp and e == 'caught')\n"
                       "  assert(utf8.len('ab') == 2 and math.max(1, 2) == 2)\n"
                       "  local t = {3, 1, 2}; table.sort(t); assert(t[1] == 1)\n"
                       "  assert(('%d'):format(7) == '7')\n"
                       "  assert(string.rep('', 1e12) == '' and ('ab'):rep(2, ',') == 'ab,ab')\n"
                       "  assert(('model.layers.3.mlp'):gsub('%.', '_') == 'model_layers_3_mlp')\n"
                       "  assert(('a.b'):find('.', 1, true) == 2 and ('x_12'):match('^(%a)_(%d+)$') == 'x')\n"
                       "  local n = 0; for w in ('a b c'):gmatch('%S+') do n = n + 1 end; assert(n == 3)\n"
                       "  local m = table.move({1, 2, 3}, 1, 3, 2, {}); assert(m[4] == 3)\n"
                       "  print('frontend test print', 1, true)\n"
                       "  g:output('o', g:input('i', 'f32', {4}))");
    IrDiag d;
    GirGraph *g = build(ok, &o, &d);
    KT_CHECK(g != NULL, "allowed: %s", d.msg);
    gir_graph_destroy(g);
}

/* Every allocation point can hit the cap: sweep the limit up from too small until the recipe builds;
 * each failure must be a clean memory-limit error (and, under ASan, leak nothing). */
static void test_memory_sweep(void)
{
    const char *p = put("sweep.lua", tiny_recipe);
    FeOptions o = fe_options_default();
    int built = 0, failed = 0;
    for (size_t lim = 1024; lim < 1024 * 1024 && !built; lim += 64) {
        o.mem_limit = lim;
        IrDiag d;
        GirGraph *g = build(p, &o, &d);
        if (g) {
            built = 1;
            KT_CHECK(gir_verify(g, &d) == IR_OK, "sweep verify: %s", d.msg);
            gir_graph_destroy(g);
        } else {
            failed++;
            KT_CHECK(d.status == IR_ERR_NOMEM && strstr(d.msg, "memory limit of") &&
                         strncmp(d.msg, p, strlen(p)) == 0,
                     "at %zu bytes: %s", lim, d.msg);
        }
    }
    KT_CHECK(built && failed > 10, "sweep built %d after %d failures", built, failed);
    if (getenv("KT_VERBOSE"))
        fprintf(stderr, "  sweep: built at %zu bytes after %d failures\n", o.mem_limit, failed);
}

static void test_defaults(void)
{
    FeOptions o = fe_options_default();
    KT_CHECK(o.model == NULL && o.sets == NULL && o.n_sets == 0, "defaults");
    KT_CHECK(o.mem_limit == 64u * 1024 * 1024 && o.instr_limit == 50000000L, "default limits");
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/kiln_fe_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_defaults();
    test_tiny_graph();
    test_models_and_sets();
    test_recipe_errors();
    test_build_errors();
    test_file_dtype();
    test_sandbox();
    test_memory_sweep();
    for (int i = n_paths - 1; i >= 0; i--)
        unlink(paths[i]);
    char sub[600];
    snprintf(sub, sizeof sub, "%s/a_rather_long_directory_name_to_push_past_sixty_characters", dir);
    rmdir(sub);
    rmdir(dir);
    return kt_done("frontend");
}
