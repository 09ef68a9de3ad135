/* at_fake.h — a fake timer for the search driver: deterministic synthetic costs per (kernel, config,
 * bucket), injected failures (compile, launch, check, GPU fault) and a virtual clock, so the whole
 * search (enumeration, pruning, invalid candidates, recovery, ties, budget, the store) runs and is
 * tested without a GPU. Prefix at_fake_.
 *
 *     AtFake f = {.seed = 1, .compile_every = 7, .fault_every = 11};
 *     AtTimer t = at_fake_timer(&f);
 *     at_search(kernels, n, &t, &opts, &res, err, sizeof err);   // f.clock: virtual seconds spent
 *
 * Everything the fake reports is a pure function of (seed, kernel name, config, bucket, sample index),
 * except what a fault does: after one, every call fails with AT_CAND_FAULT until recover() (as a lost
 * CUDA context would). The kernel's default config (its family's defaults) never fails.
 */
#ifndef KILN_AT_FAKE_H
#define KILN_AT_FAKE_H

#include "at_search.h"

typedef struct AtFake {
    /* knobs; zero gives the default in brackets */
    uint64_t seed;
    double compile_s;  /* virtual seconds per prepare [0.05] */
    double launch_s;   /* virtual seconds per time() call besides the samples themselves [0.01] */
    double jitter;     /* relative spread of a candidate's samples around its cost [0: none] */
    double quantum_us; /* costs rounded up to a multiple of this, which makes ties [0: exact] */
    /* one config in N fails this way (0: none), chosen by hash; the four choices are independent */
    int compile_every, launch_every, check_every, fault_every;
    int recover_fails; /* recover() reports failure */
    /* the cost of cfg at b in microseconds; NULL: at_fake_cost's built-in */
    double (*cost)(void *cost_ctx, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b);
    void *cost_ctx;

    /* state, for tests to read */
    double clock; /* virtual seconds since the timer was made */
    int faulted;  /* a fault happened and recover() was not called yet */
    int prepares, timings, recovers, faults;
    int last_samples; /* n of the last time() call */
} AtFake;

/* A timer whose ctx is f. f must outlive the timer's use. */
AtTimer at_fake_timer(AtFake *f);
/* The cost the fake's samples center on (microseconds, before jitter): f->cost when set, else a
 * hash-derived value in [1, 2) times (1 + sqrt(product of the bucket's values)), rounded up to
 * quantum_us. */
double at_fake_cost(const AtFake *f, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b);
/* The failure the fake injects for cfg in prepare (compile, launch, check) or time (fault), or AT_CAND_OK. */
AtCandStatus at_fake_failure(const AtFake *f, const AtKernel *k, const KirConfig *cfg);

#endif
