/* test_engine_check.c — the runtime refuses out-of-range sampling and engine options itself (issue 27: a
 * server takes them from the network), with KILN_ERR_ARG and one line naming the field and its range:
 *   - kiln_sampling_check: temperature NaN / inf / negative, top_k < 0, top_p outside (0, 1] (0, negative,
 *     above 1, NaN), max_tokens < 0, n_stop outside 0..KILN_MAX_STOP_TOKENS or with NULL stop_tokens, a
 *     stop token outside the vocabulary, ignore_eos not 0/1, a size that is not a struct size; the
 *     defaults and every range's edges pass;
 *   - kiln_engine_options_check: device below -2 or above KILN_MAX_DEVICE, kv_cache_bytes < 0, max_seqs
 *     / max_step_tokens < 0, host_threads outside 0..KILN_MAX_HOST_THREADS, flags not 0/1;
 *   - through the engine (the tiny recipe with random weights, rt_engine_open): kiln_engine_open refuses
 *     those options and a KV cache beyond the host's physical memory before allocating (no engine
 *     returned); kiln_engine_submit refuses bad sampling and queues nothing; the edges run.
 * Needs the kiln CLI (KILN_BIN) and the LLVM host backend for the engine part (skips without them, but
 * fails under CI=true).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/llvm/cg_host.h"
#include "kfile.h"
#include "kiln.h"
#include "kt.h"
#include "runtime/rt_engine.h"

static const int32_t stops_ok[] = {0, 5, 255};

/* s must be refused with a one-line message holding `want`. */
static void sampling_bad(const KilnSampling *s, int vocab, const char *want)
{
    char err[256] = "";
    KilnStatus st = kiln_sampling_check(s, vocab, err, sizeof err);
    KT_CHECK(st == KILN_ERR_ARG && strstr(err, want) && !strchr(err, '\n'), "want '%s': status %d, '%s'",
             want, (int)st, err);
}

static void options_bad(const KilnEngineOptions *o, const char *want)
{
    char err[256] = "";
    KilnStatus st = kiln_engine_options_check(o, err, sizeof err);
    KT_CHECK(st == KILN_ERR_ARG && strstr(err, want) && !strchr(err, '\n'), "want '%s': status %d, '%s'",
             want, (int)st, err);
}

static void test_sampling(void)
{
    KilnSampling s, d;
    char err[256];
    kiln_sampling_init(&d);
    KT_CHECK(kiln_sampling_check(&d, 256, err, sizeof err) == KILN_OK, "defaults: %s", err);
    KT_CHECK(kiln_sampling_check(NULL, 0, err, sizeof err) == KILN_OK, "NULL: %s", err);
    s = d, s.temperature = 0, s.top_k = 0, s.top_p = 1, s.max_tokens = 0, s.seed = UINT64_MAX;
    KT_CHECK(kiln_sampling_check(&s, 256, err, sizeof err) == KILN_OK, "low edges: %s", err);
    s = d, s.temperature = 1e30f, s.top_k = 1 << 30, s.top_p = 1e-30f, s.max_tokens = 1 << 30;
    s.stop_tokens = stops_ok, s.n_stop = 3, s.ignore_eos = 1;
    KT_CHECK(kiln_sampling_check(&s, 256, err, sizeof err) == KILN_OK, "high edges: %s", err);

    s = d, s.temperature = NAN, sampling_bad(&s, 0, "sampling.temperature nan: want a finite number >= 0");
    s = d, s.temperature = INFINITY,
    sampling_bad(&s, 0, "sampling.temperature inf: want a finite number >= 0");
    s = d, s.temperature = -1, sampling_bad(&s, 0, "sampling.temperature -1: want a finite number >= 0");
    s = d, s.top_k = -3, sampling_bad(&s, 0, "sampling.top_k -3: want >= 0 (0: off)");
    s = d, s.top_p = 0, sampling_bad(&s, 0, "sampling.top_p 0: want (0, 1] (1: off)");
    s = d, s.top_p = -0.5f, sampling_bad(&s, 0, "sampling.top_p -0.5: want (0, 1]");
    s = d, s.top_p = 2, sampling_bad(&s, 0, "sampling.top_p 2: want (0, 1]");
    s = d, s.top_p = NAN, sampling_bad(&s, 0, "sampling.top_p nan: want (0, 1]");
    s = d, s.max_tokens = -5, sampling_bad(&s, 0, "sampling.max_tokens -5: want >= 0");
    s = d, s.n_stop = -1, sampling_bad(&s, 0, "sampling.n_stop -1: want 0..1024");
    s = d, s.n_stop = KILN_MAX_STOP_TOKENS + 1, s.stop_tokens = stops_ok;
    sampling_bad(&s, 0, "sampling.n_stop 1025: want 0..1024");
    s = d, s.n_stop = 2, sampling_bad(&s, 0, "sampling.stop_tokens NULL with n_stop 2");
    s = d, s.n_stop = 3, s.stop_tokens = stops_ok;
    sampling_bad(&s, 255, "sampling.stop_tokens[2] 255: want 0..254 (the vocabulary)");
    KT_CHECK(kiln_sampling_check(&s, 0, err, sizeof err) == KILN_OK, "vocab 0 skips the vocabulary: %s", err);
    static const int32_t neg[] = {-1};
    s = d, s.n_stop = 1, s.stop_tokens = neg;
    sampling_bad(&s, 0, "sampling.stop_tokens[0] -1: want 0..");
    s = d, s.ignore_eos = 2, sampling_bad(&s, 0, "sampling.ignore_eos 2: want 0 or 1");
    s = d, s.size = 0, sampling_bad(&s, 0, "sampling.size 0: call kiln_sampling_init");
    s = d, s.size = 1 << 20, sampling_bad(&s, 0, "sampling.size 1048576");
    /* an older, shorter struct: fields past its size keep their defaults, even if the memory holds junk */
    s = d, s.size = (int)offsetof(KilnSampling, top_p), s.top_p = -7;
    KT_CHECK(kiln_sampling_check(&s, 0, err, sizeof err) == KILN_OK, "short struct: %s", err);
}

static void test_options(void)
{
    KilnEngineOptions o, d;
    char err[256];
    kiln_engine_options_init(&d);
    KT_CHECK(kiln_engine_options_check(&d, err, sizeof err) == KILN_OK, "defaults: %s", err);
    KT_CHECK(kiln_engine_options_check(NULL, err, sizeof err) == KILN_OK, "NULL: %s", err);
    o = d, o.device = -2, o.host_threads = KILN_MAX_HOST_THREADS, o.profile = 1, o.no_cuda_graphs = 1;
    KT_CHECK(kiln_engine_options_check(&o, err, sizeof err) == KILN_OK, "edges: %s", err);
    o = d, o.device = KILN_MAX_DEVICE;
    KT_CHECK(kiln_engine_options_check(&o, err, sizeof err) == KILN_OK, "device %d: %s", KILN_MAX_DEVICE,
             err);

    o = d, o.device = -3, options_bad(&o, "options.device -3: want -1 (auto), -2 (host) or a GPU 0..1023");
    o = d, o.device = 1024, options_bad(&o, "options.device 1024: want");
    o = d, o.kv_cache_bytes = -1, options_bad(&o, "options.kv_cache_bytes -1: want >= 0");
    o = d, o.max_seqs = -1, options_bad(&o, "options.max_seqs -1: want >= 0");
    o = d, o.max_step_tokens = -8, options_bad(&o, "options.max_step_tokens -8: want >= 0");
    o = d, o.host_threads = -1, options_bad(&o, "options.host_threads -1: want 0..1024");
    o = d, o.host_threads = 1000000, options_bad(&o, "options.host_threads 1000000: want 0..1024");
    o = d, o.profile = 7, options_bad(&o, "options.profile 7: want 0 or 1");
    o = d, o.no_prefix_sharing = -1, options_bad(&o, "options.no_prefix_sharing -1: want 0 or 1");
    o = d, o.size = 2, options_bad(&o, "options.size 2: call kiln_engine_options_init");
}

static int on_token(void *user, int64_t req, int32_t tok, KilnFinish fin)
{
    (void)req, (void)tok;
    if (fin != KILN_FINISH_NONE) ++*(int *)user;
    return 0;
}

static void test_engine(const char *pkg)
{
    KilnEngineOptions o;
    KilnEngine *e = (KilnEngine *)&o; /* must come back NULL */
    char err[512] = "";
    kiln_engine_options_init(&o);
    o.device = -2, o.host_threads = 5000;
    KilnStatus st = rt_engine_open(pkg, NULL, 1, &o, &e, err, sizeof err);
    KT_CHECK(st == KILN_ERR_ARG && !e &&
                 strstr(err, "kiln_engine_open: options.host_threads 5000: want 0..1024"),
             "host_threads 5000: %d '%s'", (int)st, err);
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    kiln_engine_options_init(&o);
    o.device = -2, o.kv_cache_bytes = (int64_t)pages * psize + 1;
    e = (KilnEngine *)&o;
    st = rt_engine_open(pkg, NULL, 1, &o, &e, err, sizeof err);
    KT_CHECK(st == KILN_ERR_ARG && !e && strstr(err, "options.kv_cache_bytes") &&
                 strstr(err, "bytes of physical memory of the host") && !strchr(err, '\n'),
             "a KV cache of physical memory + 1 byte: %d '%s'", (int)st, err);
    o.kv_cache_bytes = INT64_MAX;
    st = rt_engine_open(pkg, NULL, 1, &o, &e, err, sizeof err);
    KT_CHECK(st == KILN_ERR_ARG && !e, "a KV cache of INT64_MAX bytes: %d '%s'", (int)st, err);

    kiln_engine_options_init(&o);
    o.device = -2, o.host_threads = 1;
    st = rt_engine_open(pkg, NULL, 1, &o, &e, err, sizeof err);
    KT_CHECK(st == KILN_OK && e, "open: %s", err);
    if (!e) return;
    KilnSampling s, d;
    kiln_sampling_init(&d);
    d.max_tokens = 2;
    int32_t prompt[] = {1, 2, 3};
    int64_t id = 99;
    s = d, s.top_p = 2;
    st = kiln_engine_submit(e, prompt, 3, &s, NULL, NULL, &id);
    KT_CHECK(st == KILN_ERR_ARG && id == 0 &&
                 !strcmp(kiln_engine_errmsg(e), "submit: sampling.top_p 2: want (0, 1] (1: off)"),
             "top_p 2: %d '%s'", (int)st, kiln_engine_errmsg(e));
    s = d, s.temperature = NAN;
    KT_CHECK(kiln_engine_submit(e, prompt, 3, &s, NULL, NULL, &id) == KILN_ERR_ARG &&
                 strstr(kiln_engine_errmsg(e), "sampling.temperature nan"),
             "temperature nan: '%s'", kiln_engine_errmsg(e));
    static const int32_t stop[] = {256};
    s = d, s.stop_tokens = stop, s.n_stop = 1;
    KT_CHECK(kiln_engine_submit(e, prompt, 3, &s, NULL, NULL, &id) == KILN_ERR_ARG &&
                 strstr(kiln_engine_errmsg(e), "sampling.stop_tokens[0] 256: want 0..255 (the vocabulary)"),
             "a stop token outside the vocabulary: '%s'", kiln_engine_errmsg(e));
    s = d, s.max_tokens = -1;
    KT_CHECK(kiln_engine_submit(e, prompt, 3, &s, NULL, NULL, &id) == KILN_ERR_ARG, "max_tokens -1");
    KilnEngineStats stats;
    kiln_engine_stats(e, &stats, sizeof stats);
    KT_CHECK(stats.waiting == 0 && stats.running == 0, "refused requests were queued: %d waiting",
             stats.waiting);
    /* the edges run */
    int done = 0;
    s = d, s.temperature = 100, s.top_k = 1 << 24, s.top_p = 1e-6f, s.seed = UINT64_MAX;
    s.stop_tokens = stop, s.n_stop = 0;
    KT_CHECK(kiln_engine_submit(e, prompt, 3, &s, on_token, &done, &id) == KILN_OK, "edges: %s",
             kiln_engine_errmsg(e));
    int pending = 1, steps = 0;
    while (pending && steps++ < 100)
        if (kiln_engine_step(e, &pending) != KILN_OK) break;
    KT_CHECK(done == 1 && !pending, "the request at the edges did not finish (%d)", done);
    int n = 0;
    KT_CHECK(kiln_engine_tokenize_v2(e, "x", 1, 0, NULL, 0, &n) == KILN_ERR_UNSUPPORTED,
             "random weights have no tokenizer");
    kiln_engine_close(e);
}

int main(void)
{
    test_sampling();
    test_options();
    const char *kiln = getenv("KILN_BIN"), *src = getenv("KILN_SOURCE_DIR");
    if (!cg_host_jit_available()) {
        kt_done("test_engine_check");
        return kt_skip_toolkit("test_engine_check", "this build has no LLVM host backend");
    }
    if (!kiln || !src) {
        printf("SKIP: the engine part needs KILN_BIN and KILN_SOURCE_DIR (run through ctest)\n");
        return kt_ci() ? 1 : kt_done("test_engine_check");
    }
    if (!kf_scratch_open("engine-check")) return 1;
    char cmd[2048], pkg[512];
    snprintf(pkg, sizeof pkg, "%s", kf_at("tiny.kiln"));
    snprintf(cmd, sizeof cmd,
             "'%s' compile '%s/recipes/llama.lua' --model tiny --target host --no-cache -o '%s'", kiln, src,
             pkg);
    KT_CHECK(system(cmd) == 0, "%s", cmd);
    test_engine(pkg);
    kf_scratch_close();
    return kt_done("test_engine_check");
}
