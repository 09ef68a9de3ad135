/* cg_host.h — the LLVM backend's exports beyond its CgBackend vtable: run a kernel in this process (JIT),
 * link host objects into a shared library, and dump the LLVM IR of a kernel. Prefix cg_.
 *
 *     CgHostKernel *hk;
 *     if (cg_host_jit(k, &hk, &d) != IR_OK) ...;          // d: "kernel X: llvm: ..."
 *     void *args[] = {&x_ptr, &n};                          // args[i] points to param i's value
 *     int32_t grid[3] = {programs, 1, 1};
 *     cg_host_call(hk, args, grid);                         // runs every program, in order, on this thread
 *     cg_host_free(hk);
 *
 * The host entry of a kernel (format "host-obj", symbol CgBinary.entry) has the C type
 *     void entry(void *const *args, const int32_t *grid);
 * args[i] points to param i's value: a pointer for pointer params; for scalars the dtype's C type
 * (i1: uint8_t, f16/bf16: uint16_t bits, f8e4m3: uint8_t bits). It loops over pid z, y, x itself. Beside
 * it, the object exports
 *     void <entry>_range(void *const *args, const int32_t *grid, int32_t lo, int32_t hi);
 * which runs only the programs whose linear index x + gx * (y + gy * z) lies in [lo, hi) (the runtime
 * spreads a launch's programs over threads with it).
 * Without LLVM in this build every function here returns IR_ERR_UNSUPPORTED (cg_host_jit_available: 0).
 */
#ifndef KILN_CG_HOST_H
#define KILN_CG_HOST_H

#include <stdint.h>

#include "cg.h"

typedef struct CgHostKernel CgHostKernel;

/* The machine that "host-obj" code is built for: "<triple> <CPU name> <CPU features>" as LLVM reports this
 * host (e.g. "x86_64-unknown-linux-gnu znver4 +64bit,+adx,..."), a static string. The compile cache keys
 * host-target binaries by it. NULL without LLVM in this build (or out of memory at initialization). */
const char *cg_host_cpu(void);

/* 1 when this build can JIT host code. */
int cg_host_jit_available(void);

/* Compiles k for the host (the same object code as target "host") and loads it into this process.
 * On success *out is owned by the caller (cg_host_free). Thread-safe. */
IrStatus cg_host_jit(const KirKernel *k, CgHostKernel **out, IrDiag *d);
/* Loads a "host-obj" binary (cg_host_object's, e.g. kept on disk by a cache) into this process; entry is
 * the symbol it exports. The entry's name is in messages. On success *out is the caller's (cg_host_free).
 * IR_ERR_INPUT for a binary of another format or without data or entry. Thread-safe. */
IrStatus cg_host_load(const CgBinary *obj, CgHostKernel **out, IrDiag *d);
/* Runs all programs of grid (each axis >= 0; 0 runs nothing). args as above. */
void cg_host_call(CgHostKernel *hk, void *const *args, const int32_t grid[3]);
void cg_host_free(CgHostKernel *hk); /* NULL is a no-op */

/* The kernel's relocatable host object (format "host-obj", entry = its symbol); the backend's compile for
 * target "host" links this object into a shared library of its own (format "host-so", which the runtime
 * dlopens). On success the caller frees out (cg_binary_free). */
IrStatus cg_host_object(const KirKernel *k, CgBinary *out, IrDiag *d);

/* The same object without LLVM's optimizer: kiln's IR as emitted, verified, with fast instruction
 * selection (tens of times faster to compile than cg_host_object's O2 on tiled kernels; slow code). For
 * tests that check a lowering's numbers rather than the shipped code, and for debugging. */
IrStatus cg_host_object_unoptimized(const KirKernel *k, CgBinary *out, IrDiag *d);

/* Links n "host-obj" binaries into a shared library at out_path (written atomically: a temporary file
 * in the same directory, then rename). Uses `cc -shared ... -lm`, else `ld.lld-22 -shared`. */
IrStatus cg_host_link_shared(const CgBinary *objs, int n, const char *out_path, IrDiag *d);

/* The LLVM IR (format "llvm-ir", text) of k for target t, before (optimized 0) or after the O2 pipeline;
 * for debugging and --dump. for GPU targets, the module the backend compiles. */
IrStatus cg_llvm_dump_ir(const KirKernel *k, const CgTarget *t, int optimized, CgBinary *out, IrDiag *d);

#endif
