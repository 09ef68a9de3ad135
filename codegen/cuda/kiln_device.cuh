/* kiln_device.cuh — the device-side primitives that kiln's generated CUDA C calls (codegen/cuda).
 *
 * Primitives only, never whole kernels: every kernel comes from the kernel IR. The build embeds this file
 * into libkiln_codegen as a string (codegen/cuda/embed.cmake) and hands it to NVRTC as the in-memory
 * header "kiln_device.cuh", so generated sources say #include "kiln_device.cuh" and compile anywhere.
 *
 * Number formats (kir_ops.def): float tiles live in f32 registers holding values already rounded to their
 * dtype; kd_r<fmt> rounds an f32 to the format (to nearest even; f8 e4m3fn saturates to +-448). Memory
 * holds the raw encodings (kd_bf16, kd_f16, kd_f8 are their bit patterns).
 *
 * Contents: conversions; integer casts with the interpreter's saturation; the `rand` counter hash;
 * warp shuffles; vector loads/stores; cp.async; ldmatrix; mma.sync m16n8k16 (bf16/f16 -> f32).
 */
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

typedef unsigned short kd_bf16; /* bf16 bits */
typedef unsigned short kd_f16;  /* f16 bits */
typedef unsigned char kd_f8;    /* f8 e4m3fn bits */

/* ---- conversions ------------------------------------------------------------------------------------ */
__device__ __forceinline__ float kd_bf16_to_f32(kd_bf16 h)
{
    return __uint_as_float((unsigned)h << 16);
}
__device__ __forceinline__ kd_bf16 kd_f32_to_bf16(float x)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}
__device__ __forceinline__ float kd_f16_to_f32(kd_f16 h)
{
    return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ kd_f16 kd_f32_to_f16(float x)
{
    return __half_as_ushort(__float2half_rn(x));
}
__device__ __forceinline__ float kd_f8_to_f32(kd_f8 b)
{
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3)));
}
__device__ __forceinline__ kd_f8 kd_f32_to_f8(float x)
{
    return (kd_f8)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}
/* Rounds an f32 to a narrower format and back: the value a register of that dtype holds. */
/* sin/cos of f32 x with the argument reduced in f64 when |x| > 105615, where sinf/cosf leave their fast
 * path for a Payne-Hanek reduction through local memory (rope angles reach pos * 1.0 for long contexts):
 * x - k*2pi in f64 is exact to ~1e-11 there, then the fast path runs on the reduced f32 angle. */
__device__ __forceinline__ float kd_reduce_angle(float x)
{
    if (fabsf(x) <= 105615.0f) return x;
    const double d = (double)x, k = rint(d * 0.15915494309189535);
    return (float)fma(-k, 6.283185307179586232, d);
}
/* exp2 on the MUFU unit in one instruction (exp2f adds a denormal fix-up around it): relative error below
 * 2^-22; results under 2^-126 flush to 0 (exp2 is softmax's inner op). */
__device__ __forceinline__ float kd_exp2(float x)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float kd_sin(float x) { return sinf(kd_reduce_angle(x)); }
__device__ __forceinline__ float kd_cos(float x) { return cosf(kd_reduce_angle(x)); }
/* f32 of 0 <= x < 2^23, exactly: 2^23 + x assembled by its bits, less 2^23. */
__device__ __forceinline__ float kd_u23_to_f32(int x)
{
    return __int_as_float(0x4B000000 | x) - 8388608.0f;
}
__device__ __forceinline__ float kd_rbf16(float x)
{
    return kd_bf16_to_f32(kd_f32_to_bf16(x));
}
__device__ __forceinline__ float kd_rf16(float x)
{
    return kd_f16_to_f32(kd_f32_to_f16(x));
}
__device__ __forceinline__ float kd_rf8(float x)
{
    return kd_f8_to_f32(kd_f32_to_f8(x));
}
/* f32 -> bf16/f16 pair packed in one 32-bit register (low half = first), for mma operands. */
__device__ __forceinline__ unsigned kd_pack_bf16x2(float lo, float hi)
{
#if __CUDA_ARCH__ >= 800 /* one cvt for the pair */
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return (unsigned)kd_f32_to_bf16(lo) | ((unsigned)kd_f32_to_bf16(hi) << 16);
#endif
}
__device__ __forceinline__ unsigned kd_pack_f16x2(float lo, float hi)
{
#if __CUDA_ARCH__ >= 800
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return (unsigned)kd_f32_to_f16(lo) | ((unsigned)kd_f32_to_f16(hi) << 16);
#endif
}

/* (a & m) | o in one LOP3: written as and, or, ptxas keeps two (a SASS LOP3 takes one immediate; here one
 * constant is a register, set once outside the loops). */
__device__ __forceinline__ unsigned kd_lop3_mask_or(unsigned a, unsigned m, unsigned o)
{
    unsigned r;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(a), "r"(m), "r"(o));
    return r;
}
/* The 4-bit codes at bits sh..sh+3 and sh+4..sh+7 of w (sh a multiple of 8) as the b16 pair magic + q
 * (cg_cuda_nib.c): the byte moved to bit 0 and copied to bit 12 puts the second code at bit 16. */
__device__ __forceinline__ unsigned kd_nib_pair(unsigned w, int sh, unsigned magic)
{
    const unsigned b = __byte_perm(w, 0u, 0x4440u | ((unsigned)sh >> 3));
    return kd_lop3_mask_or(b * 0x1001u, 0x000f000fu, magic);
}
/* The 4-bit codes at bits sh..sh+3 and sh+16..sh+19 of w (the fragment order of qmatmul's w4a16 words) as
 * the b16 pair magic + q. */
__device__ __forceinline__ unsigned kd_nib_pair_lanes(unsigned w, int sh, unsigned magic)
{
    return kd_lop3_mask_or(w >> sh, 0x000f000fu, magic);
}
/* The bf16 bits of x rounded to nearest even (NaN: the quiet NaN 0x7fff, as kd_f32_to_bf16), in integer
 * ops (no asm: equal inputs share one computation). */
__device__ __forceinline__ unsigned kd_f32_to_bf16_bits(float x)
{
    const unsigned u = __float_as_uint(x);
    return (u & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
/* The pair (x, x) of a float that is a bf16 / f16 value, with plain ops (common subexpressions, unlike
 * a cvt in asm). */
__device__ __forceinline__ unsigned kd_splat_bf16x2(float x)
{
    return __byte_perm(__float_as_uint(x), 0u, 0x3232u);
}
__device__ __forceinline__ unsigned kd_splat_f16x2(float x)
{
    return (unsigned)kd_f32_to_f16(x) * 0x10001u;
}
/* b16 pair arithmetic, rounded once to nearest even (sm_80: bf16 as fma with 1 or -0). */
#define KD_B16X2(name, op, ty)                                                                            \
    __device__ __forceinline__ unsigned name(unsigned a, unsigned b)                                      \
    {                                                                                                     \
        unsigned r;                                                                                       \
        asm(op ".rn." ty " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));                                     \
        return r;                                                                                         \
    }
#if __CUDA_ARCH__ >= 900
KD_B16X2(kd_sub_bf16x2, "sub", "bf16x2")
KD_B16X2(kd_mul_bf16x2, "mul", "bf16x2")
#else
__device__ __forceinline__ unsigned kd_sub_bf16x2(unsigned a, unsigned b)
{
    unsigned r;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(b ^ 0x80008000u), "r"(0x3f803f80u), "r"(a));
    return r;
}
__device__ __forceinline__ unsigned kd_mul_bf16x2(unsigned a, unsigned b)
{
    unsigned r;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(0x80008000u));
    return r;
}
#endif
KD_B16X2(kd_sub_f16x2, "sub", "f16x2")
KD_B16X2(kd_mul_f16x2, "mul", "f16x2")
#undef KD_B16X2

/* Float -> integer: truncate, saturate to the type's range, NaN -> 0 (the interpreter's rule). The
 * hardware conversions to 32/64-bit already saturate and map NaN to 0. */
__device__ __forceinline__ int kd_f2i32(float x)
{
    return (int)x;
}
__device__ __forceinline__ long long kd_f2i64(float x)
{
    return (long long)x;
}
__device__ __forceinline__ signed char kd_f2i8(float x)
{
    return (signed char)max(-128, min(127, (int)x));
}
__device__ __forceinline__ unsigned char kd_f2u8(float x)
{
    return (unsigned char)max(0, min(255, (int)x));
}

/* ---- rand: kir.h's counter hash, bit for bit (kir_rand_ref) ------------------------------------------- */
__device__ __forceinline__ unsigned kd_mix32(unsigned x)
{
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}
__device__ __forceinline__ float kd_rand(long long seed, int counter)
{
    unsigned s = (unsigned)(unsigned long long)seed, hi = (unsigned)((unsigned long long)seed >> 32);
    unsigned h = kd_mix32((unsigned)counter ^ kd_mix32(s ^ 0x9e3779b9u) ^ hi);
    return (float)(h >> 8) * (1.0f / 16777216.0f);
}

/* ---- reductions --------------------------------------------------------------------------------------- */
/* Combining functions of `reduce`: float max/min return the non-NaN operand (fmaxf/fminf). */
__device__ __forceinline__ float kd_sum(float a, float b)
{
    return a + b;
}
__device__ __forceinline__ int kd_sum(int a, int b)
{
    return (int)((unsigned)a + (unsigned)b);
}
__device__ __forceinline__ long long kd_sum(long long a, long long b)
{
    return (long long)((unsigned long long)a + (unsigned long long)b);
}
__device__ __forceinline__ float kd_max(float a, float b)
{
    return fmaxf(a, b);
}
__device__ __forceinline__ float kd_min(float a, float b)
{
    return fminf(a, b);
}
template <typename T> __device__ __forceinline__ T kd_max(T a, T b)
{
    return a > b ? a : b;
}
template <typename T> __device__ __forceinline__ T kd_min(T a, T b)
{
    return a < b ? a : b;
}
/* Exchange with the lane `mask` away (all 32 lanes take part). 8/16-bit integers travel as int. */
__device__ __forceinline__ float kd_shfl_xor(float v, int mask)
{
    return __shfl_xor_sync(0xffffffffu, v, mask);
}
__device__ __forceinline__ int kd_shfl_xor(int v, int mask)
{
    return __shfl_xor_sync(0xffffffffu, v, mask);
}
__device__ __forceinline__ long long kd_shfl_xor(long long v, int mask)
{
    return __shfl_xor_sync(0xffffffffu, v, mask);
}
__device__ __forceinline__ signed char kd_shfl_xor(signed char v, int mask)
{
    return (signed char)__shfl_xor_sync(0xffffffffu, (int)v, mask);
}
__device__ __forceinline__ unsigned char kd_shfl_xor(unsigned char v, int mask)
{
    return (unsigned char)__shfl_xor_sync(0xffffffffu, (int)v, mask);
}
__device__ __forceinline__ bool kd_shfl_xor(bool v, int mask)
{
    return __shfl_xor_sync(0xffffffffu, (int)v, mask) != 0;
}

/* ---- vector memory access ------------------------------------------------------------------------------ */
/* kd_vec<BYTES>::type: the register type of one aligned access of BYTES (1..16) bytes. */
template <int B> struct kd_vec;
template <> struct kd_vec<1> {
    typedef unsigned char type;
};
template <> struct kd_vec<2> {
    typedef unsigned short type;
};
template <> struct kd_vec<4> {
    typedef unsigned type;
};
template <> struct kd_vec<8> {
    typedef uint2 type;
};
template <> struct kd_vec<16> {
    typedef uint4 type;
};
/* N elements of T at p (aligned to N * sizeof(T)) into e[0..N). NC: through the read-only path, for
 * memory that no thread writes during the kernel. */
template <int N, bool NC, typename T> __device__ __forceinline__ void kd_vload(T (&e)[N], const T *p)
{
    typedef typename kd_vec<N * sizeof(T)>::type V;
    union {
        V v;
        T e[N];
    } u;
    if (NC) u.v = __ldg((const V *)p);
    else u.v = *(const V *)p;
#pragma unroll
    for (int i = 0; i < N; i++) e[i] = u.e[i];
}
template <int N, typename T> __device__ __forceinline__ void kd_vstore(T *p, const T (&e)[N])
{
    typedef typename kd_vec<N * sizeof(T)>::type V;
    union {
        V v;
        T e[N];
    } u;
#pragma unroll
    for (int i = 0; i < N; i++) u.e[i] = e[i];
    *(V *)p = u.v;
}

/* ---- shared memory and asynchronous copies (sm_80+) --------------------------------------------------- */
__device__ __forceinline__ unsigned kd_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}
/* BYTES (4, 8 or 16) from global g to shared s; when !pred nothing is read and s is zero-filled. */
template <int BYTES> __device__ __forceinline__ void kd_cp_async(void *s, const void *g, bool pred)
{
    unsigned d = kd_smem_addr(s);
    int n = pred ? BYTES : 0;
    if (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(g), "r"(n) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(g), "n"(BYTES), "r"(n)
                     : "memory");
}
/* The aligned 4-byte word holding the B-byte element at g (B = 1, 2; g aligned to B), copied only up to
 * and including the element (src-size: nothing past it is read, where the buffer may end); the rest is
 * zero. */
template <int B> __device__ __forceinline__ void kd_cp_async_sub(void *s, const void *g, bool pred)
{
    const unsigned off = (unsigned)(size_t)g & 3;
    const int n = pred ? (int)off + B : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(kd_smem_addr(s)),
                 "l"((const char *)g - off), "r"(n)
                 : "memory");
}
__device__ __forceinline__ void kd_cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/* Waits until at most N committed groups of this thread are still in flight. */
template <int N> __device__ __forceinline__ void kd_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ---- tensor cores: ldmatrix + mma.sync m16n8k16 (sm_80+) --------------------------------------------- */
/* Four 8x8 b16 matrices; lane l gives the address of row l % 8 of matrix l / 8 (16-byte aligned). */
__device__ __forceinline__ void kd_ldmatrix_x4(unsigned (&r)[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(kd_smem_addr(p))
                 : "memory");
}
__device__ __forceinline__ void kd_ldmatrix_x4_trans(unsigned (&r)[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(kd_smem_addr(p))
                 : "memory");
}
/* Two matrices: lanes 0..15 give the addresses (the others must still be valid shared addresses). */
__device__ __forceinline__ void kd_ldmatrix_x2(unsigned (&r)[2], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(kd_smem_addr(p))
                 : "memory");
}
__device__ __forceinline__ void kd_ldmatrix_x2_trans(unsigned (&r)[2], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(kd_smem_addr(p))
                 : "memory");
}
/* (c0..c3) += a @ b on one m16n8k16 tile. Fragments (g = lane / 4, t = lane % 4): a = rows {g, g+8} x cols
 * {2t, 2t+1, 2t+8, 2t+9} as ldmatrix_x4 loads them; b = k {2t, 2t+1, 2t+8, 2t+9} x col g; c0, c1 =
 * (g, 2t..2t+1), c2, c3 = (g+8, 2t..2t+1). */
__device__ __forceinline__ void kd_mma_bf16(float &c0, float &c1, float &c2, float &c3, const unsigned (&a)[4],
                                           const unsigned (&b)[2])
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void kd_mma_f16(float &c0, float &c1, float &c2, float &c3, const unsigned (&a)[4],
                                           const unsigned (&b)[2])
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* ---- Hopper warpgroup MMA (sm_90a only) ---------------------------------------------------------------- */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Orders this thread's generic-proxy writes to shared memory (plain stores, cp.async) before later reads
 * by the async proxy (wgmma, TMA). Each writing thread, before the barrier. */
__device__ __forceinline__ void kd_fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void kd_wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void kd_wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
/* Waits until at most N committed wgmma groups of the warpgroup are pending. */
template <int N> __device__ __forceinline__ void kd_wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Keeps an accumulator register in place across asynchronous wgmma (the compiler must not move it). */
__device__ __forceinline__ void kd_fence_operand(float &r)
{
    asm volatile("" : "+f"(r)::"memory");
}
__device__ __forceinline__ void kd_fence_operand(int &r)
{
    asm volatile("" : "+r"(r)::"memory");
}
/* Descriptor of a K-major operand tile in shared memory with the 128-byte swizzle: rows of 64 b16 (128 B,
 * 16-byte chunk j of row r stored at chunk j ^ (r % 8)), 8-row groups 1024 B apart, the atom 1024-byte
 * aligned. p may point 32*i bytes into a row group to select the k16 slice i. */
__device__ __forceinline__ unsigned long long kd_wgmma_desc_sw128(const void *p)
{
    unsigned long long a = kd_smem_addr(p);
    return ((a & 0x3ffffull) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}
/* A descriptor d of a tile moved by `bytes` (a multiple of 16) further into shared memory: the start address
 * field (bits 0-13, address / 16) takes the sum without a carry, as shared addresses stay below 256 KiB; in
 * 32-bit halves so a loop over k slices adds one constant per wgmma instead of rebuilding it. */
__device__ __forceinline__ unsigned long long kd_wgmma_desc_at(unsigned long long d, unsigned bytes)
{
    return (d & 0xffffffff00000000ull) | (unsigned)((unsigned)d + (bytes >> 4));
}
/* Descriptor of an N-major operand tile (B with rows of N) with the 128-byte swizzle: atoms of 64 columns,
 * row k of an atom at 128 * k bytes (16-byte chunk j stored at chunk j ^ (k % 8)), 8-row groups 1024 B
 * apart, atoms `atom` bytes apart (the leading byte offset), each 1024-byte aligned. p may point 16 rows
 * (2048 bytes) at a time into the atom to select a k16 slice. */
__device__ __forceinline__ unsigned long long kd_wgmma_desc_mn_sw128(const void *p, unsigned atom)
{
    unsigned long long a = kd_smem_addr(p);
    return ((a & 0x3ffffull) >> 4) | ((unsigned long long)(atom >> 4) << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}
#endif
