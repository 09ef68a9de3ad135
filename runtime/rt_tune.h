/* rt_tune.h — the tuning store applied to a loaded plan: for each kernel and each shape bucket the
 * runtime will meet, the tuned config's binary (stored in the store: the runtime compiles nothing)
 * becomes a variant that rt_plan_pick runs for launches of that bucket. Prefix rt_tune_.
 *
 *     RtTuneCounts c;
 *     rt_tune_apply(plan, exec, db, max_step_tokens, log, user, err, sizeof err);  // routes, notes
 *     ... load the plan's binaries; a tuned one that fails to load: rt_tune_drop(kernel, bin) ...
 *     rt_tune_report(plan, log, user, &c);   // one line per kernel: tuned / nearest / default
 *
 * Buckets (docs/AUTOTUNE.md): a kernel with the i32 param M (a linear layer's rows) meets T=1, T=2,
 * T=4, ... up to the first power of two >= max_rows; a launch of M rows the bucket T=2^ceil(log2 M)
 * (rt_plan_bucket). Any other kernel meets the one bucket "". Per bucket rt_tdb_lookup gives exact,
 * nearest or none; a match's binary (rt_tdb_binary_get) is used only when it fits: the executor's
 * target and format, the package kernel's entry and params, launch limits, a grid that parses, and a
 * SPLIT_K > 1 config only for buckets up to its BM. Anything else (missing, damaged, unfit) leaves the
 * bucket on the package's default with a note in the log: the store can make a run faster, never stop
 * it.
 */
#ifndef KILN_RT_TUNE_H
#define KILN_RT_TUNE_H

#include "rt_exec.h"
#include "rt_plan.h"
#include "rt_tunedb.h"

typedef struct RtTuneCounts {
    int tuned;   /* kernels whose every bucket has an exact match */
    int nearest; /* kernels with some bucket from the store, not all exact */
    int dflt;    /* kernels running the package's defaults only */
} RtTuneCounts;

typedef void (*RtTuneLog)(void *user, const char *line);

/* Looks every kernel of p up in db for x's device and target, adding the binaries that fit and routing
 * buckets to them (sets n_buckets, route, match and from of each kernel). Notes about what was ignored
 * go to log (may be NULL). Errors: only SQLite failures other than damage (KILN_ERR_IO, NOMEM), with
 * one line in err; damaged rows are notes. */
KilnStatus rt_tune_apply(RtPlan *p, RtExec *x, RtTdb *db, int64_t max_rows, RtTuneLog log, void *user,
                         char *err, int errlen);
/* Routes no bucket of k to binary bin any more (a tuned binary the executor could not load). */
void rt_tune_drop(RtPlanKernel *k, int bin);
/* Counts kernels by how they are tuned and, with log, says it per kernel:
 *   "tuning: rmsnorm_64: tuned" (every bucket exact) / "default" (none from the store)
 *   "tuning: matmul_64_64: T=1 tuned, T=2 nearest T=1, T=4..8 nearest T=16, T=16 tuned, T=32..2048
 *    nearest T=16" */
void rt_tune_report(const RtPlan *p, RtTuneLog log, void *user, RtTuneCounts *out);

#endif
