/* rt_engine_impl.h — the engine's state, shared by its two files (not installed, not part of kiln.h):
 * rt_engine_open.c (open: package, plan, tuning store, kernels, weights, inputs and KV pool; close) and
 * rt_engine.c (requests, scheduling, steps, speculation, stats, scoring, the tuner's hooks, the
 * tokenizer). Design: docs/RUNTIME.md. */
#ifndef RT_ENGINE_IMPL_H
#define RT_ENGINE_IMPL_H

#include <stdint.h>

#include "kiln.h"
#include "rt_exec.h"
#include "rt_kvcache.h"
#include "rt_plan.h"
#include "rt_spec.h"
#include "rt_tokenizer.h"

enum { REQ_WAITING, REQ_RUNNING, REQ_DONE };

typedef struct Req {
    int64_t id;
    int32_t *tokens; /* prompt, then generated */
    int n_tokens, cap, n_prompt;
    int n_done; /* tokens whose K/V is in the cache */
    int n_high; /* the most tokens ever computed (a preempted request computes [n_done, n_high) again) */
    int n_prompt_counted; /* prompt tokens counted in stats.prompt_tokens */
    int32_t seq;          /* KV sequence, -1 while waiting */
    int state, generated;
    KilnFinish finish; /* set when it ends; reported at the end of the step */
    KilnSampling s;
    int32_t *stop;
    KilnLogitBias *bias; /* KilnSampling.logit_bias, copied (NULL: none) */
    int host_sample;     /* rt_sample_on_host: its tokens are drawn on the host (rt_sample.h) */
    int32_t *pred; /* KilnSampling.prediction, copied (NULL: none), n_pred tokens; pred_at: how many of */
    int n_pred, pred_at; /* the generated tokens follow it (== generated while they all do) */
    KilnTokenCallback cb;
    void *user;
    RtSpecState spec; /* speculative decoding (r->s.spec on) */
    int32_t dseq;     /* KILN_SPEC_DRAFT: its sequence in the draft engine's KV pool, -1 none */
    int n_pre;        /* KILN_SPEC_DRAFT: drafts the draft model made this step (before the step's limits) */
    int n_draft;      /* draft tokens in this step's chunk, after the request's last token */
    int32_t draft[KILN_MAX_SPEC_K];
    /* draft trees (spec_branches b > 1): the draft's next b - 1 tokens beside draft j (sib[j], made with
     * it); this step verifies sib_w of them at each of the first n_sib / sib_w depths, after the chain */
    int32_t sib[KILN_MAX_SPEC_K][KILN_MAX_SPEC_BRANCHES - 1];
    int n_sib, sib_w;
} Req;

/* What one step feeds the plan (host copies of the input buffers). */
typedef struct StepIn {
    int32_t *tokens, *positions, *slots, *block_table, *seq_lens, *cu_q, *logit_rows;
    int64_t *tree_mask; /* per token: bit i = may see chunk token i (-1: causal; a draft tree's siblings) */
    float *sampling;
    int *row_req; /* request index of each logit row */
    RtKvStepSeq *items;
    int *item_req;
} StepIn;

enum { MAX_GRAPHS = 64, MAX_CACHED = 64 };

/* A finished request's KV pages kept for later prompts that start the same way (prefix caching); given
 * back least recently used first when the pool runs short. */
typedef struct Cached {
    int32_t seq;
    int32_t *tokens; /* the n tokens whose K/V the sequence holds */
    int n;
    uint64_t used; /* e->clock at its last use */
} Cached;

/* A captured uniform step: every launch of the plan for B sequences of q new tokens each, every token a
 * logit row (q = 1: a decode; q = k + 1: a speculative verify of k drafts each), with n_splits
 * splits of the attention (the block table's stride is always max_pages), replayed in one call. */
typedef struct StepGraph {
    int B, q, n_splits;
    RtExecGraph *g;
} StepGraph;

struct KilnEngine {
    RtExec *x;
    RtPlan *plan;
    RtExecKernel **kernels;
    uint64_t *weights; /* device address per plan weight */
    uint64_t arena;
    uint64_t *inputs;   /* device address per plan buffer (inputs only) */
    int64_t *input_cap; /* bytes allocated per input */
    RtKvCache *kv;
    RtTokenizer *tok;
    int32_t n_pages, page_size, max_pages, vocab, eos, max_ctx;
    int max_seqs, max_step_tokens, max_rows, heads, kv_heads, attn_block_m;
    int buf_next_tokens;
    /* input buffer indices the engine fills, -1 when the plan has none */
    int in_tokens, in_positions, in_slots, in_block_table, in_seq_lens, in_cu_q, in_logit_rows, in_sampling;
    int in_tree_mask; /* packages compiled with tree=true: draft trees can be verified */
    int step_tree;    /* this step verifies some draft tree (run_batch writes its mask and positions) */
    Req *reqs;
    int n_reqs, cap_reqs;
    int64_t next_id;
    StepIn in;
    StepGraph graphs[MAX_GRAPHS];
    Cached cache[MAX_CACHED];
    int n_cache;
    uint64_t clock;
    int n_graphs, use_graphs, profile, share_prefixes;
    int tuning;           /* a tuning store was given */
    int probing;          /* rt_engine_probe: every launch of the step is marked */
    int route_rows;       /* > 0: the step's matmuls pick binaries as for this many rows (pick_binary) */
    int buf_logits;       /* the plan's logits output (-1: none) */
    float *lp_logits;     /* logprobs, host sampling: the step's logits rows read back (lp_rows x vocab,
                             grown), or NULL */
    int lp_rows, lp_step; /* lp_step: this step's rows were read back (logprobs or host sampling asked) */
    float *hs_row;        /* host sampling (rt_sample.h): a row to adjust, then 2 rows of scratch (3 vocab) */
    int32_t *hs_count;    /* and vocab zeroed counters */
    KilnLogprob *lp_row;  /* while a callback runs for a row with logprobs: its chosen token, then its top */
    int lp_n;             /* ... that many alternatives; -1: none */
    int *probe_bucket;    /* while probing, per kernel: the bucket its launches met (-1, -2: none, mixed) */
    const char *dump_dir; /* KILN_DUMP_DIR: every launch's activation arguments written after it (debug) */
    int in_callback;      /* > 0 while a request callback runs: step and score are refused */
    double *prof_s;       /* per kernel: seconds (profile) */
    int64_t *prof_n;      /* per kernel: launches */
    KilnEngineStats stats;
    void (*log)(void *, const char *);
    void *log_user;
    char err[512];
    KilnEngine *draft;   /* the draft model's engine (KilnEngineOptions.draft_package), or NULL */
    char tok_why[400];   /* why the weights file's tokenizer could not be built ("" when it has none) */
    char tok_src[256];   /* the weights file's path, for the tokenizer's messages ("" for random weights) */
    char *chat_template; /* the weights' chat template (kiln_engine_chat_template), or NULL */
};

/* One line into e->err (the engine's last failure); returns s. */
KilnStatus rt_engine_fail(KilnEngine *e, KilnStatus s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* A line to the embedder's log (KilnEngineOptions.log), if any. */
void rt_engine_log(KilnEngine *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Bytes per element of a plan dtype ("bf16": 2), 0 for one the engine does not know. */
int rt_engine_dtype_bytes(const char *dt);
/* The elements of a plan shape "[P,16,3,64]" with symbols at the values sym[] (B+1 from B). Returns
 * -1 for a shape it cannot read. *starts_p (may be NULL): the first dimension is P. */
int64_t rt_engine_shape_elems(const char *shape, const int64_t sym[RT_SYM_COUNT], int *starts_p);

#endif
