/* cg_llvm_gpu.c — the GPU side of the LLVM backend: NVPTX (format "ptx") and AMDGPU (format "hsaco").
 *
 * GPU lowering is the correctness path, not the fast one (that is codegen/cuda): one program per thread
 * block / workgroup, executed by its thread 0 alone — any other thread returns at once, so any block size
 * works (launch with 1). Program ids are the block ids (ctaid / workgroup.id), program counts the grid
 * size in blocks (nctaid; AMDGPU: dispatch packet grid size / workgroup size). Kernel params are the
 * kernel's params in order: pointers as global (addrspace 1) pointers, scalars in their dtype's memory
 * type (i1 as a byte, f16/bf16 as 16 bits). Tiles live in per-thread local/scratch memory.
 *
 * NVPTX: an invalid CPU/PTX-version pair makes LLVM exit the process, so every pair is checked against
 * the table below (the PTX versions LLVM 22.1 knows, and each CPU's minimum) before a target machine
 * exists. AMDGPU: code object v5 (module flag amdhsa_code_object_version = 500), emitted relocatable
 * and linked with `ld.lld-22 -shared` into a loadable HSACO in a private temporary directory.
 */
#ifdef KILN_HAVE_LLVM

#include "cg_llvm_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct GpuTarget {
    const char *name;
    CgLlvmArch arch;
    const char *cpu;
    int ptx, min_ptx; /* NVPTX: the PTX ISA version we emit (x10) and the CPU's minimum */
} GpuTarget;

static const GpuTarget gpu_targets[] = {
    {"sm_80", CG_LLVM_NVPTX, "sm_80", 70, 70},     {"sm_90a", CG_LLVM_NVPTX, "sm_90a", 80, 80},
    {"sm_100a", CG_LLVM_NVPTX, "sm_100a", 86, 86}, {"gfx942", CG_LLVM_AMDGPU, "gfx942", 0, 0},
    {"gfx950", CG_LLVM_AMDGPU, "gfx950", 0, 0},
};

/* The PTX ISA versions LLVM 22.1's NVPTX target accepts as +ptxNN. */
static const int known_ptx[] = {32, 40, 41, 42, 43, 50, 60, 61, 62, 63, 64, 65, 70, 71, 72, 73,
                                74, 75, 76, 77, 78, 80, 81, 82, 83, 84, 85, 86, 87, 88, 90};

static int ptx_pair_ok(const GpuTarget *g)
{
    if (g->ptx < g->min_ptx) return 0;
    for (unsigned i = 0; i < sizeof known_ptx / sizeof known_ptx[0]; i++)
        if (known_ptx[i] == g->ptx) return 1;
    return 0;
}

static IrStatus gpu_unit(CgLlvmUnit *u, const CgTarget *t, IrDiag *d)
{
    const GpuTarget *g = NULL;
    for (unsigned i = 0; i < sizeof gpu_targets / sizeof gpu_targets[0]; i++)
        if (!strcmp(gpu_targets[i].name, t->name)) g = &gpu_targets[i];
    if (!g) return ir_diag_set(d, IR_ERR_UNSUPPORTED, "llvm: no GPU target %s", t->name);
    if (g->arch == CG_LLVM_AMDGPU) return cg_llvm_unit_init(u, g->arch, "amdgcn-amd-amdhsa", g->cpu, "", 1, d);
    if (!ptx_pair_ok(g))
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "llvm: %s with PTX ISA %d.%d is not a valid NVPTX pair",
                           g->cpu, g->ptx / 10, g->ptx % 10);
    char feat[16];
    snprintf(feat, sizeof feat, "+ptx%d", g->ptx);
    return cg_llvm_unit_init(u, g->arch, "nvptx64-nvidia-cuda", g->cpu, feat, 1, d);
}

static LLVMValueRef sreg(CgLlvmFn *f, const char *fmt, int axis)
{
    char name[64];
    snprintf(name, sizeof name, fmt, "xyz"[axis]);
    return cg_llvm_call(f, name, NULL, 0, NULL, 0);
}

/* AMDGPU program count along axis: grid size (work-items) / workgroup size, from the dispatch packet. */
static LLVMValueRef amd_nprog(CgLlvmFn *f, LLVMValueRef packet, int axis)
{
    LLVMBuilderRef b = f->b;
    LLVMTypeRef i8 = LLVMInt8TypeInContext(f->u->ctx), i16 = LLVMInt16TypeInContext(f->u->ctx);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(f->u->ctx), i64 = LLVMInt64TypeInContext(f->u->ctx);
    LLVMValueRef go = LLVMConstInt(i64, 12 + 4 * (unsigned)axis, 0),
                 wo = LLVMConstInt(i64, 4 + 2 * (unsigned)axis, 0);
    LLVMValueRef grid = LLVMBuildLoad2(b, i32, LLVMBuildInBoundsGEP2(b, i8, packet, &go, 1, ""), "");
    LLVMValueRef wg = LLVMBuildLoad2(b, i16, LLVMBuildInBoundsGEP2(b, i8, packet, &wo, 1, ""), "");
    LLVMSetAlignment(grid, 4);
    LLVMSetAlignment(wg, 2);
    return LLVMBuildUDiv(b, grid, LLVMBuildZExt(b, wg, i32, ""), "");
}

IrStatus cg_llvm_build_gpu(CgLlvmUnit *u, const KirKernel *k, IrDiag *d)
{
    int amd = u->arch == CG_LLVM_AMDGPU;
    char sym[256];
    cg_llvm_symbol(k, sym, sizeof sym);
    LLVMTypeRef pt[KIR_MAX_PARAMS];
    for (int i = 0; i < k->n_params; i++) {
        const KirType *t = &k->params[i].type;
        pt[i] = t->is_ptr ? LLVMPointerTypeInContext(u->ctx, 1) : cg_llvm_mem_type(u, t->dtype);
    }
    LLVMValueRef fn = LLVMAddFunction(
        u->mod, sym, LLVMFunctionType(LLVMVoidTypeInContext(u->ctx), pt, (unsigned)k->n_params, 0));
    LLVMSetFunctionCallConv(fn, amd ? LLVMAMDGPUKERNELCallConv : LLVMPTXKernelCallConv);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(u->ctx, nounwind, 0));
    if (amd) {
        LLVMTypeRef i32 = LLVMInt32TypeInContext(u->ctx);
        const char *key = "amdhsa_code_object_version";
        LLVMAddModuleFlag(u->mod, LLVMModuleFlagBehaviorError, key, strlen(key),
                          LLVMValueAsMetadata(LLVMConstInt(i32, 500, 0)));
    }
    CgLlvmFn f = {0};
    IrStatus s = cg_llvm_fn_begin(&f, u, k, fn, d);
    if (s != IR_OK) return s;
    LLVMBuilderRef b = f.b;
    const char *tid_fmt = amd ? "llvm.amdgcn.workitem.id.%c" : "llvm.nvvm.read.ptx.sreg.tid.%c";
    LLVMValueRef any = sreg(&f, tid_fmt, 0);
    any = LLVMBuildOr(b, any, sreg(&f, tid_fmt, 1), "");
    any = LLVMBuildOr(b, any, sreg(&f, tid_fmt, 2), "");
    LLVMBasicBlockRef work = LLVMAppendBasicBlockInContext(u->ctx, fn, "program");
    LLVMBasicBlockRef idle = LLVMAppendBasicBlockInContext(u->ctx, fn, "idle");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, any, LLVMConstInt(LLVMTypeOf(any), 0, 0), ""), work, idle);
    LLVMPositionBuilderAtEnd(b, idle);
    LLVMBuildRetVoid(b);
    LLVMPositionBuilderAtEnd(b, work);
    for (int i = 0; i < k->n_params; i++) {
        const KirType *t = &k->params[i].type;
        LLVMValueRef p = LLVMGetParam(fn, (unsigned)i);
        LLVMSetValueName2(p, k->params[i].name, strlen(k->params[i].name));
        if (t->is_ptr)
            f.param[i] = LLVMBuildAddrSpaceCast(b, p, LLVMPointerTypeInContext(u->ctx, 0), "");
        else
            f.param[i] = cg_llvm_from_mem(&f, t->dtype, p);
    }
    LLVMValueRef packet = amd ? cg_llvm_call(&f, "llvm.amdgcn.dispatch.ptr", NULL, 0, NULL, 0) : NULL;
    for (int a = 0; a < 3; a++) {
        f.pid[a] = sreg(&f, amd ? "llvm.amdgcn.workgroup.id.%c" : "llvm.nvvm.read.ptx.sreg.ctaid.%c", a);
        f.nprog[a] = amd ? amd_nprog(&f, packet, a) : sreg(&f, "llvm.nvvm.read.ptx.sreg.nctaid.%c", a);
    }
    s = cg_llvm_emit_body(&f);
    if (s == IR_OK) LLVMBuildRetVoid(b);
    cg_llvm_fn_finish(&f);
    return s;
}

/* Links a relocatable AMDGPU object into an HSACO (ld.lld-22, else ld.lld). */
static IrStatus link_hsaco(const KirKernel *k, void *obj, size_t size, void **data, size_t *out_size,
                           IrDiag *d)
{
    char dir[64], in[96], out[96], err[96];
    IrStatus s = cg_llvm_tmpdir(dir, sizeof dir, d);
    if (s != IR_OK) return s;
    snprintf(in, sizeof in, "%s/k.o", dir);
    snprintf(out, sizeof out, "%s/k.hsaco", dir);
    snprintf(err, sizeof err, "%s/ld.err", dir);
    s = cg_llvm_write_file(in, obj, size, d);
    for (int tool = 0; tool < 2 && s == IR_OK; tool++) {
        char *argv[] = {tool ? "ld.lld" : "ld.lld-22", "-shared", "-o", out, in, NULL};
        IrDiag local = {0};
        s = cg_llvm_spawn(argv, err, &local);
        if (s == IR_OK) break;
        if (s != IR_ERR_UNSUPPORTED || tool) {
            ir_diag_set(d, s, "kernel %s: %s", k->name, local.msg);
            break;
        }
        s = IR_OK;
    }
    if (s == IR_OK) s = cg_llvm_read_file(out, data, out_size, d);
    cg_llvm_rmtree(dir);
    return s;
}

IrStatus cg_llvm_compile_gpu(const KirKernel *k, const CgTarget *t, CgBinary *out, IrDiag *d)
{
    CgLlvmUnit u = {0};
    IrStatus s = gpu_unit(&u, t, d);
    if (s != IR_OK) return s;
    int amd = u.arch == CG_LLVM_AMDGPU;
    s = cg_llvm_build_gpu(&u, k, d);
    if (s == IR_OK) s = cg_llvm_unit_optimize(&u, k->name, d);
    void *obj = NULL;
    size_t size = 0;
    if (s == IR_OK)
        s = cg_llvm_unit_emit(&u, amd ? LLVMObjectFile : LLVMAssemblyFile, &obj, &size, k->name, d);
    cg_llvm_unit_dispose(&u);
    if (s != IR_OK) return s;
    if (amd) {
        s = link_hsaco(k, obj, size, &out->data, &out->size, d);
        free(obj);
        if (s != IR_OK) return s;
    } else {
        out->data = obj;
        out->size = size;
    }
    out->format = amd ? "hsaco" : "ptx";
    char sym[256];
    cg_llvm_symbol(k, sym, sizeof sym);
    if (!(out->entry = malloc(strlen(sym) + 1)))
        return ir_diag_set(d, IR_ERR_NOMEM, "kernel %s: out of memory", k->name);
    memcpy(out->entry, sym, strlen(sym) + 1);
    return IR_OK;
}

IrStatus cg_llvm_gpu_unit(CgLlvmUnit *u, const CgTarget *t, IrDiag *d)
{
    return gpu_unit(u, t, d);
}

#else
typedef int cg_llvm_gpu_unused;
#endif
