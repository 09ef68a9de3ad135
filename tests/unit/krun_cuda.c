/* krun_cuda.c — the cuda executor for sweep tests: codegen/cuda (NVRTC) + the runtime's device layer.
 * The device is opened once per process (tests are single-threaded) and never closed. Each run compiles
 * the kernel for the device's target, copies every buffer in, launches over the kernel's grid, waits,
 * copies every buffer back. Unavailable (the test skips) without a GPU, a driver, or NVRTC. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cg_cuda.h"
#include "ir/kir_interp.h"
#include "krun.h"
#include "rt_device.h"

static RtDevice *dev;
static char reason[512];
static int tried;

static RtDevice *device(void)
{
    if (tried) return dev;
    tried = 1;
    if (rt_dev_open(0, &dev) != KILN_OK) {
        snprintf(reason, sizeof reason, "no GPU: %s", rt_dev_errmsg());
        dev = NULL;
        return NULL;
    }
    const char *t = rt_dev_target(dev);
    const CgTarget *tg = t ? cg_target_find(t) : NULL;
    if (!tg || !cg_backend_for(tg, "cuda")) {
        snprintf(reason, sizeof reason, "%s (sm %d): %s", rt_dev_info(dev)->name, rt_dev_info(dev)->sm,
                 tg ? "this build has no NVRTC" : "no kiln target for it");
        rt_dev_close(dev);
        dev = NULL;
    }
    return dev;
}

static int cuda_available(char *why, size_t n)
{
    if (device()) return 1;
    snprintf(why, n, "%s", reason);
    return 0;
}

static IrStatus dev_err(IrDiag *d, const KirKernel *k, KilnStatus s)
{
    return ir_diag_set(d, s == KILN_ERR_UNSUPPORTED ? IR_ERR_LIMIT : IR_ERR_INTERNAL, "kernel %s: %s",
                       k->name, rt_dev_errmsg());
}

static IrStatus cuda_run(const KirKernel *k, KRunArg *a, IrDiag *d)
{
    RtDevice *gpu = device();
    if (!gpu) return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: %s", k->name, reason);
    const CgTarget *t = cg_target_find(rt_dev_target(gpu));
    CgBinary cubin = {0};
    CgCudaLaunch l;
    RtModule *mod = NULL;
    RtFunction *fn = NULL;
    uint64_t bufs[KIR_MAX_PARAMS] = {0};
    void *ptrs[KIR_MAX_PARAMS] = {0}, *args[KIR_MAX_PARAMS];
    int64_t storage[KIR_MAX_PARAMS];
    int32_t grid[3];
    KilnStatus ks;
    IrStatus s = cg_cuda_launch_info(k, t, &l, d);
    if (s == IR_OK) s = cg_cuda_compile(k, t, &cubin, NULL, d);
    if (s != IR_OK) goto done;
    if ((ks = rt_dev_module_load(gpu, cubin.data, cubin.size, &mod)) != KILN_OK ||
        (ks = rt_dev_function(mod, cubin.entry, &fn)) != KILN_OK ||
        (l.smem_bytes > 0 && (ks = rt_dev_function_set_smem(fn, l.smem_bytes)) != KILN_OK)) {
        s = dev_err(d, k, ks);
        goto done;
    }
    for (int i = 0; i < k->n_params; i++) {
        if (!k->params[i].type.is_ptr) continue;
        if ((ks = rt_dev_alloc(gpu, a[i].bytes, &bufs[i])) != KILN_OK ||
            (a[i].data && (ks = rt_dev_copy_htod(gpu, bufs[i], a[i].data, a[i].bytes)) != KILN_OK)) {
            s = dev_err(d, k, ks);
            goto done;
        }
        ptrs[i] = (void *)(uintptr_t)bufs[i];
    }
    krun_pack_args(k, a, ptrs, args, storage);
    kir_grid_eval(k, args, grid);
    if (grid[0] > 0 && grid[1] > 0 && grid[2] > 0) {
        unsigned g3[3] = {(unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2]},
                 b3[3] = {(unsigned)l.threads, 1, 1};
        if ((ks = rt_dev_launch(fn, g3, b3, (unsigned)l.smem_bytes, NULL, args)) != KILN_OK ||
            (ks = rt_dev_synchronize(gpu)) != KILN_OK) {
            s = dev_err(d, k, ks);
            goto done;
        }
    }
    for (int i = 0; i < k->n_params; i++)
        if (bufs[i] && a[i].data && (ks = rt_dev_copy_dtoh(gpu, a[i].data, bufs[i], a[i].bytes)) != KILN_OK) {
            s = dev_err(d, k, ks);
            goto done;
        }
done:
    for (int i = 0; i < k->n_params; i++)
        rt_dev_free(gpu, bufs[i]);
    rt_dev_module_unload(mod);
    cg_binary_free(&cubin);
    return s;
}

const KRunner krun_cuda = {"cuda", cuda_available, cuda_run};
