/* test_kvcache.c — the paged KV-cache manager (runtime/rt_kvcache.h).
 *
 * The main test drives random create / append+step / truncate / fork / free sequences against a model:
 * every token gets a unique tag, a simulated cache (one tag per slot) receives the tags through the
 * step's slots and the copy-on-write copies the manager asks for, and after every operation each live
 * sequence must read back exactly its own tags through its page list. With the reference counts
 * recomputed from the page lists, the free count, lowest-first allocation and the page-index rule for
 * shared pages, that catches a page used by two sequences that should not share it, a leak, a lost
 * copy and a wrong slot. Plus: hand-computed step arrays for a mixed batch, copy-on-write cases,
 * out-of-pages atomicity, page-budget arithmetic and host-allocation failure injection. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kt.h"
#include "runtime/rt_kvcache.h"

#define MAX_IDS 64 /* sequence ids the checks scan */

/* ---- a snapshot of the manager, for "nothing changed" ---------------------------------------------- */

typedef struct Snap {
    int32_t n_free;
    int32_t *refs;           /* [P] */
    int32_t len[MAX_IDS];    /* -1: not live */
    int32_t *pages[MAX_IDS]; /* copies of the page lists */
    int32_t n_pages[MAX_IDS];
} Snap;

static void snap_take(const RtKvCache *kv, Snap *s)
{
    int32_t P = rt_kv_n_pages(kv);
    s->n_free = rt_kv_pages_free(kv);
    s->refs = malloc(sizeof *s->refs * (size_t)P);
    for (int32_t p = 0; p < P; p++)
        s->refs[p] = rt_kv_page_refs(kv, p);
    for (int32_t i = 0; i < MAX_IDS; i++) {
        const int32_t *pg;
        s->len[i] = rt_kv_seq_len(kv, i);
        s->n_pages[i] = rt_kv_seq_pages(kv, i, &pg);
        s->pages[i] = NULL;
        if (s->n_pages[i] > 0) {
            s->pages[i] = malloc(sizeof *pg * (size_t)s->n_pages[i]);
            memcpy(s->pages[i], pg, sizeof *pg * (size_t)s->n_pages[i]);
        }
    }
}

static int snap_same(const RtKvCache *kv, const Snap *s)
{
    int32_t P = rt_kv_n_pages(kv);
    if (s->n_free != rt_kv_pages_free(kv)) return 0;
    for (int32_t p = 0; p < P; p++)
        if (s->refs[p] != rt_kv_page_refs(kv, p)) return 0;
    for (int32_t i = 0; i < MAX_IDS; i++) {
        const int32_t *pg;
        int32_t n = rt_kv_seq_pages(kv, i, &pg);
        if (rt_kv_seq_len(kv, i) != s->len[i] || n != s->n_pages[i]) return 0;
        if (n > 0 && memcmp(pg, s->pages[i], sizeof *pg * (size_t)n)) return 0;
    }
    return 1;
}

static void snap_free(Snap *s)
{
    free(s->refs);
    for (int32_t i = 0; i < MAX_IDS; i++)
        free(s->pages[i]);
}

/* ---- structural invariants ------------------------------------------------------------------------- */

/* Reference counts recomputed from the page lists, free + used = P, pages per length, distinct pages
 * within a sequence, shared pages at the same index everywhere. Returns 1 when all hold. */
static int check_structure(const RtKvCache *kv, const char *where)
{
    int32_t P = rt_kv_n_pages(kv), S = rt_kv_page_size(kv);
    int32_t *cnt = calloc((size_t)P, sizeof *cnt), *idx = malloc(sizeof *idx * (size_t)P);
    int ok = 1;
    for (int32_t p = 0; p < P; p++)
        idx[p] = -1;
    for (int32_t i = 0; i < MAX_IDS && ok; i++) {
        const int32_t *pg;
        int32_t n = rt_kv_seq_pages(kv, i, &pg), len = rt_kv_seq_len(kv, i);
        if (len < 0) continue;
        if (n != (len + S - 1) / S) {
            KT_CHECK(0, "%s: seq %d: len %d with %d pages", where, i, len, n);
            ok = 0;
        }
        for (int32_t j = 0; j < n && ok; j++) {
            if (pg[j] < 0 || pg[j] >= P) {
                KT_CHECK(0, "%s: seq %d page %d out of range", where, i, pg[j]);
                ok = 0;
                break;
            }
            for (int32_t k = 0; k < j; k++)
                if (pg[k] == pg[j]) {
                    KT_CHECK(0, "%s: seq %d holds page %d twice", where, i, pg[j]);
                    ok = 0;
                }
            if (idx[pg[j]] >= 0 && idx[pg[j]] != j) {
                KT_CHECK(0, "%s: page %d shared at indices %d and %d", where, pg[j], idx[pg[j]], j);
                ok = 0;
            }
            idx[pg[j]] = j;
            cnt[pg[j]]++;
        }
    }
    int32_t used = 0;
    for (int32_t p = 0; p < P && ok; p++) {
        if (cnt[p] != rt_kv_page_refs(kv, p)) {
            KT_CHECK(0, "%s: page %d: refs %d, held %d times", where, p, rt_kv_page_refs(kv, p), cnt[p]);
            ok = 0;
        }
        used += cnt[p] > 0;
    }
    if (ok && (used != rt_kv_pages_used(kv) || rt_kv_pages_free(kv) + rt_kv_pages_used(kv) != P)) {
        KT_CHECK(0, "%s: %d pages held, used %d, free %d of %d", where, used, rt_kv_pages_used(kv),
                 rt_kv_pages_free(kv), P);
        ok = 0;
    }
    free(cnt);
    free(idx);
    return ok;
}

/* ---- a reference for the step arrays ------------------------------------------------------------------ */

static void ref_step(const RtKvCache *kv, const RtKvStepSeq *items, int32_t B, int32_t MP, int32_t t_cap,
                     int32_t *bt, int32_t *lens, int32_t *cu, int32_t *slots, int32_t *pos)
{
    int32_t S = rt_kv_page_size(kv), t = 0;
    cu[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        const int32_t *pg;
        int32_t n = rt_kv_seq_pages(kv, items[b].seq, &pg), len = rt_kv_seq_len(kv, items[b].seq);
        for (int32_t j = 0; j < MP; j++)
            bt[b * MP + j] = j < n ? pg[j] : -1;
        lens[b] = len;
        for (int32_t i = 0; i < items[b].n_new; i++, t++) {
            int32_t p = len - items[b].n_new + i;
            pos[t] = p;
            slots[t] = pg[p / S] * S + p % S;
        }
        cu[b + 1] = t;
    }
    for (; t < t_cap; t++)
        slots[t] = -1, pos[t] = 0;
}

/* ---- the random model test -------------------------------------------------------------------------- */

typedef struct Model {
    RtKvCache *kv;
    int32_t P, S;
    int64_t *cache; /* [P * S] simulated device cache: the tag in each slot */
    int64_t *tags[MAX_IDS];
    int32_t len[MAX_IDS]; /* -1: not live */
    int64_t next_tag;
    int n_oom, n_cow, n_fork, n_steps; /* coverage */
} Model;

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return n ? (uint32_t)(rng_state >> 33) % n : 0;
}

static void apply_copy(Model *m, const RtKvCopy *c)
{
    if (c->src < 0) return;
    m->n_cow++;
    KT_CHECK(c->n_tokens >= 1 && c->n_tokens < m->S && c->dst != c->src, "copy %d -> %d, %d rows", c->src,
             c->dst, c->n_tokens);
    KT_CHECK(rt_kv_page_refs(m->kv, c->dst) == 1, "copy target %d is exclusive", c->dst);
    memcpy(&m->cache[(int64_t)c->dst * m->S], &m->cache[(int64_t)c->src * m->S],
           sizeof *m->cache * (size_t)c->n_tokens);
}

/* Every live sequence reads its own tags back through its pages. */
static int check_content(const Model *m, const char *where)
{
    for (int32_t i = 0; i < MAX_IDS; i++) {
        const int32_t *pg;
        if (rt_kv_seq_len(m->kv, i) != m->len[i]) {
            KT_CHECK(0, "%s: seq %d: len %d, model %d", where, i, rt_kv_seq_len(m->kv, i), m->len[i]);
            return 0;
        }
        if (m->len[i] < 0) continue;
        rt_kv_seq_pages(m->kv, i, &pg);
        for (int32_t p = 0; p < m->len[i]; p++) {
            int64_t got = m->cache[(int64_t)pg[p / m->S] * m->S + p % m->S];
            if (got != m->tags[i][p]) {
                KT_CHECK(0, "%s: seq %d pos %d reads tag %lld, wrote %lld", where, i, p, (long long)got,
                         (long long)m->tags[i][p]);
                return 0;
            }
        }
    }
    return 1;
}

/* The free pages in allocation order (ascending), from the reference counts. */
static int32_t free_list(const RtKvCache *kv, int32_t *out)
{
    int32_t n = 0;
    for (int32_t p = 0; p < rt_kv_n_pages(kv); p++)
        if (rt_kv_page_refs(kv, p) == 0) out[n++] = p;
    return n;
}

static int32_t pick_live(const Model *m)
{
    int32_t ids[MAX_IDS], n = 0;
    for (int32_t i = 0; i < MAX_IDS; i++)
        if (m->len[i] >= 0) ids[n++] = i;
    return n ? ids[rnd((uint32_t)n)] : -1;
}

/* Appends to a few distinct sequences, then builds one step over those that fit and "runs" it: the
 * new tokens' tags go to their slots. */
static void op_step(Model *m, int32_t *freel)
{
    RtKvStepSeq items[4];
    int32_t B = 0, want = 1 + (int32_t)rnd(4);
    for (int32_t tries = 0; tries < 8 && B < want; tries++) {
        int32_t s = pick_live(m), dup = 0;
        for (int32_t b = 0; b < B; b++)
            dup |= items[b].seq == s;
        if (s < 0 || dup) continue;
        int32_t n = rnd(4) ? 1 + (int32_t)rnd(3) : 1 + (int32_t)rnd(3 * (uint32_t)m->S); /* decode-ish */
        int32_t need = rt_kv_pages_needed(m->kv, s, n), n_fl = free_list(m->kv, freel);
        Snap before;
        snap_take(m->kv, &before);
        RtKvCopy cow;
        KilnStatus st = rt_kv_seq_append(m->kv, s, n, &cow);
        KT_CHECK((st == KILN_OK) == (need <= n_fl), "append %d to seq %d: need %d, free %d, got %s", n, s,
                 need, n_fl, kiln_status_name(st));
        if (st != KILN_OK) {
            m->n_oom++;
            KT_CHECK(st == KILN_ERR_FULL && strstr(rt_kv_errmsg(m->kv), "out of KV pages"), "%s",
                     rt_kv_errmsg(m->kv));
            KT_CHECK(snap_same(m->kv, &before), "failed append changed nothing");
            KT_CHECK(cow.src == -1, "no copy on failure");
        } else {
            /* lowest free pages first: the copy target, then the new pages in order */
            int32_t k = 0;
            const int32_t *pg;
            int32_t np = rt_kv_seq_pages(m->kv, s, &pg);
            if (cow.src >= 0) {
                KT_CHECK(cow.dst == freel[k], "copy target %d, lowest free %d", cow.dst, freel[k]);
                k++;
            }
            for (int32_t j = before.n_pages[s]; j < np; j++, k++)
                KT_CHECK(pg[j] == freel[k], "new page %d, expected %d", pg[j], freel[k]);
            KT_CHECK(k == need, "took %d pages, predicted %d", k, need);
            apply_copy(m, &cow);
            for (int32_t i = 0; i < n; i++)
                m->tags[s][m->len[s] + i] = ++m->next_tag;
            m->len[s] += n;
            items[B].seq = s, items[B].n_new = n, B++;
        }
        snap_free(&before);
    }
    if (B == 0) return;
    int32_t MP = 1 + (int32_t)rnd((uint32_t)m->P), T = 0, need_mp = 0;
    for (int32_t b = 0; b < B; b++) {
        T += items[b].n_new;
        int32_t np = rt_kv_seq_pages(m->kv, items[b].seq, NULL);
        if (np > need_mp) need_mp = np;
    }
    int32_t t_cap = T + (int32_t)rnd(3);
    size_t nb = (size_t)B * (size_t)(MP > need_mp ? MP : need_mp);
    int32_t *bt = malloc(sizeof *bt * nb), *rbt = malloc(sizeof *rbt * nb);
    int32_t lens[4], rlens[4], cu[5], rcu[5];
    int32_t *slots = malloc(sizeof *slots * (size_t)t_cap), *pos = malloc(sizeof *pos * (size_t)t_cap);
    int32_t *rslots = malloc(sizeof *slots * (size_t)t_cap), *rpos = malloc(sizeof *pos * (size_t)t_cap);
    RtKvStep st = {.block_table = bt,
                   .max_pages = MP,
                   .seq_lens = lens,
                   .cu_q = cu,
                   .slots = slots,
                   .positions = pos,
                   .t_cap = t_cap};
    KilnStatus s = rt_kv_step_build(m->kv, items, B, &st);
    if (MP < need_mp) {
        KT_CHECK(s == KILN_ERR_ARG, "MP %d < %d pages: %s", MP, need_mp, kiln_status_name(s));
        st.max_pages = MP = need_mp;
        s = rt_kv_step_build(m->kv, items, B, &st);
    }
    KT_CHECK(s == KILN_OK, "step: %s", rt_kv_errmsg(m->kv));
    if (s == KILN_OK) {
        m->n_steps++;
        ref_step(m->kv, items, B, MP, t_cap, rbt, rlens, rcu, rslots, rpos);
        KT_CHECK(st.n_tokens == T && !memcmp(bt, rbt, sizeof *bt * (size_t)B * (size_t)MP) &&
                     !memcmp(lens, rlens, sizeof *lens * (size_t)B) &&
                     !memcmp(cu, rcu, sizeof *cu * (size_t)(B + 1)) &&
                     !memcmp(slots, rslots, sizeof *slots * (size_t)t_cap) &&
                     !memcmp(pos, rpos, sizeof *pos * (size_t)t_cap),
                 "step arrays match the reference (B %d, T %d)", B, T);
        for (int32_t b = 0, t = 0; b < B; b++)
            for (int32_t i = 0; i < items[b].n_new; i++, t++) {
                int32_t sq = items[b].seq;
                m->cache[slots[t]] = m->tags[sq][m->len[sq] - items[b].n_new + i];
            }
    }
    free(bt), free(rbt), free(slots), free(pos), free(rslots), free(rpos);
}

static void op_fork(Model *m, int32_t *freel)
{
    int32_t p = pick_live(m);
    if (p < 0) return;
    int32_t len = m->len[p];
    switch (rnd(3)) {
    case 0: break;
    case 1: len = (int32_t)rnd((uint32_t)len + 1); break;
    default: len -= len % m->S; /* a page boundary: nothing to copy */
    }
    int32_t n_fl = free_list(m->kv, freel), c = -1;
    Snap before;
    snap_take(m->kv, &before);
    RtKvCopy cow;
    KilnStatus st = rt_kv_seq_fork(m->kv, p, len, &c, &cow);
    int must_copy = len % m->S != 0;
    if (must_copy && n_fl == 0) {
        m->n_oom++;
        KT_CHECK(st == KILN_ERR_FULL && c == -1 && snap_same(m->kv, &before), "fork without a page: %s",
                 rt_kv_errmsg(m->kv));
    } else if (c >= MAX_IDS) {
        KT_CHECK(0, "id %d past the test's range", c);
    } else {
        KT_CHECK(st == KILN_OK, "fork %d at %d: %s", p, len, rt_kv_errmsg(m->kv));
        if (st != KILN_OK) goto done;
        m->n_fork++;
        KT_CHECK((cow.src >= 0) == must_copy, "copy iff the fork ends inside a page");
        if (must_copy)
            KT_CHECK(cow.dst == freel[0] && cow.n_tokens == len % m->S &&
                         cow.src == before.pages[p][len / m->S],
                     "copy %d -> %d of %d rows", cow.src, cow.dst, cow.n_tokens);
        KT_CHECK(before.len[c] == -1, "child id %d was free", c);
        for (int32_t i = 0; i < c; i++)
            KT_CHECK(before.len[i] >= 0, "lowest free id: %d was free", i);
        apply_copy(m, &cow);
        m->len[c] = len;
        memcpy(m->tags[c], m->tags[p], sizeof *m->tags[c] * (size_t)len);
    }
done:
    snap_free(&before);
}

static void random_run(uint64_t seed, int32_t P, int32_t S, int n_ops)
{
    Model m = {0};
    rng_state = seed;
    RtKvOptions o = rt_kv_options_default();
    o.n_pages = P, o.page_size = S;
    char err[256];
    KT_CHECK(rt_kv_create(&o, &m.kv, err, sizeof err) == KILN_OK, "%s", err);
    if (!m.kv) return;
    m.P = P, m.S = S;
    m.cache = calloc((size_t)P * (size_t)S, sizeof *m.cache);
    int32_t *freel = malloc(sizeof *freel * (size_t)P);
    for (int32_t i = 0; i < MAX_IDS; i++) {
        m.len[i] = -1;
        m.tags[i] = malloc(sizeof *m.tags[i] * (size_t)P * (size_t)S);
    }
    int ok = 1, n_live = 0;
    for (int op = 0; op < n_ops && ok; op++) {
        uint32_t r = rnd(100);
        int32_t s;
        if (rt_kv_pages_free(m.kv) < P / 8 && rnd(4) == 0) r = 85; /* a full pool: free something */
        if (r < 12 && n_live < 12) {
            KilnStatus st = rt_kv_seq_create(m.kv, &s);
            KT_CHECK(st == KILN_OK && s >= 0 && s < MAX_IDS && m.len[s] == -1, "create: %d", s);
            for (int32_t i = 0; i < s; i++)
                KT_CHECK(m.len[i] >= 0, "lowest id first");
            if (st == KILN_OK && s >= 0 && s < MAX_IDS) m.len[s] = 0;
        } else if (r < 55) {
            op_step(&m, freel);
        } else if (r < 70 && (s = pick_live(&m)) >= 0) {
            int32_t len = rnd(2) ? m.len[s] - (int32_t)rnd(5) : (int32_t)rnd((uint32_t)m.len[s] + 1);
            if (len < 0) len = 0;
            KilnStatus st = rt_kv_seq_truncate(m.kv, s, len);
            KT_CHECK(st == KILN_OK, "truncate %d to %d: %s", s, len, rt_kv_errmsg(m.kv));
            if (st == KILN_OK) m.len[s] = len;
        } else if (r < 82 && n_live < 12) {
            op_fork(&m, freel);
        } else if (r < 92 && (s = pick_live(&m)) >= 0) {
            KT_CHECK(rt_kv_seq_free(m.kv, s) == KILN_OK, "free %d", s);
            m.len[s] = -1;
        } else if ((s = pick_live(&m)) >= 0) { /* misuse: refused, nothing changes */
            Snap before;
            snap_take(m.kv, &before);
            RtKvCopy cow;
            int32_t c = -1;
            KT_CHECK(rt_kv_seq_truncate(m.kv, s, m.len[s] + 1) == KILN_ERR_ARG, "truncate past the end");
            KT_CHECK(rt_kv_seq_fork(m.kv, s, m.len[s] + 1, &c, &cow) == KILN_ERR_ARG, "fork past the end");
            KT_CHECK(rt_kv_seq_append(m.kv, s, -1, &cow) == KILN_ERR_ARG, "negative append");
            KT_CHECK(rt_kv_seq_append(m.kv, s, INT32_MAX, &cow) == KILN_ERR_ARG ||
                         strstr(rt_kv_errmsg(m.kv), "out of KV pages"),
                     "huge append");
            KT_CHECK(snap_same(m.kv, &before), "refused calls changed nothing");
            snap_free(&before);
        }
        n_live = 0;
        for (int32_t i = 0; i < MAX_IDS; i++)
            n_live += m.len[i] >= 0;
        ok = check_structure(m.kv, "random") && check_content(&m, "random");
        if (!ok) fprintf(stderr, "seed %llu, op %d\n", (unsigned long long)seed, op);
    }
    for (int32_t i = 0; i < MAX_IDS; i++)
        if (m.len[i] >= 0) KT_CHECK(rt_kv_seq_free(m.kv, i) == KILN_OK, "final free %d", i);
    KT_CHECK(rt_kv_pages_free(m.kv) == P && rt_kv_pages_used(m.kv) == 0, "no leak: %d of %d free",
             rt_kv_pages_free(m.kv), P);
    if (getenv("KILN_TEST_VERBOSE"))
        printf("P %d S %d seed %llu: %d out-of-pages, %d copies, %d forks, %d steps\n", P, S,
               (unsigned long long)seed, m.n_oom, m.n_cow, m.n_fork, m.n_steps);
    KT_CHECK(m.n_oom > 0 && (m.n_cow > 0 || S == 1) && m.n_fork > 0 && m.n_steps > n_ops / 4,
             "coverage: %d out-of-pages, %d copies, %d forks, %d steps", m.n_oom, m.n_cow, m.n_fork,
             m.n_steps);
    rt_kv_destroy(m.kv);
    for (int32_t i = 0; i < MAX_IDS; i++)
        free(m.tags[i]);
    free(m.cache);
    free(freel);
}

/* ---- hand-computed cases ----------------------------------------------------------------------------- */

static RtKvCache *make(int32_t P, int32_t S)
{
    RtKvOptions o = rt_kv_options_default();
    o.n_pages = P, o.page_size = S;
    RtKvCache *kv = NULL;
    char err[256];
    KT_CHECK(rt_kv_create(&o, &kv, err, sizeof err) == KILN_OK, "%s", err);
    return kv;
}

/* S = 4. B already holds 9 tokens (pages 0 1 2), C 5 (pages 3 4). The step: A prefills 6 (pages 5 6),
 * B decodes 1 (position 9, page 2 offset 1), C runs a chunk of 4 (positions 5..8: page 4 offsets 1..3,
 * then page 7 offset 0). */
static void test_mixed_batch(void)
{
    RtKvCache *kv = make(16, 4);
    if (!kv) return;
    int32_t a = -1, b = -1, c = -1;
    RtKvCopy cow;
    KT_CHECK(!rt_kv_seq_create(kv, &a) && !rt_kv_seq_create(kv, &b) && !rt_kv_seq_create(kv, &c), "create");
    KT_CHECK(a == 0 && b == 1 && c == 2, "ids %d %d %d", a, b, c);
    KT_CHECK(!rt_kv_seq_append(kv, b, 9, &cow) && !rt_kv_seq_append(kv, c, 5, &cow), "history");
    KT_CHECK(!rt_kv_seq_append(kv, a, 6, &cow) && !rt_kv_seq_append(kv, b, 1, &cow) &&
                 !rt_kv_seq_append(kv, c, 4, &cow) && cow.src == -1,
             "step appends");
    RtKvStepSeq items[3] = {{a, 6}, {b, 1}, {c, 4}};
    int32_t bt[12], lens[3], cu[4], slots[13], pos[13];
    for (int i = 0; i < 13; i++)
        slots[i] = pos[i] = 12345;
    for (int i = 0; i < 12; i++)
        bt[i] = 12345;
    RtKvStep st = {.block_table = bt,
                   .max_pages = 2,
                   .seq_lens = lens,
                   .cu_q = cu,
                   .slots = slots,
                   .positions = pos,
                   .t_cap = 13};
    KT_CHECK(rt_kv_step_build(kv, items, 3, &st) == KILN_ERR_ARG && strstr(rt_kv_errmsg(kv), "3 pages") &&
                 bt[0] == 12345 && slots[0] == 12345,
             "MP 2 is too narrow, nothing written: %s", rt_kv_errmsg(kv));
    st.max_pages = 4;
    KT_CHECK(rt_kv_step_build(kv, items, 3, &st) == KILN_OK, "%s", rt_kv_errmsg(kv));
    const int32_t ebt[12] = {5, 6, -1, -1, 0, 1, 2, -1, 3, 4, 7, -1};
    const int32_t elens[3] = {6, 10, 9}, ecu[4] = {0, 6, 7, 11};
    const int32_t eslots[13] = {20, 21, 22, 23, 24, 25, 9, 17, 18, 19, 28, -1, -1};
    const int32_t epos[13] = {0, 1, 2, 3, 4, 5, 9, 5, 6, 7, 8, 0, 0};
    KT_CHECK(!memcmp(bt, ebt, sizeof bt), "block table");
    KT_CHECK(!memcmp(lens, elens, sizeof lens) && !memcmp(cu, ecu, sizeof cu), "seq_lens, cu_q");
    KT_CHECK(!memcmp(slots, eslots, sizeof slots) && !memcmp(pos, epos, sizeof pos), "slots, positions");
    KT_CHECK(st.n_tokens == 11 && st.max_q == 6 && st.max_seq_len == 10, "T %d, max_q %d, max_len %d",
             st.n_tokens, st.max_q, st.max_seq_len);

    int32_t rbt[12], rlens[3], rcu[4], rslots[13], rpos[13];
    ref_step(kv, items, 3, 4, 13, rbt, rlens, rcu, rslots, rpos);
    KT_CHECK(!memcmp(bt, rbt, sizeof bt) && !memcmp(slots, rslots, sizeof slots) &&
                 !memcmp(pos, rpos, sizeof pos) && !memcmp(cu, rcu, sizeof cu),
             "the test's reference agrees");

    /* misuse, each refused with the arrays untouched */
    memset(slots, 0x5a, sizeof slots);
    RtKvStepSeq dup[2] = {{b, 1}, {b, 1}}, toolong[1] = {{b, 11}}, zero[1] = {{b, 0}}, dead[1] = {{9, 1}};
    KT_CHECK(rt_kv_step_build(kv, dup, 2, &st) == KILN_ERR_ARG, "repeated sequence");
    KT_CHECK(rt_kv_step_build(kv, toolong, 1, &st) == KILN_ERR_ARG, "more new tokens than the length");
    KT_CHECK(rt_kv_step_build(kv, zero, 1, &st) == KILN_ERR_ARG, "zero new tokens");
    KT_CHECK(rt_kv_step_build(kv, dead, 1, &st) == KILN_ERR_ARG, "unknown sequence");
    st.t_cap = 10;
    KT_CHECK(rt_kv_step_build(kv, items, 3, &st) == KILN_ERR_ARG, "t_cap below T");
    KT_CHECK(slots[0] == 0x5a5a5a5a, "untouched");
    rt_kv_destroy(kv);
}

static void test_copy_on_write(void)
{
    RtKvCache *kv = make(8, 4);
    if (!kv) return;
    int32_t a = -1, b = -1, c = -1, d = -1;
    RtKvCopy cow;
    const int32_t *pg;
    rt_kv_seq_create(kv, &a);
    rt_kv_seq_append(kv, a, 6, &cow); /* pages 0 1, page 1 holds 2 tokens */
    KT_CHECK(rt_kv_seq_fork(kv, a, 6, &b, &cow) == KILN_OK, "%s", rt_kv_errmsg(kv));
    KT_CHECK(cow.src == 1 && cow.dst == 2 && cow.n_tokens == 2, "copy 1 -> 2 of 2 rows: %d %d %d", cow.src,
             cow.dst, cow.n_tokens);
    KT_CHECK(rt_kv_seq_pages(kv, b, &pg) == 2 && pg[0] == 0 && pg[1] == 2, "child pages 0 2");
    KT_CHECK(rt_kv_page_refs(kv, 0) == 2 && rt_kv_page_refs(kv, 1) == 1 && rt_kv_page_refs(kv, 2) == 1,
             "refs");
    KT_CHECK(rt_kv_seq_fork(kv, a, 4, &c, &cow) == KILN_OK && cow.src == -1 && rt_kv_page_refs(kv, 0) == 3,
             "a fork on a page boundary only shares");
    /* truncating into a shared page, then appending: the append copies first */
    KT_CHECK(rt_kv_seq_truncate(kv, c, 3) == KILN_OK && rt_kv_pages_needed(kv, c, 1) == 1, "needs a copy");
    KT_CHECK(rt_kv_seq_append(kv, c, 1, &cow) == KILN_OK && cow.src == 0 && cow.dst == 3 && cow.n_tokens == 3,
             "append copies the shared partial page: %d %d %d", cow.src, cow.dst, cow.n_tokens);
    KT_CHECK(rt_kv_page_refs(kv, 0) == 2 && rt_kv_seq_pages(kv, c, &pg) == 1 && pg[0] == 3, "c moved to 3");
    /* a step whose new token would land in a shared page is refused */
    KT_CHECK(rt_kv_seq_fork(kv, a, 4, &d, &cow) == KILN_OK && rt_kv_page_refs(kv, 0) == 3, "share again");
    int32_t bt[4], lens[1], cu[2], slots[4], pos[4];
    RtKvStep st = {.block_table = bt,
                   .max_pages = 4,
                   .seq_lens = lens,
                   .cu_q = cu,
                   .slots = slots,
                   .positions = pos,
                   .t_cap = 4};
    RtKvStepSeq it[1] = {{d, 1}};
    KT_CHECK(rt_kv_step_build(kv, it, 1, &st) == KILN_ERR_ARG && strstr(rt_kv_errmsg(kv), "share"), "%s",
             rt_kv_errmsg(kv));
    /* a full shared page: appending takes a new page, no copy */
    KT_CHECK(rt_kv_seq_append(kv, d, 2, &cow) == KILN_OK && cow.src == -1, "no copy of a full page");
    it[0].n_new = 2;
    KT_CHECK(rt_kv_step_build(kv, it, 1, &st) == KILN_OK && slots[0] == 4 * 4 && slots[1] == 4 * 4 + 1,
             "d's new tokens in page 4: %d %d", slots[0], slots[1]);
    /* out of pages: a fork that needs a copy fails whole */
    int32_t e = -1;
    rt_kv_seq_create(kv, &e);
    KT_CHECK(rt_kv_seq_append(kv, e, 4 * rt_kv_pages_free(kv), &cow) == KILN_OK && rt_kv_pages_free(kv) == 0,
             "fill the pool");
    Snap before;
    snap_take(kv, &before);
    int32_t f = 77;
    KT_CHECK(rt_kv_seq_fork(kv, a, 5, &f, &cow) == KILN_ERR_FULL && f == -1 && cow.src == -1 &&
                 strstr(rt_kv_errmsg(kv), "out of KV pages"),
             "%s", rt_kv_errmsg(kv));
    KT_CHECK(rt_kv_seq_append(kv, a, 3, &cow) == KILN_ERR_FULL, "append without pages");
    KT_CHECK(snap_same(kv, &before), "nothing changed");
    snap_free(&before);
    KT_CHECK(rt_kv_seq_fork(kv, a, 4, &f, &cow) == KILN_OK, "a boundary fork needs no page");
    KT_CHECK(check_structure(kv, "cow"), "structure");
    for (int32_t s = 0; s < MAX_IDS; s++)
        if (rt_kv_seq_len(kv, s) >= 0) rt_kv_seq_free(kv, s);
    KT_CHECK(rt_kv_pages_free(kv) == 8, "all free");
    KT_CHECK(rt_kv_seq_free(kv, a) == KILN_ERR_ARG, "double free refused");
    rt_kv_destroy(kv);
}

static void test_budget(void)
{
    int32_t p = -1;
    KT_CHECK(rt_kv_page_bytes(32, 16, 8, 128, 2) == 2097152, "Llama-3-8B bf16 page: 2 MiB");
    KT_CHECK(rt_kv_pages_for_budget(10LL << 30, 32, 16, 8, 128, 2, &p) == KILN_OK && p == 5120, "10 GiB: %d",
             p);
    KT_CHECK(rt_kv_pages_for_budget((10LL << 30) - 1, 32, 16, 8, 128, 2, &p) == KILN_OK && p == 5119,
             "a byte short: %d", p);
    KT_CHECK(rt_kv_pages_for_budget(2097151, 32, 16, 8, 128, 2, &p) == KILN_OK && p == 0, "under a page");
    KT_CHECK(rt_kv_pages_for_budget(INT64_MAX, 1, 16, 1, 1, 1, &p) == KILN_OK && p == INT32_MAX / 16,
             "capped by i32 slots: %d", p);
    KT_CHECK(rt_kv_page_bytes(1 << 20, 1 << 20, 1 << 21, 1, 1) == (int64_t)1 << 62, "2^62 fits");
    KT_CHECK(rt_kv_page_bytes(1 << 20, 1 << 20, 1 << 21, 1, 2) == -1, "2^63 overflows");
    KT_CHECK(rt_kv_page_bytes(INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX) == -1, "overflow");
    KT_CHECK(rt_kv_pages_for_budget(INT64_MAX, INT_MAX, INT_MAX, INT_MAX, 2, 2, &p) == KILN_OK && p == 0,
             "an overflowing page fits nowhere");
    KT_CHECK(rt_kv_pages_for_budget(-1, 1, 1, 1, 1, 1, &p) == KILN_ERR_ARG && p == 0, "negative budget");
    KT_CHECK(rt_kv_pages_for_budget(1 << 20, 0, 16, 8, 128, 2, &p) == KILN_ERR_ARG, "0 layers");
    KT_CHECK(rt_kv_pages_for_budget(1 << 20, 1, 16, 8, 128, -2, &p) == KILN_ERR_ARG, "bad dtype size");
    KT_CHECK(rt_kv_page_bytes(1, 0, 1, 1, 1) == -1, "page_size 0");

    RtKvOptions o = rt_kv_options_default();
    RtKvCache *kv = (RtKvCache *)(uintptr_t)1; /* must come back NULL */
    char err[256];
    o.n_pages = INT32_MAX / 16 + 1, o.page_size = 16;
    KT_CHECK(rt_kv_create(&o, &kv, err, sizeof err) == KILN_ERR_ARG && !kv && strstr(err, "INT32_MAX"),
             "slots past i32: %s", err);
    o.n_pages = 0;
    KT_CHECK(rt_kv_create(&o, &kv, err, sizeof err) == KILN_ERR_ARG, "no pages");
    o.n_pages = 4, o.page_size = 0;
    KT_CHECK(rt_kv_create(&o, &kv, NULL, 0) == KILN_ERR_ARG, "page size 0, no err buffer");
}

/* The k-th host allocation fails, for every k until the scenario runs through: each failure is
 * KILN_ERR_NOMEM "out of host memory" and changes nothing; freeing what exists leaves no page used. */
static void test_alloc_failures(void)
{
    int completed = 0, failures = 0;
    for (long k = 1; k < 200 && !completed; k++) {
        RtKvOptions o = rt_kv_options_default();
        o.n_pages = 64, o.page_size = 2, o.fail_alloc_after = k;
        RtKvCache *kv = NULL;
        char err[256];
        KilnStatus st = rt_kv_create(&o, &kv, err, sizeof err);
        if (st != KILN_OK) {
            KT_CHECK(st == KILN_ERR_NOMEM && !kv && strstr(err, "host memory"), "k=%ld create: %s", k, err);
            failures++;
            continue;
        }
        int32_t ids[20], n = 0;
        RtKvCopy cow;
        st = KILN_OK;
        for (int step = 0; step < 60 && st == KILN_OK; step++) {
            Snap before;
            snap_take(kv, &before);
            int32_t s = -1;
            if (step < 20) {
                st = rt_kv_seq_create(kv, &s);
                if (st == KILN_OK) ids[n++] = s;
            } else if (step < 40) {
                st = rt_kv_seq_append(kv, ids[step % 5], 3 + step % 7, &cow); /* page lists grow past 4 */
            } else {
                st = rt_kv_seq_fork(kv, ids[step % n], rt_kv_seq_len(kv, ids[step % n]), &s, &cow);
                if (st == KILN_OK) KT_CHECK(rt_kv_seq_free(kv, s) == KILN_OK, "free the fork");
            }
            if (st != KILN_OK) {
                failures++;
                KT_CHECK(st == KILN_ERR_NOMEM && strstr(rt_kv_errmsg(kv), "host memory"), "k=%ld step %d: %s",
                         k, step, rt_kv_errmsg(kv));
                KT_CHECK(snap_same(kv, &before), "k=%ld step %d: a failed call changed nothing", k, step);
            }
            snap_free(&before);
        }
        check_structure(kv, "alloc failure");
        completed = st == KILN_OK;
        for (int32_t i = 0; i < n; i++)
            KT_CHECK(rt_kv_seq_free(kv, ids[i]) == KILN_OK, "free");
        KT_CHECK(rt_kv_pages_free(kv) == 64, "k=%ld: no page leaked", k);
        rt_kv_destroy(kv);
    }
    KT_CHECK(completed && failures > 5, "the scenario completes eventually (%d failures seen)", failures);
}

/* The split-KV heuristic on the bench's shapes (docs/ATTENTION.md) and its bounds. */
static void test_attention_splits(void)
{
    RtKvStep st = {0};
    st.n_tokens = 64, st.max_q = 1, st.max_seq_len = 4096; /* decode, 64 x 4096, GQA 32/8 */
    KT_CHECK(rt_kv_attention_splits(&st, 64, 32, 8, 16, 132, 65536) == 1, "batch 64 fills the GPU");
    st.n_tokens = 1, st.max_seq_len = 32768; /* one long sequence: 8 programs unsplit */
    KT_CHECK(rt_kv_attention_splits(&st, 1, 32, 8, 16, 132, 65536) == 32, "B1 x 32k: 32 splits");
    st.max_seq_len = 2048;
    KT_CHECK(rt_kv_attention_splits(&st, 1, 32, 8, 16, 132, 65536) == 4, ">= 512 keys per split");
    st.max_seq_len = 32768;
    KT_CHECK(rt_kv_attention_splits(&st, 1, 32, 8, 16, 132, 32 * 5) == 5, "the workspace bounds it");
    st.n_tokens = 32, st.max_seq_len = 4096; /* B32 decode: 256 programs */
    KT_CHECK(rt_kv_attention_splits(&st, 32, 32, 8, 16, 132, 65536) == 2, "B32: 2 splits");
    st.n_tokens = 16384, st.max_q = 4096; /* prefill */
    KT_CHECK(rt_kv_attention_splits(&st, 4, 32, 32, 64, 132, 65536) == 1, "prefill is never split");
    KT_CHECK(rt_kv_attention_splits(&st, 4, 32, 5, 64, 132, 65536) == 1 &&
                 rt_kv_attention_splits(NULL, 4, 32, 8, 64, 132, 65536) == 1,
             "bad arguments give 1");
}

int main(void)
{
    test_attention_splits();
    test_budget();
    test_mixed_batch();
    test_copy_on_write();
    test_alloc_failures();
    const struct {
        int32_t P, S;
    } shapes[] = {{24, 4}, {48, 1}, {40, 3}, {12, 16}, {64, 8}};
    for (int i = 0; i < 5; i++)
        for (uint64_t seed = 1; seed <= 3; seed++)
            random_run(seed * 7919 + (uint64_t)i, shapes[i].P, shapes[i].S, 3000);
    return kt_done("kvcache");
}
