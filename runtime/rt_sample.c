/* rt_sample.c — the host's sampling path (rt_sample.h). */
#include "rt_sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int rt_sample_on_host(const KilnSampling *s)
{
    return s->presence_penalty != 0 || s->frequency_penalty != 0 || s->repetition_penalty != 1 ||
           s->min_p > 0 || s->n_logit_bias > 0;
}

void rt_sample_adjust(float *x, int V, const KilnSampling *s, const int32_t *prompt, int n_prompt,
                      const int32_t *out, int n_out, int32_t *count)
{
    float rp = s->repetition_penalty;
    if (rp != 1) { /* count doubles as "seen" here, cleared after */
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < (pass ? n_out : n_prompt); i++) {
                int32_t t = pass ? out[i] : prompt[i];
                if (count[t]++) continue;
                x[t] = x[t] > 0 ? x[t] / rp : x[t] * rp;
            }
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < (pass ? n_out : n_prompt); i++)
                count[pass ? out[i] : prompt[i]] = 0;
    }
    if (s->presence_penalty != 0 || s->frequency_penalty != 0) {
        for (int i = 0; i < n_out; i++)
            count[out[i]]++;
        for (int i = 0; i < n_out; i++) {
            int32_t t = out[i];
            if (!count[t]) continue; /* done at its first occurrence */
            x[t] -= s->presence_penalty + s->frequency_penalty * (float)count[t];
            count[t] = 0;
        }
    }
    for (int i = 0; i < s->n_logit_bias; i++)
        x[s->logit_bias[i].token] += s->logit_bias[i].bias;
}

static uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

float rt_sample_rand(int64_t seed, int32_t counter)
{
    uint32_t s = (uint32_t)(uint64_t)seed, hi = (uint32_t)((uint64_t)seed >> 32);
    uint32_t h = mix32((uint32_t)counter ^ mix32(s ^ 0x9e3779b9u) ^ hi);
    return (float)(h >> 8) * (1.0f / 16777216.0f);
}

/* The k-th largest of v[0..n) (1 <= k <= n), v reordered: quickselect. */
static float kth_largest(float *v, int n, int k)
{
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float p = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] > p)
                i++;
            while (v[j] < p)
                j--;
            if (i <= j) {
                float t = v[i];
                v[i++] = v[j], v[j--] = t;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            return v[want];
    }
    return v[want];
}

/* The value t such that the values >= t of v[0..n) (masses m) are the smallest such set holding at least
 * `want` of mass, taken largest first (ties at t all in): a three-way quickselect that keeps the part
 * where the mass runs out. v and m are reordered. */
static float top_mass(float *v, float *m, int n, double want)
{
    int lo = 0, hi = n; /* the search range [lo, hi): every value above it is taken */
    float t = n ? v[0] : INFINITY;
    while (lo < hi) {
        float p = v[lo + (hi - lo) / 2];
        /* [lo, g) > p, [g, q) == p, [q, hi) < p (Dutch flag) */
        int g = lo, q = lo, r = hi;
        while (q < r) {
            float x = v[q], y = m[q];
            if (x > p) {
                v[q] = v[g], m[q] = m[g], v[g] = x, m[g] = y;
                g++, q++;
            } else if (x < p) {
                r--;
                v[q] = v[r], m[q] = m[r], v[r] = x, m[r] = y;
            } else {
                q++;
            }
        }
        double above = 0, at = 0;
        for (int i = lo; i < g; i++)
            above += m[i];
        for (int i = g; i < q; i++)
            at += m[i];
        t = p;
        if (above >= want) {
            hi = g;
        } else if (above + at >= want) {
            return p;
        } else {
            want -= above + at, lo = q;
        }
    }
    return t; /* the masses ran out (rounding): everything down to the last pivot */
}

int32_t rt_sample_row(const float *x, int V, float T, int top_k, float top_p, float min_p, int64_t seed,
                      float *scratch)
{
    float mx = -INFINITY;
    int32_t best = 0;
    for (int v = 0; v < V; v++)
        if (x[v] > mx) mx = x[v], best = v;
    if (!(T > 0) || mx == -INFINITY) return best;
    /* the allowed set {x >= t}: t from top-k, then top-p over what top-k leaves, then min-p */
    float t = -INFINITY, inv_t = 1.0f / T;
    int n = 0;
    if (top_k > 0 && top_k < V) {
        for (int v = 0; v < V; v++)
            if (x[v] > -INFINITY) scratch[n++] = x[v];
        if (top_k < n) t = kth_largest(scratch, n, top_k);
    }
    if (top_p < 1) {
        /* the smallest set of the largest values whose mass reaches top_p of the whole (e(x) =
         * exp((x - mx) / T) over x >= t): a quickselect weighted by mass, O(V) expected; masses below
         * e^-30 of the largest change no sum at float precision and are left out of the search */
        float *v = scratch, *m = scratch + V, floor = mx - 30 * T;
        double z = 0;
        n = 0;
        for (int i = 0; i < V; i++)
            if (x[i] >= t && x[i] > -INFINITY) {
                double e = exp((double)(x[i] - mx) * inv_t);
                z += e;
                if (x[i] >= floor) v[n] = x[i], m[n++] = (float)e;
            }
        t = top_mass(v, m, n, (double)top_p * z);
    }
    if (min_p > 0) {
        float m = mx + T * logf(min_p);
        t = m > t ? m : t;
    }
    float top = -INFINITY;
    best = 0;
    for (int v = 0; v < V; v++) {
        if (!(x[v] >= t) || x[v] == -INFINITY) continue;
        float u = rt_sample_rand(seed, v);
        u = u > 0x1p-25f ? u : 0x1p-25f;
        float z = x[v] * inv_t + -logf(-logf(u));
        if (z > top) top = z, best = v;
    }
    return best;
}
