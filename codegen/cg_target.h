/* cg_target.h — the compile targets kiln knows, in one table: name, backend, architecture.
 * Prefix cg_. Backends (cuda/, llvm/) register here as they arrive.
 */
#ifndef KILN_CG_TARGET_H
#define KILN_CG_TARGET_H

typedef enum CgBackendKind { CG_BACKEND_CUDA, CG_BACKEND_AMDGPU, CG_BACKEND_HOST } CgBackendKind;

typedef struct CgTarget {
    const char *name; /* as given to --target: "sm_90a", "gfx942", "host" */
    CgBackendKind backend;
    int sm; /* NVIDIA compute capability x10 (90 for sm_90a), 0 otherwise */
    const char *desc;
} CgTarget;

/* The target called `name`, or NULL. */
const CgTarget *cg_target_find(const char *name);
/* All targets, NULL-terminated by name. */
const CgTarget *cg_targets(int *count);

#endif
