/* cg_llvm_host.c — the host side of the LLVM backend: the kernel's host entry, "host-obj" compiles, the
 * in-process JIT (ORC LLJIT loading exactly that object) and linking objects into a shared library.
 *
 * Host entry: void <name>(void *const *args, const int32_t *grid). Scalar params are loaded once; then
 * for pid z, y, x (row-major, x fastest) the program body runs with pid = (x, y, z), nprog = grid. Beside
 * it, void <name>_range(args, grid, int32_t lo, int32_t hi) runs only the programs whose linear index
 * x + gx * (y + gy * z) lies in [lo, hi): the runtime spreads a launch over threads with it. The
 * object is position-independent code for this machine's CPU (host triple, CPU name and features), so a
 * host-obj is for the machine that compiled it (or one with the same CPU features).
 */
#define _POSIX_C_SOURCE 200809L

#include "cg.h"
#include "cg_host.h"

#include <stdlib.h>
#include <string.h>

#ifdef KILN_HAVE_LLVM

#include "cg_llvm_impl.h"

#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <stdio.h>
#include <unistd.h>

typedef void (*HostEntry)(void *const *args, const int32_t *grid);

struct CgHostKernel {
    LLVMOrcLLJITRef jit;
    HostEntry fn;
};

/* One host entry of k named sym: ranged 0 loops over every pid (z, y, x; x fastest); ranged 1 takes two
 * more i32 params lo, hi and runs the programs whose linear index x + gx * (y + gy * z) is in [lo, hi). */
static IrStatus build_entry(CgLlvmUnit *u, const KirKernel *k, const char *sym, int ranged, IrDiag *d)
{
    LLVMTypeRef ptr = LLVMPointerTypeInContext(u->ctx, 0), i32 = LLVMInt32TypeInContext(u->ctx);
    LLVMTypeRef pt[4] = {ptr, ptr, i32, i32};
    LLVMValueRef fn =
        LLVMAddFunction(u->mod, sym, LLVMFunctionType(LLVMVoidTypeInContext(u->ctx), pt, ranged ? 4 : 2, 0));
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(u->ctx, nounwind, 0));
    CgLlvmFn f = {0};
    IrStatus s = cg_llvm_fn_begin(&f, u, k, fn, d);
    if (s != IR_OK) return s;
    LLVMBuilderRef b = f.b;
    LLVMValueRef args = LLVMGetParam(fn, 0), grid = LLVMGetParam(fn, 1);
    for (int i = 0; i < k->n_params; i++) {
        const KirType *t = &k->params[i].type;
        LLVMValueRef idx = LLVMConstInt(LLVMInt64TypeInContext(u->ctx), (unsigned long long)i, 0);
        LLVMValueRef slot = LLVMBuildLoad2(b, ptr, LLVMBuildInBoundsGEP2(b, ptr, args, &idx, 1, ""), "");
        if (t->is_ptr)
            f.param[i] = LLVMBuildLoad2(b, ptr, slot, k->params[i].name);
        else
            f.param[i] =
                cg_llvm_from_mem(&f, t->dtype, LLVMBuildLoad2(b, cg_llvm_mem_type(u, t->dtype), slot, ""));
    }
    for (int a = 0; a < 3; a++) {
        LLVMValueRef idx = LLVMConstInt(LLVMInt64TypeInContext(u->ctx), (unsigned long long)a, 0);
        f.nprog[a] = LLVMBuildLoad2(b, i32, LLVMBuildInBoundsGEP2(b, i32, grid, &idx, 1, ""), "");
    }
    CgLlvmLoop loops[3];
    LLVMValueRef zero = LLVMConstInt(i32, 0, 0), one = LLVMConstInt(i32, 1, 0);
    int n_loops = ranged ? 1 : 3;
    if (ranged) {
        LLVMValueRef p = cg_llvm_loop_begin(&f, LLVMGetParam(fn, 2), LLVMGetParam(fn, 3), one, &loops[0]);
        LLVMValueRef yz = LLVMBuildUDiv(b, p, f.nprog[0], "");
        f.pid[0] = LLVMBuildURem(b, p, f.nprog[0], "");
        f.pid[1] = LLVMBuildURem(b, yz, f.nprog[1], "");
        f.pid[2] = LLVMBuildUDiv(b, yz, f.nprog[1], "");
    } else {
        for (int a = 2; a >= 0; a--)
            f.pid[a] = cg_llvm_loop_begin(&f, zero, f.nprog[a], one, &loops[a]);
    }
    s = cg_llvm_emit_body(&f);
    if (s == IR_OK) {
        for (int a = 0; a < n_loops; a++)
            cg_llvm_loop_end(&f, &loops[a]);
        LLVMBuildRetVoid(b);
    }
    cg_llvm_fn_finish(&f);
    return s;
}

IrStatus cg_llvm_build_host(CgLlvmUnit *u, const KirKernel *k, IrDiag *d)
{
    char sym[256], range[300];
    cg_llvm_symbol(k, sym, sizeof sym);
    snprintf(range, sizeof range, "%s_range", sym);
    IrStatus s = build_entry(u, k, sym, 0, d);
    return s == IR_OK ? build_entry(u, k, range, 1, d) : s;
}

/* Compiles k to a host object; *sym gets the entry's name (malloc'd). */
static IrStatus host_object(const KirKernel *k, int optimize, void **data, size_t *size, char **sym,
                            IrDiag *d)
{
    const char *triple, *cpu, *features;
    cg_llvm_host_info(&triple, &cpu, &features);
    CgLlvmUnit u = {0};
    IrStatus s = cg_llvm_unit_init(&u, CG_LLVM_HOST, triple, cpu, features, optimize, d);
    if (s == IR_OK) s = cg_llvm_build_host(&u, k, d);
    if (s == IR_OK) s = cg_llvm_unit_optimize(&u, k->name, d);
    if (s == IR_OK) s = cg_llvm_unit_emit(&u, LLVMObjectFile, data, size, k->name, d);
    cg_llvm_unit_dispose(&u);
    if (s != IR_OK) return s;
    char name[256];
    cg_llvm_symbol(k, name, sizeof name);
    if (!(*sym = strdup(name))) {
        free(*data);
        return ir_diag_set(d, IR_ERR_NOMEM, "kernel %s: llvm: out of memory", k->name);
    }
    return IR_OK;
}

IrStatus cg_host_object(const KirKernel *k, CgBinary *out, IrDiag *d)
{
    *out = (CgBinary){0};
    IrStatus s = host_object(k, 1, &out->data, &out->size, &out->entry, d);
    if (s == IR_OK) out->format = "host-obj";
    return s;
}

IrStatus cg_host_object_unoptimized(const KirKernel *k, CgBinary *out, IrDiag *d)
{
    *out = (CgBinary){0};
    IrStatus s = host_object(k, 0, &out->data, &out->size, &out->entry, d);
    if (s == IR_OK) out->format = "host-obj";
    return s;
}

/* Target "host": the kernel's object linked into a shared library of its own ("host-so"), which the
 * runtime loads with dlopen (it links no compiler or linker). */
IrStatus cg_llvm_compile_host(const KirKernel *k, CgBinary *out, IrDiag *d)
{
    CgBinary obj;
    char dir[64], so[96];
    IrStatus s = cg_host_object(k, &obj, d);
    if (s != IR_OK) return s;
    if ((s = cg_llvm_tmpdir(dir, sizeof dir, d)) == IR_OK) {
        snprintf(so, sizeof so, "%s/kernel.so", dir);
        s = cg_host_link_shared(&obj, 1, so, d);
        if (s == IR_OK) s = cg_llvm_read_file(so, &out->data, &out->size, d);
        cg_llvm_rmtree(dir);
    }
    if (s == IR_OK) {
        out->format = "host-so";
        out->entry = obj.entry;
        obj.entry = NULL;
    }
    cg_binary_free(&obj);
    return s;
}

int cg_host_jit_available(void)
{
    return 1;
}

static IrStatus jit_error(LLVMErrorRef e, const char *entry, const char *what, IrDiag *d)
{
    char *m = LLVMGetErrorMessage(e);
    ir_diag_set(d, IR_ERR_INTERNAL, "%s: llvm jit: %s: %s", entry, what, m);
    LLVMDisposeErrorMessage(m);
    return IR_ERR_INTERNAL;
}

IrStatus cg_host_load(const CgBinary *obj, CgHostKernel **out, IrDiag *d)
{
    *out = NULL;
    if (!obj || !obj->data || !obj->size || !obj->entry || !obj->format || strcmp(obj->format, "host-obj"))
        return ir_diag_set(d, IR_ERR_INPUT, "llvm: cg_host_load takes a host-obj binary with its entry");
    IrStatus s = IR_OK;
    CgHostKernel *hk = calloc(1, sizeof *hk);
    LLVMErrorRef e = NULL;
    if (!hk) return ir_diag_set(d, IR_ERR_NOMEM, "%s: llvm: out of memory", obj->entry);
    if ((e = LLVMOrcCreateLLJIT(&hk->jit, LLVMOrcCreateLLJITBuilder()))) {
        s = jit_error(e, obj->entry, "create", d);
        goto fail;
    }
    LLVMOrcDefinitionGeneratorRef gen;
    if ((e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(hk->jit),
                                                                  NULL, NULL))) {
        s = jit_error(e, obj->entry, "process symbols", d);
        goto fail;
    }
    LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(hk->jit);
    LLVMOrcJITDylibAddGenerator(jd, gen);
    LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRangeCopy(obj->data, obj->size, "kiln-host-obj");
    if ((e = LLVMOrcLLJITAddObjectFile(hk->jit, jd, mb))) {
        s = jit_error(e, obj->entry, "add object", d);
        goto fail;
    }
    LLVMOrcExecutorAddress addr = 0;
    if ((e = LLVMOrcLLJITLookup(hk->jit, &addr, obj->entry))) {
        s = jit_error(e, obj->entry, "lookup", d);
        goto fail;
    }
    hk->fn = (HostEntry)(uintptr_t)addr;
    *out = hk;
    return IR_OK;
fail:
    cg_host_free(hk);
    return s;
}

IrStatus cg_host_jit(const KirKernel *k, CgHostKernel **out, IrDiag *d)
{
    *out = NULL;
    IrStatus s = kir_verify(k, NULL, d);
    if (s != IR_OK) return s;
    CgBinary obj;
    if ((s = cg_host_object(k, &obj, d)) != IR_OK) return s;
    s = cg_host_load(&obj, out, d);
    cg_binary_free(&obj);
    return s;
}

void cg_host_call(CgHostKernel *hk, void *const *args, const int32_t grid[3])
{
    hk->fn(args, grid);
}

void cg_host_free(CgHostKernel *hk)
{
    if (!hk) return;
    if (hk->jit) {
        LLVMErrorRef e = LLVMOrcDisposeLLJIT(hk->jit);
        if (e) LLVMConsumeError(e);
    }
    free(hk);
}

IrStatus cg_host_link_shared(const CgBinary *objs, int n, const char *out_path, IrDiag *d)
{
    char dir[64], err[96];
    size_t plen = strlen(out_path);
    char *tmp = malloc(plen + 16);
    char **argv = calloc((size_t)n + 8, sizeof *argv);
    char(*names)[96] = calloc((size_t)n + 1, sizeof *names);
    IrStatus s = IR_OK;
    int have_dir = 0, have_tmp = 0;
    if (!tmp || !argv || !names) {
        s = ir_diag_set(d, IR_ERR_NOMEM, "llvm: link %s: out of memory", out_path);
        goto done;
    }
    for (int i = 0; i < n; i++)
        if (!objs[i].format || strcmp(objs[i].format, "host-obj")) {
            s = ir_diag_set(d, IR_ERR_INPUT, "llvm: link %s: binary %d is not a host-obj", out_path, i);
            goto done;
        }
    if ((s = cg_llvm_tmpdir(dir, sizeof dir, d)) != IR_OK) goto done;
    have_dir = 1;
    snprintf(err, sizeof err, "%s/link.err", dir);
    for (int i = 0; i < n && s == IR_OK; i++) {
        snprintf(names[i], sizeof names[i], "%s/k%d.o", dir, i);
        s = cg_llvm_write_file(names[i], objs[i].data, objs[i].size, d);
    }
    if (s != IR_OK) goto done;
    snprintf(tmp, plen + 16, "%s.tmpXXXXXX", out_path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        s = ir_diag_set(d, IR_ERR_IO, "llvm: cannot create a file next to %s", out_path);
        goto done;
    }
    close(fd);
    have_tmp = 1;
    for (int tool = 0; tool < 2; tool++) {
        int a = 0;
        argv[a++] = tool ? "ld.lld-22" : "cc";
        argv[a++] = "-shared";
        argv[a++] = "-o";
        argv[a++] = tmp;
        for (int i = 0; i < n; i++)
            argv[a++] = names[i];
        if (!tool) argv[a++] = "-lm";
        argv[a] = NULL;
        IrDiag local = {0};
        s = cg_llvm_spawn(argv, err, &local);
        if (s != IR_ERR_UNSUPPORTED || tool) {
            if (s != IR_OK) ir_diag_set(d, s, "%s", local.msg);
            break;
        }
    }
    if (s == IR_OK && rename(tmp, out_path) != 0)
        s = ir_diag_set(d, IR_ERR_IO, "llvm: cannot rename %s to %s", tmp, out_path);
    if (s == IR_OK) have_tmp = 0;
done:
    if (have_tmp) unlink(tmp);
    if (have_dir) cg_llvm_rmtree(dir);
    free(tmp);
    free(argv);
    free(names);
    return s;
}

#else /* !KILN_HAVE_LLVM */

struct CgHostKernel {
    int unused;
};

int cg_host_jit_available(void)
{
    return 0;
}

IrStatus cg_host_jit(const KirKernel *k, CgHostKernel **out, IrDiag *d)
{
    *out = NULL;
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: this build has no LLVM (host JIT)", k->name);
}

void cg_host_call(CgHostKernel *hk, void *const *args, const int32_t grid[3])
{
    (void)hk;
    (void)args;
    (void)grid;
}

void cg_host_free(CgHostKernel *hk)
{
    free(hk);
}

IrStatus cg_host_object(const KirKernel *k, CgBinary *out, IrDiag *d)
{
    *out = (CgBinary){0};
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: this build has no LLVM (host code)", k->name);
}

IrStatus cg_host_object_unoptimized(const KirKernel *k, CgBinary *out, IrDiag *d)
{
    return cg_host_object(k, out, d);
}

IrStatus cg_host_load(const CgBinary *obj, CgHostKernel **out, IrDiag *d)
{
    (void)obj;
    *out = NULL;
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "llvm: this build has no LLVM (host JIT)");
}

IrStatus cg_host_link_shared(const CgBinary *objs, int n, const char *out_path, IrDiag *d)
{
    (void)objs;
    (void)n;
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "llvm: cannot link %s: this build has no LLVM", out_path);
}

#endif
