/* kir_impl.h — shared by the kernel-IR files only (kir.c, kir_verify.c, kir_print.c). */
#ifndef KILN_IR_KIR_IMPL_H
#define KILN_IR_KIR_IMPL_H

#include "kir.h"

int kir_op_n_ops(KirOp op);
/* The typing rule of one instruction: checks operands and attributes, and gives the result type
 * (*has_res = 0 for ops without a result). For `for`, checks the body's arguments and final yield
 * against the inits. Message without location in d. */
IrStatus kir_infer_inst(const KirKernel *k, const KirInst *in, KirType *res, int *has_res, IrDiag *d);

#endif
