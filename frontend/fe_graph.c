/* fe_graph.c — the graph-building API a recipe's build(g, cfg) sees.
 *
 * `g` is a userdata whose __index turns a method name into an op through gir_op_parse, so every op in
 * gir_ops.def is callable as g:<op>(tensors..., {attrs}) with no change here; input, weight and output
 * have their own methods. Tensors are userdata holding a GirValue* (the value lives in the graph arena,
 * so the userdata needs no __gc). Each node records the recipe file:line that made it; builder errors
 * come back from gir_node_add already located and are raised as they are.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "fe_impl.h"

#define FE_TENSOR "kiln.tensor"
#define FE_GRAPH  "kiln.graph"

static GirLoc here(lua_State *L)
{
    FeCtx *c = fe_ctx(L);
    return (GirLoc){.file = c->loc_file, .line = fe_line(L, 1)};
}

static GirValue *to_tensor(lua_State *L, int idx)
{
    GirValue **p = luaL_testudata(L, idx, FE_TENSOR);
    return p ? *p : NULL;
}

static void push_tensor(lua_State *L, GirValue *v)
{
    GirValue **p = lua_newuserdatauv(L, sizeof *p, 0);
    *p = v;
    luaL_setmetatable(L, FE_TENSOR);
}

const char *fe_text(lua_State *L, int idx, FeText kind, const char *what, int line)
{
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    IrDiag d = {0};
    IrStatus st = kind == FE_TEXT_NAME  ? gir_check_name(what, s, len, &d)
                  : kind == FE_TEXT_KEY ? gir_check_key(what, s, len, &d)
                                        : gir_check_value(what, s, len, &d);
    if (st != IR_OK) {
        if (line < 0) fe_raise_diag(L, &d);
        fe_error_at(L, st, line, "%s", d.msg);
    }
    return s;
}

/* ---- tensors ------------------------------------------------------------------------------------ */

static int tensor_index(lua_State *L)
{
    FeCtx *c = fe_ctx(L);
    GirValue *v = to_tensor(L, 1);
    const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
    if (strcmp(k, "shape") == 0) {
        lua_createtable(L, v->type.rank, 0);
        for (int i = 0; i < v->type.rank; i++) {
            GirDim d = v->type.dim[i];
            if (d.sym >= 0)
                lua_pushstring(L, c->graph->sym[d.sym]);
            else
                lua_pushinteger(L, (lua_Integer)d.n);
            lua_rawseti(L, -2, i + 1);
        }
    } else if (strcmp(k, "dtype") == 0) {
        lua_pushstring(L, gir_dtype_name(v->type.dtype));
    } else if (strcmp(k, "rank") == 0) {
        lua_pushinteger(L, v->type.rank);
    } else {
        return fe_error(L, IR_ERR_INPUT, "tensor has no field '%s' (fields: shape, dtype, rank)", k);
    }
    return 1;
}

/* "%5: bf16[T,4096]" */
static int tensor_tostring(lua_State *L)
{
    FeCtx *c = fe_ctx(L);
    GirValue *v = to_tensor(L, 1);
    char s[256];
    IrBuf b = {0}; /* malloc'd: freed before anything that can raise */
    gir_type_print(c->graph, &v->type, &b);
    snprintf(s, sizeof s, "%%%d: %s", v->id, b.s && !b.oom ? b.s : "?");
    ir_buf_free(&b);
    lua_pushstring(L, s);
    return 1;
}

static int tensor_eq(lua_State *L)
{
    lua_pushboolean(L, to_tensor(L, 1) == to_tensor(L, 2));
    return 1;
}

/* ---- leaves and outputs ------------------------------------------------------------------------- */

/* A symbol name: a letter or '_', then letters, digits and _ + - * / . (so "T", "MP", "B+1"), at most 32
 * characters. Names print inside types ("i32[B+1]") and in the graph's "dims" line. */
static int is_sym_name(const char *s)
{
    static const char more[] = "_+-*/.";
    if (!(isalpha((unsigned char)*s) || *s == '_')) return 0;
    size_t n = 1;
    for (s++; *s; s++, n++)
        if (!(isalnum((unsigned char)*s) || strchr(more, *s))) return 0;
    return n <= 32;
}

/* Reads a shape table at idx: positive integers and symbol names, 1..GIR_MAX_RANK of them. */
static GirType read_type(lua_State *L, GirDtype dt, int idx, const char *what, const char *name)
{
    FeCtx *c = fe_ctx(L);
    GirDim dims[GIR_MAX_RANK];
    if (lua_type(L, idx) != LUA_TTABLE)
        fe_error(L, IR_ERR_INPUT, "%s '%s': shape must be a table such as {\"T\", 4096}", what, name);
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    if (n < 1 || n > GIR_MAX_RANK)
        fe_error(L, IR_ERR_SHAPE, "%s '%s': shape has %d dimensions (must be 1 to %d)", what, name, (int)n,
                 GIR_MAX_RANK);
    for (int i = 0; i < n; i++) {
        int t = lua_rawgeti(L, idx, i + 1), ok = 0;
        if (t == LUA_TNUMBER) {
            lua_Integer v = lua_tointegerx(L, -1, &ok);
            ok = ok && v > 0;
            dims[i] = gir_dim_const(v);
        } else if (t == LUA_TSTRING && is_sym_name(lua_tostring(L, -1))) {
            dims[i] = gir_dim_sym(c->graph, lua_tostring(L, -1));
            if (dims[i].sym == GIR_SYM_NOMEM) fe_error(L, IR_ERR_NOMEM, "%s '%s': out of memory", what, name);
            if (dims[i].sym < 0)
                fe_error(L, IR_ERR_LIMIT, "%s '%s': too many symbolic dimensions (at most %d)", what, name,
                         GIR_MAX_SYMS);
            ok = 1;
        }
        if (!ok)
            fe_error(L, IR_ERR_SHAPE,
                     "%s '%s': dimension %d is %s (must be a positive integer or a symbol name)", what, name,
                     i + 1, luaL_tolstring(L, -1, NULL));
        lua_pop(L, 1);
    }
    return gir_type(dt, (int)n, dims);
}

static void check_self(lua_State *L, const char *method)
{
    if (!luaL_testudata(L, 1, FE_GRAPH))
        fe_error(L, IR_ERR_INPUT, "call graph methods with ':' (g:%s(...), not g.%s(...))", method, method);
}

/* g:input(name, dtype, shape) and g:weight(name, dtype, shape) */
static int graph_leaf(lua_State *L, GirOp op)
{
    FeCtx *c = fe_ctx(L);
    const char *what = gir_op_name(op);
    check_self(L, what);
    if (lua_type(L, 2) != LUA_TSTRING || !lua_tostring(L, 2)[0])
        fe_error(L, IR_ERR_INPUT,
                 op == GIR_OP_WEIGHT ? "weight needs its checkpoint name" : "input needs a name");
    const char *name = fe_text(L, 2, FE_TEXT_NAME, what, -1);
    GirDtype dt;
    if (lua_type(L, 3) != LUA_TSTRING)
        fe_error(L, IR_ERR_INPUT, "%s '%s': dtype must be a string such as \"bf16\"", what, name);
    if (!gir_dtype_parse(lua_tostring(L, 3), &dt))
        fe_error(L, IR_ERR_INPUT, "unknown dtype '%s'", lua_tostring(L, 3));
    GirType t = read_type(L, dt, 4, what, name);
    IrDiag d = {0};
    GirValue *v = gir_leaf(c->graph, op, name, t, here(L), &d);
    if (!v) fe_raise_diag(L, &d);
    fe_check_memory(L);
    push_tensor(L, v);
    return 1;
}

static int graph_input(lua_State *L)
{
    return graph_leaf(L, GIR_OP_INPUT);
}

static int graph_weight(lua_State *L)
{
    return graph_leaf(L, GIR_OP_WEIGHT);
}

/* g:file_dtype(path, name, fallback): the dtype weight `name` has in the weights file at path (a block
 * format as stored; fallback for a float tensor), read by the caller's FeOptions.file_dtype. */
static int graph_file_dtype(lua_State *L)
{
    FeCtx *c = fe_ctx(L);
    check_self(L, "file_dtype");
    for (int i = 2; i <= 4; i++)
        if (lua_type(L, i) != LUA_TSTRING || !lua_tostring(L, i)[0])
            fe_error(L, IR_ERR_INPUT,
                     "file_dtype(path, name, fallback): argument %d must be a non-empty string", i - 1);
    const char *path = lua_tostring(L, 2), *name = lua_tostring(L, 3), *fallback = lua_tostring(L, 4);
    if (!c->opt.file_dtype)
        fe_error(L, IR_ERR_UNSUPPORTED, "file_dtype: this caller reads no weights files (kiln compile does)");
    char out[32], err[400];
    if (c->opt.file_dtype(c->opt.file_dtype_ctx, path, name, fallback, out, sizeof out, err, sizeof err))
        fe_error(L, IR_ERR_INPUT, "%s", err);
    GirDtype dt;
    if (!gir_dtype_parse(out, &dt))
        fe_error(L, IR_ERR_INPUT, "%s: weight %s: unknown dtype '%s'", path, name, out);
    lua_pushstring(L, out);
    return 1;
}

/* g:output(name, tensor) */
static int graph_output(lua_State *L)
{
    FeCtx *c = fe_ctx(L);
    check_self(L, "output");
    if (lua_type(L, 2) != LUA_TSTRING || !lua_tostring(L, 2)[0])
        fe_error(L, IR_ERR_INPUT, "output needs a name: g:output(name, tensor)");
    const char *name = fe_text(L, 2, FE_TEXT_NAME, "output", -1);
    GirValue *v = to_tensor(L, 3);
    if (!v) fe_error(L, IR_ERR_INPUT, "output '%s': %s is not a tensor", name, luaL_typename(L, 3));
    const GirNode *o = gir_find_named(c->graph, GIR_OP_OUTPUT, name);
    if (o) fe_error(L, IR_ERR_INPUT, "output '%s' is declared twice (first at line %d)", name, o->loc.line);
    GirAttr a = gir_attr_str("name", name);
    IrDiag d = {0};
    if (!gir_node_add(c->graph, GIR_OP_OUTPUT, &v, 1, &a, 1, here(L), &d)) fe_raise_diag(L, &d);
    fe_check_memory(L);
    return 0;
}

/* ---- ops ---------------------------------------------------------------------------------------- */

/* Position of key in the op's schema ("heads:i head_dim:i ..."); unknown keys sort after all known. */
static int schema_pos(const char *schema, const char *key)
{
    size_t kl = strlen(key);
    int pos = 0;
    for (const char *p = schema; *p; pos++) {
        while (*p == ' ')
            p++;
        const char *colon = strchr(p, ':');
        if (!colon) break;
        if ((size_t)(colon - p) == kl && strncmp(p, key, kl) == 0) return pos;
        p = colon;
        while (*p && *p != ' ')
            p++;
    }
    return 1000;
}

/* Reads the attribute table at idx into a[], ordered as the schema lists them (the printer keeps the
 * stored order, so this makes the text form independent of Lua's hash order). Keys go to the arena. */
static int read_attrs(lua_State *L, int idx, GirOp op, GirAttr *a)
{
    FeCtx *c = fe_ctx(L);
    const char *opname = gir_op_name(op), *schema = gir_op_attr_schema(op);
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            fe_error(L, IR_ERR_INPUT, "%s: attribute keys must be names, got a %s key", opname,
                     luaL_typename(L, -2));
        const char *k = fe_text(L, -2, FE_TEXT_KEY, "attribute", -1);
        if (n == GIR_MAX_ATTRS) fe_error(L, IR_ERR_INPUT, "%s: too many attributes (at most %d)", opname, n);
        const char *key = ir_arena_strdup(c->graph->arena, k);
        if (!key) fe_error(L, IR_ERR_NOMEM, "out of memory");
        switch (lua_type(L, -1)) {
        case LUA_TNUMBER:
            a[n] = lua_isinteger(L, -1) ? gir_attr_int(key, lua_tointeger(L, -1))
                                        : gir_attr_float(key, lua_tonumber(L, -1));
            break;
        case LUA_TBOOLEAN: a[n] = gir_attr_int(key, lua_toboolean(L, -1)); break;
        case LUA_TSTRING: { /* anchored by the table */
            char what[GIR_NAME_MAX + 16];
            snprintf(what, sizeof what, "attribute %s", key);
            a[n] = gir_attr_str(key, fe_text(L, -1, FE_TEXT_VALUE, what, -1));
            break;
        }
        default:
            fe_error(L, IR_ERR_INPUT, "%s: attribute '%s' is a %s (must be a number, string or boolean)",
                     opname, k, luaL_typename(L, -1));
        }
        n++;
        lua_pop(L, 1);
    }
    for (int i = 1; i < n; i++) { /* insertion sort: schema position, then name */
        GirAttr x = a[i];
        int px = schema_pos(schema, x.key), j = i;
        for (; j > 0; j--) {
            int pj = schema_pos(schema, a[j - 1].key);
            if (pj < px || (pj == px && strcmp(a[j - 1].key, x.key) <= 0)) break;
            a[j] = a[j - 1];
        }
        a[j] = x;
    }
    fe_check_memory(L);
    return n;
}

/* g:<op>(tensor..., [attrs]) -> the node's outputs. Upvalue 1: the GirOp. */
static int graph_op(lua_State *L)
{
    FeCtx *c = fe_ctx(L);
    GirOp op = (GirOp)lua_tointeger(L, lua_upvalueindex(1));
    const char *name = gir_op_name(op);
    check_self(L, name);
    int top = lua_gettop(L), attr_idx = 0, n_in = 0, n_attr = 0;
    if (top >= 2 && lua_type(L, top) == LUA_TTABLE) attr_idx = top--;
    if (top - 1 > GIR_MAX_IN) fe_error(L, IR_ERR_INPUT, "%s: too many inputs (%d)", name, top - 1);
    GirValue *in[GIR_MAX_IN];
    for (int i = 2; i <= top; i++) {
        if (!(in[n_in++] = to_tensor(L, i)))
            fe_error(L, IR_ERR_INPUT, "%s: input %d is %s, not a tensor", name, i - 1, luaL_typename(L, i));
    }
    GirAttr attrs[GIR_MAX_ATTRS];
    if (attr_idx) n_attr = read_attrs(L, attr_idx, op, attrs);
    IrDiag d = {0};
    GirNode *node = gir_node_add(c->graph, op, in, n_in, attrs, n_attr, here(L), &d);
    if (!node) fe_raise_diag(L, &d);
    fe_check_memory(L);
    for (int k = 0; k < node->n_out; k++)
        push_tensor(L, node->out[k]);
    return node->n_out;
}

static int graph_index(lua_State *L)
{
    if (lua_type(L, 2) != LUA_TSTRING)
        return fe_error(L, IR_ERR_INPUT, "graph methods are named: g:<op>(...), got a %s key",
                        luaL_typename(L, 2));
    const char *k = lua_tostring(L, 2);
    GirOp op;
    if (strcmp(k, "input") == 0)
        lua_pushcfunction(L, graph_input);
    else if (strcmp(k, "weight") == 0)
        lua_pushcfunction(L, graph_weight);
    else if (strcmp(k, "output") == 0)
        lua_pushcfunction(L, graph_output);
    else if (strcmp(k, "file_dtype") == 0)
        lua_pushcfunction(L, graph_file_dtype);
    else if (gir_op_parse(k, &op) && !(gir_op_flags(op) & GIR_F_LEAF)) {
        lua_pushinteger(L, op);
        lua_pushcclosure(L, graph_op, 1);
    } else
        return fe_error(L, IR_ERR_INPUT, "unknown op '%s'", k);
    return 1;
}

static int graph_newindex(lua_State *L)
{
    return fe_error(L, IR_ERR_INPUT, "the graph object is read-only");
}

static int graph_tostring(lua_State *L)
{
    FeCtx *c = fe_ctx(L);
    lua_pushfstring(L, "graph %s (%d nodes)", c->graph->name, c->graph->n_nodes);
    return 1;
}

void fe_graph_open(lua_State *L)
{
    luaL_newmetatable(L, FE_TENSOR);
    lua_pushcfunction(L, tensor_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, tensor_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushcfunction(L, tensor_eq);
    lua_setfield(L, -2, "__eq");
    lua_pushliteral(L, "tensor"); /* type name in Lua's messages */
    lua_setfield(L, -2, "__name");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);

    luaL_newmetatable(L, FE_GRAPH);
    lua_pushcfunction(L, graph_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, graph_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, graph_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "graph");
    lua_setfield(L, -2, "__name");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
}

void fe_graph_push(lua_State *L)
{
    lua_newuserdatauv(L, 1, 0);
    luaL_setmetatable(L, FE_GRAPH);
}
