/* fe_impl.h — what the frontend's own files share; nothing outside frontend/ includes it (fe.h is the
 * module's interface). One FeCtx lives on the C stack of each fe_recipe_build / fe_recipe_models call and
 * is the Lua allocator's userdata, so any Lua C function finds it with fe_ctx(L) without allocating.
 *
 * Lua boundary (STYLE.md rule 7): Lua errors longjmp. Everything allocated while recipe code can still
 * raise is either Lua-managed or lives in the graph's arena; the graph itself hangs off the FeCtx, which
 * outlives the protected call, and is destroyed by the caller on failure.
 */
#ifndef KILN_FRONTEND_FE_IMPL_H
#define KILN_FRONTEND_FE_IMPL_H

#include <lua.h>

#include "fe.h"

typedef enum FeMode { FE_MODE_BUILD, FE_MODE_MODELS } FeMode;

typedef struct FeCtx {
    const char *path; /* recipe file as the caller named it; every message starts with it */
    FeOptions opt;    /* limits resolved (never 0) */
    FeMode mode;
    lua_State *L;         /* while the state is open */
    GirGraph *graph;      /* built by the recipe; destroyed by the caller on failure */
    const char *loc_file; /* arena copy of path, for GirLoc */
    char *src;            /* the recipe's text, read once by fe_sandbox_run (regular files only) */
    size_t src_len;
    size_t mem_used;      /* bytes the Lua state holds now */
    long instr_used;      /* VM instructions run (in hook steps) plus work charged for C calls */
    long alloc_charge;    /* work charged for bytes allocated since the last hook */
    double start_ms;
    double deadline_ms; /* ir_now_ms() backstop for C calls that neither allocate nor are charged */
    int hook_line;      /* recipe line seen by the last count hook */
    int mem_line;       /* recipe line of the last refused allocation (0: unknown) */
    int mem_capped;     /* that refusal was our cap, not malloc */
    int recipe_line;    /* line of the recipe{...} call, once made */
    IrStatus status;    /* status of the error being raised, when C raised it */
    IrStatus fatal;     /* a limit was hit: the run is over, even if the recipe catches the error */
    char fatal_msg[512];
} FeCtx;

/* fe_sandbox.c */
FeCtx *fe_ctx(lua_State *L);
int fe_line(lua_State *L, int level); /* nearest recipe line at or above `level`; 0: none */
void fe_sandbox_open(lua_State *L);   /* safe libraries, print, strict globals */
/* Raises "path:line: msg" (line 0: "path: msg") with status s; never returns. */
int fe_error_at(lua_State *L, IrStatus s, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* fe_error_at at the line of the Lua code that called the running C function. */
int fe_error(lua_State *L, IrStatus s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int fe_raise_diag(lua_State *L, const IrDiag *d); /* raises d->msg, adding the location if it has none */
int fe_rethrow(lua_State *L, int lua_status);     /* re-raises the error on top after a protected call */
void fe_check_memory(lua_State *L);               /* raises when Lua + graph arena exceed the cap */
/* Runs `body` protected in a fresh sandboxed state; copies a string result into `result` (may be NULL).
 * Closes the state on every path. Returns IR_OK, or a status with d->msg "path:line: reason". */
IrStatus fe_sandbox_run(FeCtx *c, lua_CFunction body, IrBuf *result, IrDiag *d);

/* fe_graph.c */
/* The Lua string at idx (with its true length: an embedded NUL is an error, not a cut) checked by the
 * graph IR's text rules (gir.h, docs/IR.md): a name, a key or a string value. Raises "path:line: <what>
 * '<shown>': <why> (<rule>)" at `line` (< 0: the calling Lua line) when it breaks them. */
typedef enum FeText { FE_TEXT_NAME, FE_TEXT_KEY, FE_TEXT_VALUE } FeText;
const char *fe_text(lua_State *L, int idx, FeText kind, const char *what, int line);
void fe_graph_open(lua_State *L); /* registers the graph and tensor metatables */
void fe_graph_push(lua_State *L); /* pushes the `g` object for build(g, cfg) */

#endif
