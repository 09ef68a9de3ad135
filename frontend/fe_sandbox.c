/* fe_sandbox.c — the Lua state a recipe runs in, and how its errors become one "path:line: reason" line.
 *
 * The state is private to one call: our allocator counts live bytes (plus the graph arena) against
 * FeOptions.mem_limit, a count hook charges every FE_HOOK_EVERY instructions against instr_limit, and
 * only base (pruned), string (no dump), table, math (no random) and utf8 are opened. Reading an undefined
 * global raises. Hitting a limit is fatal: our pcall/xpcall re-raise it, so a recipe cannot catch it.
 *
 * Work the hook cannot see, because it happens inside one C call, is charged to the same budget: bytes
 * allocated, and up front for the library loops that need not allocate (table.move/insert/remove, the
 * pattern matcher's backtracking, string.rep of ""). What is left (e.g. comparing long strings in a
 * loop) meets a wall-clock deadline checked by the hook. Finalizers run with hooks off, so __gc is refused.
 *
 * Locations: every error names the recipe line that caused it. C functions use fe_error (the calling Lua
 * line); the message handler adds a location to messages that have none; a memory error skips the
 * handler, so the allocator itself notes the running line when it refuses a block. Lua shortens long
 * chunk names to "...tail"; fe_sandbox_run puts the full path back.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "fe_impl.h"

enum {
    FE_HOOK_EVERY = 1000,    /* VM instructions between count hooks */
    FE_BYTES_PER_INSTR = 16, /* allocating this many bytes costs one instruction */
    FE_MIN_DEADLINE_MS = 2000,
    FE_MAX_SOURCE = 64 << 20, /* bytes of recipe text (the Lua state's memory limit bounds the rest) */
};

FeCtx *fe_ctx(lua_State *L)
{
    void *ud;
    lua_getallocf(L, &ud);
    return ud;
}

int fe_line(lua_State *L, int level)
{
    lua_Debug ar;
    for (int lv = level; lua_getstack(L, lv, &ar); lv++)
        if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0 && ar.source[0] == '@') return ar.currentline;
    return 0;
}

/* "64 MiB", "12 KiB" or "1000 bytes". */
static void fmt_bytes(size_t n, char *buf, size_t len)
{
    if (n && n % (1024 * 1024) == 0)
        snprintf(buf, len, "%zu MiB", n / (1024 * 1024));
    else if (n && n % 1024 == 0)
        snprintf(buf, len, "%zu KiB", n / 1024);
    else
        snprintf(buf, len, "%zu bytes", n);
}

static void vformat_at(const FeCtx *c, int line, char *buf, size_t len, const char *fmt, va_list ap)
{
    int n = line > 0 ? snprintf(buf, len, "%s:%d: ", c->path, line) : snprintf(buf, len, "%s: ", c->path);
    if (n < 0 || (size_t)n >= len) n = 0;
    vsnprintf(buf + n, len - (size_t)n, fmt, ap);
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void
set_fatal(FeCtx *c, IrStatus s, int line, const char *fmt, ...)
{
    if (c->fatal) return; /* the first limit hit is the one reported */
    va_list ap;
    va_start(ap, fmt);
    vformat_at(c, line, c->fatal_msg, sizeof c->fatal_msg, fmt, ap);
    va_end(ap);
    c->fatal = s;
}

static void set_fatal_memory(FeCtx *c, int line)
{
    char lim[32];
    fmt_bytes(c->opt.mem_limit, lim, sizeof lim);
    if (c->mem_capped)
        set_fatal(c, IR_ERR_NOMEM, line, "memory limit of %s exceeded", lim);
    else
        set_fatal(c, IR_ERR_NOMEM, line, "out of memory");
}

int fe_error_at(lua_State *L, IrStatus s, int line, const char *fmt, ...)
{
    FeCtx *c = fe_ctx(L);
    char msg[512]; /* C stack: nothing to free when lua_error jumps */
    va_list ap;
    va_start(ap, fmt);
    vformat_at(c, line, msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->status = s;
    lua_pushstring(L, msg);
    return lua_error(L);
}

int fe_error(lua_State *L, IrStatus s, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fe_error_at(L, s, fe_line(L, 1), "%s", msg);
}

/* If msg starts with the recipe's file name, as given or as Lua shortens it ("...tail"), followed by ':',
 * returns the length of that name; else 0. */
static size_t file_prefix(const FeCtx *c, const char *msg)
{
    size_t n = strlen(c->path);
    if (strncmp(msg, c->path, n) == 0 && msg[n] == ':') return n;
    if (strncmp(msg, "...", 3) == 0)
        for (size_t k = n; k > 0; k--)
            if (strncmp(msg + 3, c->path + n - k, k) == 0 && msg[3 + k] == ':') return 3 + k;
    return 0;
}

int fe_raise_diag(lua_State *L, const IrDiag *d)
{
    FeCtx *c = fe_ctx(L);
    IrStatus s = d->status ? d->status : IR_ERR_INPUT;
    if (!file_prefix(c, d->msg)) return fe_error(L, s, "%s", d->msg);
    c->status = s;
    lua_pushstring(L, d->msg);
    return lua_error(L);
}

int fe_rethrow(lua_State *L, int lua_status)
{
    FeCtx *c = fe_ctx(L);
    if (lua_status == LUA_ERRMEM) set_fatal_memory(c, c->mem_line ? c->mem_line : c->hook_line);
    if (c->fatal) lua_pushstring(L, c->fatal_msg);
    return lua_error(L);
}

void fe_check_memory(lua_State *L)
{
    FeCtx *c = fe_ctx(L);
    size_t arena = c->graph ? ir_arena_used(c->graph->arena) : 0;
    if (c->mem_used + arena <= c->opt.mem_limit) return;
    c->mem_capped = 1;
    set_fatal_memory(c, fe_line(L, 1));
    lua_pushstring(L, c->fatal_msg);
    lua_error(L);
}

/* ---- allocator and hook ------------------------------------------------------------------------- */

static void note_refusal(FeCtx *c, int capped)
{
    c->mem_capped = capped;
    /* Only reads the call stack; safe while Lua waits on this allocation. */
    if (c->L) c->mem_line = fe_line(c->L, 0);
    if (!c->mem_line) c->mem_line = c->hook_line;
}

static void *fe_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    FeCtx *c = ud;
    size_t old = ptr ? osize : 0; /* for a new block, osize is a type tag */
    if (nsize == 0) {
        free(ptr);
        c->mem_used -= old;
        return NULL;
    }
    if (nsize > old) {
        size_t arena = c->graph ? ir_arena_used(c->graph->arena) : 0;
        if (c->mem_used - old + nsize + arena > c->opt.mem_limit) {
            note_refusal(c, 1);
            return NULL;
        }
        c->alloc_charge += (long)((nsize - old) / FE_BYTES_PER_INSTR); /* paid at the next hook */
    }
    void *p = realloc(ptr, nsize);
    if (!p) {
        if (nsize <= old) return ptr; /* Lua assumes shrinking never fails; the old block still fits */
        note_refusal(c, 0);
        return NULL;
    }
    c->mem_used = c->mem_used - old + nsize;
    return p;
}

static void fe_hook(lua_State *L, lua_Debug *ar)
{
    FeCtx *c = fe_ctx(L);
    c->instr_used += FE_HOOK_EVERY + c->alloc_charge;
    c->alloc_charge = 0;
    if (lua_getinfo(L, "l", ar) && ar->currentline > 0) c->hook_line = ar->currentline;
    if (c->instr_used > c->opt.instr_limit)
        set_fatal(c, IR_ERR_LIMIT, c->hook_line, "instruction limit of %ld exceeded (endless loop?)",
                  c->opt.instr_limit);
    else if (ir_now_ms() > c->deadline_ms)
        set_fatal(c, IR_ERR_LIMIT, c->hook_line,
                  "time limit of %.0f s exceeded (library calls doing too much work in a loop?)",
                  (c->deadline_ms - c->start_ms) / 1000);
    else
        return;
    lua_pushstring(L, c->fatal_msg);
    lua_error(L);
}

/* ---- the sandboxed library ---------------------------------------------------------------------- */

static int fe_print(lua_State *L)
{
    int n = lua_gettop(L);
    fputs("recipe: ", stderr);
    for (int i = 1; i <= n; i++) { /* one line: control bytes print as '?' (no forged lines, no escapes) */
        if (i > 1) fputc('\t', stderr);
        size_t len;
        const char *t = luaL_tolstring(L, i, &len);
        for (size_t j = 0; j < len; j++) {
            unsigned char ch = (unsigned char)t[j];
            fputc(ch < 0x20 || ch == 0x7f ? '?' : ch, stderr);
        }
        lua_pop(L, 1);
    }
    fputc('\n', stderr);
    return 0;
}

/* pcall and xpcall as in lbaselib.c, except that a limit hit is re-raised instead of returned. */
static int finish_pcall(lua_State *L, int status, int extra)
{
    FeCtx *c = fe_ctx(L);
    if (status == LUA_ERRMEM || c->fatal) return fe_rethrow(L, status);
    if (status != LUA_OK) {
        c->status = IR_OK; /* the recipe handled it */
        lua_pushboolean(L, 0);
        lua_pushvalue(L, -2);
        return 2;
    }
    return lua_gettop(L) - extra;
}

static int fe_pcall(lua_State *L)
{
    luaL_checkany(L, 1);
    lua_pushboolean(L, 1);
    lua_insert(L, 1);
    return finish_pcall(L, lua_pcall(L, lua_gettop(L) - 2, LUA_MULTRET, 0), 0);
}

/* The recipe's message handler, called only for errors the recipe may handle: an error raised from the
 * count hook reaches the handler while hooks are off, so a looping handler could never be stopped. */
static int xpcall_handler(lua_State *L)
{
    if (fe_ctx(L)->fatal) return 1;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int fe_xpcall(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, xpcall_handler, 1);
    lua_replace(L, 2);
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 1);
    lua_rotate(L, 3, 2);
    return finish_pcall(L, lua_pcall(L, n - 2, LUA_MULTRET, 2), 2);
}

/* setmetatable without __gc: finalizers run with hooks off, so a looping one could never be stopped. */
static int fe_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (t == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return fe_error(L, IR_ERR_INPUT, "setmetatable: __gc metamethods are not allowed in recipes");
        lua_pop(L, 1);
    }
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return fe_error(L, IR_ERR_INPUT, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

/* ---- C loops the count hook cannot see ---------------------------------------------------------- */

/* Charges `cost` instructions for work done in C, raising the instruction limit when it does not fit. */
static void charge(lua_State *L, double cost, const char *what)
{
    FeCtx *c = fe_ctx(L);
    if (cost <= (double)c->opt.instr_limit - (double)c->instr_used) {
        c->instr_used += (long)cost;
        return;
    }
    set_fatal(c, IR_ERR_LIMIT, fe_line(L, 1), "instruction limit of %ld exceeded by %s", c->opt.instr_limit,
              what);
    lua_pushstring(L, c->fatal_msg);
    lua_error(L);
}

/* Calls the wrapped library function (upvalue 1) with this call's arguments. */
static int call_original(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* string.rep of an empty string loops n times without allocating, so the memory cap cannot stop it. */
static int fe_str_rep(lua_State *L)
{
    size_t l, lsep;
    luaL_checklstring(L, 1, &l);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_optlstring(L, 3, "", &lsep);
    if (n > 0 && l + lsep == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    return call_original(L);
}

/* table.insert(t, pos, v) and table.remove(t, pos) shift #t - pos elements without allocating. */
static void charge_shift(lua_State *L)
{
    if (lua_type(L, 1) == LUA_TTABLE && lua_isinteger(L, 2)) {
        double len = (double)lua_rawlen(L, 1), pos = (double)lua_tointeger(L, 2);
        if (len >= pos) charge(L, len - pos + 1, "table.insert/remove");
    }
}

static int fe_table_insert(lua_State *L)
{
    if (lua_gettop(L) == 3) charge_shift(L);
    return call_original(L);
}

static int fe_table_remove(lua_State *L)
{
    charge_shift(L);
    return call_original(L);
}

/* table.move of nils allocates nothing: charge one instruction per element. */
static int fe_table_move(lua_State *L)
{
    lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);
    if (e >= f) charge(L, (double)e - (double)f + 1, "table.move");
    return call_original(L);
}

/* Lua's matcher backtracks: a pattern with q quantifiers may take about n^(q+1) steps on n bytes. That
 * bound is charged up front (sets like [a-z] and %-escapes hold no quantifiers). */
static double pattern_cost(const char *p, size_t pl, size_t n)
{
    double cost = (double)n + 1;
    for (size_t i = 0; i < pl && cost < 1e30; i++) {
        if (p[i] == '%') {
            i++;
        } else if (p[i] == '[') {
            i++;
            if (i < pl && p[i] == '^') i++;
            for (int first = 1; i < pl && (first || p[i] != ']'); i++, first = 0)
                if (p[i] == '%') i++;
        } else if (p[i] == '*' || p[i] == '+' || p[i] == '-' || p[i] == '?') {
            cost *= (double)n + 1;
        }
    }
    return cost;
}

static const char pattern_what[] = "a string pattern (too much backtracking for this string)";

/* string.match, gmatch, gsub */
static int fe_str_pattern(lua_State *L)
{
    size_t n, pl;
    luaL_checklstring(L, 1, &n);
    const char *p = luaL_checklstring(L, 2, &pl);
    charge(L, pattern_cost(p, pl, n), pattern_what);
    return call_original(L);
}

/* string.find(s, pattern, init, plain) */
static int fe_str_find(lua_State *L)
{
    size_t n, pl;
    luaL_checklstring(L, 1, &n);
    const char *p = luaL_checklstring(L, 2, &pl);
    charge(L, lua_toboolean(L, 4) ? (double)n + 1 : pattern_cost(p, pl, n), pattern_what);
    return call_original(L);
}

static void wrap(lua_State *L, int lib, const char *name, lua_CFunction fn)
{
    lib = lua_absindex(L, lib);
    lua_getfield(L, lib, name);
    lua_pushcclosure(L, fn, 1);
    lua_setfield(L, lib, name);
}

static const char *const removed_globals[] = {
    "io",   "os",         "require",        "package", "debug",  "coroutine", "dofile",  "loadfile",
    "load", "loadstring", "collectgarbage", "warn",    "module", "setfenv",   "getfenv", NULL,
};

static int fe_global_index(lua_State *L)
{
    const char *name = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
    for (int i = 0; removed_globals[i]; i++)
        if (strcmp(name, removed_globals[i]) == 0)
            return fe_error(L, IR_ERR_INPUT,
                            "unknown global '%s' (recipes run sandboxed: no io, os, require or file access)",
                            name);
    return fe_error(L, IR_ERR_INPUT, "unknown global '%s'", name);
}

static void set_field_nil(lua_State *L, int t, const char *k)
{
    t = lua_absindex(L, t);
    lua_pushnil(L);
    lua_setfield(L, t, k);
}

void fe_sandbox_open(lua_State *L)
{
    static const struct {
        const char *name;
        lua_CFunction open;
    } libs[] = {
        {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string}, {LUA_TABLIBNAME, luaopen_table},
        {LUA_MATHLIBNAME, luaopen_math}, {LUA_UTF8LIBNAME, luaopen_utf8},
    };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        luaL_requiref(L, libs[i].name, libs[i].open, 1);
        lua_pop(L, 1);
    }
    lua_pushglobaltable(L);
    int G = lua_gettop(L);
    for (int i = 0; removed_globals[i]; i++)
        set_field_nil(L, G, removed_globals[i]);
    lua_getfield(L, G, "string");
    set_field_nil(L, -1, "dump");
    wrap(L, -1, "rep", fe_str_rep);
    wrap(L, -1, "find", fe_str_find);
    wrap(L, -1, "match", fe_str_pattern);
    wrap(L, -1, "gmatch", fe_str_pattern);
    wrap(L, -1, "gsub", fe_str_pattern);
    lua_pop(L, 1);
    lua_getfield(L, G, "table");
    wrap(L, -1, "move", fe_table_move);
    wrap(L, -1, "insert", fe_table_insert);
    wrap(L, -1, "remove", fe_table_remove);
    lua_pop(L, 1);
    lua_getfield(L, G, "math"); /* graphs must not depend on a random seed */
    set_field_nil(L, -1, "random");
    set_field_nil(L, -1, "randomseed");
    lua_pop(L, 1);
    lua_pushcfunction(L, fe_print);
    lua_setfield(L, G, "print");
    lua_pushcfunction(L, fe_pcall);
    lua_setfield(L, G, "pcall");
    lua_pushcfunction(L, fe_xpcall);
    lua_setfield(L, G, "xpcall");
    lua_pushcfunction(L, fe_setmetatable);
    lua_setfield(L, G, "setmetatable");
    lua_createtable(L, 0, 2); /* strict globals: reading an unknown name is an error */
    lua_pushcfunction(L, fe_global_index);
    lua_setfield(L, -2, "__index");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, G);
    lua_pop(L, 1);
}

/* ---- running ------------------------------------------------------------------------------------ */

static int fe_msgh(lua_State *L)
{
    FeCtx *c = fe_ctx(L);
    const char *msg = lua_tostring(L, 1);
    if (!msg) msg = lua_pushfstring(L, "error object is a %s value", luaL_typename(L, 1));
    if (c->fatal || file_prefix(c, msg)) {
        lua_pushstring(L, msg);
        return 1;
    }
    int line = fe_line(L, 1);
    if (line > 0)
        lua_pushfstring(L, "%s:%d: %s", c->path, line, msg);
    else
        lua_pushfstring(L, "%s: %s", c->path, msg);
    return 1;
}

/* Turns a failed protected call into d: the fatal limit message if one was hit, else the error on top
 * with its file name made the full path (or "path: " put in front when it has no location). */
static IrStatus report(FeCtx *c, lua_State *L, int st, IrDiag *d)
{
    if (st == LUA_ERRMEM) set_fatal_memory(c, c->mem_line ? c->mem_line : c->hook_line);
    if (c->fatal) return ir_diag_set(d, c->fatal, "%s", c->fatal_msg);
    IrStatus s = c->status ? c->status : IR_ERR_INPUT;
    const char *msg = lua_tostring(L, -1);
    if (!msg) msg = "error object is not a string";
    size_t p = file_prefix(c, msg);
    if (p) return ir_diag_set(d, s, "%s%s", c->path, msg + p);
    return ir_diag_set(d, s, "%s: %s", c->path, msg);
}

IrStatus fe_sandbox_run(FeCtx *c, lua_CFunction body, IrBuf *result, IrDiag *d)
{
    /* Read once, before Lua starts: a FIFO or device is refused without blocking, and the text that
     * runs is the text read (never malloc'd memory held across a raising call: freed after lua_close). */
    IrStatus rs = ir_file_read(c->path, FE_MAX_SOURCE, &c->src, &c->src_len, d);
    if (rs) return rs;

    lua_State *L = lua_newstate(fe_alloc, c);
    if (!L) {
        free(c->src);
        c->src = NULL;
        char lim[32];
        fmt_bytes(c->opt.mem_limit, lim, sizeof lim);
        return ir_diag_set(d, IR_ERR_NOMEM, "%s: memory limit of %s is too small to start Lua", c->path, lim);
    }
    c->L = L;
    c->start_ms = ir_now_ms();
    c->deadline_ms = c->start_ms + (c->opt.instr_limit / 1000 > FE_MIN_DEADLINE_MS ? c->opt.instr_limit / 1000
                                                                                   : FE_MIN_DEADLINE_MS);
    lua_sethook(L, fe_hook, LUA_MASKCOUNT, FE_HOOK_EVERY);
    lua_pushcfunction(L, fe_msgh); /* light C functions: pushing them cannot raise */
    lua_pushcfunction(L, body);
    int st = lua_pcall(L, 0, 1, 1);
    IrStatus s = IR_OK;
    if (st != LUA_OK) {
        s = report(c, L, st, d);
    } else if (result) {
        size_t n;
        const char *r = lua_tolstring(L, -1, &n);
        if (r) ir_buf_put(result, r, n);
        if (result->oom) s = ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory", c->path);
    }
    lua_close(L);
    c->L = NULL;
    free(c->src);
    c->src = NULL;
    return s;
}
