/* kiln.h — the public ABI of the kiln runtime (libkiln). One header, opaque handles, status codes with
 * a readable message, no globals.
 *
 * Generating text (a complete program; error handling shortened to `return 1`):
 *
 *     #include <stdio.h>
 *     #include "kiln.h"
 *
 *     static int on_token(void *user, int64_t req, int32_t tok, KilnFinish fin)
 *     {
 *         char buf[64];
 *         size_t n;
 *         if (tok >= 0 && kiln_engine_detokenize(user, &tok, 1, buf, sizeof buf, &n) == KILN_OK)
 *             fwrite(buf, 1, n < sizeof buf ? n : sizeof buf, stdout);
 *         return 0;                                  // nonzero would abort this request
 *     }
 *
 *     int main(void)
 *     {
 *         char err[512];
 *         KilnEngineOptions o;
 *         kiln_engine_options_init(&o);              // GPU when there is one, else the host
 *         KilnEngine *e;
 *         if (kiln_engine_open("model.kiln", "model.gguf", &o, &e, err, sizeof err)) {
 *             fprintf(stderr, "%s\n", err);           // "model.gguf: missing tensor ..."
 *             return 1;
 *         }
 *         int32_t ids[512];
 *         int n, pending;
 *         if (kiln_engine_tokenize(e, "The capital of France is", ids, 512, &n) || n > 512) return 1;
 *         KilnSampling s;
 *         kiln_sampling_init(&s);                    // greedy; or s.temperature = 0.7f, s.top_p = 0.9f
 *         s.max_tokens = 32;
 *         int64_t id;
 *         if (kiln_engine_submit(e, ids, n, &s, on_token, e, &id)) return 1;
 *         do {                                       // more requests may be submitted between steps
 *             if (kiln_engine_step(e, &pending)) { fprintf(stderr, "%s\n", kiln_engine_errmsg(e)); break; }
 *         } while (pending);
 *         kiln_engine_close(e);
 *         return 0;
 *     }
 *
 * Packages can also be opened on their own (kiln_package_open) to read their meta data.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0
/* Returns the library's version as major*10000 + minor*100 + patch. */
KILN_API int kiln_version(void);

typedef enum KilnStatus {
    KILN_OK = 0,
    KILN_ERR_ARG,         /* a bad argument from the caller */
    KILN_ERR_IO,          /* a file could not be opened, read or written */
    KILN_ERR_FORMAT,      /* not a kiln file, or a format version this build does not read */
    KILN_ERR_CORRUPT,     /* a kiln file whose contents are damaged or inconsistent */
    KILN_ERR_NOMEM,       /* host memory allocation failed */
    KILN_ERR_DEVICE,      /* a GPU driver call failed */
    KILN_ERR_UNSUPPORTED, /* valid, but not supported by this build or device */
    KILN_ERR_FULL,        /* a fixed pool is exhausted (no free KV-cache pages); nothing was changed */
} KilnStatus;

/* A short constant name for a status ("corrupt file"). Never NULL. */
KILN_API const char *kiln_status_name(KilnStatus s);

/* ---- packages (model.kiln) ------------------------------------------------------------------------ */
typedef struct KilnPackage KilnPackage;

/* Opens and validates a package read-only: an existing, non-empty SQLite file whose application_id is
 * kiln's, with a format version this build reads, that passes SQLite's quick_check and has every table
 * and column kiln needs. On failure returns a status, writes a one-line message that starts with `path`
 * into err (errlen bytes, may be 0), leaves *out NULL, and never modifies the file. */
KILN_API KilnStatus kiln_package_open(const char *path, KilnPackage **out, char *err, int errlen);
/* Closes a package (NULL is fine). */
KILN_API void kiln_package_close(KilnPackage *pkg);
/* The meta value for key, or NULL. The string is owned by the package and valid until close. */
KILN_API const char *kiln_package_meta(KilnPackage *pkg, const char *key);

/* ---- the engine: a package + weights -> tokens -------------------------------------------------------
 * Continuous batching: requests join (kiln_engine_submit) between steps; each kiln_engine_step runs one
 * forward pass over every running sequence (decode: 1 token; prefill: a chunk of its prompt) and calls
 * each request's callback with its new token. Single-threaded: one thread drives an engine (different
 * engines are independent). */
typedef struct KilnEngine KilnEngine;

/* Option structs start with their size (set by their _init function) so that a program built against an
 * older kiln.h keeps working: fields it does not know keep their defaults. Every field has a stated
 * range; a value outside it is refused (KILN_ERR_ARG, one line naming the field and the range), never
 * clamped or read as a default: options may come from a network peer. */
#define KILN_MAX_HOST_THREADS 1024 /* host_threads */
#define KILN_MAX_DEVICE       1023 /* device */
#define KILN_MAX_STOP_TOKENS  1024 /* n_stop */
typedef struct KilnEngineOptions {
    int size;   /* sizeof(KilnEngineOptions) where the caller was compiled (kiln_engine_options_init) */
    int device; /* -1 (default): GPU 0 when one is usable, else the host; -2: the host; N in
                   0..KILN_MAX_DEVICE: GPU N (an error when there is no such GPU) */
    int64_t kv_cache_bytes; /* KV-cache pool, bytes: 0 (default): 90% of the GPU memory left after weights
                               and activations, on the host 1 GiB (both capped at what max_seqs full-length
                               sequences need); else at most the device's memory (the host: its physical
                               RAM), checked before anything is allocated */
    int max_seqs;        /* sequences per step, >= 0; 0: the package's planned maximum (larger: the plan's) */
    int max_step_tokens; /* tokens per step (prompts are prefilled in chunks of this), >= 0; 0: min(plan,
                            2048) (larger: the plan's) */
    int no_cuda_graphs;  /* 0 or 1: 1 launches every kernel of a decode step (default: replay captured
                            graphs) */
    int no_prefix_sharing; /* 0 or 1: 1 makes every request compute its whole prompt (default: a request
                              whose tokens start with page-aligned tokens a live sequence has computed shares
                              them) */
    int profile;           /* 0 or 1: 1 times every kernel (GPU events between launches; the host clock on the
                              host; CUDA graphs off) and logs a table per kernel at close */
    int host_threads;      /* threads that run each host launch's programs, 0..KILN_MAX_HOST_THREADS (0:
                              every online CPU, at most 64) */
    void (*log)(void *user, const char *line); /* what the engine chose and did (verbose); NULL: quiet */
    void *log_user;
    /* The tuning store (tune.db, docs/AUTOTUNE.md); NULL or "": none, every kernel runs the package's
     * default configs. Read-only; a missing or broken store fails the open (one line); a damaged or
     * unfit tuned binary in it only leaves its kernel on the default (a log line says why). The engine
     * loads the tuned binaries the store holds for this device: it compiles nothing. */
    const char *tune_db;
    /* Weights are checked for NaN and Inf as they load: 0, a sample of each tensor (about 64 values, or
     * the scales of 64 blocks of a GGUF block format: an all-NaN checkpoint fails at once, at no
     * noticeable cost); 1, every value (every block's scales). A finding fails the open with
     * KILN_ERR_CORRUPT naming the tensor and the element. */
    int check_weights;
    /* A draft model for speculative decoding (KILN_SPEC_DRAFT requests; docs/RUNTIME.md): a second package
     * with the target's vocabulary, opened on the same device with its own KV pool (sized as kv_cache_bytes
     * says for the target) and its weights at draft_weights. NULL or "": none. */
    const char *draft_package;
    const char *draft_weights;
    /* A Hugging Face tokenizer.json (or a directory holding one, with its tokenizer_config.json) used instead
     * of the weights' own tokenizer: for a checkpoint that carries none, or random weights. NULL or "": the
     * weights' (GGUF metadata, or the tokenizer.json beside safetensors). A file that does not load, or
     * whose ids exceed the package's vocabulary, fails the open. */
    const char *tokenizer;
} KilnEngineOptions;

/* Sets the defaults above. */
KILN_API void kiln_engine_options_init(KilnEngineOptions *o);
/* Checks o's fields against the ranges above that need no device (kiln_engine_open calls it, then
 * checks kv_cache_bytes against the device's memory). NULL o: the defaults, fine. KILN_OK, or
 * KILN_ERR_ARG with one line in err: "options.host_threads 5000: want 0..1024". */
KILN_API KilnStatus kiln_engine_options_check(const KilnEngineOptions *o, char *err, int errlen);
/* Opens package (model.kiln) with the weights at `weights` (a GGUF file, a safetensors file, a sharded
 * safetensors index or a directory holding one), on the device the options ask for: loads and checks the
 * kernels for that device's target, the weights (names, dtypes and shapes against the package), and
 * sizes the KV cache. On failure *out is NULL and err has one line naming the file at fault. */
KILN_API KilnStatus kiln_engine_open(const char *package, const char *weights, const KilnEngineOptions *o,
                                     KilnEngine **out, char *err, int errlen);
KILN_API void kiln_engine_close(KilnEngine *e); /* NULL is fine; pending requests end unannounced */
/* The message of the engine's last failure ("" when none). */
KILN_API const char *kiln_engine_errmsg(const KilnEngine *e);
/* "host CPU ..." or "NVIDIA H200 (sm_90a, ...)": where the engine runs. */
KILN_API const char *kiln_engine_device(const KilnEngine *e);

/* Sampling parameters: the ranges are checked at submit (kiln_sampling_check); a value outside them is
 * KILN_ERR_ARG, never read as "off". */
/* A logit bias entry: bias (finite, -100..100) added to token's logit. */
typedef struct KilnLogitBias {
    int32_t token;
    float bias;
} KilnLogitBias;

typedef struct KilnSampling {
    int size;                   /* sizeof(KilnSampling) where the caller was compiled (kiln_sampling_init) */
    float temperature;          /* finite, >= 0; 0: greedy (argmax) */
    int top_k;                  /* >= 0: the k most likely tokens; 0: off (k >= the vocabulary: off) */
    float top_p;                /* in (0, 1]: the smallest set of tokens holding p of the mass; 1: off */
    uint64_t seed;              /* any; with the same seed, the same tokens */
    int max_tokens;             /* new tokens at most, >= 0; 0: until the context is full */
    const int32_t *stop_tokens; /* ending tokens besides EOS, each in the vocabulary (copied at submit);
                                   non-NULL when n_stop > 0 */
    int n_stop;                 /* 0..KILN_MAX_STOP_TOKENS */
    int ignore_eos;             /* 0 or 1: 1 makes the model's end-of-sequence token not end the request */
    /* Speculative decoding (docs/RUNTIME.md): a proposer guesses up to spec_k next tokens and one step of
     * the target checks them all; the request keeps the ones the target itself draws (greedy, or sampled
     * with the seed of their position), so its tokens are exactly those it gets without speculation. */
    int spec;   /* KILN_SPEC_NONE (default), KILN_SPEC_NGRAM or KILN_SPEC_DRAFT */
    int spec_k; /* draft tokens per step at most, 1..KILN_MAX_SPEC_K (default 4); adapted down (and
                   paused) while the target rejects the drafts; read only when spec is on */
    /* The output the caller expects (OpenAI's "predicted outputs": the file being edited, a quoted
     * passage), each id in the vocabulary, copied at submit; non-NULL when n_prediction > 0. With spec
     * NGRAM the proposer reads it first: while the output follows it, its next tokens are the drafts; once
     * they part, the lookup searches it before the request's own tokens. Decides speed, never output. */
    const int32_t *prediction;
    int n_prediction; /* 0..KILN_MAX_PREDICTION */
    /* KILN_SPEC_DRAFT: candidates per depth, 1..KILN_MAX_SPEC_BRANCHES (default 1: a chain). b > 1 makes
     * a draft tree: beside each draft token, the draft model's next b - 1 most likely tokens at that
     * depth are verified in the same step (a token tree, up to 64 tokens a request), and a sibling the
     * target drew is kept with the target's token after it. Needs a target package compiled with
     * `--set tree=true` (its attention takes the tree mask); on others the chain alone is verified. */
    int spec_branches;
    /* -1 (default): none; 0..KILN_MAX_LOGPROBS: each token's log-probability under the model (the
     * log-softmax of its logits, before temperature and filters) and that many most likely alternatives,
     * for the token's callback to read (kiln_engine_logprobs). Reads the step's logits rows back. */
    int logprobs;
    /* What the graph's sampler cannot do: a request that asks for any of these has its logit rows read
     * back and its tokens drawn on the host, after the adjustments below (runtime/rt_sample.h; the same
     * noise and filters as the device's sampler, so its draws follow the seed alike), and does not
     * speculate. Penalties as OpenAI and vLLM define them: */
    float presence_penalty;  /* [-2, 2], 0 off: a token the output holds: logit - p */
    float frequency_penalty; /* [-2, 2], 0 off: logit - f * (the times the output holds it) */
    float
        repetition_penalty; /* (0, 100], 1 off: a token of the prompt or output: logit / r if > 0, else * r */
    float min_p;            /* [0, 1], 0 off: drops tokens less likely than min_p times the most likely */
    const KilnLogitBias *logit_bias; /* added to the logits (copied at submit); non-NULL when n_logit_bias */
    int n_logit_bias;                /* 0..KILN_MAX_LOGIT_BIAS */
} KilnSampling;
#define KILN_MAX_LOGIT_BIAS 4096      /* n_logit_bias */
#define KILN_MAX_LOGPROBS   20        /* logprobs */
#define KILN_MAX_PREDICTION (1 << 20) /* n_prediction */

/* Proposers (KilnSampling.spec). NGRAM: prompt lookup, no model: the longest suffix (4 tokens down to 1)
 * of the request's tokens that occurred before proposes what followed it (copying, editing, RAG). */
/* DRAFT: the engine's draft model (KilnEngineOptions.draft_package) decodes k tokens greedily ahead of the
 * target, batched over the requests that use it. */
typedef enum KilnSpec { KILN_SPEC_NONE = 0, KILN_SPEC_NGRAM = 1, KILN_SPEC_DRAFT = 2 } KilnSpec;
#define KILN_MAX_SPEC_K        32 /* spec_k */
#define KILN_MAX_SPEC_BRANCHES 8  /* spec_branches */

/* Greedy, 256 tokens, seed 0, no speculation (spec_k 4 when it is turned on). */
KILN_API void kiln_sampling_init(KilnSampling *s);
/* Checks s against the ranges above (a server can check a request before it queues one); vocab > 0
 * also checks the stop tokens against it (kiln_engine_vocab), 0 skips that. KILN_OK, or KILN_ERR_ARG with
 * one line in err: "sampling.top_p 2: want (0, 1]". */
KILN_API KilnStatus kiln_sampling_check(const KilnSampling *s, int vocab, char *err, int errlen);

typedef enum KilnFinish {
    KILN_FINISH_NONE = 0, /* a token; more may follow */
    KILN_FINISH_STOP,     /* EOS or a stop token (that token was the last one reported) */
    KILN_FINISH_LENGTH,   /* max_tokens reached, or the model's context is full */
    KILN_FINISH_ABORT,    /* kiln_engine_abort, or the callback returned nonzero */
    KILN_FINISH_ERROR,    /* the engine failed (kiln_engine_errmsg) */
} KilnFinish;

/* Called from kiln_engine_step: once per new token (finish NONE, or the finishing token with STOP /
 * LENGTH), and once with token -1 for ABORT / ERROR. Returning nonzero aborts the request. A callback may
 * call kiln_engine_submit and kiln_engine_abort (and the tokenizer); kiln_engine_step and
 * kiln_engine_score are refused there (KILN_ERR_ARG), and it must not close the engine. LENGTH also ends a
 * request whose tokens fill the whole KV cache. */
typedef int (*KilnTokenCallback)(void *user, int64_t request, int32_t token, KilnFinish finish);

/* Queues a request for prompt[0..n) (n >= 1 token ids); *request gets its id (> 0). The prompt is
 * copied. KILN_ERR_ARG for an empty prompt, a token outside the vocabulary, a prompt of at least the
 * model's context, one (plus its first new token) larger than the whole KV cache, or sampling that
 * kiln_sampling_check refuses (s NULL: kiln_sampling_init's). */
KILN_API KilnStatus kiln_engine_submit(KilnEngine *e, const int32_t *prompt, int n, const KilnSampling *s,
                                       KilnTokenCallback cb, void *user, int64_t *request);
/* Runs one step. *pending (may be NULL) gets the number of requests still queued or running afterwards
 * (0: idle; on failure, the count before the step). A device failure is returned (and every request ends
 * with KILN_FINISH_ERROR). */
KILN_API KilnStatus kiln_engine_step(KilnEngine *e, int *pending);
/* Ends a request (its callback sees KILN_FINISH_ABORT at the next step). KILN_ERR_ARG: no such request. */
KILN_API KilnStatus kiln_engine_abort(KilnEngine *e, int64_t request);

typedef struct KilnEngineStats {
    int64_t steps, prompt_tokens, generated_tokens, preemptions; /* prompt tokens: computed, each once */
    int64_t prefix_tokens;                 /* prompt tokens read from a shared prefix instead of computed */
    double step_seconds;                   /* wall time inside kiln_engine_step */
    int running, waiting, cached_prefixes; /* cached: finished sequences kept for their prefixes */
    int32_t kv_pages, kv_pages_free, page_size;
    int max_seqs, max_step_tokens;
    int64_t recomputed_tokens; /* tokens computed again after a preemption (prompt and generated) */
    /* kernels by what the tuning store gave them: every bucket an exact match; some bucket from the
     * store (a nearest bucket, or exact for some only); nothing (the package's default configs) */
    int kernels_tuned, kernels_nearest, kernels_default;
    /* speculative decoding: verify steps of a request's drafts, draft tokens proposed and kept (the
     * mean tokens per verify is (spec_accepted + spec_verifies) / spec_verifies) */
    int64_t spec_verifies, spec_proposed, spec_accepted;
    /* step wall times by kind: steps where every sequence decodes one token (no drafts, no prefill);
     * steps where some sequence verifies drafts and none prefills (verify cost = verify_seconds /
     * verify_steps against decode_seconds / decode_steps); the draft model's proposals before steps */
    int64_t decode_steps, verify_steps;
    double decode_seconds, verify_seconds, draft_seconds;
    int64_t draft_steps; /* the draft model's steps (its catch-up and decode rounds) in draft_seconds */
    /* draft trees (spec_branches > 1): sibling tokens verified, and verifies that kept a sibling (each
     * such verify's kept drafts in spec_accepted count the sibling) */
    int64_t spec_siblings, spec_sibling_hits;
} KilnEngineStats;
/* Writes min(size, sizeof(KilnEngineStats)) bytes of the stats to st (pass sizeof *st: a caller built
 * against an older, shorter struct gets its fields). */
KILN_API void kiln_engine_stats(const KilnEngine *e, KilnEngineStats *st, size_t size);

/* One request's counters (st->size set by the caller: sizeof *st), while the engine knows it: from submit
 * until its last token's callback returns (a callback may ask, the one of the finishing token included;
 * an aborted or failed request is gone by its final callback). KILN_ERR_ARG: no such request (any more),
 * or a bad size. */
typedef struct KilnRequestStats {
    int size; /* sizeof(KilnRequestStats) where the caller was compiled */
    int64_t prompt_tokens, generated_tokens;
    int64_t spec_verifies, spec_proposed, spec_accepted; /* as KilnEngineStats, this request's */
} KilnRequestStats;
KILN_API KilnStatus kiln_engine_request_stats(const KilnEngine *e, int64_t request, KilnRequestStats *st);

/* Within a token's callback of a request with sampling.logprobs >= 0: *chosen gets the token and its
 * log-probability, top[0..min(cap, logprobs)) the most likely tokens (descending; ties: smaller id first);
 * returns how many were written to top. -1 elsewhere (no such callback running, or logprobs off). */
typedef struct KilnLogprob {
    int32_t token;
    float logprob;
} KilnLogprob;
KILN_API int kiln_engine_logprobs(const KilnEngine *e, KilnLogprob *chosen, KilnLogprob *top, int cap);

/* Teacher-forced scoring (evaluation, perplexity, comparing with another implementation): runs
 * tokens[0..n) as one fresh sequence and writes the model's logits after every position to
 * logits[n * vocab] (f32, row i predicts token i+1). Needs no request running or queued (KILN_ERR_ARG
 * otherwise) and n <= min(max_step_tokens, max_seqs) of kiln_engine_stats (one step, one row each). */
KILN_API KilnStatus kiln_engine_score(KilnEngine *e, const int32_t *tokens, int n, float *logits);
/* The vocabulary size (columns of the logits). */
KILN_API int kiln_engine_vocab(const KilnEngine *e);

/* The tokenizer (GGUF weights carry one; otherwise KILN_ERR_UNSUPPORTED).
 * tokenize: the ids of text (NUL-terminated; NULL is ""): all of it is text, so "<|im_end|>" typed by a
 * user stays the characters it is, never a control token; the model's BOS is added when the model wants
 * one. *n gets the count, the first min(*n, cap) are written (ids may be NULL when cap is 0: a count).
 * KILN_ERR_ARG for cap < 0 or NULL ids with cap > 0.
 * tokenize_v2: the same for len bytes at text (any bytes, NULs included), with flags: KILN_TOKENIZE_SPECIAL
 * makes every special-token text (<|im_start|>, <|im_end|>) its control id, for text the caller wrote
 * itself (a chat template's parts), never for text from a user; KILN_TOKENIZE_NO_BOS adds no BOS (a part
 * after the first). Other flag bits: KILN_ERR_ARG.
 * detokenize: the bytes of ids (control tokens omitted), *len gets the count, the first min(*len, cap)
 * written, no NUL added. */
enum {
    KILN_TOKENIZE_SPECIAL = 1 << 0, /* special-token texts become their control ids */
    KILN_TOKENIZE_NO_BOS = 1 << 1,  /* no BOS, even when the model wants one */
};
KILN_API KilnStatus kiln_engine_tokenize(KilnEngine *e, const char *text, int32_t *ids, int cap, int *n);
KILN_API KilnStatus kiln_engine_tokenize_v2(KilnEngine *e, const char *text, size_t len, int flags,
                                            int32_t *ids, int cap, int *n);
KILN_API KilnStatus kiln_engine_detokenize(KilnEngine *e, const int32_t *ids, int n, char *out, size_t cap,
                                           size_t *len);
/* detokenize_r: the same, safe to call from another thread while one drives the engine (it reads only the
 * tokenizer, which never changes once the engine is open, and writes no error message): a server's
 * text thread turns tokens into text while the engine runs its next step. Until kiln_engine_close. */
KILN_API KilnStatus kiln_engine_detokenize_r(const KilnEngine *e, const int32_t *ids, int n, char *out,
                                             size_t cap, size_t *len);
/* tokenize_marked: len bytes at text as one text, special-token texts becoming their ids only where every
 * byte of them is marked (marks: len bytes, nonzero = text the caller wrote, such as a chat template's
 * own; zero = a user's, which stays text); merges across the marks are those of the whole text. flags:
 * KILN_TOKENIZE_NO_BOS or 0. */
KILN_API KilnStatus kiln_engine_tokenize_marked(KilnEngine *e, const char *text, size_t len,
                                                const unsigned char *marks, int flags, int32_t *ids, int cap,
                                                int *n);
/* The model's chat template (Jinja text: GGUF tokenizer.chat_template, or chat_template of the
 * tokenizer_config.json beside safetensors weights), or NULL when the weights carry none. */
KILN_API const char *kiln_engine_chat_template(const KilnEngine *e);
/* A token's vocabulary text (control tokens too: "<|im_start|>"), *len bytes, the first min(*len, cap)
 * written (no NUL); KILN_ERR_ARG for an id outside the vocabulary. */
KILN_API KilnStatus kiln_engine_token_text(KilnEngine *e, int32_t id, char *out, size_t cap, size_t *len);
/* The model's BOS and EOS ids (-1: none). */
KILN_API int32_t kiln_engine_bos(const KilnEngine *e);
KILN_API int32_t kiln_engine_eos(const KilnEngine *e);

#ifdef __cplusplus
}
#endif
#endif
