/* rt_kvcache.h — the paged KV-cache manager: which pages of the device's KV pool each sequence owns, and
 * the per-step arrays (block table, lengths, query offsets, slots, positions) the kv_write and attention
 * kernels read. Prefix rt_kv_. Host bookkeeping only: it never touches device memory. The cache layout
 * (pages of S tokens, caches [P, S, Hkv, D] per layer, slot = page * S + offset) is docs/ATTENTION.md's;
 * the design note is its section "KV page manager".
 *
 *     int32_t P;
 *     rt_kv_pages_for_budget(kv_bytes, layers, 16, n_kv_heads, head_dim, 2, &P);   // bf16, K and V
 *     RtKvOptions o = rt_kv_options_default();
 *     o.n_pages = P, o.page_size = 16;
 *     RtKvCache *kv;
 *     if (rt_kv_create(&o, &kv, err, sizeof err) != KILN_OK) fail(err);
 *     int32_t a;  RtKvCopy cow;
 *     rt_kv_seq_create(kv, &a);
 *     if (rt_kv_seq_append(kv, a, prompt_len, &cow) != KILN_OK) ... rt_kv_errmsg(kv) ...  // "out of KV
 * pages" if (cow.src >= 0) copy rows [0, cow.n_tokens) of page cow.src to page cow.dst, every layer, K and V;
 *     RtKvStepSeq items[] = {{a, prompt_len}};
 *     RtKvStep st = {.block_table = bt, .max_pages = MP, .seq_lens = lens, .cu_q = cu_q,
 *                    .slots = slots, .positions = pos, .t_cap = T_cap};
 *     rt_kv_step_build(kv, items, 1, &st);     // then kv_write(slots), attention(block_table, ...)
 *     rt_kv_seq_truncate(kv, a, accepted_len); // speculative decoding: drop rejected drafts
 *     int32_t b;  rt_kv_seq_fork(kv, a, shared_len, &b, &cow);   // prefix sharing; copy as above
 *     rt_kv_seq_free(kv, b);  rt_kv_seq_free(kv, a);
 *     rt_kv_destroy(kv);
 *
 * Errors: every call that can fail returns a KilnStatus and leaves a one-line message for rt_kv_errmsg.
 * A failed call changes nothing (no page allocated or freed, no sequence created or changed). Statuses:
 * KILN_ERR_ARG for a caller's mistake (unknown sequence, length out of range, block table too narrow),
 * KILN_ERR_FULL "out of KV pages: ..." when the device pool cannot hold the request (the scheduler's cue
 * to wait or preempt; rt_kv_pages_needed predicts it), KILN_ERR_NOMEM "out of host memory: ..." when a
 * host allocation failed.
 *
 * Ownership and threads: the manager owns all its host memory; sequence ids and page lists it hands out
 * stay valid until the next call that changes that sequence. Not thread-safe: one owner (the scheduler)
 * calls it, or callers serialize.
 *
 * Device copies (copy-on-write): a sequence never writes into a page another sequence also holds. When
 * a call would (a fork whose length ends inside a page, or an append to a sequence whose partially filled
 * last page is shared), it moves the sequence onto a fresh page and returns an RtKvCopy. The caller must
 * copy token rows [0, n_tokens) of page src into page dst (all layers, K and V) before the next step's
 * kernels run; copies of one interval are independent of each other and of that step's kv_write (a copy
 * reads only rows no kernel of the step writes). */
#ifndef KILN_RT_KVCACHE_H
#define KILN_RT_KVCACHE_H

#include <stdint.h>

#include "kiln.h"

typedef struct RtKvCache RtKvCache;

typedef struct RtKvOptions {
    int32_t n_pages;   /* P, pages in the pool, >= 1 (rt_kv_pages_for_budget); P * S <= INT32_MAX */
    int32_t page_size; /* S, tokens per page, >= 1 */
    /* Tests: the k-th host allocation of this manager (counting from its creation, k >= 1) and every
     * later one fail as if malloc returned NULL; 0 = never. */
    long fail_alloc_after;
} RtKvOptions;

/* A device copy the caller owes (see the top of this file). src < 0: none. */
typedef struct RtKvCopy {
    int32_t src, dst; /* pages */
    int32_t n_tokens; /* rows [0, n_tokens) of the page, 1 .. S-1 */
} RtKvCopy;

/* One sequence of a step: its last n_new tokens (already appended) are this step's queries. */
typedef struct RtKvStepSeq {
    int32_t seq;
    int32_t n_new; /* q_len, >= 1 */
} RtKvStepSeq;

/* The arrays of one step, all caller-owned and i32, in the layout the kernels read (docs/KERNELS.md).
 * The caller sets the pointers and capacities; rt_kv_step_build fills the arrays and the outputs. */
typedef struct RtKvStep {
    int32_t *block_table; /* [B, max_pages] row-major; row b: the pages of sequence b, then -1 */
    int32_t max_pages;    /* MP, the row stride: >= every sequence's page count, else KILN_ERR_ARG */
    int32_t *seq_lens;    /* [B] lengths after the step */
    int32_t *cu_q;        /* [B+1] query offsets: cu_q[0] = 0, cu_q[b+1] = cu_q[b] + n_new_b */
    int32_t *slots;       /* [t_cap] slot of each new token; entries [T, t_cap) are padding: -1 */
    int32_t *positions;   /* [t_cap] position of each new token in its sequence; padding: 0 */
    int32_t t_cap;        /* room in slots and positions, >= T */
    /* outputs */
    int32_t n_tokens;    /* T = cu_q[B] */
    int32_t max_q;       /* the longest n_new (the attention kernel's max_q) */
    int32_t max_seq_len; /* the longest seq_lens entry */
} RtKvStep;

/* Bytes of one page across the whole model: 2 (K and V) * layers * S * Hkv * D * dtype_bytes, or -1
 * when an argument is < 1 or the product overflows int64. */
int64_t rt_kv_page_bytes(int layers, int page_size, int n_kv_heads, int head_dim, int dtype_bytes);
/* How many pages fit in `bytes` of device memory: floor(bytes / rt_kv_page_bytes(...)), capped at
 * INT32_MAX / page_size (slots are i32). 0 when not even one page fits (also when the page size
 * overflows int64). KILN_ERR_ARG (and *pages = 0) for bytes < 0 or any other argument < 1. */
KilnStatus rt_kv_pages_for_budget(int64_t bytes, int layers, int page_size, int n_kv_heads, int head_dim,
                                  int dtype_bytes, int32_t *pages);

RtKvOptions rt_kv_options_default(void); /* zeros: n_pages and page_size must be set */
/* Creates a manager with every page free. KILN_ERR_ARG for bad options, KILN_ERR_NOMEM; the message goes
 * to err (errlen bytes; err may be NULL when errlen is 0) and *out is NULL on failure. */
KilnStatus rt_kv_create(const RtKvOptions *o, RtKvCache **out, char *err, int errlen);
/* Frees the manager and every sequence it holds (NULL is fine). */
void rt_kv_destroy(RtKvCache *kv);
/* The message of the last failed call ("" when none). Owned by the manager. */
const char *rt_kv_errmsg(const RtKvCache *kv);

int32_t rt_kv_page_size(const RtKvCache *kv);
int32_t rt_kv_n_pages(const RtKvCache *kv);
int32_t rt_kv_pages_free(const RtKvCache *kv);
int32_t rt_kv_pages_used(const RtKvCache *kv); /* P - free: pages with a reference count > 0 */
/* How many sequences hold `page` (0 when free); -1 for a page out of range. */
int32_t rt_kv_page_refs(const RtKvCache *kv, int32_t page);

/* A new, empty sequence in *seq (-1 on failure). Ids are small integers >= 0, the lowest unused one
 * first, reused after free. */
KilnStatus rt_kv_seq_create(RtKvCache *kv, int32_t *seq);
/* The length (tokens) of a live sequence, or -1 when seq is not one. */
int32_t rt_kv_seq_len(const RtKvCache *kv, int32_t seq);
/* The page count of a live sequence (ceil(len / S)) with *pages pointing at its page list (owned by the
 * manager, valid until the sequence next changes); -1 and *pages NULL when seq is not one. */
int32_t rt_kv_seq_pages(const RtKvCache *kv, int32_t seq, const int32_t **pages);
/* The pages an append of n tokens to seq would take from the pool (new pages plus one for a copy-on-write
 * of a shared partial last page); -1 when seq is not live or n < 0. The append succeeds, host memory
 * permitting, iff this is <= rt_kv_pages_free. */
int32_t rt_kv_pages_needed(const RtKvCache *kv, int32_t seq, int32_t n);

/* Grows seq by n >= 0 tokens, taking new pages from the pool in allocation order (lowest free page
 * first). *cow (required) reports a device copy when seq's partially filled last page was shared: the
 * sequence then owns a copy of it. All or nothing: "out of KV pages" (KILN_ERR_FULL) when the pool is
 * short, with nothing changed. */
KilnStatus rt_kv_seq_append(RtKvCache *kv, int32_t seq, int32_t n, RtKvCopy *cow);
/* Shrinks seq to len (0 <= len <= its length), releasing the pages past ceil(len / S). Never fails
 * for a live sequence and a len in range. */
KilnStatus rt_kv_seq_truncate(RtKvCache *kv, int32_t seq, int32_t len);
/* Creates *child holding the first len tokens of parent (0 <= len <= parent's length): the child shares
 * parent's pages that those tokens fill completely (their reference counts go up); when len ends inside
 * a page the child gets a fresh page instead and *cow (required) says to copy the len % S rows. Fails
 * with "out of KV pages" (KILN_ERR_FULL) when that page is not available; on failure no child exists. */
KilnStatus rt_kv_seq_fork(RtKvCache *kv, int32_t parent, int32_t len, int32_t *child, RtKvCopy *cow);
/* Releases seq: its pages' reference counts go down; pages reaching 0 return to the pool; its id may
 * be reused. */
KilnStatus rt_kv_seq_free(RtKvCache *kv, int32_t seq);

/* Fills st's arrays for a step over n_seqs >= 1 distinct live sequences, sequence b's queries being its
 * last items[b].n_new tokens (append them first): block table rows, seq_lens, cu_q, and for every new
 * token in order its slot (page * S + offset) and position. Checks everything before writing anything:
 * KILN_ERR_ARG (arrays untouched) for an unknown or repeated sequence, n_new < 1 or > its length,
 * max_pages below a sequence's page count, t_cap < T, a NULL array, or a new token that would land in a
 * page shared with another sequence (append resolves that; seeing it means the order of calls is off). */
KilnStatus rt_kv_step_build(RtKvCache *kv, const RtKvStepSeq *items, int32_t n_seqs, RtKvStep *st);

/* The attention split-KV count for a built step (the schedule's rt:n_splits; docs/ATTENTION.md): enough
 * programs for two waves over n_sms multiprocessors, counting n_seqs * kv_heads * cdiv(max_q * G,
 * block_m) unsplit programs (G = heads / kv_heads), with at least 512 keys per split, at most 32 splits
 * (one attention_merge trip), and n_tokens * heads * splits <= max_split_rows (the workspace). 1 when
 * the step fills the GPU anyway; >= 1 always (bad arguments give 1). */
int32_t rt_kv_attention_splits(const RtKvStep *st, int32_t n_seqs, int heads, int kv_heads, int block_m,
                               int n_sms, int64_t max_split_rows);

#endif
