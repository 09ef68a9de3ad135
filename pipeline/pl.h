/* pl.h — the compile pipeline as one library call: recipe -> graph -> passes -> schedule -> kernels ->
 * binaries per target -> package. `kiln compile` parses its arguments and calls pl_compile; `kiln ir`
 * calls pl_graph; the tuner compiles its candidates through the same kernel stage (cg_kernel_jobs).
 * Prefix pl_. docs/PIPELINE.md has the stages, their verifiers and dump points.
 *
 *     PlOptions o = pl_options_default();
 *     o.recipe = "recipes/llama.lua";  o.model = "llama-3-8b";  o.output = "llama.kiln";
 *     const CgTarget *t[] = {cg_target_find("sm_90a")};  o.targets = t;  o.n_targets = 1;
 *     PlStats st;  IrDiag d = {0};
 *     if (pl_compile(&o, &st, &d) != IR_OK) fprintf(stderr, "kiln: %s\n", d.msg);   // no file at output
 *
 * Depends on frontend (the recipe), ir (passes, schedule, families), codegen (backends) and the
 * runtime's package writer and weights header reader (g:file_dtype).
 */
#ifndef KILN_PL_H
#define KILN_PL_H

#include <stdio.h>

#include "cg.h"
#include "ir/gir.h"

typedef struct PlOptions {
    const char *recipe;      /* recipe path */
    const char *model;       /* named config; NULL: the recipe's default */
    const char *const *sets; /* "key=value" overrides, in order */
    int n_sets;
    long recipe_instr_limit;  /* Lua VM instructions the recipe may run; 0: the frontend's default */
    size_t recipe_mem_limit;  /* bytes the recipe's Lua state may hold; 0: the frontend's default */
    const char *output;      /* package path (pl_compile): written atomically */
    const CgTarget *const *targets; /* n_targets == 0: a graph-only package (kernel rows, no binaries) */
    int n_targets;
    /* The target whose facts (SMs, shared memory) shape every kernel's default config: its package row,
     * its IR hash (the tuning store's key) and its small-M variants, for all targets alike (a target that
     * rejects a default walks the candidates). pl_options_default: cg_target_defaults() (sm_90a), which
     * the tuner uses too, so tuned rows keep matching; NULL means the same. */
    const CgTarget *defaults_target;
    int threads;             /* compile threads; <= 0: every CPU */
    const char *cache_dir;   /* kernel binary cache; NULL: none */
    int emit_source;         /* 1: binaries are the backends' generated source (CgDriverOptions.source) */
    /* Dump point: a graph pass name (or "all": every pass), "schedule" (the launch plan), or "kernels"
     * (every kernel's IR at the config its binaries use), printed into dump after that stage. */
    const char *dump_after;
    IrBuf *dump;
    FILE *log; /* notes for a person (a default config that did not fit a target, ...); NULL: none */
} PlOptions;

PlOptions pl_options_default(void);

/* What a compile did, for `kiln compile -v`. */
typedef struct PlStats {
    int nodes, launches, kernels, missing; /* missing: kernels whose family kiln lacks (graph-only) */
    int binaries, cached;
    double ms_frontend, ms_passes, ms_schedule, ms_kernels, ms_binaries, ms_package, ms_total;
    char model[64];
    char warning[512]; /* one line when the kernel cache could not be used (the kernels still compiled) */
} PlStats;

/* 1 when name is a dump point pl_compile or pl_graph knows. */
int pl_dump_known(const char *name);

/* The recipe's graph after the passes (raw: as the recipe built it), verified. On success *out is the
 * caller's (gir_graph_destroy). Errors: the frontend's and the passes' status with their one line. */
IrStatus pl_graph(const PlOptions *o, int raw, GirGraph **out, IrDiag *d);

/* The checks pl_compile makes of g (a pl_graph result, not raw) short of compiling: its schedule, and
 * every kernel whose family kiln has built at its default config and verified, then discarded (what
 * `kiln ir` runs, so that it refuses what `kiln compile` would). Errors as pl_compile's. */
IrStatus pl_check(const PlOptions *o, const GirGraph *g, IrDiag *d);

/* The whole pipeline into the package at o->output. st may be NULL. On any error returns its status
 * with one line in d ("<recipe>: <why>"; a kernel's "<recipe>:<line>: <kernel>: <why>" and
 * "<recipe>:<line>: <kernel> for <target>: <why>", at the line of the op the kernel serves) and leaves
 * no file at output. */
IrStatus pl_compile(const PlOptions *o, PlStats *st, IrDiag *d);

#endif
