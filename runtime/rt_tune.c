/* rt_tune.c — tuned binaries from the tuning store routed into a loaded plan (rt_tune.h).
 *
 * Invariant: a bucket is routed to a tuned binary only when that binary was read whole (hash checked)
 * and fits the kernel and the executor; everything else stays on the package's binaries, which
 * rt_plan_load already checked. So a store can change which code runs, never whether the plan runs.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt_tune.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void note(RtTuneLog log, void *user, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void note(RtTuneLog log, void *user, const char *fmt, ...)
{
    if (!log) return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log(user, line);
}

/* A tuned config already looked at for the kernel: its binary index, or -1 when it is not usable. */
typedef struct Tried {
    char config[RT_TDB_MAX_CONFIG];
    int bin;
} Tried;

typedef struct Ctx {
    RtExec *x;
    RtTdb *db;
    char fp[RT_TDB_FP_LEN];
    const char *target;
    RtTuneLog log;
    void *user;
} Ctx;

/* Reads config's binary for k and adds it when it fits. Returns its index, -1 when it is not usable
 * (with a note), or -2 after a failure of the store (*s, err). */
static int tuned_binary(const Ctx *c, RtPlanKernel *k, const char *config, KilnStatus *s, char *err,
                        int errlen)
{
    RtTdbBinary b;
    int found = 0;
    char msg[512], why[256];
    *s = rt_tdb_binary_get(c->db, c->fp, k->ir_hash, config, c->target, &b, &found, msg, sizeof msg);
    if (*s == KILN_ERR_CORRUPT) {
        note(c->log, c->user, "tuning: %s: ignored: %s", k->name, msg);
        *s = KILN_OK;
        return -1;
    }
    if (*s) {
        snprintf(err, (size_t)errlen, "%s", msg);
        return -2;
    }
    if (!found) {
        note(c->log, c->user, "tuning: %s: ignored %s: the store has no %s binary for it", k->name, config,
             c->target);
        return -1;
    }
    int bin = -1, fits = rt_exec_binary_fits(c->x, b.format, b.block, b.smem, why, sizeof why);
    if (fits && strcmp(b.entry, k->bins[0].entry)) {
        snprintf(why, sizeof why, "entry %.60s, the package's is %.60s", b.entry, k->bins[0].entry);
        fits = 0;
    }
    if (fits && strcmp(b.params, k->params)) {
        snprintf(why, sizeof why, "params differ from the package kernel's");
        fits = 0;
    }
    if (fits)
        bin = rt_plan_binary_add(k, config, b.format, b.entry, b.grid, b.block, b.smem, b.data, b.size, why,
                                 sizeof why);
    if (bin < 0) note(c->log, c->user, "tuning: %s: ignored %s: %s", k->name, config, why);
    rt_tdb_binary_free(&b);
    return bin;
}

static KilnStatus tune_kernel(const Ctx *c, RtPlanKernel *k, int n_buckets, char *err, int errlen)
{
    Tried tried[RT_PLAN_MAX_BUCKETS];
    int n_tried = 0;
    k->n_buckets = n_buckets;
    for (int b = 0; b < n_buckets; b++) {
        k->route[b] = -1, k->match[b] = RT_TDB_NONE, k->from[b] = 0;
        int64_t rows = (int64_t)1 << b;
        char bucket[32] = "", msg[512];
        if (k->m_param >= 0) snprintf(bucket, sizeof bucket, "T=%lld", (long long)rows);
        RtTdbHit hit;
        KilnStatus s = rt_tdb_lookup(c->db, c->fp, k->ir_hash, bucket, &hit, msg, sizeof msg);
        if (s == KILN_ERR_CORRUPT) {
            note(c->log, c->user, "tuning: %s: ignored: %s", k->name, msg);
            continue;
        }
        if (s) {
            snprintf(err, (size_t)errlen, "%s", msg);
            return s;
        }
        if (hit.match == RT_TDB_NONE) continue;
        int bin = -1, t = 0;
        while (t < n_tried && strcmp(tried[t].config, hit.config))
            t++;
        if (t < n_tried) {
            bin = tried[t].bin;
        } else {
            bin = tuned_binary(c, k, hit.config, &s, err, errlen);
            if (bin == -2) return s;
            snprintf(tried[n_tried].config, sizeof tried[n_tried].config, "%s", hit.config);
            tried[n_tried++].bin = bin;
        }
        if (bin < 0) continue;
        const RtPlanBinary *pb = &k->bins[bin];
        if (pb->split > 1 && rows > pb->bm) { /* split-K serves at most BM rows (rt_plan.h) */
            note(c->log, c->user, "tuning: %s: %s: ignored %s: it splits K and serves at most %lld rows",
                 k->name, bucket, pb->config, (long long)pb->bm);
            continue;
        }
        RtTdbBucket from;
        k->route[b] = (signed char)bin;
        k->match[b] = (unsigned char)hit.match;
        k->from[b] =
            rt_tdb_bucket_parse(hit.bucket, &from, NULL, 0) == KILN_OK && from.n == 1 ? from.val[0] : 0;
    }
    return KILN_OK;
}

KilnStatus rt_tune_apply(RtPlan *p, RtExec *x, RtTdb *db, int64_t max_rows, RtTuneLog log, void *user,
                         char *err, int errlen)
{
    Ctx c = {.x = x, .db = db, .target = p->target, .log = log, .user = user};
    RtTdbDevice dev;
    rt_exec_tune_device(x, &dev);
    rt_tdb_fingerprint(&dev, c.fp);
    note(log, user, "tuning: store %s, device %s (%s, %s)", rt_tdb_path(db), c.fp, dev.name, dev.arch);
    int n_rows = 1; /* buckets T=1 .. the first power of two >= max_rows */
    while (n_rows < RT_PLAN_MAX_BUCKETS && ((int64_t)1 << (n_rows - 1)) < max_rows)
        n_rows++;
    for (int i = 0; i < p->n_kernels; i++) {
        RtPlanKernel *k = &p->kernels[i];
        if (!k->n_pkg) continue; /* never launched */
        KilnStatus s = tune_kernel(&c, k, k->m_param >= 0 ? n_rows : 1, err, errlen);
        if (s) return s;
    }
    return KILN_OK;
}

void rt_tune_drop(RtPlanKernel *k, int bin)
{
    for (int b = 0; b < k->n_buckets; b++)
        if (k->route[b] == bin) k->route[b] = -1, k->match[b] = RT_TDB_NONE, k->from[b] = 0;
}

/* "T=4" or "T=4..64" for buckets [a, b] into out. */
static int put_range(char *out, size_t n, int a, int b)
{
    if (a == b) return snprintf(out, n, "T=%lld", (long long)1 << a);
    return snprintf(out, n, "T=%lld..%lld", (long long)1 << a, (long long)1 << b);
}

void rt_tune_report(const RtPlan *p, RtTuneLog log, void *user, RtTuneCounts *out)
{
    RtTuneCounts c = {0};
    for (int i = 0; i < p->n_kernels; i++) {
        const RtPlanKernel *k = &p->kernels[i];
        if (!k->n_pkg) continue;
        int exact = 0, some = 0;
        for (int b = 0; b < k->n_buckets; b++) {
            exact += k->match[b] == RT_TDB_EXACT;
            some += k->match[b] != RT_TDB_NONE;
        }
        if (k->n_buckets && exact == k->n_buckets)
            c.tuned++;
        else if (some)
            c.nearest++;
        else
            c.dflt++;
        if (!log) continue;
        char line[1024];
        int len = snprintf(line, sizeof line, "tuning: %s:", k->name);
        if (!some || exact == k->n_buckets) {
            snprintf(line + len, sizeof line - (size_t)len, " %s", some ? "tuned" : "default");
            log(user, line);
            continue;
        }
        for (int a = 0; a < k->n_buckets && len < (int)sizeof line;) {
            int b = a;
            while (b + 1 < k->n_buckets && k->match[b + 1] == k->match[a] &&
                   (k->match[a] == RT_TDB_EXACT || k->from[b + 1] == k->from[a]))
                b++;
            len += snprintf(line + len, sizeof line - (size_t)len, "%s ", a ? "," : "");
            if (len < (int)sizeof line) len += put_range(line + len, sizeof line - (size_t)len, a, b);
            if (len < (int)sizeof line)
                len += snprintf(line + len, sizeof line - (size_t)len, " %s",
                                rt_tdb_match_name((RtTdbMatch)k->match[a]));
            if (k->match[a] == RT_TDB_NEAREST && len < (int)sizeof line)
                len += snprintf(line + len, sizeof line - (size_t)len, " T=%lld", (long long)k->from[a]);
            a = b + 1;
        }
        log(user, line);
    }
    if (out) *out = c;
}
