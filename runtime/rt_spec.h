/* rt_spec.h — speculative decoding's host side: the proposers that guess a request's next tokens, the
 * acceptance rule that keeps exactly the tokens the target model would have produced, and the adaptive
 * draft length. Prefix rt_spec_. Pure host code over token arrays: the engine (rt_engine.c) runs the
 * verify step, this module decides what to verify and what to keep. Design: docs/RUNTIME.md,
 * "Speculative decoding".
 *
 * A proposer is a function of the request's tokens so far (prompt, then generated); it writes at most k
 * draft tokens. The n-gram proposer needs no model; a draft model or a head over the target's hidden
 * states plugs in as another RtSpecKind with the same contract (docs/RUNTIME.md says how).
 */
#ifndef RT_SPEC_H
#define RT_SPEC_H

#include <stdint.h>

enum {
    RT_SPEC_NGRAM_MAX = 4, /* the longest suffix the n-gram proposer matches */
    RT_SPEC_TREE_MAX = 64, /* tokens a draft tree verifies at most (the attention tree mask: 64 bits) */
    RT_SPEC_MISS_PAUSE = 3 /* verifies in a row that accept nothing before speculation pauses */
};

/* Per-request speculation state: the draft length in use and its counters. */
typedef struct RtSpecState {
    int k_max;     /* the request's draft length (KilnSampling.spec_k) */
    int k_cur;     /* the draft length now: 1..k_max, adapted to what the target accepts */
    int misses;    /* verifies in a row at k_cur 1 that accepted nothing */
    int pause;     /* steps left without speculation (a bad draft costs little) */
    int pause_len; /* the next pause's length: doubles with each pause, back to 1 after an acceptance */
    int64_t verifies, proposed, accepted;
} RtSpecState;

/* Starts a request's state with draft length k_max >= 1. */
void rt_spec_init(RtSpecState *s, int k_max);

/* The draft length to ask of the proposer this step (0 while paused; the pause counts down here). */
int rt_spec_budget(RtSpecState *s);

/* Prompt lookup: the longest suffix of t[0..n) of length RT_SPEC_NGRAM_MAX down to 1 that occurs earlier
 * in t (the latest such occurrence) proposes the k tokens that followed it, written to out; where they run
 * past t's end the copy continues from its own output (a sequence that repeats with period p proposes
 * the repetition, k tokens, not only the p that follow the match). Returns k (0: no suffix recurs, or
 * k <= 0). */
int rt_spec_ngram(const int32_t *t, int n, int k, int32_t *out);
/* The same lookup in another text: the longest suffix of t[0..n) (RT_SPEC_NGRAM_MAX tokens down to 1)
 * found in c[0..m) with a token after it proposes up to k of the tokens that follow it in c; of several
 * occurrences, the one whose next token is nearest to position `near` of c (a prediction: the output's
 * position in it, so text after an edit of the same length is found aligned, not at a later repeat), or
 * the latest with near < 0. Returns how many were written to out (0: no match). */
int rt_spec_lookup(const int32_t *t, int n, const int32_t *c, int m, int near, int k, int32_t *out);

/* The acceptance rule of a chain verify: target[j] is the target model's token after the request's
 * last token and drafts 0..j-1 (j = 0..n_draft), each drawn as the request would draw it without
 * speculation (greedy, or sampled with the seed of its position). Draft j is kept while the target drew
 * it: returns the count a of kept drafts (0..n_draft); the request then gets target[0..a] (a + 1 tokens),
 * exactly the tokens it gets without speculation. */
int rt_spec_accept(const int32_t *draft, const int32_t *target, int n_draft);

/* Records a verify that proposed `proposed` >= 1 drafts and kept `accepted`, and adapts k_cur: all kept
 * grows it by one (up to k_max); otherwise it becomes accepted + 1; RT_SPEC_MISS_PAUSE verifies in a row
 * at k_cur 1 with nothing kept pause speculation for pause_len steps (1, 2, 4, ... 64). */
void rt_spec_record(RtSpecState *s, int proposed, int accepted);

#endif
