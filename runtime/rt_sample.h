/* rt_sample.h — the host's sampling path: what the graph's sampler (kfam_sample.c: temperature, top-k,
 * top-p) cannot express, for the rows of the requests that ask for it (docs/RUNTIME.md, "Where sampling
 * runs"). The row's logits come back from the device; penalties and logit bias adjust a copy; the token is
 * drawn as the device draws it (the same Gumbel noise, the same filters) with min-p besides. */
#ifndef KILN_RT_SAMPLE_H
#define KILN_RT_SAMPLE_H

#include <stdint.h>

#include "kiln.h"

/* Whether s asks for anything only this path does (penalties, logit bias, min-p). */
int rt_sample_on_host(const KilnSampling *s);

/* Adjusts the V logits x in place for a request whose tokens are prompt[0..n_prompt) then out[0..n_out):
 * repetition penalty r over the tokens of both (x / r where x > 0, x * r otherwise; once per distinct
 * token), then, over out, presence (x -= p once per distinct token) and frequency (x -= f per occurrence),
 * then s->logit_bias (added). count: V zeroed ints of scratch, left zeroed. */
void rt_sample_adjust(float *x, int V, const KilnSampling *s, const int32_t *prompt, int n_prompt,
                      const int32_t *out, int n_out, int32_t *count);

/* The token drawn from the V logits x with temperature T (<= 0: argmax, ties to the smallest id), top-k,
 * top-p and min-p as kfam_sample.c defines them (min-p: only tokens whose probability is at least min_p
 * times the most likely one's), the noise of seed (the device's kir_rand of seed and the column). scratch:
 * 2 V floats. */
int32_t rt_sample_row(const float *x, int V, float T, int top_k, float top_p, float min_p, int64_t seed,
                      float *scratch);

/* The device's uniform noise (ir/kir.c kir_rand_ref: the kernels' kir_rand), in [0, 1): a copy, since the
 * runtime links none of the compiler; test_engine checks the two agree. */
float rt_sample_rand(int64_t seed, int32_t counter);

#endif
