/* cg_llvm.c — the LLVM backend: kernel IR -> LLVM IR -> host object code, NVPTX PTX, AMDGPU code objects.
 * This file is the backend's vtable and its compile driver (targets, one LLVM unit per compile, the O2
 * pipeline, code emission); cg_llvm_emit.c lowers the IR, cg_llvm_math.c the element semantics,
 * cg_llvm_host.c and cg_llvm_gpu.c wrap a kernel for the host and the GPUs.
 *
 * Invariants: LLVM's targets are initialized once (pthread_once); each compile owns its LLVMContext,
 * module and target machine, so compiles run in parallel threads. Output is deterministic (same kernel
 * -> same bytes). Built without LLVM (KILN_WITH_LLVM=OFF), the backend supports no target.
 */
#include "cg.h"
#include "cg_host.h"

#include <string.h>

#ifdef KILN_HAVE_LLVM

#include "cg_llvm_impl.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static char *host_triple, *host_cpu, *host_features, *host_id;

static void init_targets(void)
{
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
    char *t = LLVMGetDefaultTargetTriple();
    host_triple = LLVMNormalizeTargetTriple(t);
    LLVMDisposeMessage(t);
    host_cpu = LLVMGetHostCPUName();
    host_features = LLVMGetHostCPUFeatures();
    size_t n = strlen(host_triple) + strlen(host_cpu) + strlen(host_features) + 3;
    if ((host_id = malloc(n))) snprintf(host_id, n, "%s %s %s", host_triple, host_cpu, host_features);
}

const char *cg_host_cpu(void)
{
    pthread_once(&init_once, init_targets);
    return host_id;
}

void cg_llvm_host_info(const char **triple, const char **cpu, const char **features)
{
    pthread_once(&init_once, init_targets);
    *triple = host_triple;
    *cpu = host_cpu;
    *features = host_features;
}

void cg_llvm_symbol(const KirKernel *k, char *out, size_t n)
{
    size_t j = 0;
    if (n == 0) return;
    if (k->name[0] >= '0' && k->name[0] <= '9' && j + 1 < n) out[j++] = '_';
    for (const char *p = k->name; *p && j + 1 < n; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        out[j++] = ok ? c : '_';
    }
    out[j] = 0;
}

/* Keeps LLVM's diagnostics: errors (e.g. "stack frame size exceeds limit" on AMDGPU) become the compile's
 * status instead of LLVM printing them and exiting the process. Warnings and remarks are dropped. */
static void diag_handler(LLVMDiagnosticInfoRef di, void *ctx)
{
    CgLlvmUnit *u = ctx;
    if (LLVMGetDiagInfoSeverity(di) != LLVMDSError || u->diag_error) return;
    char *msg = LLVMGetDiagInfoDescription(di);
    snprintf(u->diag, sizeof u->diag, "%s", msg ? msg : "error");
    for (char *c = u->diag; *c; c++)
        if (*c == '\n') *c = ' ';
    LLVMDisposeMessage(msg);
    u->diag_error = 1;
}

IrStatus cg_llvm_unit_init(CgLlvmUnit *u, CgLlvmArch arch, const char *triple, const char *cpu,
                           const char *features, int optimize, IrDiag *d)
{
    pthread_once(&init_once, init_targets);
    memset(u, 0, sizeof *u);
    u->arch = arch;
    u->optimize = optimize;
    LLVMTargetRef target;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
        ir_diag_set(d, IR_ERR_UNSUPPORTED, "llvm: no target for %s: %s", triple, err ? err : "?");
        LLVMDisposeMessage(err);
        return IR_ERR_UNSUPPORTED;
    }
    LLVMRelocMode reloc = arch == CG_LLVM_HOST ? LLVMRelocPIC : LLVMRelocDefault;
    u->tm = LLVMCreateTargetMachine(target, triple, cpu, features,
                                    optimize ? LLVMCodeGenLevelDefault : LLVMCodeGenLevelNone, reloc,
                                    LLVMCodeModelDefault);
    if (!u->tm)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "llvm: cannot create a target machine for %s %s", triple,
                           cpu);
    u->ctx = LLVMContextCreate();
    LLVMContextSetDiagnosticHandler(u->ctx, diag_handler, u);
    u->mod = LLVMModuleCreateWithNameInContext("kiln", u->ctx);
    LLVMSetTarget(u->mod, triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(u->tm);
    LLVMSetModuleDataLayout(u->mod, dl);
    LLVMDisposeTargetData(dl);
    return IR_OK;
}

void cg_llvm_unit_dispose(CgLlvmUnit *u)
{
    if (u->mod) LLVMDisposeModule(u->mod);
    if (u->ctx) LLVMContextDispose(u->ctx);
    if (u->tm) LLVMDisposeTargetMachine(u->tm);
    memset(u, 0, sizeof *u);
}

IrStatus cg_llvm_unit_optimize(CgLlvmUnit *u, const char *kname, IrDiag *d)
{
    char *msg = NULL;
    if (LLVMVerifyModule(u->mod, LLVMReturnStatusAction, &msg)) {
        char *nl = msg ? strchr(msg, '\n') : NULL;
        if (nl) *nl = 0;
        ir_diag_set(d, IR_ERR_INTERNAL, "kernel %s: llvm: invalid IR (backend bug): %s", kname,
                    msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return IR_ERR_INTERNAL;
    }
    LLVMDisposeMessage(msg);
    if (!u->optimize) return IR_OK;
    LLVMPassBuilderOptionsRef opt = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(opt, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(opt, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(opt, 1);
    LLVMErrorRef e = LLVMRunPasses(u->mod, "default<O2>", u->tm, opt);
    LLVMDisposePassBuilderOptions(opt);
    if (e) {
        char *em = LLVMGetErrorMessage(e);
        ir_diag_set(d, IR_ERR_INTERNAL, "kernel %s: llvm: O2 pipeline: %s", kname, em);
        LLVMDisposeErrorMessage(em);
        return IR_ERR_INTERNAL;
    }
    return IR_OK;
}

IrStatus cg_llvm_unit_emit(CgLlvmUnit *u, LLVMCodeGenFileType kind, void **data, size_t *size,
                           const char *kname, IrDiag *d)
{
    LLVMMemoryBufferRef mb = NULL;
    char *err = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(u->tm, u->mod, kind, &err, &mb)) {
        ir_diag_set(d, IR_ERR_INTERNAL, "kernel %s: llvm: code generation: %s", kname, err ? err : "?");
        LLVMDisposeMessage(err);
        return IR_ERR_INTERNAL;
    }
    if (u->diag_error) {
        LLVMDisposeMemoryBuffer(mb);
        int limit = strstr(u->diag, "stack frame size") || strstr(u->diag, "exceeds limit") ||
                    strstr(u->diag, "local memory");
        return ir_diag_set(d, limit ? IR_ERR_LIMIT : IR_ERR_INTERNAL, "kernel %s: llvm: %s", kname, u->diag);
    }
    size_t n = LLVMGetBufferSize(mb);
    char *p = malloc(n + 1);
    if (!p) {
        LLVMDisposeMemoryBuffer(mb);
        return ir_diag_set(d, IR_ERR_NOMEM, "kernel %s: llvm: out of memory", kname);
    }
    memcpy(p, LLVMGetBufferStart(mb), n);
    p[n] = 0;
    LLVMDisposeMemoryBuffer(mb);
    *data = p;
    *size = n;
    return IR_OK;
}

static int llvm_supports(const CgTarget *t)
{
    static const char *const names[] = {"host", "sm_80", "sm_90a", "sm_100a", "gfx942", "gfx950"};
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(t->name, names[i])) return 1;
    return 0;
}

static IrStatus llvm_compile(const KirKernel *k, const CgTarget *t, CgBinary *out, IrDiag *d)
{
    memset(out, 0, sizeof *out);
    if (!llvm_supports(t))
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: the LLVM backend has no target %s", k->name,
                           t->name);
    IrStatus s = kir_verify(k, NULL, d);
    if (s != IR_OK) return s;
    double t0 = ir_now_ms();
    s = t->backend == CG_BACKEND_HOST ? cg_llvm_compile_host(k, out, d) : cg_llvm_compile_gpu(k, t, out, d);
    if (s != IR_OK) {
        cg_binary_free(out);
        return s;
    }
    out->compile_ms = ir_now_ms() - t0;
    out->threads = 1, out->smem = 0; /* a program runs on one thread (docs/BACKENDS.md) */
    return IR_OK;
}

IrStatus cg_llvm_dump_ir(const KirKernel *k, const CgTarget *t, int optimized, CgBinary *out, IrDiag *d)
{
    memset(out, 0, sizeof *out);
    if (!llvm_supports(t))
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: the LLVM backend has no target %s", k->name,
                           t->name);
    IrStatus s = kir_verify(k, NULL, d);
    if (s != IR_OK) return s;
    CgLlvmUnit u = {0};
    const char *triple, *cpu, *features;
    cg_llvm_host_info(&triple, &cpu, &features);
    if (t->backend == CG_BACKEND_HOST) {
        s = cg_llvm_unit_init(&u, CG_LLVM_HOST, triple, cpu, features, 1, d);
        if (s == IR_OK) s = cg_llvm_build_host(&u, k, d);
    } else {
        s = cg_llvm_gpu_unit(&u, t, d);
        if (s == IR_OK) s = cg_llvm_build_gpu(&u, k, d);
    }
    if (s == IR_OK && optimized) s = cg_llvm_unit_optimize(&u, k->name, d);
    if (s == IR_OK) {
        char *text = LLVMPrintModuleToString(u.mod);
        size_t n = strlen(text);
        out->data = malloc(n + 1);
        if (out->data) {
            memcpy(out->data, text, n + 1);
            out->size = n;
            out->format = "llvm-ir";
        } else {
            s = ir_diag_set(d, IR_ERR_NOMEM, "kernel %s: llvm: out of memory", k->name);
        }
        LLVMDisposeMessage(text);
    }
    cg_llvm_unit_dispose(&u);
    return s;
}

#else /* !KILN_HAVE_LLVM */

const char *cg_host_cpu(void)
{
    return NULL;
}

static int llvm_supports(const CgTarget *t)
{
    (void)t;
    return 0;
}

static IrStatus llvm_compile(const KirKernel *k, const CgTarget *t, CgBinary *out, IrDiag *d)
{
    memset(out, 0, sizeof *out);
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: this build has no LLVM (target %s)", k->name,
                       t->name);
}

IrStatus cg_llvm_dump_ir(const KirKernel *k, const CgTarget *t, int optimized, CgBinary *out, IrDiag *d)
{
    (void)optimized;
    return llvm_compile(k, t, out, d);
}

#endif

static IrStatus llvm_source(const KirKernel *k, const CgTarget *t, CgBinary *out, IrDiag *d)
{
    IrStatus s = cg_llvm_dump_ir(k, t, 0, out, d);
    out->threads = 1, out->smem = 0;
    if (s == IR_OK && !(out->entry = cg_strdup(k->name))) {
        cg_binary_free(out);
        s = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    }
    return s;
}

const CgBackend cg_llvm_backend = {"llvm", llvm_supports, llvm_compile, llvm_source};
