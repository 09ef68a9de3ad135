/* cg_target.c — the target table. */
#include "cg_target.h"

#include <string.h>

static const CgTarget targets[] = {
    {"host", CG_BACKEND_HOST, 0, "this CPU (LLVM host code)"},
    {"sm_80", CG_BACKEND_CUDA, 80, "NVIDIA Ampere (A100)"},
    {"sm_90a", CG_BACKEND_CUDA, 90, "NVIDIA Hopper (H100, H200)"},
    {"sm_100a", CG_BACKEND_CUDA, 100, "NVIDIA Blackwell (B200)"},
    {"gfx942", CG_BACKEND_AMDGPU, 0, "AMD CDNA3 (MI300)"},
    {"gfx950", CG_BACKEND_AMDGPU, 0, "AMD CDNA4 (MI350)"},
};

const CgTarget *cg_target_find(const char *name)
{
    for (unsigned i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (strcmp(targets[i].name, name) == 0) return &targets[i];
    return 0;
}

const CgTarget *cg_targets(int *count)
{
    *count = (int)(sizeof targets / sizeof targets[0]);
    return targets;
}
