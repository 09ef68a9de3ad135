/* cg_cuda.h — the CUDA backend: kernel IR -> CUDA C -> NVRTC -> PTX + cubin. Prefix cg_cuda_.
 *
 * The backend's vtable (cg_cuda_backend, registered in cg.c) compiles to "cubin" for the target's exact
 * architecture (sm_80, sm_90a, sm_100a). This header adds what the vtable cannot say:
 *
 *     IrBuf src = {0};
 *     cg_cuda_source(k, cg_target_find("sm_90a"), &src, &d);       // the generated CUDA C (no NVRTC needed)
 *     CgBinary cubin = {0}, ptx = {0};
 *     cg_cuda_compile(k, target, &cubin, &ptx, &d);                // one NVRTC run, both outputs
 *     CgCudaLaunch l;
 *     cg_cuda_launch_info(k, target, &l, &d);                      // block size and dynamic shared memory
 *     // launch: grid from kir_grid_eval, block (l.threads, 1, 1), l.smem_bytes of dynamic shared memory
 *     // (raise CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to it whenever it is not 0: the
 *     // kernel's static shared memory, a split-K ticket, counts against the 48 KiB default too)
 *
 * ABI of a generated kernel: `extern "C" __global__` named by the entry (the kernel name reduced to
 * [A-Za-z0-9_]); one argument per kernel param in order (pointers as device pointers, scalars by value in
 * their dtype: i1/i8/u8 as 1 byte, i32 4, i64 8, f32 4, bf16/f16 2, f8 1); every pointer argument must
 * be 16-byte aligned (the generated code vectorizes on that promise, as cudaMalloc'd memory satisfies).
 *
 * Everything here is thread-safe (no global state; NVRTC programs are per call) and deterministic: the
 * same kernel and target give byte-identical source, PTX and cubin.
 */
#ifndef KILN_CG_CUDA_H
#define KILN_CG_CUDA_H

#include "cg.h"

/* How to launch a kernel generated for a target. */
typedef struct CgCudaLaunch {
    int threads;    /* block size: 32 * k->warps, on x */
    int smem_bytes; /* dynamic shared memory per block */
} CgCudaLaunch;

/* The generated CUDA C for k on target t (an NVIDIA target), appended to out (caller frees with
 * ir_buf_free). Works without NVRTC. Returns IR_OK; IR_ERR_UNSUPPORTED (not a CUDA target, or an IR
 * construct the backend does not lower), IR_ERR_LIMIT (does not fit t: too many threads or too much
 * shared memory; the config is INVALID) or IR_ERR_NOMEM, with one line in d. */
IrStatus cg_cuda_source(const KirKernel *k, const CgTarget *t, IrBuf *out, IrDiag *d);

/* Launch parameters of the code cg_cuda_source generates for (k, t). Same errors. */
IrStatus cg_cuda_launch_info(const KirKernel *k, const CgTarget *t, CgCudaLaunch *out, IrDiag *d);

/* Generates and compiles k for t with NVRTC (--gpu-architecture=<t->name>). Fills cubin (format "cubin")
 * and/or ptx (format "ptx"), either may be NULL; each gets malloc'd data and entry (cg_binary_free).
 * Errors: those of cg_cuda_source; IR_ERR_UNSUPPORTED when this build has no NVRTC; IR_ERR_INTERNAL when
 * NVRTC rejects the generated code ("kernel K: nvrtc: <first log lines>"), IR_ERR_LIMIT when the failure
 * is a resource limit (shared memory, registers). On error both outputs are left empty. */
IrStatus cg_cuda_compile(const KirKernel *k, const CgTarget *t, CgBinary *cubin, CgBinary *ptx, IrDiag *d);
/* The cubin of a CUDA C source given for kernel k (a hand-edited cg_cuda_source: prototyping a lowering
 * before the backend emits it; bench/kbench.c's KB_SOURCE). */
IrStatus cg_cuda_compile_source(const KirKernel *k, const CgTarget *t, const char *src, CgBinary *cubin,
                                IrDiag *d);

/* Compiles k for t with ptxas in verbose mode and appends its report (registers, spill bytes, shared
 * memory, per entry) to report. For developers and tools (bench/kgen.py --compile); errors as
 * cg_cuda_compile. */
IrStatus cg_cuda_ptxas_report(const KirKernel *k, const CgTarget *t, IrBuf *report, IrDiag *d);

/* The entry symbol for k (k->name reduced to [A-Za-z0-9_], "k_" prefixed when it would start with a
 * digit), written into out (n bytes, truncated). */
void cg_cuda_entry_name(const KirKernel *k, char *out, size_t n);

/* The device library (kiln_device.cuh) that generated sources include, NUL-terminated. */
const char *cg_cuda_device_library(void);

#endif
