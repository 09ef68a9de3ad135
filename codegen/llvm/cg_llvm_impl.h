/* cg_llvm_impl.h — shared by the LLVM backend's files only (the .c files in codegen/llvm); everything here
 * needs LLVM, so the whole header is behind KILN_HAVE_LLVM.
 *
 * One compile = one CgLlvmUnit (its own LLVMContext, module and target machine: compiles run in
 * parallel threads and share nothing). The kernel body is emitted by cg_llvm_emit_body into a function
 * that a wrapper (host: cg_llvm_host.c, GPU: cg_llvm_gpu.c) has set up: parameters, program ids and
 * program counts as LLVM values, and a builder positioned where the body goes.
 */
#ifndef KILN_CG_LLVM_IMPL_H
#define KILN_CG_LLVM_IMPL_H

#ifdef KILN_HAVE_LLVM

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "cg.h"

typedef enum CgLlvmArch { CG_LLVM_HOST, CG_LLVM_NVPTX, CG_LLVM_AMDGPU } CgLlvmArch;

typedef struct CgLlvmUnit {
    CgLlvmArch arch;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMTargetMachineRef tm;
    int optimize; /* 1: default<O2> and the default code generation level (products); 0: kiln's IR as
                     emitted, fast instruction selection (cg_host_object_unoptimized) */
    /* The first error diagnostic LLVM reported (our handler keeps LLVM from printing it and calling
     * exit(1), which is what it does for errors without a handler). */
    int diag_error;
    char diag[256];
} CgLlvmUnit;

/* The function being emitted. The wrapper fills param/pid/nprog, creates fn with an "entry" block that
 * holds only allocas (ab appends there; cg_llvm_fn_finish adds its branch) and positions b in the block
 * where the body starts. Pointer params are generic (address space 0) pointers. */
typedef struct CgLlvmFn {
    CgLlvmUnit *u;
    const KirKernel *k;
    LLVMBuilderRef b, ab;
    LLVMValueRef fn;
    LLVMBasicBlockRef entry, start;
    LLVMValueRef param[KIR_MAX_PARAMS];
    LLVMValueRef pid[3], nprog[3];
    LLVMValueRef *vals;         /* by KirValue id: a scalar (register type) or a tile's base pointer */
    int *dead_head, *dead_next; /* tiles whose storage dies at a walk position (cg_llvm_emit.c) */
    int pos;
    IrDiag *d;
} CgLlvmFn;

/* ---- cg_llvm.c: targets, units, the pipeline ---- */
/* Creates the context, an empty module and the target machine for arch/cpu/features (validated by the
 * caller), with the module's triple and data layout set; optimize as CgLlvmUnit.optimize. IR_ERR_UNSUPPORTED
 * when LLVM lacks the target. */
IrStatus cg_llvm_unit_init(CgLlvmUnit *u, CgLlvmArch arch, const char *triple, const char *cpu,
                           const char *features, int optimize, IrDiag *d);
void cg_llvm_unit_dispose(CgLlvmUnit *u);
/* Verifies the module (a failure is a backend bug: IR_ERR_INTERNAL) and runs default<O2> (when
 * u->optimize). */
IrStatus cg_llvm_unit_optimize(CgLlvmUnit *u, const char *kname, IrDiag *d);
/* Emits an object file or assembly (PTX) into a malloc'd buffer, NUL-terminated (not counted in size). */
IrStatus cg_llvm_unit_emit(CgLlvmUnit *u, LLVMCodeGenFileType kind, void **data, size_t *size,
                           const char *kname, IrDiag *d);
/* The host's triple, CPU and features, computed once. */
void cg_llvm_host_info(const char **triple, const char **cpu, const char **features);
/* Writes the symbol name for kernel k ([A-Za-z0-9_], not starting with a digit) into out. */
void cg_llvm_symbol(const KirKernel *k, char *out, size_t n);

/* ---- cg_llvm_emit.c: kernel IR -> LLVM IR ---- */
/* Starts a function: fn must exist; creates entry/start blocks and the two builders. */
IrStatus cg_llvm_fn_begin(CgLlvmFn *f, CgLlvmUnit *u, const KirKernel *k, LLVMValueRef fn, IrDiag *d);
/* Emits the kernel body at b (stops at `ret`, emitting no LLVM ret). */
IrStatus cg_llvm_emit_body(CgLlvmFn *f);
/* Closes the entry block (branch to start) and frees the builders. */
void cg_llvm_fn_finish(CgLlvmFn *f);
LLVMTypeRef cg_llvm_reg_type(CgLlvmUnit *u, KirDtype t); /* a scalar value: i1, i8, i16 (f16/bf16 bits)... */
LLVMTypeRef cg_llvm_mem_type(CgLlvmUnit *u, KirDtype t); /* in memory: as reg, but i1 is a byte */
/* Memory form <-> register form (only i1 differs). */
LLVMValueRef cg_llvm_from_mem(CgLlvmFn *f, KirDtype t, LLVMValueRef v);
LLVMValueRef cg_llvm_to_mem(CgLlvmFn *f, KirDtype t, LLVMValueRef v);
/* While loop `for (iv = lo; iv < hi; iv += step)` on i32 (signed compare). begin returns iv with b in the
 * body; end closes it (the latch is b's current block) and leaves b after the loop. */
typedef struct CgLlvmLoop {
    LLVMBasicBlockRef head, exit;
    LLVMValueRef iv, step;
} CgLlvmLoop;
LLVMValueRef cg_llvm_loop_begin(CgLlvmFn *f, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef step,
                                CgLlvmLoop *l);
void cg_llvm_loop_end(CgLlvmFn *f, CgLlvmLoop *l);

/* ---- cg_llvm_math.c: element semantics (kir_ops.def) on register values ---- */
LLVMValueRef cg_llvm_call(CgLlvmFn *f, const char *intrinsic, LLVMTypeRef *over, int n_over,
                          LLVMValueRef *args, int n_args);
LLVMValueRef cg_llvm_to_f32(CgLlvmFn *f, KirDtype t, LLVMValueRef v);   /* exact */
LLVMValueRef cg_llvm_from_f32(CgLlvmFn *f, KirDtype t, LLVMValueRef x); /* round to nearest even */
LLVMValueRef cg_llvm_elem_binary(CgLlvmFn *f, KirOp op, KirDtype t, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_llvm_elem_unary(CgLlvmFn *f, KirOp op, KirDtype t, LLVMValueRef a);
LLVMValueRef cg_llvm_elem_cast(CgLlvmFn *f, KirDtype from, KirDtype to, LLVMValueRef a);
LLVMValueRef cg_llvm_elem_rand(CgLlvmFn *f, LLVMValueRef seed, LLVMValueRef counter);
LLVMValueRef cg_llvm_const_f(CgLlvmFn *f, KirDtype t, double v);

/* ---- cg_llvm_host.c / cg_llvm_gpu.c ---- */
IrStatus cg_llvm_compile_host(const KirKernel *k, CgBinary *out, IrDiag *d);
IrStatus cg_llvm_compile_gpu(const KirKernel *k, const CgTarget *t, CgBinary *out, IrDiag *d);
/* Builds the whole module for k into u (a unit of the matching arch). */
IrStatus cg_llvm_build_host(CgLlvmUnit *u, const KirKernel *k, IrDiag *d);
IrStatus cg_llvm_build_gpu(CgLlvmUnit *u, const KirKernel *k, IrDiag *d);
/* Validates t's CPU/PTX pair and creates its unit (IR_ERR_UNSUPPORTED for an unknown or invalid pair). */
IrStatus cg_llvm_gpu_unit(CgLlvmUnit *u, const CgTarget *t, IrDiag *d);
/* Runs argv (argv[0] looked up in PATH) and waits; on failure, one line of its stderr (kept in
 * errfile) in d. */
IrStatus cg_llvm_spawn(char *const *argv, const char *errfile, IrDiag *d);
/* A fresh private temporary directory (mkdtemp) into dir[n]; cg_llvm_rmtree removes it and its files. */
IrStatus cg_llvm_tmpdir(char *dir, size_t n, IrDiag *d);
void cg_llvm_rmtree(const char *dir);
IrStatus cg_llvm_write_file(const char *path, const void *data, size_t size, IrDiag *d);
IrStatus cg_llvm_read_file(const char *path, void **data, size_t *size, IrDiag *d);

#endif /* KILN_HAVE_LLVM */
#endif
