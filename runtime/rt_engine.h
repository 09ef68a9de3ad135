/* rt_engine.h — the engine's inside, for the autotuner (autotune/at_engine.c): not part of kiln.h.
 * Prefix rt_engine_. The tuner measures candidates inside the engine's real step, so every kernel gets
 * the inputs a model run gives it (token ids, block tables, a filled KV cache) with no per-family input
 * generator:
 *
 *     KilnEngine *e;
 *     rt_engine_open("model.kiln", NULL, 7, &opts, &e, err, sizeof err);   // NULL weights: random, seed 7
 *     rt_engine_buckets_init(e);                                            // every route: the package's
 *     int bin = rt_engine_binary_add(e, ki, config, "host-so", entry, grid, 1, 0, data, size, err, n);
 *     rt_engine_plan(e)->kernels[ki].route[b] = (signed char)bin;           // bucket b runs it
 *     RtEngineProbe pr = {.logits = lg, .next = nt, .kernel_us = us, .kernel_launches = nl};
 *     rt_engine_probe(e, tokens, 16, 4, &pr);                               // one timed step
 *     rt_engine_binary_pop(e, ki);                                          // unloaded, unrouted
 *
 * The engine stays single-threaded: one thread drives it, tuner included.
 */
#ifndef KILN_RT_ENGINE_H
#define KILN_RT_ENGINE_H

#include "kiln.h"
#include "rt_exec.h"
#include "rt_plan.h"

/* kiln_engine_open, with weights NULL meaning random weights from random_seed (rt_w_random: f32 / f16 /
 * bf16 values N(0, 0.08), norm weights around 1; any other dtype small finite codes), so a package can
 * be run, and tuned, without its checkpoint. */
KilnStatus rt_engine_open(const char *package, const char *weights, uint64_t random_seed,
                          const KilnEngineOptions *o, KilnEngine **out, char *err, int errlen);
RtPlan *rt_engine_plan(KilnEngine *e); /* owned by the engine */
RtExec *rt_engine_exec(KilnEngine *e);

/* Gives every launched kernel its tuning buckets as rt_tune_apply would (a kernel with M: T=1 .. the
 * first power of two >= max_step_tokens; any other: the one bucket "") with every route -1 (the
 * package's binaries). */
void rt_engine_buckets_init(KilnEngine *e);
/* Appends a binary to plan kernel ki (rt_plan_binary_add) and loads it. Returns its index in the
 * kernel's bins, or -1 with one line in err (no room, a bad grid, a load failure: nothing is left
 * behind). Routes nothing: set the kernel's route[] to use it. */
int rt_engine_binary_add(KilnEngine *e, int ki, const char *config, const char *format, const char *entry,
                         const char *grid, int block, int smem, const void *data, size_t size, char *err,
                         int errlen);
/* Unloads and removes kernel ki's last binary when rt_engine_binary_add added it (the package's stay);
 * buckets routed to it go back to the package's binaries. */
void rt_engine_binary_pop(KilnEngine *e, int ki);

/* What one probe step gives back; every pointer may be NULL. Arrays per plan kernel have n_kernels
 * entries. */
typedef struct RtEngineProbe {
    float *logits;        /* rows x vocab, f32 */
    int32_t *next;        /* rows: the sampled (greedy) tokens */
    double *kernel_us;    /* per kernel: microseconds of its launches in the step (launch marks) */
    int *kernel_launches; /* per kernel: its launches in the step */
    int *kernel_bucket;   /* per kernel: the bucket index its launches met (rt_plan_bucket); -1 not
                             launched, -2 launches in different buckets */
} RtEngineProbe;

/* Runs one step of one fresh sequence: tokens[0..n) prefilled, logit rows at its last `rows` tokens,
 * greedy sampling, every launch timed between marks (GPU events; the host clock on the host, where
 * launches are synchronous). Needs no request queued or running; 1 <= rows <= min(n, max_seqs), n <=
 * max_step_tokens and below the context. KILN_ERR_ARG for those; a device failure as it comes (the
 * engine's message). The sequence's KV pages are given back. */
KilnStatus rt_engine_probe(KilnEngine *e, const int32_t *tokens, int n, int rows, RtEngineProbe *out);
/* Checks the engine's bookkeeping between steps (tests call it after every step): each KV page's
 * reference count equals the number of live sequences (requests' and cached prefixes') holding it, the
 * free count is the pages nobody holds, no sequence belongs to two owners, a waiting request holds none,
 * and each sequence's length is its owner's computed tokens (no rejected draft left behind). Returns 0,
 * or -1 with the first broken invariant in err. */
int rt_engine_check(const KilnEngine *e, char *err, int errlen);

/* The most tokens a probe step may have: max_step_tokens, below the context and within the KV pool. */
int rt_engine_probe_max(const KilnEngine *e);

#endif
