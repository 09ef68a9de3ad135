/* sched.h — lowering: graph IR -> kernel schedule. Which kernel (family + spec) runs for each graph op,
 * in which order, on which buffers; and where every activation lives in one arena (buffer planning).
 * Prefix sched_. Everything is allocated in the caller's arena.
 *
 *     Schedule *s;
 *     SchedOptions o = sched_options_default();     // max tokens per step etc. size the arena
 *     if (sched_build(graph, &o, arena, &s, &d) != IR_OK) ...
 *     for each s->launches[i]: kernel s->kernels[launch.kernel], args launch.args[...]
 *
 * Symbolic sizes stay symbolic in launches (an argument "sym T" is the step's token count); the arena is
 * planned at the option's maxima, so a step never needs more than act_bytes of activation memory.
 */
#ifndef KILN_IR_SCHED_H
#define KILN_IR_SCHED_H

#include "gir.h"
#include "kfam.h"

typedef enum SchedBufKind {
    SCHED_BUF_INPUT,  /* a graph input: the runtime fills it per step (tokens, positions, KV caches, ...) */
    SCHED_BUF_WEIGHT, /* a checkpoint tensor, by name */
    SCHED_BUF_ACT,    /* an activation: a slice of the activation arena */
} SchedBufKind;

typedef struct SchedBuf {
    const char *name; /* input/weight name; "%N" (printed value number) for activations */
    SchedBufKind kind;
    GirType type;
    int64_t bytes;      /* at the planned maxima */
    int64_t offset;     /* activations: byte offset in the arena; -1 otherwise */
    int first, last;    /* launches that define / last use it (activations) */
    const char *output; /* graph output name, or NULL */
} SchedBuf;

/* SCHED_ARG_RUNTIME: a per-step value the runtime computes from the step's batch, named by `rt`:
 *   "max_q"        the longest query count of one sequence in this step (max over b of cu_q[b+1] - cu_q[b]);
 *                  sizes the attention grid.
 *   "n_splits"     attention's split-KV count for this step (>= 1; flash-decoding: > 1 when few sequences
 *                  with long contexts leave SMs idle), with T * heads * n_splits <= max_split_rows.
 *   "split_tokens" T when n_splits > 1, else 0: the attention_merge grid (0 rows: the launch is skipped,
 *                  attention wrote its output itself).
 * Printed as "rt:<name>" by sched_launch_args. */
typedef enum SchedArgKind { SCHED_ARG_BUF, SCHED_ARG_SYM, SCHED_ARG_RUNTIME } SchedArgKind;

typedef struct SchedArg {
    SchedArgKind kind;
    int buf;        /* SCHED_ARG_BUF: index into bufs */
    int64_t offset; /* SCHED_ARG_BUF of a weight: bytes into it (a w4a16 weight's scales, zeros), else 0 */
    int sym;        /* SCHED_ARG_SYM: graph symbol index (the runtime passes its value for this step) */
    const char *rt; /* SCHED_ARG_RUNTIME: the value's name (static string) */
} SchedArg;

enum { SCHED_MAX_ARGS = 16 };

typedef struct SchedLaunch {
    int kernel; /* index into kernels */
    int node;   /* graph node id it came from */
    int n_args;
    SchedArg args[SCHED_MAX_ARGS]; /* in the family's param order */
} SchedLaunch;

typedef struct SchedKernel {
    KfamSpec spec;
    const KfamFamily *fam; /* NULL: the family is not implemented in this build (reported, not fatal) */
    const char *name;      /* kfam_spec_name */
    int uses;              /* launches of it */
} SchedKernel;

typedef struct SchedOptions {
    int64_t max_tokens;     /* T: tokens in one step */
    int64_t max_seqs;       /* B: sequences in one step */
    int64_t max_rows;       /* R: rows that need logits */
    int64_t max_split_rows; /* attention split-KV workspace rows (token x head x split) */
} SchedOptions;

typedef struct Schedule {
    const GirGraph *g;
    SchedOptions opt;
    int n_bufs, n_launches, n_kernels;
    SchedBuf *bufs;
    SchedLaunch *launches;
    SchedKernel *kernels;
    int64_t act_bytes; /* activation arena size */
} Schedule;

SchedOptions sched_options_default(void); /* 8192 tokens, 256 sequences, 256 rows, 65536 split rows */

/* Lowers a verified graph (after gir_run_passes). IR_ERR_UNSUPPORTED for an op no family can serve. */
IrStatus sched_build(const GirGraph *g, const SchedOptions *o, IrArena *a, Schedule **out, IrDiag *d);

/* Readable, deterministic listing: kernels, launches with their arguments, the arena plan. */
void sched_print(const Schedule *s, IrBuf *b);
/* One launch's arguments as text ("x=act:%12 w=weight:model.norm.weight n_rows=sym:T"), the package's
 * launch_plan format (docs/PACKAGE.md). */
void sched_launch_args(const Schedule *s, const SchedLaunch *l, IrBuf *b);

#endif
