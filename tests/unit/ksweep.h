/* ksweep.h — the driver shared by the kernel-family sweep tests (test_kfam_*.c): which executors to
 * run, building a family's kernel for a spec + config (a config that cannot serve the spec or the
 * target is INVALID, not FAILED), running it, checking a result and, on a failure, printing the kernel's
 * IR to stderr. Counts per executor are printed by ksweep_summary. Prefix ksweep_. */
#ifndef KILN_KSWEEP_H
#define KILN_KSWEEP_H

#include "ir/kfam.h"
#include "krun.h"

/* The executors usable here (interp, host, cuda order) into out; prints "skip <name>: <why>" for the
 * others. KILN_TEST_EXECUTORS (e.g. "interp,cuda") restricts them, for debugging. Returns the count. */
int ksweep_runners(const KRunner **out, int max);
/* 1 for compiled executors, which can afford larger shapes than the interpreter. */
int ksweep_big(const KRunner *r);

/* 1 when this process runs the next case of a sweep: KILN_TEST_SHARD=i/n (0 <= i < n) keeps every n-th
 * case from the i-th, so a long sweep spreads over processes (its kernels compile on several cores at
 * once); unset, every case. Call once per case (or group of cases a check spans), in the same order in
 * every shard. Skipped cases draw no random numbers: KILN_TEST_SEED repeats a run with the same shard.
 * ksweep_shard0: 1 in shard 0 (or unsharded), for the parts of a test outside its sweep. */
int ksweep_mine(void);
int ksweep_shard0(void);

/* A config from n (key, value) pairs; keys must be string literals. */
KirConfig ksweep_cfg(int n, ...);

/* Builds family s->family for s and cfg (NULL: defaults) into a. NULL when the config is INVALID for
 * the spec (counted) or the build failed (a test failure, reported). */
KirKernel *ksweep_build(const KRunner *r, IrArena *a, const KfamSpec *s, const KirConfig *cfg);
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
/* Prints "<suite> <executor>: N checks passed, N failed, N invalid configs,
 * worst error/tolerance R" for each executor used. */
void ksweep_summary(const char *suite);

#endif
