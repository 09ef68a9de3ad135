/* at_engine.h — the AtTimer that measures candidates inside the engine's real step (docs/AUTOTUNE.md,
 * "How kiln tune measures"). Prefix at_engine_.
 *
 *     AtEngineOptions eo = {.package = "model.kiln", .device = -2, .kernels = "matmul*"};
 *     AtEngine *t;
 *     if (at_engine_create(&eo, &t, err, sizeof err)) fail(err);
 *     const AtKernel *ks;  int n = at_engine_kernels(t, &ks);   // the package's kernels and buckets
 *     AtTimer timer = at_engine_timer(t);
 *     char fp[RT_TDB_FP_LEN];  at_store_device(db, at_engine_device(t), fp, err, sizeof err);
 *     AtSearchOptions so = {.limits = at_engine_limits(t), .store = db, .device = fp, .budget_s = 600};
 *     at_search(ks, n, &timer, &so, &res, err, sizeof err);
 *     at_engine_destroy(t);
 *
 * An engine is opened on the package (the package's own binaries, random weights unless a weights file
 * is given) and probed once per step size T = 1, 2, 4, ... up to max_step_tokens: one fresh sequence of
 * T random tokens with min(T, max_seqs) logit rows. The probes give each kernel the buckets its
 * launches meet (a kernel with M: T=2^ceil(log2 M); any other: "") and the reference logits and tokens
 * of the package's default binaries. A candidate is compiled (at_compile), loaded as a variant of its
 * kernel and routed for every bucket it serves (the mechanism rt_tune uses for a store's binaries), so
 * a step runs it where the runtime would; prepare checks each bucket's step against the reference,
 * time takes one warm-up step and then one sample per step: the microseconds of the kernel's launches
 * in it (launch marks: CUDA events on a GPU, the clock on the host) divided by their number.
 */
#ifndef KILN_AT_ENGINE_H
#define KILN_AT_ENGINE_H

#include "at_compile.h"
#include "at_search.h"

/* The relative L2 distance of a candidate's logits from the default's: a reordered K sum in one matmul of
 * Llama-3-8B (random weights, 32 layers) moves the logits by 0.018-0.021, a broken kernel by O(1). */
#define AT_CHECK_TOL 5e-2

typedef struct AtEngineOptions {
    const char *package;
    const char *weights;       /* a weights file; NULL: random weights from seed */
    int device;                /* -2 the host, N GPU N, -1 GPU 0 when usable else the host */
    int max_step_tokens;       /* the largest step tuned for (0: the engine's default, min(plan, 2048)) */
    int host_threads;          /* threads per host launch (0: every CPU) */
    uint64_t seed;             /* random weights and probe tokens */
    double tol;                /* the check's tolerance; <= 0: AT_CHECK_TOL */
    const char *kernels;       /* only kernels whose name matches this glob; NULL: all */
    const CgDriverOptions *cg; /* compile options (threads, cache); NULL: one thread, no cache */
    int compile_threads;       /* candidates compiled ahead on this many threads; 0: inline; -1: auto
                                * (a GPU: min(4, CPUs - 1); the host: 0, its timing needs the CPUs) */
    void (*log)(void *user, const char *line); /* what was skipped and why; NULL: quiet */
    void *log_user;
} AtEngineOptions;

typedef struct AtEngine AtEngine;

/* Opens the engine, probes it and lists the kernels to tune. Errors (the package or weights do not
 * open, no kiln target for the device, no backend to compile for it, a failing probe): a status and one
 * line in err. */
KilnStatus at_engine_create(const AtEngineOptions *o, AtEngine **out, char *err, int errlen);
void at_engine_destroy(AtEngine *t); /* NULL is fine */

/* The kernels to tune with their buckets (owned by t). A kernel is left out, with a log line, when its
 * family is unknown, its spec does not parse, its IR at the default config does not hash to the
 * package's ir_hash (another kiln compiled it), or no probe step launches it. */
int at_engine_kernels(AtEngine *t, const AtKernel **out);
AtTimer at_engine_timer(AtEngine *t);
const RtTdbDevice *at_engine_device(AtEngine *t); /* as the runtime names it (rt_exec_tune_device) */
const char *at_engine_target(AtEngine *t);        /* "host", "sm_90a" */
const KirLimits *at_engine_limits(AtEngine *t);   /* the target's (cg_target_limits) */

#endif
