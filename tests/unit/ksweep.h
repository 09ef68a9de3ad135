/* ksweep.h — the driver shared by the kernel-family sweep tests (test_kfam_*.c): which executors to
 * run, building a family's kernel for a spec + config (a config that cannot serve the spec or the
 * target is INVALID, not FAILED), running it, checking a result and, on a failure, printing the kernel's
 * IR to stderr. Counts per executor are printed by ksweep_summary, which also fails a vacuous sweep.
 *
 * Tiers (docs/TESTING.md), KILN_TEST_TIER, else KILN_TEST_TIER_DEFAULT (which ctest sets):
 *   full     every config a sweep asks for; the host executor compiles each with LLVM's O2, as packages
 *            (make test-full, the GPU machine);
 *   standard (the Release build's) every config, numerically checked as in full; the host executor
 *            compiles the spec's default config, and the configs a hash of (the run's seed, the spec,
 *            the config) picks (about one in four), at O2, the others without the optimizer: O2 on these
 *            tiled kernels is ~40x the compile time, and which lowering a config takes is kiln's code,
 *            checked either way;
 *   reduced  (the sanitized build's) only the default config and the seed's sample; the sample runs
 *            without the optimizer (ASan finds kiln's memory errors, not LLVM's).
 * The sample rotates with the printed seed, and KILN_TEST_SEED replays it. Prefix ksweep_. */
#ifndef KILN_KSWEEP_H
#define KILN_KSWEEP_H

#include "ir/kfam.h"
#include "krun.h"

/* The executors usable here (interp, host, cuda order) into out; prints "skip <name>: <why>" for the
 * others. KILN_TEST_EXECUTORS (e.g. "interp,cuda") restricts them, for debugging. Returns the count. */
int ksweep_runners(const KRunner **out, int max);
/* 1 for compiled executors, which can afford larger shapes than the interpreter. */
int ksweep_big(const KRunner *r);

/* 1 when this process runs the next case of a sweep: KILN_TEST_SHARD=i/n (0 <= i < n) keeps the cases
 * whose index hashes to i (about one in n), so a long sweep spreads over processes (its kernels compile
 * on several cores at once); unset, every case. Call once per case (or group of cases a check spans), in the same order in
 * every shard. Skipped cases draw no random numbers: KILN_TEST_SEED repeats a run with the same shard.
 * ksweep_shard0: 1 in shard 0 (or unsharded), for the parts of a test outside its sweep. */
int ksweep_mine(void);
int ksweep_shard0(void);

/* A config from n (key, value) pairs; keys must be string literals. */
KirConfig ksweep_cfg(int n, ...);

typedef enum KsweepTier { KSWEEP_FULL, KSWEEP_STANDARD, KSWEEP_REDUCED } KsweepTier;
KsweepTier ksweep_tier(void);
/* 1 in the reduced tier. */
int ksweep_reduced(void);

/* Builds family s->family for s and cfg (NULL: defaults) into a. NULL when the config is INVALID for
 * the spec (counted), the build failed (a test failure, reported) or, in the reduced tier, the config is
 * not the spec's default and the sample left it out (counted as sampled out: a non-run, not INVALID). */
KirKernel *ksweep_build(const KRunner *r, IrArena *a, const KfamSpec *s, const KirConfig *cfg);
/* As ksweep_build, never sampled out: for a kernel that a check of an already built config needs (the
 * epilogue-none twin of a pair launch, a merge), or a fixed case outside the config sweep. */
KirKernel *ksweep_build_always(const KRunner *r, IrArena *a, const KfamSpec *s, const KirConfig *cfg);
/* The host target's own config for s: its family's defaults at m_hint (0: none) for the host row's facts,
 * the tiles a package's host binaries run (pl_compile.c). */
KirConfig ksweep_host_cfg(const KfamSpec *s, int64_t m_hint);
/* As ksweep_build_always, built with the host row's facts (which allow host-only tiles: qmatmul's BM < 16
 * with SWAP=0) and optimized as a package's on the host executor. */
KirKernel *ksweep_build_host(const KRunner *r, IrArena *a, const KfamSpec *s, const KirConfig *cfg);
/* Configs of executor r the reduced tier has left out so far (0 in the full tier). */
int ksweep_sampled_out(const KRunner *r);
/* Runs k on r. 1: ran; 0: the executor says the config is INVALID there (counted); -1: failed (reported
 * with the kernel's IR). */
int ksweep_run(const KRunner *r, const KirKernel *k, KRunArg *args);
/* Records one result check for executor r: on failure prints the printf-style message and the IR. */
void ksweep_check(const KRunner *r, const KirKernel *k, int ok, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Notes an error / tolerance ratio for executor r (the summary prints the worst, to show the margin). */
void ksweep_margin(const KRunner *r, double ratio);
/* Prints the tier and "<suite> <executor>: N checks passed, N failed, N invalid configs, N sampled out,
 * worst error/tolerance R" for each executor used; then each vacuous executor (ksweep_verdict) is a test
 * failure (kt_fail), with one line saying why. */
void ksweep_summary(const char *suite);
/* The number of executors used whose sweep is vacuous: no check passed, or at least 90% of the configs
 * it tried (sampled-out ones excluded) came back INVALID. Prints one line per such executor to stderr
 * (prefixed by suite); touches no counter. */
int ksweep_verdict(const char *suite);
/* Forgets every count, the shard's case counter and the tier (read again): for test_ksweep. */
void ksweep_reset(void);

#endif
