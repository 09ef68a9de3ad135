/* at_fake.c — the fake timer (at_fake.h): hashed costs and failures on a virtual clock. */
#include "at_fake.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cg_target.h" /* cg_target_defaults: the facts packages shape their defaults by */

static uint64_t at_fake_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double at_fake_unit(uint64_t h)
{
    return (double)(h >> 11) * 0x1.0p-53;
}

/* A hash of (seed, kernel name, config, extra). */
static uint64_t at_fake_hash(const AtFake *f, const AtKernel *k, const KirConfig *cfg, const char *extra)
{
    IrBuf b = {0};
    ir_buf_printf(&b, "%s|", k->name ? k->name : "");
    kir_config_print(cfg, &b);
    ir_buf_printf(&b, "|%s", extra);
    uint64_t h = b.s && !b.oom ? ir_hash64(b.s, b.len, IR_HASH_SEED) : 0;
    ir_buf_free(&b);
    return at_fake_mix(h ^ at_fake_mix(f->seed));
}

static int at_fake_is_default(const AtKernel *k, const KirConfig *cfg)
{
    if (!k->family) return 0;
    KirConfig d = {0};
    k->family->defaults(&k->spec, cg_target_facts(cg_target_defaults()), &d);
    if (d.n != cfg->n) return 0;
    for (int i = 0; i < d.n; i++)
        if (kir_config_get(cfg, d.key[i], d.val[i] + 1) != d.val[i]) return 0;
    return 1;
}

AtCandStatus at_fake_failure(const AtFake *f, const AtKernel *k, const KirConfig *cfg)
{
    if (at_fake_is_default(k, cfg)) return AT_CAND_OK;
    uint64_t h = at_fake_hash(f, k, cfg, "fail");
    const int every[] = {f->compile_every, f->launch_every, f->check_every, f->fault_every};
    const AtCandStatus what[] = {AT_CAND_COMPILE, AT_CAND_LAUNCH, AT_CAND_CHECK, AT_CAND_FAULT};
    for (int i = 0; i < 4; i++)
        if (every[i] > 0 && at_fake_mix(h ^ (uint64_t)(i + 1)) % (uint64_t)every[i] == 0) return what[i];
    return AT_CAND_OK;
}

double at_fake_cost(const AtFake *f, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b)
{
    double c;
    if (f->cost) {
        c = f->cost(f->cost_ctx, k, cfg, b);
    } else {
        char text[RT_TDB_MAX_BUCKET];
        rt_tdb_bucket_format(b, text);
        double work = 1;
        for (int i = 0; i < b->n; i++)
            work *= (double)b->val[i];
        c = (1 + at_fake_unit(at_fake_hash(f, k, cfg, text))) * (1 + sqrt(work));
    }
    if (f->quantum_us > 0) c = ceil(c / f->quantum_us) * f->quantum_us;
    return c;
}

static AtCandStatus at_fake_prepare(void *ctx, const AtKernel *k, const KirConfig *cfg, char *msg, int msglen)
{
    AtFake *f = ctx;
    f->prepares++;
    f->clock += f->compile_s > 0 ? f->compile_s : 0.05;
    if (f->faulted) {
        snprintf(msg, (size_t)msglen, "fake: the context was lost by an earlier fault");
        return AT_CAND_FAULT;
    }
    AtCandStatus st = at_fake_failure(f, k, cfg);
    if (st == AT_CAND_FAULT) return AT_CAND_OK; /* it faults when it runs for timing */
    if (st != AT_CAND_OK) snprintf(msg, (size_t)msglen, "fake: injected %s failure", at_cand_status_name(st));
    return st;
}

static AtCandStatus at_fake_time(void *ctx, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b,
                                 double *us, int n, char *msg, int msglen)
{
    AtFake *f = ctx;
    f->timings++;
    f->last_samples = n;
    f->clock += f->launch_s > 0 ? f->launch_s : 0.01;
    if (f->faulted || at_fake_failure(f, k, cfg) == AT_CAND_FAULT) {
        if (!f->faulted) f->faults++;
        f->faulted = 1;
        snprintf(msg, (size_t)msglen, "fake: CUDA_ERROR_ILLEGAL_ADDRESS");
        return AT_CAND_FAULT;
    }
    char text[RT_TDB_MAX_BUCKET];
    rt_tdb_bucket_format(b, text);
    double c = at_fake_cost(f, k, cfg, b), sum = 0;
    uint64_t h = at_fake_hash(f, k, cfg, text);
    for (int i = 0; i < n; i++) {
        double u = at_fake_unit(at_fake_mix(h ^ (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull));
        us[i] = c * (1 + f->jitter * (u - 0.5));
        sum += us[i];
    }
    f->clock += sum * 1e-6;
    return AT_CAND_OK;
}

static double at_fake_now(void *ctx)
{
    return ((AtFake *)ctx)->clock;
}

static int at_fake_recover(void *ctx)
{
    AtFake *f = ctx;
    f->recovers++;
    if (f->recover_fails) return -1;
    f->faulted = 0;
    return 0;
}

AtTimer at_fake_timer(AtFake *f)
{
    return (AtTimer){.ctx = f,
                     .prepare = at_fake_prepare,
                     .time = at_fake_time,
                     .now = at_fake_now,
                     .recover = at_fake_recover};
}
