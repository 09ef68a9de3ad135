/* test_cg_llvm_gpu.c — the LLVM backend's NVPTX code on a real GPU. The build machine has LLVM but no GPU,
 * the GPU machine a GPU but no LLVM, so this replays cases: test_cg_llvm, run with
 * KILN_LLVM_GPU_CASES=<dir>, writes each kernel's sm_90a PTX, grid, arguments, inputs and host-JIT outputs
 * there; this test, run with the same variable on the GPU machine (any build, LLVM not needed), loads
 * each PTX through the device layer, runs it twice (block of 1 thread and of 64: only thread 0 of a
 * block works) and compares every buffer with the host's results (bit-exact, or within the case's
 * tolerance for float elements). Exit 77 without cases or without a GPU.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/kir.h"
#include "kcase.h"
#include "kt.h"
#include "runtime/rt_device.h"

static double mini(uint32_t bits, int eb, int mb, int bias, int f8)
{
    uint32_t s = bits >> (eb + mb) & 1, e = bits >> mb & ((1u << eb) - 1), m = bits & ((1u << mb) - 1);
    double v;
    if (f8 && e == 15 && m == 7)
        v = NAN;
    else if (!f8 && e == (1u << eb) - 1)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - bias - mb);
    else
        v = ldexp(1.0 + ldexp((double)m, -mb), (int)e - bias);
    return s ? -v : v;
}

static double fget(int t, const void *p, size_t i)
{
    switch (t) {
    case KIR_F32: return ((const float *)p)[i];
    case KIR_BF16: return mini(((const uint16_t *)p)[i], 8, 7, 127, 0);
    case KIR_F16: return mini(((const uint16_t *)p)[i], 5, 10, 15, 0);
    default: return mini(((const uint8_t *)p)[i], 4, 3, 7, 1);
    }
}

/* Differences between got and want in param p (0: all equal within tolerance). */
static int compare(const KcaseParam *p, double tol, size_t *first)
{
    int t = p->dtype, bytes = kir_dtype_bytes((KirDtype)t), bad = 0;
    size_t n = p->v / (size_t)bytes;
    for (size_t i = 0; i < n; i++) {
        if (!memcmp((const char *)p->got + i * bytes, (const char *)p->want + i * bytes, (size_t)bytes))
            continue;
        if (kir_dtype_is_float((KirDtype)t)) {
            double a = fget(t, p->got, i), b = fget(t, p->want, i);
            if ((isnan(a) && isnan(b)) || fabs(a - b) <= tol * (fabs(b) > 1 ? fabs(b) : 1)) continue;
        }
        if (!bad++) *first = i;
    }
    return bad;
}

static void run_case(RtDevice *dev, const char *name, Kcase *c)
{
    RtModule *mod = NULL;
    RtFunction *fn = NULL;
    KilnStatus s = rt_dev_module_load(dev, c->ptx, c->ptx_len + 1, &mod);
    KT_CHECK(s == KILN_OK, "%s: load PTX: %s", name, rt_dev_errmsg());
    if (s == KILN_OK) s = rt_dev_function(mod, c->entry, &fn);
    KT_CHECK(s == KILN_OK, "%s: function %s: %s", name, c->entry, rt_dev_errmsg());
    for (unsigned block = 1; s == KILN_OK && block <= 64; block *= 64) {
        uint64_t dptr[KIR_MAX_PARAMS] = {0};
        void *args[KIR_MAX_PARAMS];
        for (uint32_t i = 0; i < c->n && s == KILN_OK; i++) {
            KcaseParam *p = &c->p[i];
            args[i] = p->is_ptr ? (void *)&dptr[i] : (void *)&p->v;
            if (!p->is_ptr) continue;
            s = rt_dev_alloc(dev, p->v, &dptr[i]);
            if (s == KILN_OK) s = rt_dev_copy_htod(dev, dptr[i], p->in, p->v);
        }
        unsigned grid[3] = {(unsigned)c->grid[0], (unsigned)c->grid[1], (unsigned)c->grid[2]},
                 blk[3] = {block, 1, 1};
        if (s == KILN_OK && grid[0] && grid[1] && grid[2]) s = rt_dev_launch(fn, grid, blk, 0, NULL, args);
        if (s == KILN_OK) s = rt_dev_synchronize(dev);
        KT_CHECK(s == KILN_OK, "%s (block %u): %s", name, block, rt_dev_errmsg());
        for (uint32_t i = 0; i < c->n && s == KILN_OK; i++) {
            KcaseParam *p = &c->p[i];
            if (!p->is_ptr) continue;
            size_t first = 0;
            s = rt_dev_copy_dtoh(dev, p->got, dptr[i], p->v);
            int bad = s == KILN_OK ? compare(p, c->tol > 0 ? 4 * c->tol : 0, &first) : 0;
            KT_CHECK(!bad, "%s (block %u): param %u: %d elements differ from the host (first [%zu])", name,
                     block, i, bad, first);
        }
        for (uint32_t i = 0; i < c->n; i++)
            rt_dev_free(dev, dptr[i]);
    }
    if (mod) rt_dev_module_unload(mod);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    const char *dir = getenv("KILN_LLVM_GPU_CASES");
    if (!dir) {
        printf("test_cg_llvm_gpu: SKIP (KILN_LLVM_GPU_CASES not set: no cases from test_cg_llvm)\n");
        return 77;
    }
    RtDevice *dev;
    if (rt_dev_open(0, &dev) != KILN_OK) {
        printf("test_cg_llvm_gpu: SKIP (%s)\n", rt_dev_errmsg());
        return 77;
    }
    DIR *dp = opendir(dir);
    char *names[1024];
    int n = 0;
    struct dirent *e;
    while (dp && (e = readdir(dp)) != NULL && n < 1024)
        if (strstr(e->d_name, ".case")) names[n++] = strdup(e->d_name);
    if (dp) closedir(dp);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    KT_CHECK(n > 0, "no cases in %s", dir);
    printf("test_cg_llvm_gpu: %d cases on %s\n", n, rt_dev_info(dev)->name);
    for (int i = 0; i < n; i++) {
        char path[1024];
        Kcase c;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        int ok = kcase_read(path, &c);
        KT_CHECK(ok, "cannot read %s", path);
        if (ok) run_case(dev, names[i], &c);
        kcase_free(&c);
        free(names[i]);
    }
    rt_dev_close(dev);
    return kt_done("test_cg_llvm_gpu");
}
