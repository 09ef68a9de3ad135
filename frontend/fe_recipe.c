/* fe_recipe.c — the recipe{} declaration, config selection and --set overrides, and the two entry points.
 *
 * A recipe file runs once, top to bottom, and must call recipe{name, default, configs, build} exactly
 * once; the table is kept in the registry. Then (all inside one protected call, so no Lua error escapes):
 * pick the config (--model or the default), copy it, apply "key=value" overrides typed by the existing
 * value, check the result against the recipe's declared limits (a range per number, a set per string:
 * a value outside them is a one-line error before build runs, so `--set n_layers=-1` never reaches the
 * graph), create the graph, run build(g, cfg), require an output, and record the config's scalar entries
 * in sorted key order (so the graph text never depends on Lua's hash order).
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "cli/cli_num.h"
#include "fe_impl.h"

#define FE_RECIPE_KEY "kiln.recipe"

enum { FE_DEFAULT_MEM = 64 * 1024 * 1024 };
#define FE_DEFAULT_INSTR 50000000L

FeOptions fe_options_default(void)
{
    return (FeOptions){.mem_limit = FE_DEFAULT_MEM, .instr_limit = FE_DEFAULT_INSTR};
}

/* ---- helpers ------------------------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted string keys of the table at idx (other keys skipped). The array is a userdata left on the stack;
 * the strings stay valid while the table does. */
static const char **sorted_keys(lua_State *L, int idx, int *n)
{
    int count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        count += lua_type(L, -2) == LUA_TSTRING;
        lua_pop(L, 1);
    }
    const char **keys = lua_newuserdatauv(L, sizeof(char *) * (size_t)(count ? count : 1), 0);
    int k = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) == LUA_TSTRING) keys[k++] = lua_tostring(L, -2);
        lua_pop(L, 1);
    }
    qsort(keys, (size_t)k, sizeof *keys, cmp_str);
    *n = k;
    return keys;
}

/* "a, b, c" into buf (cut with "..." when long). */
static const char *join(const char **names, int n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < n && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", names[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    if (used >= len && len > 4) strcpy(buf + len - 4, "...");
    return buf;
}

/* ---- recipe{...} -------------------------------------------------------------------------------- */

static const char *const recipe_fields[] = {"name",        "default", "configs", "build",
                                            "description", "limits",  NULL};

static int recipe_fn(lua_State *L)
{
    FeCtx *c = fe_ctx(L);
    if (lua_type(L, 1) != LUA_TTABLE)
        return fe_error(L, IR_ERR_INPUT,
                        "recipe expects a table: recipe { name = ..., configs = ..., build = ... }");
    lua_settop(L, 1);
    if (c->recipe_line || lua_getfield(L, LUA_REGISTRYINDEX, FE_RECIPE_KEY) != LUA_TNIL)
        return fe_error(L, IR_ERR_INPUT, "recipe{...} is called twice (first at line %d)", c->recipe_line);
    lua_pop(L, 1);
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        int known = 0;
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        for (int i = 0; recipe_fields[i]; i++)
            known |= strcmp(k, recipe_fields[i]) == 0;
        if (!known)
            return fe_error(L, IR_ERR_INPUT,
                            "recipe: unknown field '%s' (fields: name, default, configs, build, description, "
                            "limits)",
                            k);
        lua_pop(L, 1);
    }
    if (lua_getfield(L, 1, "name") != LUA_TSTRING || !lua_tostring(L, -1)[0])
        return fe_error(L, IR_ERR_INPUT, "recipe: 'name' must be a non-empty string");
    fe_text(L, -1, FE_TEXT_NAME, "recipe: name", -1);
    if (lua_getfield(L, 1, "build") != LUA_TFUNCTION)
        return fe_error(L, IR_ERR_INPUT, "recipe: 'build' must be a function(g, cfg)");
    int t = lua_getfield(L, 1, "description");
    if (t != LUA_TNIL && t != LUA_TSTRING)
        return fe_error(L, IR_ERR_INPUT, "recipe: 'description' must be a string");
    if (lua_getfield(L, 1, "configs") != LUA_TTABLE)
        return fe_error(L, IR_ERR_INPUT, "recipe: 'configs' must be a table of named configs");
    int cfgs = lua_gettop(L), n = 0;
    lua_pushnil(L);
    while (lua_next(L, cfgs)) {
        if (lua_type(L, -2) != LUA_TSTRING || !lua_tostring(L, -2)[0])
            return fe_error(L, IR_ERR_INPUT, "recipe: config names must be non-empty strings");
        fe_text(L, -2, FE_TEXT_NAME, "recipe: config", -1);
        if (lua_type(L, -1) != LUA_TTABLE)
            return fe_error(L, IR_ERR_INPUT, "recipe: configs['%s'] must be a table of settings",
                            lua_tostring(L, -2));
        n++;
        lua_pop(L, 1);
    }
    if (n == 0) return fe_error(L, IR_ERR_INPUT, "recipe: 'configs' is empty");
    t = lua_getfield(L, 1, "limits");
    if (t != LUA_TNIL && t != LUA_TTABLE)
        return fe_error(L, IR_ERR_INPUT,
                        "recipe: 'limits' must be a table of key = {min = , max = } or "
                        "{one_of = {...}}");
    lua_pop(L, 1);
    t = lua_getfield(L, 1, "default");
    if (t != LUA_TNIL) {
        if (t != LUA_TSTRING) return fe_error(L, IR_ERR_INPUT, "recipe: 'default' must be a config name");
        if (lua_getfield(L, cfgs, lua_tostring(L, -1)) == LUA_TNIL) {
            char known[300];
            int nk;
            const char **names = sorted_keys(L, cfgs, &nk);
            return fe_error(L, IR_ERR_INPUT, "recipe: default '%s' is not one of the configs (known: %s)",
                            lua_tostring(L, -3), join(names, nk, known, sizeof known));
        }
    }
    c->recipe_line = fe_line(L, 1);
    if (!c->recipe_line) c->recipe_line = -1;
    lua_pushvalue(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, FE_RECIPE_KEY);
    return 0;
}

/* ---- config selection and overrides ------------------------------------------------------------- */

/* --set numbers follow the CLI's rules for option numbers (cli/cli_num.h): the whole text, strictly (no
 * space, '+', hex, nan or inf), so "n_layers=+2" and "rms_eps= 1e-5" are refused as "-j +2" is. */
static int parse_int(const char *s, lua_Integer *out)
{
    int64_t v;
    if (!cli_num_int_ok(s, INT64_MIN, INT64_MAX, &v)) return 0;
    *out = (lua_Integer)v;
    return 1;
}

static int parse_num(const char *s, lua_Number *out)
{
    double v;
    if (!cli_num_real_ok(s, -DBL_MAX, DBL_MAX, 0, &v)) return 0;
    *out = (lua_Number)v;
    return 1;
}

/* Applies one "key=value" to the config table at cfg; the key must exist and fixes the value's type. */
static void apply_set(lua_State *L, int cfg, const char *model, const char *set)
{
    if (!set) set = "";
    const char *eq = strchr(set, '=');
    if (!eq || eq == set) fe_error_at(L, IR_ERR_INPUT, 0, "--set: expected key=value, got '%s'", set);
    const char *val = eq + 1;
    lua_pushlstring(L, set, (size_t)(eq - set));
    const char *key = lua_tostring(L, -1);
    lua_pushvalue(L, -1);
    int t = lua_rawget(L, cfg);
    lua_Integer i = 0;
    lua_Number f = 0;
    switch (t) {
    case LUA_TNIL:
        fe_error_at(L, IR_ERR_INPUT, 0, "--set: unknown config key '%s' for model '%s'", key, model);
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, -1)) {
            if (!parse_int(val, &i) || i < INT32_MIN || i > INT32_MAX)
                fe_error_at(L, IR_ERR_INPUT, 0,
                            "--set: config key '%s' is an integer in -2147483648..2147483647, got '%s'", key,
                            val);
            lua_pushinteger(L, i);
        } else {
            if (!parse_num(val, &f))
                fe_error_at(L, IR_ERR_INPUT, 0, "--set: config key '%s' is a number, got '%s'", key, val);
            lua_pushnumber(L, f);
        }
        break;
    case LUA_TBOOLEAN:
        if (strcmp(val, "true") && strcmp(val, "false"))
            fe_error_at(L, IR_ERR_INPUT, 0, "--set: config key '%s' is a boolean (true or false), got '%s'",
                        key, val);
        lua_pushboolean(L, strcmp(val, "true") == 0);
        break;
    case LUA_TSTRING: lua_pushstring(L, val); break;
    default:
        fe_error_at(L, IR_ERR_INPUT, 0,
                    "--set: config key '%s' is a %s and cannot be set from the command line", key,
                    lua_typename(L, t));
    }
    lua_remove(L, -2); /* the old value */
    lua_rawset(L, cfg);
}

/* The last "--set key=..." of key, or NULL. */
static const char *set_of(const FeCtx *c, const char *key)
{
    const char *last = NULL;
    size_t n = strlen(key);
    for (int i = 0; i < c->opt.n_sets; i++)
        if (c->opt.sets[i] && !strncmp(c->opt.sets[i], key, n) && c->opt.sets[i][n] == '=')
            last = c->opt.sets[i];
    return last;
}

/* Raises the error for key's value outside its limit (want: "a whole number in 1..1024"): at the --set
 * that gave it, else at the recipe{} call for the config's own value. */
static void limit_error(lua_State *L, const FeCtx *c, const char *model, const char *key, const char *want)
{
    const char *set = set_of(c, key);
    if (set) fe_error_at(L, IR_ERR_INPUT, 0, "--set %s: %s wants %s (the recipe's limits)", set, key, want);
    fe_error_at(L, IR_ERR_INPUT, c->recipe_line > 0 ? c->recipe_line : 0,
                "config '%s': %s = %s is outside the recipe's limits: %s wants %s", model, key,
                luaL_tolstring(L, -1, NULL), key, want);
}

/* Checks every entry of the config at cfg that the recipe's limits (at lim) name: numbers against
 * {min = , max = } (both inclusive; an integer key's bounds are integers), strings against
 * {one_of = {...}}. A limit that names no setting of any config, or is not one of those two forms, is
 * the recipe's error. The value being checked is on top of the stack when limit_error raises. */
static void check_limits(lua_State *L, FeCtx *c, int lim, int cfgs, int cfg, const char *model)
{
    int line = c->recipe_line > 0 ? c->recipe_line : 0;
    lua_pushnil(L);
    while (lua_next(L, lim)) {
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TTABLE)
            fe_error_at(L, IR_ERR_INPUT, line,
                        "recipe: limits entries must be key = {min = , max = } or "
                        "key = {one_of = {...}}");
        const char *key = lua_tostring(L, -2);
        int spec = lua_gettop(L), known = 0;
        lua_pushnil(L);
        while (lua_next(L, cfgs)) { /* some config must have the key: a misspelt limit is an error */
            lua_getfield(L, -1, key);
            known |= !lua_isnil(L, -1);
            lua_pop(L, 2);
        }
        if (!known) fe_error_at(L, IR_ERR_INPUT, line, "recipe: limits name '%s', which no config has", key);
        lua_pushnil(L);
        while (lua_next(L, spec)) {
            const char *f = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
            if (strcmp(f, "min") && strcmp(f, "max") && strcmp(f, "one_of"))
                fe_error_at(L, IR_ERR_INPUT, line,
                            "recipe: limits['%s'] has unknown field '%s' (min, max, one_of)", key, f);
            lua_pop(L, 1);
        }
        int tmin = lua_getfield(L, spec, "min"), tmax = lua_getfield(L, spec, "max");
        int tset = lua_getfield(L, spec, "one_of");
        int ranged = tmin == LUA_TNUMBER && tmax == LUA_TNUMBER;
        if (ranged == (tset == LUA_TTABLE) || (!ranged && (tmin != LUA_TNIL || tmax != LUA_TNIL)))
            fe_error_at(L, IR_ERR_INPUT, line,
                        "recipe: limits['%s'] must be {min = N, max = N} or {one_of = {...}}", key);
        int vt = lua_getfield(L, cfg, key); /* stack: spec min max one_of value */
        char want[240];
        if (vt == LUA_TNIL) {
            /* this config has no such setting */
        } else if (ranged) {
            int is_int = vt == LUA_TNUMBER && lua_isinteger(L, -1);
            if (is_int && (!lua_isinteger(L, -4) || !lua_isinteger(L, -3)))
                fe_error_at(L, IR_ERR_INPUT, line,
                            "recipe: limits['%s']: an integer setting has integer bounds", key);
            if (is_int)
                snprintf(want, sizeof want, "a whole number in %lld..%lld", (long long)lua_tointeger(L, -4),
                         (long long)lua_tointeger(L, -3));
            else
                snprintf(want, sizeof want, "a number in [%g, %g]", (double)lua_tonumber(L, -4),
                         (double)lua_tonumber(L, -3));
            if (vt != LUA_TNUMBER) limit_error(L, c, model, key, want);
            int in = is_int ? lua_tointeger(L, -1) >= lua_tointeger(L, -4) &&
                                  lua_tointeger(L, -1) <= lua_tointeger(L, -3)
                            : lua_tonumber(L, -1) >= lua_tonumber(L, -4) &&
                                  lua_tonumber(L, -1) <= lua_tonumber(L, -3);
            if (!in) limit_error(L, c, model, key, want);
        } else {
            int found = 0, n = (int)lua_rawlen(L, -2);
            size_t used = (size_t)snprintf(want, sizeof want, "one of");
            for (int i = 1; i <= n; i++) {
                if (lua_rawgeti(L, -2, i) != LUA_TSTRING)
                    fe_error_at(L, IR_ERR_INPUT, line, "recipe: limits['%s'].one_of must list strings", key);
                const char *o = lua_tostring(L, -1);
                found |= vt == LUA_TSTRING && !strcmp(o, lua_tostring(L, -2));
                if (used < sizeof want)
                    used += (size_t)snprintf(want + used, sizeof want - used, "%s %s", i > 1 ? "," : "", o);
                lua_pop(L, 1);
            }
            if (!found) limit_error(L, c, model, key, want);
        }
        lua_settop(L, spec - 1); /* the key, for lua_next */
    }
}

/* Records the config's scalar entries in the graph, in sorted key order. */
static void record_config(lua_State *L, FeCtx *c, int cfg)
{
    int line = c->recipe_line > 0 ? c->recipe_line : 0;
    lua_pushnil(L); /* every key and string value by the graph's text rules, with its true length */
    while (lua_next(L, cfg)) {
        int vt = lua_type(L, -1);
        if (lua_type(L, -2) == LUA_TSTRING &&
            (vt == LUA_TNUMBER || vt == LUA_TBOOLEAN || vt == LUA_TSTRING)) {
            const char *k = fe_text(L, -2, FE_TEXT_KEY, "config key", line);
            char what[GIR_NAME_MAX + 16];
            snprintf(what, sizeof what, "config %s", k);
            if (lua_type(L, -1) == LUA_TSTRING) fe_text(L, -1, FE_TEXT_VALUE, what, line);
        }
        lua_pop(L, 1);
    }
    int n;
    const char **keys = sorted_keys(L, cfg, &n);
    for (int i = 0; i < n; i++) {
        GirAttr a;
        lua_getfield(L, cfg, keys[i]);
        switch (lua_type(L, -1)) {
        case LUA_TNUMBER:
            a = lua_isinteger(L, -1) ? gir_attr_int(keys[i], lua_tointeger(L, -1))
                                     : gir_attr_float(keys[i], lua_tonumber(L, -1));
            break;
        case LUA_TBOOLEAN: a = gir_attr_int(keys[i], lua_toboolean(L, -1)); break;
        case LUA_TSTRING: a = gir_attr_str(keys[i], lua_tostring(L, -1)); break;
        default: lua_pop(L, 1); continue;
        }
        IrDiag d = {0};
        if (gir_graph_set_config(c->graph, a, &d) != IR_OK) fe_error_at(L, d.status, line, "%s", d.msg);
        lua_pop(L, 1);
    }
    lua_pop(L, 1); /* keys */
}

/* ---- the protected body ------------------------------------------------------------------------- */

static void push_model_list(lua_State *L, const char *dflt, const char **names, int n)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (dflt) {
        luaL_addstring(&b, dflt);
        luaL_addstring(&b, " (default)\n");
    }
    for (int i = 0; i < n; i++) {
        if (dflt && strcmp(names[i], dflt) == 0) continue;
        luaL_addstring(&b, names[i]);
        luaL_addchar(&b, '\n');
    }
    luaL_pushresult(&b);
}

static int fe_body(lua_State *L)
{
    FeCtx *c = fe_ctx(L);
    fe_sandbox_open(L);
    fe_graph_open(L);
    lua_pushcfunction(L, recipe_fn);
    lua_setglobal(L, "recipe");

    /* Text only (never binary chunks), as luaL_loadfilex would: a UTF-8 BOM and a first "#" line are
     * skipped, the newline kept so line numbers stay. The chunk name "@path" puts path in messages. */
    const char *text = c->src;
    size_t len = c->src_len;
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) text += 3, len -= 3;
    if (len && text[0] == '#') {
        const char *nl = memchr(text, '\n', len);
        len = nl ? len - (size_t)(nl - text) : 0;
        text = nl ? nl : text + len;
    }
    lua_pushfstring(L, "@%s", c->path);
    int st = luaL_loadbufferx(L, text, len, lua_tostring(L, -1), "t");
    lua_remove(L, -2); /* the chunk name */
    if (st != LUA_OK) {
        c->status = IR_ERR_INPUT;
        return fe_rethrow(L, st);
    }
    lua_call(L, 0, 0);
    if (lua_getfield(L, LUA_REGISTRYINDEX, FE_RECIPE_KEY) != LUA_TTABLE)
        return fe_error_at(L, IR_ERR_INPUT, 0, "the file never calls recipe{...}");
    int rec = lua_gettop(L);
    lua_getfield(L, rec, "configs");
    int cfgs = lua_gettop(L), n;
    const char *dflt = lua_getfield(L, rec, "default") == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    const char **names = sorted_keys(L, cfgs, &n);
    if (!dflt && n == 1) dflt = names[0];
    if (c->mode == FE_MODE_MODELS) {
        push_model_list(L, dflt, names, n);
        return 1;
    }

    char known[300];
    const char *model = c->opt.model ? c->opt.model : dflt;
    if (!model)
        return fe_error_at(L, IR_ERR_INPUT, 0,
                           "the recipe has no default config; choose one with --model (known: %s)",
                           join(names, n, known, sizeof known));
    if (lua_getfield(L, cfgs, model) != LUA_TTABLE)
        return fe_error_at(L, IR_ERR_INPUT, 0, "unknown model '%s' (known: %s)", model,
                           join(names, n, known, sizeof known));
    int src = lua_gettop(L);
    lua_newtable(L); /* the copy build() gets; overrides go here */
    int cfg = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, src)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, cfg);
    }
    for (int i = 0; i < c->opt.n_sets; i++)
        apply_set(L, cfg, model, c->opt.sets[i]);
    if (lua_getfield(L, rec, "limits") == LUA_TTABLE) check_limits(L, c, lua_gettop(L), cfgs, cfg, model);
    lua_pop(L, 1);

    lua_getfield(L, rec, "name");
    c->graph = gir_graph_create(lua_tostring(L, -1));
    if (!c->graph) return fe_error_at(L, IR_ERR_NOMEM, 0, "out of memory");
    gir_graph_set_model(c->graph, model);
    c->loc_file = ir_arena_strdup(c->graph->arena, c->path);
    if (!c->graph->model || !c->loc_file) return fe_error_at(L, IR_ERR_NOMEM, 0, "out of memory");

    lua_getfield(L, rec, "build");
    int build = lua_gettop(L);
    lua_pushvalue(L, build);
    fe_graph_push(L);
    lua_pushvalue(L, cfg);
    lua_call(L, 2, 0);

    int outputs = 0;
    for (int i = 0; i < c->graph->n_nodes; i++)
        outputs += c->graph->nodes[i]->op == GIR_OP_OUTPUT;
    if (!outputs) {
        lua_Debug ar;
        lua_pushvalue(L, build);
        lua_getinfo(L, ">S", &ar);
        return fe_error_at(L, IR_ERR_INPUT, ar.linedefined,
                           "build for model '%s' made no outputs (mark results with g:output(name, tensor))",
                           model);
    }
    record_config(L, c, cfg);
    return 0;
}

static IrStatus run(const char *path, const FeOptions *opt, FeMode mode, GirGraph **out, IrBuf *names,
                    IrDiag *d)
{
    if (!path || !path[0]) return ir_diag_set(d, IR_ERR_INPUT, "no recipe file given");
    FeCtx c = {.path = path, .mode = mode};
    c.opt = opt ? *opt : fe_options_default();
    if (!c.opt.mem_limit) c.opt.mem_limit = FE_DEFAULT_MEM;
    if (c.opt.instr_limit <= 0) c.opt.instr_limit = FE_DEFAULT_INSTR;
    if (c.opt.n_sets < 0 || (c.opt.n_sets > 0 && !c.opt.sets)) c.opt.n_sets = 0;
    IrStatus s = fe_sandbox_run(&c, fe_body, names, d);
    if (s != IR_OK || !out) {
        gir_graph_destroy(c.graph);
        return s;
    }
    *out = c.graph;
    return IR_OK;
}

IrStatus fe_recipe_build(const char *path, const FeOptions *opt, GirGraph **out, IrDiag *d)
{
    *out = NULL;
    return run(path, opt, FE_MODE_BUILD, out, NULL, d);
}

IrStatus fe_recipe_models(const char *path, const FeOptions *opt, IrBuf *names, IrDiag *d)
{
    return run(path, opt, FE_MODE_MODELS, NULL, names, d);
}
