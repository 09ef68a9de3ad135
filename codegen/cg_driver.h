/* cg_driver.h — compile many kernels for many targets: in parallel threads, through a disk cache keyed
 * by (kernel IR text, target, backend, salt, kiln version and, for the host target, the host CPU).
 * Prefix cg_.
 *
 *     CgJob jobs[n] = {{.k = kernel, .target = cg_target_find("sm_90a")}, ...};
 *     IrDiag warn = {0};
 *     CgDriverOptions o = {.threads = 2, .cache_dir = "/home/u/.cache/kiln", .salt = build_id, .warn =
 * &warn}; cg_compile_jobs(jobs, n, &o);          // each job: status, msg, bin, cached if (warn.status) ...
 * warn.msg ...;      // the cache was not used (one line), the jobs still compiled
 */
#ifndef KILN_CG_DRIVER_H
#define KILN_CG_DRIVER_H

#include "cg.h"

typedef struct CgJob {
    const KirKernel *k;
    const CgTarget *target;
    const char *prefer; /* backend name, or NULL for the target's default */
    int kernel_row;     /* caller's bookkeeping (which kernel this binary is for); untouched */
    /* results */
    IrStatus status; /* IR_ERR_LIMIT / IR_ERR_UNSUPPORTED: the config is INVALID for this target */
    char msg[512];
    CgBinary bin; /* owned by the job: cg_binary_free */
    int cached;   /* 1 when served from the cache */
    char backend[16];
} CgJob;

typedef struct CgDriverOptions {
    int threads; /* <= 0: the number of online CPUs */
    /* NULL: no cache. Created with mode 0700 (and missing parents) when missing. Refused, with one line
     * in *warn, when it is not a directory owned by this user, or is writable by group or others:
     * anyone who can write it could plant code that kiln packages and runs. */
    const char *cache_dir;
    const char *salt; /* identifies the compiler build (stale entries never match); may be NULL */
    /* The host CPU in the keys of host-target jobs (other targets' keys never include it). NULL: the
     * LLVM backend's description of this machine (cg_host_cpu); host jobs are not cached when there is
     * none. Tests set it to simulate another machine. */
    const char *host_cpu;
    IrDiag *warn; /* may be NULL: gets the one-line reason when the cache directory is not used */
    /* 1: each job's binary is its backend's source text (CgBackend.source: "cuda-c", "llvm-ir") instead
     * of compiled code; never cached. For the golden kernel corpus and for reading what kiln generates. */
    int source;
} CgDriverOptions;

/* Compiles every job (kir_verify with the target's limits first). Never fails as a whole: each job has
 * its own status. Cache failures (an unusable directory, an unwritable or corrupt entry) only cost a
 * recompile: a corrupt, truncated or foreign entry is a miss and is removed. Opening the cache removes
 * temporary files that killed writers left more than an hour ago. Any number of threads and processes
 * may share one cache directory. */
void cg_compile_jobs(CgJob *jobs, int n, const CgDriverOptions *o);

#endif
