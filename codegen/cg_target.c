/* cg_target.c — the target table: one row per target, its limits and its facts.
 *
 * Limits (KirLimits): threads per program, shared memory per program (the opt-in maximum: 163 KiB on
 * A100, 227 KiB on H100/H200 and B200; LDS 64 KiB on MI300, 160 KiB on MI350), registers per thread.
 * AMDGPU code comes from the LLVM backend, whose GPU lowering keeps a program's tiles in one thread's
 * private stack (LLVM refuses frames over 128 KiB there): program_bytes leaves room for the rest.
 * Facts (KfamFacts): SMs or CUs (A100 108, H100/H200 132, B200 148, MI300X 304, MI355X 256), shared
 * memory per program (the limit's), the register file of one SM (64K 32-bit registers) or CU (4 SIMDs x
 * 512 VGPRs x 64 lanes = 128K). The host row: 1 "SM", no register file, its program memory limit as its
 * shared memory, and cpu = 1: the families' host rules (kfam_matmul.c, kfam_qmatmul.c) size its tiles by
 * the rows a launch has and for the L1 cache, and the compiler shapes host binaries by this row
 * (pl_compile.c), not by the reference's.
 */
#include "cg_target.h"

#include <string.h>

/* clang-format off */
static const CgTarget targets[] = {
    {"host", CG_BACKEND_HOST, 0, "this CPU (LLVM host code)", {"host", 1024, 1 << 30, 1 << 20, 0},
     {1, 1 << 30, 0, 1}},
    {"sm_80", CG_BACKEND_CUDA, 80, "NVIDIA Ampere (A100)", {"sm_80", 1024, 163 * 1024, 255, 0},
     {108, 163 * 1024, 65536, 0}},
    {"sm_90a", CG_BACKEND_CUDA, 90, "NVIDIA Hopper (H100, H200)", {"sm_90a", 1024, 227 * 1024, 255, 0},
     {132, 227 * 1024, 65536, 0}},
    {"sm_100a", CG_BACKEND_CUDA, 100, "NVIDIA Blackwell (B200)", {"sm_100a", 1024, 227 * 1024, 255, 0},
     {148, 227 * 1024, 65536, 0}},
    {"gfx942", CG_BACKEND_AMDGPU, 0, "AMD CDNA3 (MI300)", {"gfx942", 1024, 64 * 1024, 512, 64 * 1024},
     {304, 64 * 1024, 131072, 0}},
    {"gfx950", CG_BACKEND_AMDGPU, 0, "AMD CDNA4 (MI350)", {"gfx950", 1024, 160 * 1024, 512, 64 * 1024},
     {256, 160 * 1024, 131072, 0}},
};
/* clang-format on */

/* Named once: see cg_target.h. */
static const char *const defaults_target = "sm_90a";

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

const KirLimits *cg_target_limits(const CgTarget *t)
{
    return &t->limits;
}

const KfamFacts *cg_target_facts(const CgTarget *t)
{
    return &t->facts;
}

const CgTarget *cg_target_defaults(void)
{
    return cg_target_find(defaults_target);
}
