/* fuzz_safetensors.c — the safetensors reader (runtime/rt_safetensors.c) and the weights layer over it
 * (rt_w_check, rt_w_read: float conversions in the file's own shape). Invariant besides "no crash, no
 * leak, no UB": every tensor the reader accepts lies inside the file, and its byte count agrees with its
 * shape and dtype. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/rt_safetensors.h"
#include "runtime/rt_weights.h"

enum { MAX_BYTES = 1 << 16 }; /* tensors read per input are at most this big */

static const char *dtype_of(RtStDtype d)
{
    return d == RT_ST_DTYPE_F32 ? "f32" : d == RT_ST_DTYPE_F16 ? "f16" : d == RT_ST_DTYPE_BF16 ? "bf16" : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_file("in.safetensors", data, size);
    RtStCheckpoint *ck = NULL;
    char err[512];
    if (rt_st_open(path, &ck, err, sizeof err) != KILN_OK) {
        if (!err[0] || strchr(err, '\n')) fz_fail("error not one line: '%s'", err);
        return 0;
    }
    for (int i = 0; i < rt_st_count(ck); i++) {
        const RtStTensor *t = rt_st_tensor_at(ck, i);
        if (t->file_offset + t->nbytes > size || t->file_offset + t->nbytes < t->nbytes)
            fz_fail("tensor %s ends past the file", t->name);
        if (t->nbytes != (uint64_t)t->n_elements * (uint64_t)rt_st_dtype_size(t->dtype))
            fz_fail("tensor %s: %llu bytes for %lld elements", t->name, (unsigned long long)t->nbytes,
                    (long long)t->n_elements);
        if (rt_st_find(ck, t->name) != t) fz_fail("tensor %s is not found by its name", t->name);
    }
    rt_st_close(ck);

    RtWeights *w = NULL;
    if (rt_w_open(path, &w, err, sizeof err) != KILN_OK) return 0; /* e.g. a header that starts with '{' */
    if (rt_st_open(path, &ck, err, sizeof err) != KILN_OK) fz_fail("a second open failed: %s", err);
    for (int i = 0; i < rt_st_count(ck) && i < 32; i++) {
        const RtStTensor *t = rt_st_tensor_at(ck, i);
        if (!dtype_of(t->dtype) || t->n_dims > RT_W_MAX_RANK) continue;
        for (int k = 0; k < 3; k++) { /* to f32, f16 and bf16 */
            const char *to = k == 0 ? "f32" : k == 1 ? "f16" : "bf16";
            int64_t nbytes = t->n_elements * (k == 0 ? 4 : 2);
            if (nbytes > MAX_BYTES) continue;
            RtWeightSpec s = {.name = t->name, .dtype = to, .rank = t->n_dims, .nbytes = nbytes};
            memcpy(s.shape, t->shape, sizeof(int64_t) * (size_t)t->n_dims);
            void *dst = malloc((size_t)nbytes + 1);
            if (dst && rt_w_check(w, &s, 1, err, sizeof err) == KILN_OK) rt_w_read(w, &s, dst, err, sizeof err);
            free(dst);
        }
    }
    rt_st_close(ck);
    rt_w_close(w);
    return 0;
}
