/* kcase.c — writing and reading GPU replay cases (kcase.h). */
#include "kcase.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"

const char *kcase_dir(void)
{
    return getenv("KILN_LLVM_GPU_CASES");
}

int kcase_write(const KirKernel *k, const KRunArg *a, void *const *inputs, const int64_t *storage,
                const int32_t grid[3], double tol)
{
    static int serial;
    const char *dir = kcase_dir();
    if (!dir) return 1;
    const CgTarget *t = cg_target_find("sm_90a");
    const CgBackend *be = cg_backend_for(t, "llvm");
    CgBinary ptx;
    IrDiag d = {0};
    if (!be || be->compile(k, t, &ptx, &d) != IR_OK) {
        fprintf(stderr, "kcase: %s: no sm_90a PTX: %s\n", k->name, be ? d.msg : "no LLVM backend");
        return 0;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%05d_%.200s.case", dir, serial++, k->name);
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        fprintf(stderr, "kcase: cannot write %s\n", path);
        cg_binary_free(&ptx);
        return 0;
    }
    uint32_t len = (uint32_t)strlen(ptx.entry), plen = (uint32_t)ptx.size, np = (uint32_t)k->n_params;
    fwrite("KLC1", 1, 4, fp);
    fwrite(&len, 4, 1, fp);
    fwrite(ptx.entry, 1, len, fp);
    fwrite(&plen, 4, 1, fp);
    fwrite(ptx.data, 1, plen, fp);
    fwrite(grid, 4, 3, fp);
    fwrite(&tol, 8, 1, fp);
    fwrite(&np, 4, 1, fp);
    for (int i = 0; i < k->n_params; i++) {
        uint8_t h[2] = {k->params[i].type.is_ptr, (uint8_t)k->params[i].type.dtype};
        uint64_t v = h[0] ? (uint64_t)a[i].bytes : (uint64_t)storage[i];
        fwrite(h, 1, 2, fp);
        fwrite(&v, 8, 1, fp);
    }
    for (int i = 0; i < k->n_params; i++)
        if (k->params[i].type.is_ptr) {
            fwrite(inputs[i], 1, a[i].bytes, fp);
            fwrite(a[i].data, 1, a[i].bytes, fp);
        }
    int ok = fclose(fp) == 0;
    cg_binary_free(&ptx);
    return ok;
}

static int rd(FILE *fp, void *p, size_t n)
{
    return fread(p, 1, n, fp) == n;
}

int kcase_read(const char *path, Kcase *c)
{
    FILE *fp = fopen(path, "rb");
    char magic[4];
    uint32_t len;
    memset(c, 0, sizeof *c);
    if (!fp) return 0;
    int ok = rd(fp, magic, 4) && !memcmp(magic, "KLC1", 4) && rd(fp, &len, 4) && len < sizeof c->entry &&
             rd(fp, c->entry, len) && rd(fp, &c->ptx_len, 4) && (c->ptx = calloc(c->ptx_len + 1, 1)) &&
             rd(fp, c->ptx, c->ptx_len) && rd(fp, c->grid, 12) && rd(fp, &c->tol, 8) && rd(fp, &c->n, 4) &&
             c->n <= KIR_MAX_PARAMS;
    for (uint32_t i = 0; ok && i < c->n; i++)
        ok = rd(fp, &c->p[i].is_ptr, 1) && rd(fp, &c->p[i].dtype, 1) && rd(fp, &c->p[i].v, 8);
    for (uint32_t i = 0; ok && i < c->n; i++) {
        KcaseParam *p = &c->p[i];
        if (!p->is_ptr) continue;
        ok = (p->in = malloc(p->v + 1)) && (p->want = malloc(p->v + 1)) && (p->got = malloc(p->v + 1)) &&
             rd(fp, p->in, p->v) && rd(fp, p->want, p->v);
    }
    fclose(fp);
    return ok;
}

void kcase_free(Kcase *c)
{
    free(c->ptx);
    for (uint32_t i = 0; i < c->n; i++) {
        free(c->p[i].in);
        free(c->p[i].want);
        free(c->p[i].got);
    }
    memset(c, 0, sizeof *c);
}
