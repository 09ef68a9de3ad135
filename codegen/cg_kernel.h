/* cg_kernel.h — the kernel stage of compilation: a family's kernel for a spec, built at a config, verified
 * under a target's limits and compiled by the target's backend, with the launch geometry the backend
 * reports. `kiln compile`'s pipeline (pipeline/pl_compile.c) and the tuner's candidates
 * (autotune/at_compile.c) both compile through cg_kernel_jobs, so a tuned binary is exactly what a
 * package holds for that config. Prefix cg_.
 *
 *     IrArena *a = ir_arena_create();
 *     CgKernelJob j = {.fam = kfam_find("rmsnorm"), .spec = &spec, .target = cg_target_find("host"),
 *                      .retry = 1};                                  // cfg left empty: the defaults
 *     cg_kernel_jobs(&j, 1, a, &driver_options);
 *     if (j.status == IR_OK) ... j.k (the kernel, in a), j.bin.data / size / threads / smem ...
 *     cg_kernel_jobs_free(&j, 1);
 *     ir_arena_destroy(a);
 */
#ifndef KILN_CG_KERNEL_H
#define KILN_CG_KERNEL_H

#include "cg_driver.h"
#include "ir/kfam.h"

typedef enum CgKernelStage { CG_STAGE_BUILD = 1, CG_STAGE_COMPILE } CgKernelStage;

typedef struct CgKernelJob {
    /* in */
    const KfamFamily *fam;
    const KfamSpec *spec;  /* must outlive the call */
    const KfamFacts *facts; /* the facts default configs are shaped by; NULL: cg_target_defaults()'s */
    const KirKernel *k;    /* built already (fam and spec then only serve a retry), or NULL: built at cfg */
    KirConfig cfg;         /* with k NULL: the config to build; keys left out take the family's defaults */
    const CgTarget *target;
    /* 1: when the kernel does not fit the target (the backend reports a limit or refuses a construct:
     * INVALID there), walk the family's candidate configs, closest to the kernel's first, until one
     * compiles; the job then holds that one and `retried` is 1. The first failure stays when none does. */
    int retry;
    int row; /* the caller's bookkeeping; untouched */
    /* out */
    IrStatus status;     /* IR_ERR_LIMIT / IR_ERR_UNSUPPORTED: INVALID (the build or the backend refused) */
    CgKernelStage stage; /* which stage set a failing status */
    char msg[512];       /* one line when status is not IR_OK */
    CgBinary bin;        /* owned by the job (cg_kernel_jobs_free); threads and smem set by the backend */
    int cached, retried;
} CgKernelJob;

/* Builds every job's kernel (in arena a, serially), compiles them all through cg_compile_jobs with o
 * (parallel, cached; NULL: one thread, no cache), then retries the jobs that ask for it. Each job gets its
 * own status; the call as a whole never fails. On success job->k is the kernel the binary was made
 * from (in a). */
void cg_kernel_jobs(CgKernelJob *jobs, int n, IrArena *a, const CgDriverOptions *o);
void cg_kernel_jobs_free(CgKernelJob *jobs, int n);

/* 1 when configs a and b set the same keys to the same values (in any order). */
int cg_config_same(const KirConfig *a, const KirConfig *b);

#endif
