/* kref.c — C references for the kernel families, number formats, test RNG and error metric (kref.h).
 * Plain loops with float64 accumulation: slow and obviously right is the point. Where a family's
 * semantics fix a float32 step (rope's inv_freq and angle) the reference mirrors that step exactly.
 */
#define _POSIX_C_SOURCE 200809L
#include "kref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- number formats ---- */

static double round_fmt(double x, int mbits, int emin, double maxv)
{
    if (x != x || x == 0 || isinf(x)) return x;
    int e;
    frexp(fabs(x), &e);
    e = e - 1 < emin ? emin : e - 1;
    double q = ldexp(1.0, e - mbits), r = rint(fabs(x) / q) * q;
    return copysign(r > maxv ? INFINITY : r, x);
}

double kref_round(double x, KirDtype t)
{
    if (t == KIR_F32) return (float)x;
    if (t == KIR_BF16) return round_fmt(x, 7, -126, ldexp(255.0, 120));
    if (t == KIR_F16) return round_fmt(x, 10, -14, 65504.0);
    return x;
}

uint16_t kref_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (f != f) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float kref_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t kref_f32_to_f16(float f)
{
    double x = round_fmt(f, 10, -14, 65504.0), a = fabs(x);
    unsigned s = signbit(x) ? 0x8000u : 0;
    if (a != a) return (uint16_t)(s | 0x7e00u);
    if (isinf(a)) return (uint16_t)(s | 0x7c00u);
    if (a < ldexp(1.0, -14)) return (uint16_t)(s | (unsigned)(a * ldexp(1.0, 24)));
    int e;
    double m = frexp(a, &e);
    return (uint16_t)(s | ((unsigned)(e + 14) << 10) | (unsigned)((2 * m - 1) * 1024));
}

float kref_f16_to_f32(uint16_t h)
{
    unsigned e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, (int)e - 25);
    return (float)((h >> 15) ? -v : v);
}

float kref_f8e4m3_to_f32(uint8_t b)
{
    unsigned e = (b >> 3) & 15, m = b & 7;
    double v = e == 15 && m == 7 ? NAN : e == 0 ? ldexp(m, -9) : ldexp(m + 8, (int)e - 10);
    return (float)((b >> 7) ? -v : v);
}

size_t kref_bytes(KirDtype t, size_t n)
{
    return n * (size_t)kir_dtype_bytes(t);
}

double kref_get(const void *p, KirDtype t, size_t i)
{
    if (t == KIR_F32) return ((const float *)p)[i];
    if (t == KIR_BF16) return kref_bf16_to_f32(((const uint16_t *)p)[i]);
    if (t == KIR_F16) return kref_f16_to_f32(((const uint16_t *)p)[i]);
    if (t == KIR_I32) return ((const int32_t *)p)[i];
    if (t == KIR_F8E4M3) return kref_f8e4m3_to_f32(((const uint8_t *)p)[i]);
    if (t == KIR_I8) return ((const int8_t *)p)[i];
    abort();
}

void kref_set(void *p, KirDtype t, size_t i, double v)
{
    if (t == KIR_F32)
        ((float *)p)[i] = (float)v;
    else if (t == KIR_BF16)
        ((uint16_t *)p)[i] = kref_f32_to_bf16((float)kref_round(v, t));
    else if (t == KIR_F16)
        ((uint16_t *)p)[i] = kref_f32_to_f16((float)kref_round(v, t));
    else if (t == KIR_I32)
        ((int32_t *)p)[i] = (int32_t)v;
    else
        abort();
}

/* ---- inputs ---- */

uint64_t kref_seed(void)
{
    static uint64_t seed;
    static int done;
    if (done) return seed;
    const char *env = getenv("KILN_TEST_SEED");
    if (env && *env)
        seed = strtoull(env, NULL, 0);
    else
        seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 20) ^ (uint64_t)clock();
    done = 1;
    printf("kref: seed 0x%llx (KILN_TEST_SEED=0x%llx repeats this run)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    return seed;
}

KrefRng kref_rng(uint64_t seed)
{
    return (KrefRng){seed};
}

uint64_t kref_next(KrefRng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double kref_uniform(KrefRng *r, double lo, double hi)
{
    return lo + (hi - lo) * (double)(kref_next(r) >> 11) * 0x1p-53;
}

double kref_normal(KrefRng *r)
{
    double u = kref_uniform(r, 1e-300, 1.0), v = kref_uniform(r, 0.0, 1.0);
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

void kref_fill(KrefRng *r, void *p, KirDtype t, size_t n, double lo, double hi)
{
    int nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        kref_set(p, t, i, kref_uniform(r, lo, hi));
        nonzero |= kref_get(p, t, i) != 0;
    }
    if (n && !nonzero) kref_set(p, t, 0, hi != 0 ? hi / 2 : lo / 2);
}

void kref_poison(void *p, size_t bytes)
{
    memset(p, 0xff, bytes);
}

void *kref_alloc(KirDtype t, size_t n)
{
    size_t bytes = kref_bytes(t, n ? n : 1);
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "kref: out of memory (%zu bytes)\n", bytes);
        abort();
    }
    kref_poison(p, bytes);
    return p;
}

/* ---- error ---- */

double kref_rel_l2(const double *got, const double *want, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double kref_tol(KirDtype t)
{
    return t == KIR_F32 ? 1e-4 : 1e-2;
}

double *kref_to_double(const void *p, KirDtype t, size_t n)
{
    double *d = malloc(sizeof(double) * (n ? n : 1));
    if (!d) abort();
    for (size_t i = 0; i < n; i++)
        d[i] = kref_get(p, t, i);
    return d;
}

/* ---- references ---- */

void kref_embedding(const int32_t *ids, const void *table, KirDtype t, int T, int V, int C, double *out)
{
    for (int i = 0; i < T; i++)
        for (int c = 0; c < C; c++)
            out[(size_t)i * C + c] =
                ids[i] >= 0 && ids[i] < V ? kref_get(table, t, (size_t)ids[i] * C + c) : 0.0;
}

void kref_rmsnorm(const void *x, const void *r, const void *w, KirDtype t, int rows, int C, double eps,
                  double *out, double *sum_out)
{
    double *s = malloc(sizeof(double) * (size_t)C);
    if (!s) abort();
    for (int i = 0; i < rows; i++) {
        double ss = 0;
        for (int c = 0; c < C; c++) {
            size_t j = (size_t)i * C + c;
            s[c] = kref_get(x, t, j);
            if (r) s[c] = kref_round(s[c] + kref_get(r, t, j), t);
            if (sum_out) sum_out[j] = s[c];
            ss += s[c] * s[c];
        }
        double inv = 1.0 / sqrt(ss / C + (double)(float)eps);
        for (int c = 0; c < C; c++)
            out[(size_t)i * C + c] = s[c] * inv * kref_get(w, t, (size_t)c);
    }
    free(s);
}

float kref_rope_inv_freq(const KrefRope *p, int i)
{
    float e = (float)(2 * i) / (float)p->D;
    float l2t = (float)log2(p->theta);
    float inv = (float)exp2(-(double)(e * l2t));
    if (!strcmp(p->scaling, "none")) return inv;
    float factor = (float)p->factor, scaled = inv / factor;
    if (!strcmp(p->scaling, "linear")) return scaled;
    double old = p->original_max_pos, lo = p->low_freq_factor, hi = p->high_freq_factor;
    float wavelen = (float)6.283185307179586 / inv;
    float smooth = ((float)old / wavelen - (float)lo) / (float)(hi - lo);
    float mid = (1.0f - smooth) * inv / factor + smooth * inv;
    if (wavelen > (float)(old / lo)) return scaled;
    if (wavelen < (float)(old / hi)) return inv;
    return mid;
}

void kref_rope(const void *x, const int32_t *pos, KirDtype t, int T, const KrefRope *p, double *out)
{
    int half = p->D / 2;
    for (int tok = 0; tok < T; tok++)
        for (int i = 0; i < half; i++) {
            float angle = (float)pos[tok] * kref_rope_inv_freq(p, i);
            double c = cos((double)angle), s = sin((double)angle);
            for (int h = 0; h < p->H; h++) {
                size_t o = (size_t)tok * p->H * p->D + (size_t)h * p->D + i;
                double x1 = kref_get(x, t, o), x2 = kref_get(x, t, o + half);
                out[o] = x1 * c - x2 * s;
                out[o + half] = x2 * c + x1 * s;
            }
        }
}

void kref_kv_write(const void *k, const void *v, const int32_t *slots, const int32_t *pos, KirDtype t, int T,
                   int Hkv, int D, const KrefRope *rope, double *k_cache, double *v_cache)
{
    size_t row = (size_t)Hkv * D;
    for (int tok = 0; tok < T; tok++) {
        if (slots[tok] < 0) continue;
        double *kd = k_cache + (size_t)slots[tok] * row, *vd = v_cache + (size_t)slots[tok] * row;
        for (size_t e = 0; e < row; e++) {
            kd[e] = kref_get(k, t, (size_t)tok * row + e);
            vd[e] = kref_get(v, t, (size_t)tok * row + e);
        }
        if (rope) kref_rope((const char *)k + kref_bytes(t, (size_t)tok * row), pos + tok, t, 1, rope, kd);
    }
}

void kref_matmul(const void *x, const void *w, const void *w2, const void *bias, const void *r, KirDtype t,
                 int M, int N, int K, const char *epilogue, double *out)
{
    double *xd = kref_to_double(x, t, (size_t)M * K), *wd = kref_to_double(w, t, (size_t)N * K);
    double *w2d = w2 ? kref_to_double(w2, t, (size_t)N * K) : NULL;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            const double *a = xd + (size_t)m * K, *b = wd + (size_t)n * K,
                         *b2 = w2d ? w2d + (size_t)n * K : NULL;
            double acc = 0, acc2 = 0;
            for (int k = 0; k < K; k++)
                acc += a[k] * b[k];
            for (int k = 0; b2 && k < K; k++)
                acc2 += a[k] * b2[k];
            size_t o = (size_t)m * N + n;
            if (!strcmp(epilogue, "bias")) acc += kref_get(bias, t, (size_t)n);
            if (!strcmp(epilogue, "residual")) acc = kref_round(acc, t) + kref_get(r, t, o);
            if (!strcmp(epilogue, "silu_mul")) acc = acc / (1 + exp(-acc)) * acc2;
            out[o] = acc;
        }
    free(xd);
    free(wd);
    free(w2d);
}

int kref_argmax(const float *x, int V)
{
    int best = 0;
    for (int j = 1; j < V; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

static int desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

double kref_sample_threshold(const float *x, int V, double T, int top_k, double top_p, double slack)
{
    double *v = malloc(sizeof(double) * (size_t)V);
    if (!v) abort();
    int nf = 0;
    for (int j = 0; j < V; j++)
        if (x[j] > -INFINITY) v[nf++] = x[j];
    if (nf == 0) {
        free(v);
        return INFINITY;
    }
    qsort(v, (size_t)nf, sizeof(double), desc);
    double t = v[nf - 1];
    if (!(T > 0)) {
        t = v[0];
    } else {
        if (top_k > 0 && top_k < V) t = v[(top_k <= nf ? top_k : nf) - 1];
        if (top_p < 1) {
            double z = 0, cum = 0, target;
            for (int i = 0; i < nf && v[i] >= t; i++)
                z += exp((v[i] - v[0]) / T);
            target = top_p * (1 + slack) * z;
            for (int i = 0; i < nf && v[i] >= t; i++) {
                cum += exp((v[i] - v[0]) / T);
                if ((i + 1 == nf || v[i + 1] != v[i]) && cum >= target) {
                    t = v[i];
                    break;
                }
            }
        }
    }
    free(v);
    return t;
}

void kref_sample_probs(const float *x, int V, double T, double threshold, double *p)
{
    double mx = -INFINITY, z = 0;
    for (int j = 0; j < V; j++)
        if (x[j] > mx) mx = x[j];
    for (int j = 0; j < V; j++)
        z += (p[j] = x[j] >= threshold ? exp((x[j] - mx) / T) : 0.0);
    for (int j = 0; j < V; j++)
        p[j] /= z;
}

double kref_chi2_bound(int df)
{
    double z = 3.719, h = 2.0 / (9.0 * df), c = 1 - h + z * sqrt(h);
    return df * c * c * c;
}

void kref_attention_paged(const void *q, const void *k_cache, const void *v_cache, KirDtype t,
                          const int32_t *block_table, const int32_t *seq_lens, const int32_t *cu_q, int B,
                          int MP, int H, int Hkv, int D, int S, int causal, int window, const int64_t *tree,
                          double scale, double *out)
{
    int group = H / Hkv;
    for (int b = 0; b < B; b++) {
        int qlen = cu_q[b + 1] - cu_q[b], slen = seq_lens[b];
        double *p = malloc(sizeof(double) * (size_t)(slen > 0 ? slen : 1));
        for (int i = 0; i < qlen; i++) {
            int row = cu_q[b] + i, pos = slen - qlen + i;
            int hi = causal ? pos + 1 : slen, lo = window > 0 ? pos - window + 1 : 0;
            if (lo < 0) lo = 0;
            if (hi > slen) hi = slen;
            for (int h = 0; h < H; h++) {
                int kvh = h / group;
                size_t qb = ((size_t)row * H + h) * D;
                double mx = -INFINITY, sum = 0;
                for (int j = lo; j < hi; j++) {
                    int start = slen - qlen;
                    if (tree && j >= start && !((tree[row] >> (j - start)) & 1)) {
                        p[j] = -INFINITY; /* not an ancestor in the draft tree */
                        continue;
                    }
                    size_t kb = (((size_t)block_table[(size_t)b * MP + j / S] * S + j % S) * Hkv + kvh) * D;
                    double dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += kref_get(q, t, qb + d) * kref_get(k_cache, t, kb + d);
                    p[j] = dot * scale;
                    if (p[j] > mx) mx = p[j];
                }
                for (int j = lo; j < hi; j++) {
                    p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - mx);
                    sum += p[j];
                }
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int j = lo; j < hi; j++) {
                        size_t vb =
                            (((size_t)block_table[(size_t)b * MP + j / S] * S + j % S) * Hkv + kvh) * D;
                        acc += p[j] * kref_get(v_cache, t, vb + d);
                    }
                    out[qb + d] = sum > 0 ? acc / sum : 0;
                }
            }
        }
        free(p);
    }
}

/* ---- spec_verify ---- */

void kref_spec_verify_greedy(const float *logits, const int32_t *draft, int B, int k, int V,
                             int32_t *accepted, int32_t *bonus)
{
    for (int b = 0; b < B; b++) {
        const float *rows = logits + (size_t)b * (k + 1) * V;
        int n = 0;
        while (n < k && kref_argmax(rows + (size_t)n * V, V) == draft[(size_t)b * k + n])
            n++;
        accepted[b] = n;
        bonus[b] = kref_argmax(rows + (size_t)n * V, V);
    }
}

double kref_gumbel(int64_t seed, int32_t counter)
{
    double u = fmax((double)kir_rand_ref(seed, counter), 0x1p-25);
    return -log(-log(u));
}

/* Draws from row j of a sequence (x logits, qr its q row or NULL for p itself) by Gumbel-max as the
 * family does; p holds softmax(x / T), m = max x. The kernel's p may be off by a relative `margin`: sets
 * *amb when that (or 1e-5 on the key terms) could make it pick another token or change whether the
 * residual max(0, p - q) is empty. */
static int spec_draw(const float *x, const float *qr, const double *p, int V, double m, double T,
                     int64_t seed, int j, double margin, int *amb)
{
    double best = -INFINITY, best_lo = -INFINITY;
    int w = 0, sure = 0, maybe = 0, use_r = 0;
    for (int t = 0; qr && t < V; t++) {
        sure |= p[t] * (1 - margin) > qr[t];
        maybe |= p[t] * (1 + margin) > qr[t];
        use_r |= p[t] > qr[t];
    }
    if (sure != maybe) *amb = 1; /* the kernel's residual may or may not be empty */
    double *lo = malloc(sizeof(double) * (size_t)V), *hi = malloc(sizeof(double) * (size_t)V);
    if (!lo || !hi) abort();
    for (int t = 0; t < V; t++) {
        double g = kref_gumbel(seed, (int32_t)((int64_t)(j + 1) * V + t)), c;
        if (use_r) {
            double r = p[t] - qr[t], rl = p[t] * (1 - margin) - qr[t], rh = p[t] * (1 + margin) - qr[t];
            double s = 1e-5 * (1 + fabs(g));
            c = r > 0 ? log(r) + g : -INFINITY;
            lo[t] = rl > 0 ? log(rl) + g - s : -INFINITY;
            hi[t] = rh > 0 ? log(rh) + g + s : -INFINITY;
        } else {
            double lx = (x[t] - m) / T, s = 1e-5 * (1 + fabs(lx) + fabs(g));
            c = lx + g;
            lo[t] = x[t] > -INFINITY ? c - s : -INFINITY;
            hi[t] = x[t] > -INFINITY ? c + s : -INFINITY;
        }
        if (c > best) best = c, best_lo = lo[t], w = t;
    }
    for (int t = 0; t < V; t++)
        if (t != w && hi[t] > -INFINITY && hi[t] >= best_lo) *amb = 1;
    free(lo);
    free(hi);
    return w;
}

int kref_spec_verify_sample(const float *logits, const int32_t *draft, const float *q, const float *params,
                            int B, int k, int V, double margin, int32_t *accepted, int32_t *bonus,
                            unsigned char *ambiguous)
{
    double *p = malloc(sizeof(double) * (size_t)V);
    if (!p) abort();
    int n_amb = 0;
    for (int b = 0; b < B; b++) {
        double T = params[(size_t)b * 4];
        int64_t seed = (int64_t)params[(size_t)b * 4 + 3];
        int amb = 0, n = k, tok = 0;
        for (int j = 0; j <= k; j++) {
            size_t row = ((size_t)b * (k + 1) + j) * V;
            const float *x = logits + row;
            int d = j < k ? draft[(size_t)b * k + j] : -1;
            double m = -INFINITY, z = 0;
            for (int t = 0; t < V; t++)
                m = fmax(m, x[t]);
            if (!(T > 0) || m == -INFINITY) { /* greedy position */
                int a = kref_argmax(x, V);
                if (j < k && a == d) continue;
                n = j, tok = a;
                break;
            }
            for (int t = 0; t < V; t++)
                z += (p[t] = exp((x[t] - m) / T));
            for (int t = 0; t < V; t++)
                p[t] /= z;
            if (d >= 0 && d < V) {
                double lhs = (double)kir_rand_ref(seed, -1 - j) * q[row + d], rhs = p[d];
                if (fabs(lhs - rhs) < margin * fmax(lhs, rhs)) amb = 1;
                if (lhs < rhs) continue;
            }
            n = j;
            tok = spec_draw(x, j < k ? q + row : NULL, p, V, m, T, seed, j, margin, &amb);
            break;
        }
        accepted[b] = n;
        bonus[b] = tok;
        ambiguous[b] = (unsigned char)amb;
        n_amb += amb;
    }
    free(p);
    return n_amb;
}

/* ---- quantized weights ---- */

static float kref_le_half(const unsigned char *p)
{
    return kref_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

void kref_qdequant(const char *wfmt, const void *w, const void *scales, const uint8_t *zeros, KirDtype t,
                   int N, int K, int group, float *out)
{
    const unsigned char *p = w;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            float *o = &out[(size_t)n * K + k];
            if (!strcmp(wfmt, "w4a16")) {
                /* the fragment order (kfam_qmatmul.c): word (k/2)%4 of the 32-k block, nibble (k/8)%4 +
                 * 4(k%2) */
                uint32_t word = ((const uint32_t *)w)[(size_t)n * (K / 8) + (k / 32) * 4 + (k / 2) % 4];
                int q = (int)((word >> (4 * ((k / 8) % 4 + 4 * (k % 2)))) & 15);
                size_t g = (size_t)n * (K / group) + k / group;
                int z = zeros ? zeros[g] & 127 : 8; /* 7-bit zero points (kfam_qmatmul.c) */
                *o = (float)(q - z) * (float)kref_get(scales, t, g);
            } else if (!strcmp(wfmt, "w8a16")) {
                *o = (float)((const int8_t *)w)[(size_t)n * K + k];
            } else if (!strcmp(wfmt, "fp8")) { /* group > 1: f32 scales [N, K/group] in f32(q * s) */
                *o = kref_f8e4m3_to_f32(((const uint8_t *)w)[(size_t)n * K + k]);
                if (group > 1) *o *= ((const float *)scales)[(size_t)n * (K / group) + k / group];
            } else if (!strcmp(wfmt, "q4_k")) { /* super-blocks of 256: d, dmin, scales[12], qs[128] */
                const unsigned char *blk = p + ((size_t)n * (K / 256) + k / 256) * 144, *sc = blk + 4;
                int j = k % 256, s = j / 32, q = (blk[16 + (j / 64) * 32 + j % 32] >> (4 * (s % 2))) & 15;
                int scale = s < 4 ? sc[s] & 63 : (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
                int min = s < 4 ? sc[s + 4] & 63 : sc[s + 4] >> 4 | (sc[s] >> 6) << 4;
                float d1 = kref_le_half(blk) * (float)scale, m1 = kref_le_half(blk + 2) * (float)min;
                *o = d1 * (float)q - m1;
            } else if (!strcmp(wfmt, "q6_k")) { /* ql[128], qh[64], i8 scales[16], d */
                const unsigned char *blk = p + ((size_t)n * (K / 256) + k / 256) * 210;
                int j = k % 256, h = j / 128, u = (j / 32) % 4, l = j % 32;
                int lo = blk[64 * h + l + 32 * (u % 2)] >> (4 * (u / 2)) & 15;
                int q = (lo | ((blk[128 + 32 * h + l] >> (2 * u)) & 3) << 4) - 32;
                *o = kref_le_half(blk + 208) * (float)(int8_t)blk[192 + 8 * h + l / 16 + 2 * u] * (float)q;
            } else {
                int q4_1 = !strcmp(wfmt, "q4_1"), q8 = !strcmp(wfmt, "q8_0");
                size_t bytes = q8 ? 34 : q4_1 ? 20 : 18;
                const unsigned char *blk = p + ((size_t)n * (K / 32) + k / 32) * bytes;
                int j = k % 32;
                float d = kref_le_half(blk);
                if (q8) {
                    *o = (float)(int8_t)blk[2 + j] * d;
                } else {
                    const unsigned char *qs = blk + (q4_1 ? 4 : 2);
                    int q = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
                    *o = q4_1 ? (float)q * d + kref_le_half(blk + 2) : (float)(q - 8) * d;
                }
            }
        }
}

void kref_qmatmul(const void *x, KirDtype xt, const float *xs, const float *w, const float *w2,
                  const void *chan, const void *chan2, KirDtype ct, const void *bias, const void *r,
                  KirDtype t, int M, int N, int K, const char *epilogue, double *out)
{
    double *xd = kref_to_double(x, xt, (size_t)M * K);
    double *wd = malloc(sizeof(double) * (size_t)N * K), *w2d = malloc(sizeof(double) * (size_t)N * K);
    if (!wd || !w2d) abort();
    for (size_t i = 0; i < (size_t)N * K; i++) {
        wd[i] = kref_round(w[i], t);
        w2d[i] = w2 ? kref_round(w2[i], t) : 0;
    }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            const double *a = xd + (size_t)m * K, *b = wd + (size_t)n * K, *b2 = w2d + (size_t)n * K;
            double acc = 0, acc2 = 0;
            for (int k = 0; k < K; k++)
                acc += a[k] * b[k];
            for (int k = 0; w2 && k < K; k++)
                acc2 += a[k] * b2[k];
            if (xs) acc *= xs[m], acc2 *= xs[m];
            if (chan) acc *= kref_get(chan, ct, (size_t)n);
            if (chan2) acc2 *= kref_get(chan2, ct, (size_t)n);
            size_t o = (size_t)m * N + n;
            if (!strcmp(epilogue, "bias")) acc += kref_get(bias, t, (size_t)n);
            if (!strcmp(epilogue, "residual")) acc = kref_round(acc, t) + kref_get(r, t, o);
            if (!strcmp(epilogue, "silu_mul")) acc = acc / (1 + exp(-acc)) * acc2;
            out[o] = acc;
        }
    free(xd);
    free(wd);
    free(w2d);
}
