/* kir_interp.h — a direct interpreter of the kernel IR: the executable form of kir_ops.def's semantics.
 * Slow and simple on purpose; tests use it as one more executor beside the backends, and it defines
 * what "correct lowering" means when a backend and the C reference disagree.
 */
#ifndef KILN_IR_KIR_INTERP_H
#define KILN_IR_KIR_INTERP_H

#include "kir.h"

/* The launch grid from the kernel's grid formula and the scalar arguments. args[i] points to the value
 * of param i (CUDA convention: for a pointer param, args[i] points to the pointer). */
void kir_grid_eval(const KirKernel *k, void *const *args, int32_t grid[3]);

/* Runs every program of the grid in order on the host. Pointers are host pointers. Returns IR_OK, or an
 * error (e.g. an out-of-range `arange` use is not checked; a NULL pointer dereference is reported when
 * detected). */
IrStatus kir_interp_run(const KirKernel *k, void *const *args, const int32_t grid[3], IrDiag *d);

/* kir_interp_run, and every load, store, atomic and arrive through pointer param i must stay inside its
 * bytes[i] bytes (0: unchecked); an access outside is an error naming the element and the param. */
IrStatus kir_interp_run_checked(const KirKernel *k, void *const *args, const size_t *bytes, const int32_t grid[3],
                                IrDiag *d);

#endif
