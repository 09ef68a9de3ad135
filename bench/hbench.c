/* hbench.c — time one kernel's host code: build a family's kernel for a spec and config, JIT it with the
 * LLVM host backend and run its launch for M rows on one thread, as the runtime would (every program of
 * the grid, in order). For choosing host configs (docs/BACKENDS.md, "Host tiles"); not part of libkiln.
 *
 *   hbench FAMILY "SPEC" "CONFIG" M [REPS]
 *   hbench qmatmul "N=1536 K=576 dtype=f32 wfmt=q4_1 epilogue=silu_mul" "BM=1 BN=32 BK=128" 1
 *
 * CONFIG's keys override the family's host defaults (m_hint = M). Every pointer param gets its own 64 MiB
 * buffer: f32 values in [-1, 1), bytes in [0x30, 0x3b] (quant nibbles of any value, f16 halves normal
 * and small), other dtypes zero. HBENCH_PRINT=1 in the environment prints the kernel IR first. Prints the
 * config, the median and best time of REPS launches (default 20) and the weight bytes a millisecond streams
 * at the median.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/cg_target.h"
#include "codegen/llvm/cg_host.h"
#include "ir/kfam.h"

enum { BUF_BYTES = 64 << 20 };

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* "k=v k=v" into spec (cfg NULL) or cfg: integers, numbers, else strings (keys copied into a). */
static int parse_pairs(IrArena *a, const char *text, KfamSpec *spec, KirConfig *cfg)
{
    char *copy = ir_arena_strdup(a, text);
    for (char *tok = strtok(copy, " \t"); tok; tok = strtok(NULL, " \t")) {
        char *eq = strchr(tok, '='), *end;
        if (!eq || eq == tok) return 0;
        *eq = 0;
        long long iv = strtoll(eq + 1, &end, 10);
        int is_int = eq[1] && !*end;
        double fv = strtod(eq + 1, &end);
        if (cfg && !is_int) return 0;
        if (cfg)
            kir_config_set(cfg, tok, iv);
        else if (is_int)
            kfam_spec_int(spec, tok, iv);
        else if (eq[1] && !*end)
            kfam_spec_float(spec, tok, fv);
        else
            kfam_spec_str(spec, tok, eq + 1);
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: hbench FAMILY \"SPEC\" \"CONFIG\" M [REPS]\n");
        return 2;
    }
    const KfamFamily *f = kfam_find(argv[1]);
    int m = atoi(argv[4]), reps = argc > 5 ? atoi(argv[5]) : 20;
    IrArena *a = ir_arena_create();
    KfamSpec spec = kfam_spec(argv[1]);
    KirConfig cfg = {0}, over = {0};
    if (!f || m < 1 || reps < 1 || !parse_pairs(a, argv[2], &spec, NULL) ||
        !parse_pairs(a, argv[3], NULL, &over)) {
        fprintf(stderr, "hbench: bad family, spec, config or M\n");
        return 2;
    }
    const KfamFacts *facts = cg_target_facts(cg_target_find("host"));
    KfamSpec hinted = spec;
    kfam_spec_int(&hinted, "m_hint", m);
    f->defaults(&hinted, facts, &cfg);
    for (int i = 0; i < over.n; i++)
        kir_config_set(&cfg, over.key[i], over.val[i]);
    KirKernel *k = NULL;
    IrDiag d = {0};
    CgHostKernel *hk = NULL;
    double t0 = now_ms();
    if (f->build(a, &spec, facts, &cfg, &k, &d) != IR_OK || cg_host_jit(k, &hk, &d) != IR_OK) {
        fprintf(stderr, "hbench: %s\n", d.msg);
        return 1;
    }
    double compile_ms = now_ms() - t0;
    if (getenv("HBENCH_PRINT")) { /* the kernel IR the host code comes from */
        IrBuf b = {0};
        kir_print(k, &b);
        fputs(b.s ? b.s : "", stdout);
        ir_buf_free(&b);
    }
    void *bufs[KIR_MAX_PARAMS] = {0}, *args[KIR_MAX_PARAMS];
    int32_t scalars[KIR_MAX_PARAMS];
    uint64_t rng = 88172645463325252ull;
    for (int i = 0; i < k->n_params; i++) {
        const KirType *t = &k->params[i].type;
        if (!t->is_ptr) {
            scalars[i] = m; /* the only scalar param of a linear layer: M */
            args[i] = &scalars[i];
            continue;
        }
        bufs[i] = calloc(1, BUF_BYTES);
        for (size_t j = 0; t->dtype == KIR_F32 && j < BUF_BYTES / 4; j++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            ((float *)bufs[i])[j] = (float)((rng >> 40) / (double)(1 << 24)) * 2 - 1;
        }
        for (size_t j = 0; t->dtype == KIR_U8 && j < BUF_BYTES; j++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            ((uint8_t *)bufs[i])[j] = (uint8_t)(0x30 + (rng >> 40) % 12);
        }
        args[i] = &bufs[i]; /* args[i] points to the param's value */
    }
    int32_t grid[3];
    for (int ax = 0; ax < 3; ax++) {
        const KirGridDim *g = &k->grid[ax];
        grid[ax] = (int32_t)(g->param < 0 ? g->c : (m * g->mul + g->div - 1) / g->div);
    }
    double *ms = calloc((size_t)reps, sizeof *ms);
    cg_host_call(hk, args, grid); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double s = now_ms();
        cg_host_call(hk, args, grid);
        ms[r] = now_ms() - s;
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp_d);
    IrBuf c = {0};
    kir_config_print(&k->cfg, &c);
    printf("%s M=%d %s: median %.3f ms, best %.3f ms (grid %d x %d x %d, compile %.0f ms)\n", k->name, m, c.s,
           ms[reps / 2], ms[0], grid[0], grid[1], grid[2], compile_ms);
    ir_buf_free(&c);
    cg_host_free(hk);
    for (int i = 0; i < k->n_params; i++)
        free(bufs[i]);
    free(ms);
    ir_arena_destroy(a);
    return 0;
}
