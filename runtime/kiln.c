/* kiln.c — the library's version, the names of its status codes, and the checks of the caller's option
 * structs against the ranges kiln.h states (kiln_sampling_check, kiln_engine_options_check): the one place
 * those ranges are enforced, so the engine, a server and the CLI refuse the same values with the same
 * line. No state, no allocation. */
#include <math.h>
#include <string.h>

#include "kiln.h"
#include "rt_file.h"

int kiln_version(void)
{
    return KILN_VERSION_MAJOR * 10000 + KILN_VERSION_MINOR * 100 + KILN_VERSION_PATCH;
}

const char *kiln_status_name(KilnStatus s)
{
    switch (s) {
    case KILN_OK: return "ok";
    case KILN_ERR_ARG: return "bad argument";
    case KILN_ERR_IO: return "i/o error";
    case KILN_ERR_FORMAT: return "wrong file format";
    case KILN_ERR_CORRUPT: return "corrupt file";
    case KILN_ERR_NOMEM: return "out of memory";
    case KILN_ERR_DEVICE: return "device error";
    case KILN_ERR_UNSUPPORTED: return "unsupported";
    case KILN_ERR_FULL: return "pool full";
    }
    return "unknown status";
}

/* A caller's struct of `size` bytes over the defaults in out (size bytes of it, at most sizeof). The
 * size must hold at least the size field and be sane; 0 when it is not. */
static int versioned_copy(void *out, size_t out_size, const void *in, int size)
{
    if (size < (int)sizeof(int) || size > 65536) return 0;
    memcpy(out, in, (size_t)size < out_size ? (size_t)size : out_size);
    *(int *)out = (int)out_size;
    return 1;
}

KilnStatus kiln_sampling_check(const KilnSampling *given, int vocab, char *err, int errlen)
{
    KilnSampling s;
    kiln_sampling_init(&s);
    if (given && !versioned_copy(&s, sizeof s, given, given->size))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.size %d: call kiln_sampling_init",
                            given->size);
    if (!isfinite(s.temperature) || s.temperature < 0)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.temperature %g: want a finite number >= 0",
                            (double)s.temperature);
    if (s.top_k < 0)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.top_k %d: want >= 0 (0: off)", s.top_k);
    if (!(s.top_p > 0 && s.top_p <= 1))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.top_p %g: want (0, 1] (1: off)",
                            (double)s.top_p);
    if (s.max_tokens < 0)
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "sampling.max_tokens %d: want >= 0 (0: until the context is full)", s.max_tokens);
    if (s.n_stop < 0 || s.n_stop > KILN_MAX_STOP_TOKENS)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.n_stop %d: want 0..%d", s.n_stop,
                            KILN_MAX_STOP_TOKENS);
    if (s.n_stop && !s.stop_tokens)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.stop_tokens NULL with n_stop %d", s.n_stop);
    for (int i = 0; i < s.n_stop; i++)
        if (s.stop_tokens[i] < 0 || (vocab > 0 && s.stop_tokens[i] >= vocab))
            return rt_file_errf(err, errlen, KILN_ERR_ARG,
                                "sampling.stop_tokens[%d] %d: want 0..%d (the vocabulary)", i,
                                (int)s.stop_tokens[i], vocab > 0 ? vocab - 1 : INT32_MAX);
    if (s.ignore_eos != 0 && s.ignore_eos != 1)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.ignore_eos %d: want 0 or 1", s.ignore_eos);
    if (s.spec < KILN_SPEC_NONE || s.spec > KILN_SPEC_DRAFT)
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "sampling.spec %d: want 0 (none), 1 (ngram) or 2 (draft)", s.spec);
    if (s.n_prediction < 0 || s.n_prediction > KILN_MAX_PREDICTION)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.n_prediction %d: want 0..%d", s.n_prediction,
                            KILN_MAX_PREDICTION);
    if (s.n_prediction && !s.prediction)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.prediction NULL with n_prediction %d",
                            s.n_prediction);
    for (int i = 0; i < s.n_prediction; i++)
        if (s.prediction[i] < 0 || (vocab > 0 && s.prediction[i] >= vocab))
            return rt_file_errf(err, errlen, KILN_ERR_ARG,
                                "sampling.prediction[%d] %d: want 0..%d (the vocabulary)", i,
                                (int)s.prediction[i], vocab > 0 ? vocab - 1 : INT32_MAX);
    if (s.spec != KILN_SPEC_NONE && (s.spec_k < 1 || s.spec_k > KILN_MAX_SPEC_K))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.spec_k %d: want 1..%d", s.spec_k,
                            KILN_MAX_SPEC_K);
    if (s.logprobs < -1 || s.logprobs > KILN_MAX_LOGPROBS)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.logprobs %d: want -1 (off) or 0..%d",
                            s.logprobs, KILN_MAX_LOGPROBS);
    if (s.spec != KILN_SPEC_NONE && (s.spec_branches < 1 || s.spec_branches > KILN_MAX_SPEC_BRANCHES))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.spec_branches %d: want 1..%d",
                            s.spec_branches, KILN_MAX_SPEC_BRANCHES);
    if (!(s.presence_penalty >= -2 && s.presence_penalty <= 2))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.presence_penalty %g: want -2..2 (0: off)",
                            (double)s.presence_penalty);
    if (!(s.frequency_penalty >= -2 && s.frequency_penalty <= 2))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.frequency_penalty %g: want -2..2 (0: off)",
                            (double)s.frequency_penalty);
    if (!(s.repetition_penalty > 0 && s.repetition_penalty <= 100))
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "sampling.repetition_penalty %g: want (0, 100] (1: off)",
                            (double)s.repetition_penalty);
    if (!(s.min_p >= 0 && s.min_p <= 1))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "sampling.min_p %g: want 0..1 (0: off)",
                            (double)s.min_p);
    if (s.n_logit_bias < 0 || s.n_logit_bias > KILN_MAX_LOGIT_BIAS || (s.n_logit_bias && !s.logit_bias))
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "sampling.n_logit_bias %d: want 0..%d, with logit_bias", s.n_logit_bias,
                            KILN_MAX_LOGIT_BIAS);
    for (int i = 0; i < s.n_logit_bias; i++)
        if (s.logit_bias[i].token < 0 || (vocab > 0 && s.logit_bias[i].token >= vocab) ||
            !(s.logit_bias[i].bias >= -100 && s.logit_bias[i].bias <= 100))
            return rt_file_errf(
                err, errlen, KILN_ERR_ARG,
                "sampling.logit_bias[%d]: token %d, bias %g: want a token 0..%d, a bias -100..100", i,
                (int)s.logit_bias[i].token, (double)s.logit_bias[i].bias, vocab > 0 ? vocab - 1 : INT32_MAX);
    return KILN_OK;
}

KilnStatus kiln_engine_options_check(const KilnEngineOptions *given, char *err, int errlen)
{
    KilnEngineOptions o;
    kiln_engine_options_init(&o);
    if (given && !versioned_copy(&o, sizeof o, given, given->size))
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "options.size %d: call kiln_engine_options_init",
                            given->size);
    if (o.device < -2 || o.device > KILN_MAX_DEVICE)
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "options.device %d: want -1 (auto), -2 (host) or a GPU 0..%d", o.device,
                            KILN_MAX_DEVICE);
    if (o.kv_cache_bytes < 0)
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "options.kv_cache_bytes %lld: want >= 0 (0: from free memory)",
                            (long long)o.kv_cache_bytes);
    if (o.max_seqs < 0)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "options.max_seqs %d: want >= 0 (0: the plan's)",
                            o.max_seqs);
    if (o.max_step_tokens < 0)
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "options.max_step_tokens %d: want >= 0 (0: min(plan, 2048))", o.max_step_tokens);
    if (o.host_threads < 0 || o.host_threads > KILN_MAX_HOST_THREADS)
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "options.host_threads %d: want 0..%d (0: every online CPU)", o.host_threads,
                            KILN_MAX_HOST_THREADS);
    const struct {
        const char *name;
        int v;
    } flags[] = {{"no_cuda_graphs", o.no_cuda_graphs},
                 {"no_prefix_sharing", o.no_prefix_sharing},
                 {"profile", o.profile}};
    for (unsigned i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i].v != 0 && flags[i].v != 1)
            return rt_file_errf(err, errlen, KILN_ERR_ARG, "options.%s %d: want 0 or 1", flags[i].name,
                                flags[i].v);
    return KILN_OK;
}
