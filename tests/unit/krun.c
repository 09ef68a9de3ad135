/* krun.c — argument packing shared by every executor, and the interpreter executor. */
#include "krun.h"

#include <string.h>

#include "ir/kir_interp.h"

void krun_pack_args(const KirKernel *k, const KRunArg *a, void *const *ptrs, void **args, int64_t *storage)
{
    for (int i = 0; i < k->n_params; i++) {
        const KirType *t = &k->params[i].type;
        void *slot = &storage[i];
        if (t->is_ptr) {
            memcpy(slot, &ptrs[i], sizeof(void *));
        } else if (t->dtype == KIR_F32) {
            float f = (float)a[i].f;
            memcpy(slot, &f, sizeof f);
        } else if (t->dtype == KIR_I64) {
            memcpy(slot, &a[i].i, sizeof(int64_t));
        } else {
            int32_t v = (int32_t)a[i].i;
            memcpy(slot, &v, sizeof v);
        }
        args[i] = slot;
    }
}

static int interp_available(char *why, size_t n)
{
    (void)why;
    (void)n;
    return 1;
}

static IrStatus interp_run(const KirKernel *k, KRunArg *a, IrDiag *d)
{
    void *ptrs[KIR_MAX_PARAMS], *args[KIR_MAX_PARAMS];
    int64_t storage[KIR_MAX_PARAMS];
    int32_t grid[3];
    size_t bytes[KIR_MAX_PARAMS]; /* every access of a kernel under test stays inside its buffer */
    for (int i = 0; i < k->n_params; i++) ptrs[i] = a[i].data, bytes[i] = k->params[i].type.is_ptr ? a[i].bytes : 0;
    krun_pack_args(k, a, ptrs, args, storage);
    kir_grid_eval(k, args, grid);
    return kir_interp_run_checked(k, args, bytes, grid, d);
}

const KRunner krun_interp = {"interp", interp_available, interp_run};
