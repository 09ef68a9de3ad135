/* rt_kvcache.c — the paged KV-cache manager (rt_kvcache.h; design note: docs/ATTENTION.md, "KV page
 * manager").
 *
 * State: a reference count per page, a binary min-heap of the free pages (so allocation takes the lowest
 * free page: runs are reproducible and the used part of the pool stays compact), and a table of sequences
 * indexed by id, each a length and a growable list of pages.
 * Invariants, between calls:
 *   - refs[p] = the number of (sequence, index) pairs naming page p; p is in the heap iff refs[p] == 0;
 *   - a sequence of length len holds exactly ceil(len / S) pages, all distinct;
 *   - a page is shared (refs > 1) only as a common prefix: it sits at the same index in every sequence
 *     holding it, and (because forks copy a partial page) it is full in all of them but possibly the
 *     ones truncated into it — which is why an append first copies a shared partial last page.
 * Every mutating call checks and reserves everything that can fail (arguments, host memory, pool pages)
 * before it changes anything, so a failure leaves the manager exactly as it was.
 */
#include "rt_kvcache.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct RtKvSeq {
    int live;
    int32_t len;     /* tokens */
    int32_t n_pages; /* ceil(len / S) */
    int32_t cap;     /* room in pages */
    int32_t *pages;
    uint64_t mark; /* the step_build call that last saw it, to refuse repeats */
} RtKvSeq;

struct RtKvCache {
    int32_t n_pages, page_size;
    int32_t *refs; /* [P] */
    int32_t *heap; /* [P] min-heap of free pages, heap[0 .. n_free) */
    int32_t n_free;
    RtKvSeq *seqs; /* [n_seqs], by id */
    int32_t n_seqs, seq_cap;
    uint64_t step_mark;
    long n_allocs, fail_after; /* allocation-failure injection (RtKvOptions.fail_alloc_after) */
    char msg[256];
};

/* ---- messages and host memory ------------------------------------------------------------------------ */

static KilnStatus rt_kv_fail(RtKvCache *kv, KilnStatus s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static KilnStatus rt_kv_fail(RtKvCache *kv, KilnStatus s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kv->msg, sizeof kv->msg, fmt, ap);
    va_end(ap);
    return s;
}

static int rt_kv_alloc_allowed(long *n_allocs, long fail_after)
{
    ++*n_allocs;
    return fail_after <= 0 || *n_allocs < fail_after;
}

static void *rt_kv_malloc(RtKvCache *kv, size_t n)
{
    return rt_kv_alloc_allowed(&kv->n_allocs, kv->fail_after) ? malloc(n ? n : 1) : NULL;
}

static void *rt_kv_realloc(RtKvCache *kv, void *p, size_t n)
{
    return rt_kv_alloc_allowed(&kv->n_allocs, kv->fail_after) ? realloc(p, n ? n : 1) : NULL;
}

/* ---- the free-page heap ------------------------------------------------------------------------------- */

static void rt_kv_heap_push(RtKvCache *kv, int32_t page)
{
    int32_t i = kv->n_free++;
    while (i > 0) {
        int32_t parent = (i - 1) / 2;
        if (kv->heap[parent] <= page) break;
        kv->heap[i] = kv->heap[parent];
        i = parent;
    }
    kv->heap[i] = page;
}

static int32_t rt_kv_heap_pop(RtKvCache *kv)
{
    int32_t top = kv->heap[0], last = kv->heap[--kv->n_free], n = kv->n_free, i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && kv->heap[c + 1] < kv->heap[c]) c++;
        if (last <= kv->heap[c]) break;
        kv->heap[i] = kv->heap[c];
        i = c;
    }
    if (n > 0) kv->heap[i] = last;
    return top;
}

static int32_t rt_kv_page_take(RtKvCache *kv)
{
    int32_t p = rt_kv_heap_pop(kv);
    kv->refs[p] = 1;
    return p;
}

static void rt_kv_page_release(RtKvCache *kv, int32_t page)
{
    if (--kv->refs[page] == 0) rt_kv_heap_push(kv, page);
}

/* ---- pages for a budget ------------------------------------------------------------------------------- */

int64_t rt_kv_page_bytes(int layers, int page_size, int n_kv_heads, int head_dim, int dtype_bytes)
{
    int f[5] = {layers, page_size, n_kv_heads, head_dim, dtype_bytes};
    int64_t b = 2;
    for (int i = 0; i < 5; i++) {
        if (f[i] < 1) return -1;
        if (b > INT64_MAX / f[i]) return -1;
        b *= f[i];
    }
    return b;
}

KilnStatus rt_kv_pages_for_budget(int64_t bytes, int layers, int page_size, int n_kv_heads, int head_dim,
                                  int dtype_bytes, int32_t *pages)
{
    if (!pages) return KILN_ERR_ARG;
    *pages = 0;
    if (bytes < 0 || layers < 1 || page_size < 1 || n_kv_heads < 1 || head_dim < 1 || dtype_bytes < 1)
        return KILN_ERR_ARG;
    int64_t pb = rt_kv_page_bytes(layers, page_size, n_kv_heads, head_dim, dtype_bytes);
    if (pb < 0) return KILN_OK; /* a page larger than any int64 budget */
    int64_t n = bytes / pb, cap = INT32_MAX / page_size;
    *pages = (int32_t)(n < cap ? n : cap);
    return KILN_OK;
}

/* ---- create / destroy --------------------------------------------------------------------------------- */

RtKvOptions rt_kv_options_default(void)
{
    RtKvOptions o = {0};
    return o;
}

KilnStatus rt_kv_create(const RtKvOptions *o, RtKvCache **out, char *err, int errlen)
{
    if (err && errlen > 0) err[0] = 0;
    if (!out) return KILN_ERR_ARG;
    *out = NULL;
    if (!o || o->n_pages < 1 || o->page_size < 1 || o->n_pages > INT32_MAX / o->page_size) {
        if (err && errlen > 0)
            snprintf(err, (size_t)errlen,
                     "rt_kv_create: bad options: n_pages %d, page_size %d (need >= 1, "
                     "n_pages * page_size <= INT32_MAX)",
                     o ? (int)o->n_pages : 0, o ? (int)o->page_size : 0);
        return KILN_ERR_ARG;
    }
    long n_allocs = 0;
    RtKvCache *kv = rt_kv_alloc_allowed(&n_allocs, o->fail_alloc_after) ? calloc(1, sizeof *kv) : NULL;
    if (kv) {
        kv->n_allocs = n_allocs;
        kv->fail_after = o->fail_alloc_after;
        kv->n_pages = o->n_pages;
        kv->page_size = o->page_size;
        kv->refs = rt_kv_malloc(kv, sizeof *kv->refs * (size_t)o->n_pages);
        kv->heap = kv->refs ? rt_kv_malloc(kv, sizeof *kv->heap * (size_t)o->n_pages) : NULL;
    }
    if (!kv || !kv->heap) {
        rt_kv_destroy(kv);
        if (err && errlen > 0)
            snprintf(err, (size_t)errlen, "rt_kv_create: out of host memory for %d pages", (int)o->n_pages);
        return KILN_ERR_NOMEM;
    }
    for (int32_t p = 0; p < o->n_pages; p++) {
        kv->refs[p] = 0;
        kv->heap[p] = p; /* ascending: already a min-heap */
    }
    kv->n_free = o->n_pages;
    *out = kv;
    return KILN_OK;
}

void rt_kv_destroy(RtKvCache *kv)
{
    if (!kv) return;
    for (int32_t i = 0; i < kv->n_seqs; i++)
        free(kv->seqs[i].pages);
    free(kv->seqs);
    free(kv->heap);
    free(kv->refs);
    free(kv);
}

const char *rt_kv_errmsg(const RtKvCache *kv)
{
    return kv ? kv->msg : "";
}

/* ---- accounting --------------------------------------------------------------------------------------- */

int32_t rt_kv_page_size(const RtKvCache *kv)
{
    return kv->page_size;
}

int32_t rt_kv_n_pages(const RtKvCache *kv)
{
    return kv->n_pages;
}

int32_t rt_kv_pages_free(const RtKvCache *kv)
{
    return kv->n_free;
}

int32_t rt_kv_pages_used(const RtKvCache *kv)
{
    return kv->n_pages - kv->n_free;
}

int32_t rt_kv_page_refs(const RtKvCache *kv, int32_t page)
{
    return page >= 0 && page < kv->n_pages ? kv->refs[page] : -1;
}

/* ---- sequences ---------------------------------------------------------------------------------------- */

static RtKvSeq *rt_kv_seq_get(const RtKvCache *kv, int32_t seq)
{
    return seq >= 0 && seq < kv->n_seqs && kv->seqs[seq].live ? &kv->seqs[seq] : NULL;
}

static int32_t rt_kv_pages_for_len(const RtKvCache *kv, int32_t len)
{
    return (int32_t)(((int64_t)len + kv->page_size - 1) / kv->page_size);
}

/* Makes room for `need` pages in s's list (host memory only; nothing else changes). */
static KilnStatus rt_kv_seq_reserve(RtKvCache *kv, RtKvSeq *s, int32_t need, const char *what)
{
    if (need <= s->cap) return KILN_OK;
    int64_t cap = s->cap ? s->cap : 4;
    while (cap < need)
        cap *= 2;
    if (cap > kv->n_pages) cap = kv->n_pages; /* a sequence's pages are distinct */
    int32_t *p = rt_kv_realloc(kv, s->pages, sizeof *p * (size_t)cap);
    if (!p) return rt_kv_fail(kv, KILN_ERR_NOMEM, "%s: out of host memory for %d pages", what, (int)need);
    s->pages = p;
    s->cap = (int32_t)cap;
    return KILN_OK;
}

/* The lowest unused id, growing the table if every id is live. Marks nothing live. */
static KilnStatus rt_kv_seq_slot(RtKvCache *kv, int32_t *id, const char *what)
{
    for (int32_t i = 0; i < kv->n_seqs; i++)
        if (!kv->seqs[i].live) return *id = i, KILN_OK;
    if (kv->n_seqs == INT32_MAX) return rt_kv_fail(kv, KILN_ERR_ARG, "%s: too many sequences", what);
    if (kv->n_seqs == kv->seq_cap) {
        int64_t cap = kv->seq_cap ? 2 * (int64_t)kv->seq_cap : 8;
        if (cap > INT32_MAX) cap = INT32_MAX;
        RtKvSeq *t = rt_kv_realloc(kv, kv->seqs, sizeof *t * (size_t)cap);
        if (!t) return rt_kv_fail(kv, KILN_ERR_NOMEM, "%s: out of host memory for a sequence", what);
        kv->seqs = t;
        kv->seq_cap = (int32_t)cap;
    }
    memset(&kv->seqs[kv->n_seqs], 0, sizeof kv->seqs[0]);
    *id = kv->n_seqs++;
    return KILN_OK;
}

KilnStatus rt_kv_seq_create(RtKvCache *kv, int32_t *seq)
{
    if (!seq) return rt_kv_fail(kv, KILN_ERR_ARG, "rt_kv_seq_create: seq is NULL");
    *seq = -1;
    int32_t id = -1;
    KilnStatus s = rt_kv_seq_slot(kv, &id, "rt_kv_seq_create");
    if (s != KILN_OK) return s;
    RtKvSeq *q = &kv->seqs[id];
    q->live = 1;
    q->len = q->n_pages = 0;
    *seq = id;
    return KILN_OK;
}

int32_t rt_kv_seq_len(const RtKvCache *kv, int32_t seq)
{
    const RtKvSeq *s = rt_kv_seq_get(kv, seq);
    return s ? s->len : -1;
}

int32_t rt_kv_seq_pages(const RtKvCache *kv, int32_t seq, const int32_t **pages)
{
    const RtKvSeq *s = rt_kv_seq_get(kv, seq);
    if (pages) *pages = s ? s->pages : NULL;
    return s ? s->n_pages : -1;
}

/* Whether appending to s must first copy its last page: partially filled and held by another sequence. */
static int rt_kv_needs_cow(const RtKvCache *kv, const RtKvSeq *s)
{
    return s->len % kv->page_size != 0 && kv->refs[s->pages[s->n_pages - 1]] > 1;
}

int32_t rt_kv_pages_needed(const RtKvCache *kv, int32_t seq, int32_t n)
{
    const RtKvSeq *s = rt_kv_seq_get(kv, seq);
    if (!s || n < 0 || n > INT32_MAX - s->len) return -1;
    if (n == 0) return 0;
    return rt_kv_pages_for_len(kv, s->len + n) - s->n_pages + rt_kv_needs_cow(kv, s);
}

KilnStatus rt_kv_seq_append(RtKvCache *kv, int32_t seq, int32_t n, RtKvCopy *cow)
{
    RtKvSeq *s = rt_kv_seq_get(kv, seq);
    if (!cow) return rt_kv_fail(kv, KILN_ERR_ARG, "rt_kv_seq_append: cow is NULL");
    cow->src = cow->dst = -1;
    cow->n_tokens = 0;
    if (!s) return rt_kv_fail(kv, KILN_ERR_ARG, "rt_kv_seq_append: %d is not a live sequence", (int)seq);
    if (n < 0 || n > INT32_MAX - s->len)
        return rt_kv_fail(kv, KILN_ERR_ARG, "rt_kv_seq_append: sequence %d: cannot add %d tokens to %d",
                          (int)seq, (int)n, (int)s->len);
    if (n == 0) return KILN_OK;
    int32_t new_pages = rt_kv_pages_for_len(kv, s->len + n);
    int do_cow = rt_kv_needs_cow(kv, s);
    int32_t need = new_pages - s->n_pages + do_cow;
    if (need > kv->n_free)
        return rt_kv_fail(kv, KILN_ERR_FULL,
                          "out of KV pages: sequence %d needs %d more for %d tokens, %d of %d free", (int)seq,
                          (int)need, (int)n, (int)kv->n_free, (int)kv->n_pages);
    KilnStatus st = rt_kv_seq_reserve(kv, s, new_pages, "rt_kv_seq_append");
    if (st != KILN_OK) return st;
    if (do_cow) {
        int32_t *last = &s->pages[s->n_pages - 1];
        cow->src = *last;
        cow->dst = rt_kv_page_take(kv);
        cow->n_tokens = s->len % kv->page_size;
        kv->refs[cow->src]--; /* still > 0: it was shared */
        *last = cow->dst;
    }
    while (s->n_pages < new_pages)
        s->pages[s->n_pages++] = rt_kv_page_take(kv);
    s->len += n;
    return KILN_OK;
}

KilnStatus rt_kv_seq_truncate(RtKvCache *kv, int32_t seq, int32_t len)
{
    RtKvSeq *s = rt_kv_seq_get(kv, seq);
    if (!s) return rt_kv_fail(kv, KILN_ERR_ARG, "rt_kv_seq_truncate: %d is not a live sequence", (int)seq);
    if (len < 0 || len > s->len)
        return rt_kv_fail(kv, KILN_ERR_ARG, "rt_kv_seq_truncate: sequence %d: length %d is not in [0, %d]",
                          (int)seq, (int)len, (int)s->len);
    int32_t keep = rt_kv_pages_for_len(kv, len);
    while (s->n_pages > keep)
        rt_kv_page_release(kv, s->pages[--s->n_pages]);
    s->len = len;
    return KILN_OK;
}

KilnStatus rt_kv_seq_fork(RtKvCache *kv, int32_t parent, int32_t len, int32_t *child, RtKvCopy *cow)
{
    if (!child || !cow) return rt_kv_fail(kv, KILN_ERR_ARG, "rt_kv_seq_fork: child or cow is NULL");
    cow->src = cow->dst = -1;
    cow->n_tokens = 0;
    *child = -1;
    const RtKvSeq *p = rt_kv_seq_get(kv, parent);
    if (!p) return rt_kv_fail(kv, KILN_ERR_ARG, "rt_kv_seq_fork: %d is not a live sequence", (int)parent);
    if (len < 0 || len > p->len)
        return rt_kv_fail(kv, KILN_ERR_ARG, "rt_kv_seq_fork: sequence %d: length %d is not in [0, %d]",
                          (int)parent, (int)len, (int)p->len);
    int32_t n_pages = rt_kv_pages_for_len(kv, len), rem = len % kv->page_size;
    if (rem && kv->n_free < 1)
        return rt_kv_fail(kv, KILN_ERR_FULL,
                          "out of KV pages: forking sequence %d at %d needs 1 page for a copy, 0 of %d free",
                          (int)parent, (int)len, (int)kv->n_pages);
    int32_t id = -1;
    KilnStatus st = rt_kv_seq_slot(kv, &id, "rt_kv_seq_fork"); /* may move kv->seqs: p is stale */
    if (st != KILN_OK) return st;
    RtKvSeq *c = &kv->seqs[id];
    c->len = c->n_pages = 0;
    if ((st = rt_kv_seq_reserve(kv, c, n_pages, "rt_kv_seq_fork")) != KILN_OK) return st;
    p = &kv->seqs[parent];
    int32_t shared = rem ? n_pages - 1 : n_pages;
    for (int32_t i = 0; i < shared; i++) {
        c->pages[i] = p->pages[i];
        kv->refs[p->pages[i]]++;
    }
    if (rem) {
        cow->src = p->pages[shared];
        cow->dst = c->pages[shared] = rt_kv_page_take(kv);
        cow->n_tokens = rem;
    }
    c->n_pages = n_pages;
    c->len = len;
    c->live = 1;
    *child = id;
    return KILN_OK;
}

KilnStatus rt_kv_seq_free(RtKvCache *kv, int32_t seq)
{
    RtKvSeq *s = rt_kv_seq_get(kv, seq);
    if (!s) return rt_kv_fail(kv, KILN_ERR_ARG, "rt_kv_seq_free: %d is not a live sequence", (int)seq);
    while (s->n_pages > 0)
        rt_kv_page_release(kv, s->pages[--s->n_pages]);
    s->len = 0;
    s->live = 0; /* the page list stays allocated for the id's next owner */
    return KILN_OK;
}

/* ---- steps -------------------------------------------------------------------------------------------- */

KilnStatus rt_kv_step_build(RtKvCache *kv, const RtKvStepSeq *items, int32_t n_seqs, RtKvStep *st)
{
    const char *w = "rt_kv_step_build";
    if (!items || !st || n_seqs < 1) return rt_kv_fail(kv, KILN_ERR_ARG, "%s: no sequences", w);
    if (!st->block_table || !st->seq_lens || !st->cu_q || !st->slots || !st->positions)
        return rt_kv_fail(kv, KILN_ERR_ARG, "%s: an output array is NULL", w);
    if (st->max_pages < 1 || st->t_cap < 0)
        return rt_kv_fail(kv, KILN_ERR_ARG, "%s: max_pages %d, t_cap %d", w, (int)st->max_pages,
                          (int)st->t_cap);
    const int32_t S = kv->page_size;
    uint64_t mark = ++kv->step_mark;
    int64_t T = 0;
    int32_t max_q = 0, max_len = 0;
    for (int32_t b = 0; b < n_seqs; b++) {
        RtKvSeq *s = rt_kv_seq_get(kv, items[b].seq);
        int32_t q = items[b].n_new;
        if (!s)
            return rt_kv_fail(kv, KILN_ERR_ARG, "%s: item %d: %d is not a live sequence", w, (int)b,
                              (int)items[b].seq);
        if (s->mark == mark)
            return rt_kv_fail(kv, KILN_ERR_ARG, "%s: item %d: sequence %d appears twice", w, (int)b,
                              (int)items[b].seq);
        s->mark = mark;
        if (q < 1 || q > s->len)
            return rt_kv_fail(kv, KILN_ERR_ARG, "%s: sequence %d: %d new tokens, length %d", w,
                              (int)items[b].seq, (int)q, (int)s->len);
        if (s->n_pages > st->max_pages)
            return rt_kv_fail(kv, KILN_ERR_ARG, "%s: sequence %d holds %d pages, block table has %d columns",
                              w, (int)items[b].seq, (int)s->n_pages, (int)st->max_pages);
        for (int32_t i = (s->len - q) / S; i < s->n_pages; i++)
            if (kv->refs[s->pages[i]] != 1)
                return rt_kv_fail(kv, KILN_ERR_ARG,
                                  "%s: sequence %d: new tokens would be written into page %d, which %d "
                                  "sequences share",
                                  w, (int)items[b].seq, (int)s->pages[i], (int)kv->refs[s->pages[i]]);
        T += q;
        if (q > max_q) max_q = q;
        if (s->len > max_len) max_len = s->len;
    }
    if (T > st->t_cap)
        return rt_kv_fail(kv, KILN_ERR_ARG, "%s: %lld new tokens, room for %d", w, (long long)T,
                          (int)st->t_cap);

    int32_t t = 0;
    st->cu_q[0] = 0;
    for (int32_t b = 0; b < n_seqs; b++) {
        const RtKvSeq *s = &kv->seqs[items[b].seq];
        int32_t *row = st->block_table + (size_t)b * (size_t)st->max_pages;
        memcpy(row, s->pages, sizeof *row * (size_t)s->n_pages);
        for (int32_t i = s->n_pages; i < st->max_pages; i++)
            row[i] = -1;
        st->seq_lens[b] = s->len;
        for (int32_t pos = s->len - items[b].n_new; pos < s->len; pos++, t++) {
            st->slots[t] = s->pages[pos / S] * S + pos % S;
            st->positions[t] = pos;
        }
        st->cu_q[b + 1] = t;
    }
    for (int32_t i = t; i < st->t_cap; i++) {
        st->slots[i] = -1;
        st->positions[i] = 0;
    }
    st->n_tokens = t;
    st->max_q = max_q;
    st->max_seq_len = max_len;
    return KILN_OK;
}

int32_t rt_kv_attention_splits(const RtKvStep *st, int32_t n_seqs, int heads, int kv_heads, int block_m,
                               int n_sms, int64_t max_split_rows)
{
    if (!st || n_seqs < 1 || heads < 1 || kv_heads < 1 || heads % kv_heads || block_m < 1 || n_sms < 1 ||
        st->n_tokens < 1 || st->max_q < 1)
        return 1;
    int64_t g = heads / kv_heads, tiles = ((int64_t)st->max_q * g + block_m - 1) / block_m;
    int64_t programs = (int64_t)n_seqs * kv_heads * tiles;
    int64_t n = (2 * (int64_t)n_sms + programs - 1) / programs; /* two waves */
    int64_t by_keys = st->max_seq_len / 512, by_rows = max_split_rows / ((int64_t)st->n_tokens * heads);
    if (n > by_keys) n = by_keys;
    if (n > 32) n = 32;
    if (n > by_rows) n = by_rows;
    return n < 1 ? 1 : (int32_t)n;
}
