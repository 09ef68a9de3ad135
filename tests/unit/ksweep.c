/* ksweep.c — the sweep-test driver (ksweep.h). */
#include "ksweep.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfacts.h"
#include "kt.h"

enum { MAX_RUNNERS = 3, MAX_DUMPS = 3 };

static struct {
    const KRunner *r;
    int pass, fail, invalid;
    double margin, ms;
} counts[MAX_RUNNERS];
static int n_counts, n_dumps;

static int slot(const KRunner *r)
{
    for (int i = 0; i < n_counts; i++)
        if (counts[i].r == r) return i;
    counts[n_counts].r = r;
    return n_counts++;
}

int ksweep_runners(const KRunner **out, int max)
{
    const KRunner *all[] = {&krun_interp, &krun_host, &krun_cuda};
    const char *only = getenv("KILN_TEST_EXECUTORS");
    int n = 0;
    for (int i = 0; i < 3; i++) {
        char why[256] = "";
        if (only && !strstr(only, all[i]->name)) {
            printf("skip %s: not in KILN_TEST_EXECUTORS=%s\n", all[i]->name, only);
        } else if (all[i]->available(why, sizeof why) && n < max) {
            out[n++] = all[i];
            slot(all[i]);
        } else {
            printf("skip %s: %s\n", all[i]->name, why);
        }
    }
    return n;
}

int ksweep_big(const KRunner *r)
{
    return strcmp(r->name, "interp") != 0;
}

static int shard = -1, shards = 1;

static void shard_init(void)
{
    if (shard >= 0) return;
    const char *e = getenv("KILN_TEST_SHARD");
    shard = 0;
    if (e && (sscanf(e, "%d/%d", &shard, &shards) != 2 || shards < 1 || shard < 0 || shard >= shards)) {
        fprintf(stderr, "KILN_TEST_SHARD='%s' is not i/n with 0 <= i < n: running every case\n", e);
        shard = 0, shards = 1;
    }
}

int ksweep_mine(void)
{
    static int n_cases;
    shard_init();
    return n_cases++ % shards == shard;
}

int ksweep_shard0(void)
{
    shard_init();
    return shard == 0;
}

KirConfig ksweep_cfg(int n, ...)
{
    KirConfig c;
    memset(&c, 0, sizeof c);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *key = va_arg(ap, const char *);
        kir_config_set(&c, key, va_arg(ap, int));
    }
    va_end(ap);
    return c;
}

static void dump(const KirKernel *k)
{
    if (!k || n_dumps++ >= MAX_DUMPS) return;
    IrBuf b = {0};
    kir_print(k, &b);
    fprintf(stderr, "---- kernel IR ----\n%s-------------------\n", b.s ? b.s : "(out of memory)\n");
    ir_buf_free(&b);
}

KirKernel *ksweep_build(const KRunner *r, IrArena *a, const KfamSpec *s, const KirConfig *cfg)
{
    int i = slot(r);
    const KfamFamily *f = kfam_find(s->family);
    IrDiag d = {0};
    KirKernel *k = NULL;
    KirConfig none;
    memset(&none, 0, sizeof none);
    IrStatus st = f ? f->build(a, s, kfacts_sm90(), cfg ? cfg : &none, &k, &d) : IR_ERR_INPUT;
    if (st == IR_ERR_LIMIT || st == IR_ERR_UNSUPPORTED) {
        counts[i].invalid++;
        return NULL;
    }
    if (st != IR_OK) {
        IrBuf b = {0};
        kfam_spec_print(s, &b);
        kt_fail++;
        counts[i].fail++;
        fprintf(stderr, "%s: build failed: %s: %s\n", b.s ? b.s : "?", ir_status_name(st),
                f ? d.msg : "no family");
        ir_buf_free(&b);
        return NULL;
    }
    return k;
}

int ksweep_run(const KRunner *r, const KirKernel *k, KRunArg *args)
{
    int i = slot(r);
    IrDiag d = {0};
    double t0 = ir_now_ms();
    IrStatus st = r->run(k, args, &d);
    counts[i].ms += ir_now_ms() - t0;
    if (st == IR_OK) return 1;
    if (st == IR_ERR_LIMIT || st == IR_ERR_UNSUPPORTED) {
        counts[i].invalid++;
        return 0;
    }
    kt_fail++;
    counts[i].fail++;
    fprintf(stderr, "%s: run of %s failed: %s: %s\n", r->name, k->name, ir_status_name(st), d.msg);
    dump(k);
    return -1;
}

void ksweep_check(const KRunner *r, const KirKernel *k, int ok, const char *fmt, ...)
{
    int i = slot(r);
    if (ok) {
        kt_pass++;
        counts[i].pass++;
        return;
    }
    kt_fail++;
    counts[i].fail++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", r->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (k) {
        IrBuf b = {0};
        kir_config_print(&k->cfg, &b);
        fprintf(stderr, "  kernel %s config %s\n", k->name, b.s ? b.s : "");
        ir_buf_free(&b);
    }
    dump(k);
}

void ksweep_margin(const KRunner *r, double ratio)
{
    int i = slot(r);
    if (!(ratio <= counts[i].margin)) counts[i].margin = ratio;
}

void ksweep_summary(const char *suite)
{
    for (int i = 0; i < n_counts; i++)
        printf("%s %s: %d checks passed, %d failed, %d invalid configs, worst error/tolerance %.3g, %.1f s "
               "in runs\n",
               suite, counts[i].r->name, counts[i].pass, counts[i].fail, counts[i].invalid, counts[i].margin,
               counts[i].ms / 1000);
}
