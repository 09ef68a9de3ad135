/* rt_spec.c — proposers, the acceptance rule and the adaptive draft length of speculative decoding
 * (rt_spec.h). Invariant: whatever a proposer writes, the tokens a request gets are the ones it gets
 * without speculation: a draft is kept only where the target drew the same token, so a proposer decides
 * speed, never output.
 */
#include "rt_spec.h"

#include <stdlib.h>
#include <string.h>

void rt_spec_init(RtSpecState *s, int k_max)
{
    memset(s, 0, sizeof *s);
    s->k_max = s->k_cur = k_max < 1 ? 1 : k_max;
    s->pause_len = 1;
}

int rt_spec_budget(RtSpecState *s)
{
    if (s->pause > 0) {
        s->pause--;
        return 0;
    }
    return s->k_cur;
}

int rt_spec_ngram(const int32_t *t, int n, int k, int32_t *out)
{
    if (k <= 0) return 0;
    for (int g = n - 1 < RT_SPEC_NGRAM_MAX ? n - 1 : RT_SPEC_NGRAM_MAX; g >= 1; g--) {
        const int32_t *suffix = t + n - g;
        /* the latest earlier occurrence t[i..i+g) with at least one token after it (i + g < n) */
        for (int i = n - g - 1; i >= 0; i--) {
            if (t[i] != suffix[0] || memcmp(t + i, suffix, (size_t)g * sizeof *t)) continue;
            /* what followed, copied with overlap: past t's end the copy reads its own output, so a
             * sequence repeating with period p = n - (i + g) proposes k tokens, not p */
            for (int j = 0; j < k; j++)
                out[j] = i + g + j < n ? t[i + g + j] : out[i + g + j - n];
            return k;
        }
    }
    return 0;
}

int rt_spec_lookup(const int32_t *t, int n, const int32_t *c, int m, int near, int k, int32_t *out)
{
    if (k <= 0) return 0;
    for (int g = n < RT_SPEC_NGRAM_MAX ? n : RT_SPEC_NGRAM_MAX; g >= 1; g--) {
        const int32_t *suffix = t + n - g;
        int best = -1;
        long best_d = 0;
        for (int i = m - g - 1; i >= 0; i--) {
            if (c[i] != suffix[0] || memcmp(c + i, suffix, (size_t)g * sizeof *c)) continue;
            long d = near < 0 ? 0 : labs((long)(i + g) - near);
            if (best < 0 || d < best_d) best = i, best_d = d;
            if (near < 0 || !d) break; /* the latest, or the aligned one */
        }
        if (best >= 0) {
            int w = m - (best + g) < k ? m - (best + g) : k;
            memcpy(out, c + best + g, (size_t)w * sizeof *out);
            return w;
        }
    }
    return 0;
}

int rt_spec_accept(const int32_t *draft, const int32_t *target, int n_draft)
{
    int a = 0;
    while (a < n_draft && draft[a] == target[a])
        a++;
    return a;
}

void rt_spec_record(RtSpecState *s, int proposed, int accepted)
{
    s->verifies++;
    s->proposed += proposed;
    s->accepted += accepted;
    if (accepted == proposed) {
        if (s->k_cur < s->k_max) s->k_cur++;
    } else {
        s->k_cur = accepted + 1;
    }
    if (accepted > 0) {
        s->misses = 0, s->pause_len = 1;
        return;
    }
    if (s->k_cur == 1 && ++s->misses >= RT_SPEC_MISS_PAUSE) {
        s->pause = s->pause_len;
        if (s->pause_len < 64) s->pause_len *= 2;
        s->misses = 0;
    }
}
