/* fe.h — the recipe frontend: runs a Lua 5.4 recipe in a sandbox and builds its graph IR.
 * Prefix fe_. The recipe language is documented in docs/RECIPES.md.
 *
 *     FeOptions o = fe_options_default();
 *     o.model = "llama-3-8b";  o.sets = (const char *[]){"n_layers=2"};  o.n_sets = 1;
 *     GirGraph *g;  IrDiag d = {0};
 *     if (fe_recipe_build("recipes/llama.lua", &o, &g, &d) != IR_OK) puts(d.msg);
 *     ...  gir_graph_destroy(g);
 */
#ifndef KILN_FRONTEND_FE_H
#define KILN_FRONTEND_FE_H

#include <stddef.h>

#include "ir/gir.h"

/* The package dtype of weight `name` (a checkpoint name) as the weights file at `path` stores it, for
 * g:file_dtype (the frontend reads no files: the caller, e.g. kiln compile, does): into out a dtype name
 * (a block format as stored, or `fallback` for a float tensor); 0, or -1 with a one-line reason in err. */
typedef int (*FeFileDtype)(void *ctx, const char *path, const char *name, const char *fallback, char *out,
                           int outlen, char *err, int errlen);

typedef struct FeOptions {
    const char *model;       /* named config; NULL for the recipe's default */
    const char *const *sets; /* "key=value" config overrides, applied in order */
    int n_sets;
    size_t mem_limit;       /* bytes the Lua state may hold */
    long instr_limit;       /* Lua VM instructions the recipe may run */
    FeFileDtype file_dtype; /* NULL: g:file_dtype is an error */
    void *file_dtype_ctx;
} FeOptions;

FeOptions fe_options_default(void); /* no model, no sets, 64 MiB, 50M instructions */

/* Runs the recipe at `path` and builds its graph for the chosen config. On success returns IR_OK and
 * *out (caller destroys with gir_graph_destroy). On failure returns a status, *out is NULL, and d->msg is
 * one line that starts with the location: "path:line: reason" (or "path: reason" when no line applies).
 * No memory is leaked on any path, including Lua errors, the memory cap and the instruction limit. */
IrStatus fe_recipe_build(const char *path, const FeOptions *opt, GirGraph **out, IrDiag *d);

/* Appends the recipe's named configs to `names`, one per line, default first marked with " (default)". */
IrStatus fe_recipe_models(const char *path, const FeOptions *opt, IrBuf *names, IrDiag *d);

#endif
