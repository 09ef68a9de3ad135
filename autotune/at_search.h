/* at_search.h — the search driver: for each kernel, walk its family's declared search space (pruned by
 * the target's verifier limits), prepare each candidate (compile, launch, check against the default
 * config), time the survivors at every shape bucket, keep the fastest per bucket and write it to the
 * tuning store. Prefix at_. How a candidate is compiled, checked and timed is a pluggable AtTimer: the
 * engine's (at_engine.h: candidates compiled ahead on CPU threads, checked and timed inside the engine's
 * real steps, on a GPU or the host) or the fake one (at_fake.h: synthetic costs and failures, no GPU),
 * which tests every rule here.
 *
 *     AtKernel k = {.name = "rmsnorm_4096_bf16", .ir_hash = h, .family = kfam_find("rmsnorm"),
 *                   .spec = spec, .buckets = (const char *[]){"T=1", "T=128"}, .n_buckets = 2};
 *     AtSearchOptions o = {.limits = cg_target_limits(cg_target_find("sm_90a")), .budget_s = 600,
 *                          .store = db, .device = fp};
 *     AtSearchResult res;
 *     KilnStatus s = at_search(&k, 1, &timer, &o, &res, err, sizeof err);
 *     ... res.kernels[0].buckets[1].best: the index of the winner in res.kernels[0].cands ...
 *     at_search_result_free(&res);
 *
 * Rules (docs/AUTOTUNE.md): candidates run in kfam_config_candidates order (the default first, then the
 * configs closest to it); every candidate is prepared once and then timed at every bucket, so at any
 * stopping point each bucket has seen the same candidates. A candidate that fails any step is INVALID
 * (with its reason) and the search goes on; after a fault the timer's recover() is called, and when it
 * cannot recover the search stops (KILN_ERR_DEVICE) keeping what it measured. The winner per bucket is
 * the lowest median; a later candidate must beat it by more than tie_rel, so ties (and differences
 * within tie_rel) go to the earlier candidate and re-runs pick the same winner. The budget is split
 * over the kernels not yet tuned in proportion to their weights (evenly without weights; what one
 * leaves goes to the next); a kernel starts no new candidate once its share is spent and keeps the best
 * so far.
 */
#ifndef KILN_AT_SEARCH_H
#define KILN_AT_SEARCH_H

#include "at_store.h"
#include "ir/kfam.h"

enum { AT_MIN_SAMPLES = 20, AT_DEFAULT_MAX_CANDIDATES = 256 };

typedef enum AtCandStatus {
    AT_CAND_OK,      /* prepared (and timed, where it got that far) */
    AT_CAND_COMPILE, /* INVALID: failed to compile */
    AT_CAND_LAUNCH,  /* INVALID: failed to launch (too many registers, too much shared memory, ...) */
    AT_CAND_CHECK,   /* INVALID: its output differs from the default config's */
    AT_CAND_FAULT,   /* INVALID: faulted the GPU context */
    AT_CAND_TIMING,  /* INVALID: timing failed (a sample not finite or not positive) */
    AT_CAND_SKIPPED  /* not tried: the budget ran out first */
} AtCandStatus;

const char *at_cand_status_name(AtCandStatus s); /* "ok", "compile", "launch", "check", ... */

/* One kernel to tune: what the package says about it, and the buckets the runtime will meet. */
typedef struct AtKernel {
    const char *name;    /* the package's kernel name (for people and the store) */
    const char *ir_hash; /* the package's kernels.ir_hash: the store's key */
    const KfamFamily *family;
    KfamSpec spec;
    const char *const *buckets; /* bucket texts (rt_tdb_bucket_parse); at least one ("" for no sizes) */
    int n_buckets;
    /* Optional: configs tried before the declared space (the package's own binaries: what the runtime
     * runs with no store), and per bucket the index in `first` of the one the runtime would run there
     * (-1: none), whose median becomes the bucket's default_us. So a winner is never slower than what
     * an untuned engine runs, even when the budget stops the search early. */
    const KirConfig *first;
    int n_first;
    const int *base;
    /* Optional: its share of the budget relative to the other kernels' (the engine's timer gives its
     * time in the probe steps, so a matmul that takes 30% of a step gets more than a norm that takes
     * 1%); <= 0 counts as 1. */
    double weight;
} AtKernel;

typedef struct AtCand {
    KirConfig cfg;
    char config[RT_TDB_MAX_CONFIG]; /* kir_config_print's text: "BLOCK=1024 WARPS=4" */
    AtCandStatus status;
    char msg[200]; /* why it is INVALID */
} AtCand;

/* How candidates are prepared and timed. ctx is the timer's own. Messages: one line into msg. */
typedef struct AtTimer {
    void *ctx;
    /* Compiles cfg, launches it once and checks its output against the default config's on random inputs.
     * Returns AT_CAND_OK or why the candidate is INVALID. */
    AtCandStatus (*prepare)(void *ctx, const AtKernel *k, const KirConfig *cfg, char *msg, int msglen);
    /* Times a prepared candidate at bucket b: n samples in microseconds into us (warm-up is the timer's).
     * Returns AT_CAND_OK with all n samples written, or why the candidate is INVALID. */
    AtCandStatus (*time)(void *ctx, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b, double *us,
                         int n, char *msg, int msglen);
    /* Before a kernel's first candidate: the whole ordered list, so the timer may compile ahead while it
     * times (at_ahead.h). NULL: nothing. */
    void (*start)(void *ctx, const AtKernel *k, const AtCand *cands, int n);
    /* Seconds on the budget's clock (the fake timer's is virtual). NULL: the monotonic wall clock. */
    double (*now)(void *ctx);
    /* After AT_CAND_FAULT: makes the timer usable again (a new context or child). Returns 0 on success.
     * NULL: nothing to do. */
    int (*recover)(void *ctx);
    /* Whether the runtime would run cfg at bucket b (a split-K config serves only rows up to its BM): a
     * config that does not serve a bucket is not timed there and cannot win it. NULL: every bucket. */
    int (*serves)(void *ctx, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b);
    /* Called for each winning config before the results that name it are put into the store: writes
     * what the runtime needs to run it (its binary, at_store_put_binary) under device. Returns KILN_OK,
     * or a status with one line in err (the search then stops as for a store failure). NULL: nothing. */
    KilnStatus (*keep)(void *ctx, const AtKernel *k, const KirConfig *cfg, RtTdb *store, const char *device,
                       char *err, int errlen);
} AtTimer;

typedef struct AtProgress {
    const char *kernel;
    int kernel_index, n_kernels;
    int done, n_cands;       /* candidates of this kernel finished, and in all */
    const char *best_config; /* the best so far at the kernel's first bucket, or NULL */
    double best_us;          /* its median */
    double elapsed_s, eta_s; /* eta: a guess from the pace so far, capped by the budget */
} AtProgress;

typedef struct AtSearchOptions {
    const KirLimits *limits; /* the target's verifier limits (cg_target_limits); NULL: no budgets */
    int max_candidates;      /* per kernel, after pruning; 0: AT_DEFAULT_MAX_CANDIDATES */
    int samples;             /* timing samples per (candidate, bucket); raised to AT_MIN_SAMPLES */
    double budget_s;         /* for the whole run on the timer's clock; <= 0: no limit */
    double tie_rel;          /* a later candidate must be faster by more than this fraction; 0: exact */
    RtTdb *store;            /* where winners go (at_store_put), opened RT_TDB_WRITE; NULL: nowhere */
    const char *device;      /* the store's device fingerprint (at_store_device); needed with store */
    void (*progress)(void *ctx, const AtProgress *p);
    void *progress_ctx;
} AtSearchOptions;

typedef struct AtStats {
    double median_us, p20_us, p80_us;
    int samples; /* 0: not timed */
} AtStats;

/* Median, p20 and p80 of n samples (linear interpolation between closest ranks, numpy's default). */
void at_stats(const double *us, int n, AtStats *out);


typedef struct AtBucketResult {
    char bucket[RT_TDB_MAX_BUCKET]; /* canonical */
    AtStats *stats;                 /* per candidate (samples 0 where not timed) */
    int best;                       /* the winner's index in cands, or -1 */
    double default_us;              /* the default config's median, or -1 */
    int stored;                     /* 1: written to the store, with outcome put */
    AtPutOutcome put;
} AtBucketResult;

typedef struct AtKernelResult {
    const AtKernel *kernel; /* the caller's: the result points into the array given to at_search */
    KilnStatus status;      /* KILN_OK, or KILN_ERR_ARG for a spec or bucket the search cannot use */
    char msg[256];          /* its reason */
    int64_t n_space;        /* configs in the family's declared space */
    int n_pruned;           /* refused by the build or the verifier's limits */
    int n_cands;            /* candidates after pruning and max_candidates */
    int dflt;               /* the default config's index in cands, or -1 when it does not fit */
    int *base;              /* per bucket: the index in cands of the kernel's base config, or -1 */
    AtCand *cands;
    int tried, invalid, skipped;
    AtBucketResult *buckets; /* kernel->n_buckets */
    double seconds;          /* on the timer's clock */
} AtKernelResult;

typedef struct AtSearchResult {
    int n_kernels;
    AtKernelResult *kernels;
    int budget_exhausted; /* some candidate was skipped for the budget */
    double seconds;
} AtSearchResult;

/* Tunes n kernels. Fills *res (free it with at_search_result_free, whatever the status). Returns
 * KILN_OK when every kernel got as far as its budget allowed (a kernel the search cannot use has its
 * own status and message in res); KILN_ERR_DEVICE when the timer could not recover from a fault;
 * KILN_ERR_ARG for bad options; store failures and KILN_ERR_NOMEM as they come. Winners measured
 * before a failure are in res and, with a store, already written. */
KilnStatus at_search(const AtKernel *kernels, int n, const AtTimer *timer, const AtSearchOptions *o,
                     AtSearchResult *res, char *err, int errlen);
void at_search_result_free(AtSearchResult *res);

#endif
