/* cg_driver.h — compile many kernels for many targets: in parallel threads, through a disk cache keyed
 * by (kernel IR text, target, backend, salt). Prefix cg_.
 *
 *     CgJob jobs[n] = {{.k = kernel, .target = cg_target_find("sm_90a")}, ...};
 *     CgDriverOptions o = {.threads = 2, .cache_dir = "/home/u/.cache/kiln", .salt = build_id};
 *     cg_compile_jobs(jobs, n, &o);          // each job: status, msg, bin, cached
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
    int threads;           /* <= 0: the number of online CPUs */
    const char *cache_dir; /* NULL: no cache. Created when missing. */
    const char *salt;      /* identifies the compiler build (stale entries never match); may be NULL */
} CgDriverOptions;

/* Compiles every job (kir_verify with the target's limits first). Never fails as a whole: each job has
 * its own status. Cache failures (unwritable dir, corrupt entry) only cost a recompile. */
void cg_compile_jobs(CgJob *jobs, int n, const CgDriverOptions *o);

#endif
