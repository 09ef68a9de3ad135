/* cg_target.h — the compile targets kiln knows, in one table: one row per target with its name, backend,
 * architecture, the limits kir_verify holds its kernels to and the facts the families' default rules read.
 * Prefix cg_. Backends (cuda/, llvm/) register here as they arrive.
 */
#ifndef KILN_CG_TARGET_H
#define KILN_CG_TARGET_H

#include "ir/kfam.h"
#include "ir/kir.h"

typedef enum CgBackendKind { CG_BACKEND_CUDA, CG_BACKEND_AMDGPU, CG_BACKEND_HOST } CgBackendKind;

typedef struct CgTarget {
    const char *name; /* as given to --target: "sm_90a", "gfx942", "host" */
    CgBackendKind backend;
    int sm; /* NVIDIA compute capability x10 (90 for sm_90a), 0 otherwise */
    const char *desc;
    KirLimits limits; /* resource limits for kir_verify (cg_target_limits) */
    KfamFacts facts;  /* what default rules read (cg_target_facts); facts.smem_block == limits.smem_bytes */
} CgTarget;

/* The target called `name`, or NULL. */
const CgTarget *cg_target_find(const char *name);
/* All targets, NULL-terminated by name. */
const CgTarget *cg_targets(int *count);
/* Target t's resource limits for kir_verify. */
const KirLimits *cg_target_limits(const CgTarget *t);
/* Target t's facts for the families' default rules (KfamFacts: SMs, shared memory, registers). */
const KfamFacts *cg_target_facts(const CgTarget *t);
/* The reference target whose facts shape every package's default configs: sm_90a (H100/H200), where the
 * defaults were measured. One kernel row per kernel serves every target of a package, so the row's
 * config, and the IR hash the tuning store keys by, come from this target's facts whatever the package's
 * targets; a target that rejects that config gets the closest candidate that fits
 * (kfam_config_candidates). `kiln compile` (PlOptions.defaults_target) and the tuner both use it. */
const CgTarget *cg_target_defaults(void);

#endif
