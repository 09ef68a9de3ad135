/* test_weights_golden.h — golden data for test_weights.c (included there once): GGUF blocks dequantized by
 * gguf-py, a tiny GGUF and a tiny safetensors file as the reference writers made them. */
#ifndef KILN_TEST_WEIGHTS_GOLDEN_H
#define KILN_TEST_WEIGHTS_GOLDEN_H

#include <stdint.h>

/* ---- golden data ----------------------------------------------------------------------------------------
 * Made once with gguf-py 0.19.0 (pip install gguf numpy) and safetensors 0.8.0, so this test needs no Python:
 *   rng = np.random.default_rng(1234)
 *   for qt in (Q4_0, Q4_1, Q8_0):                  # 3 blocks each: 2 quantized by gguf-py, 1 crafted
 *       x = (rng.standard_normal(64) * 0.7).astype(np.float32)
 *       q = gguf.quants.quantize(x.reshape(1, 64), qt).tobytes()
 *       raw = bytearray(rng.integers(0, 256, block_bytes, dtype=np.uint8).tobytes())
 *       raw[0:2] = np.float16(-0.0123).tobytes()       # d; for Q4_1 also m = raw[2:4] = 0x83ff (-subnormal)
 *       src = q + raw; want = gguf.quants.dequantize(src as (1, -1) uint8, qt).view(np.uint32)
 *   Q4_K, Q6_K (numpy 2.4.6): 2 random super-blocks each with chosen halves (gguf-py cannot quantize them):
 *       rng = np.random.default_rng(4242)
 *       q4_k = bytearray(rng.integers(0, 256, 2 * 144, dtype=np.uint8).tobytes())
 *       q4_k[0:4] = np.array([0.01234, 2.5e-6], np.float16).tobytes()     # block 0: d, dmin (subnormal)
 *       q4_k[144:148] = np.array([-0.0457, 0.00781], np.float16).tobytes() # block 1: negative d
 *       q4_k[4:12] = bytes((b & 63) | h << 6 for b, h in zip(q4_k[4:12], [1, 2, 3, 1, 2, 3, 2, 1]))
 *                                       # every top-bit pair nonzero: sub-blocks 4-7 of block 0 use them
 *       q6_k = bytearray(rng.integers(0, 256, 2 * 210, dtype=np.uint8).tobytes())
 *       q6_k[192:194] = bytes([0x80, 0x7f])                               # block 0: scales -128, 127
 *       q6_k[208:210] = np.float16(0.03119).tobytes()
 *       q6_k[418:420] = np.float16(-4.5e-6).tobytes()                     # block 1: negative subnormal d
 *       for src, qt in (q4_k, Q4_K), (q6_k, Q6_K):
 *           want = gguf.quants.dequantize(np.frombuffer(src, np.uint8).reshape(1, -1), qt).view(np.uint32)
 *   tiny_gguf: gguf.GGUFWriter(path, "llama") with add_name("tiny"), llama.block_count u32 2, test.i32 -5,
 *       llama.rope.freq_base f32 10000, test.bool true, test.u64 2^40, tokenizer.ggml.tokens
 *       ["<s>", "hello", "été", ""], tokenizer.ggml.scores [0, -1.5, -2.25, 3], tokenizer.ggml.token_type
 *       [3, 1, 1, 6]; tensors q4 (Q4_0 of a (2, 32) f32 array, rng = default_rng(7)), h (f16 [1, -2, 0.5]),
 *       f (f32 [[1, 2], [3, 4]]).
 *   tiny_st: safetensors.numpy.save_file({"b": f32 [[1,2,3],[4,5,6]], "a": arange(3, int64),
 *       "e": f16 zeros (0, 4)}, path, metadata={"format": "np"}).
 *   F16_FNV: FNV-1a 64 of the little-endian f32 bits of np.arange(65536, dtype=uint16).view(float16)
 *       .astype(float32), i.e. every half converted as numpy does (NaN payloads kept). */
/* q4_0: 54 bytes, 96 values */
static const char q4_0_src[] = "\x14\xb4\x7c\x38\x76\xb8\x76\x60\x5c\xb5\x6d\x77\x89\x84\xaa\xa7\x4b\x7e\xd7"
                               "\xb3\x79\x4f\x9b\x69\x9c\x8c\x36\x59\xbd\x0c\xb9\x65\x7c\x83\x79\x8d\x4c\xa2"
                               "\x79\xad\xb8\x85\xdf\x9c\xf7\x19\xef\xb6\xea\xf2\xc4\x47\xb2\xfb";
static const uint32_t q4_0_want[96] = {
    0xbf828000, 0x80000000, 0x3f028000, 0x80000000, 0x3f028000, 0x40028000, 0xbf828000, 0x3f43c000,
    0xbfa32000, 0x3e828000, 0xbe828000, 0x3f828000, 0xbf028000, 0x3e828000, 0xbf43c000, 0xbfc3c000,
    0x3e828000, 0x3fa32000, 0x3e828000, 0xbf43c000, 0x3e828000, 0x3f028000, 0x3f43c000, 0xbf43c000,
    0x3f028000, 0x3e828000, 0x80000000, 0x80000000, 0xbf028000, 0xbf028000, 0x3f828000, 0x3e828000,
    0xbe7ae000, 0xbfdb8400, 0xbf3c2800, 0xbe7ae000, 0xbf7ae000, 0xbf7ae000, 0x3efae000, 0xbe7ae000,
    0xbf9ccc00, 0xbf7ae000, 0xbe7ae000, 0x3f3c2800, 0xbf7ae000, 0x3f9ccc00, 0xbe7ae000, 0xbf9ccc00,
    0x3e7ae000, 0x3f7ae000, 0xbe7ae000, 0x3efae000, 0xbe7ae000, 0x80000000, 0x3f9ccc00, 0x3f3c2800,
    0xbf3c2800, 0x3ffae000, 0xbf3c2800, 0x3efae000, 0x3e7ae000, 0x80000000, 0x3e7ae000, 0x80000000,
    0xbc498000, 0xbd7be000, 0x80000000, 0x3d172000, 0xbdb05000, 0xbd498000, 0x3c498000, 0xbc498000,
    0xbdb05000, 0x3cc98000, 0xbcc98000, 0x3d972000, 0x3d498000, 0x3c498000, 0x3d972000, 0xbd172000,
    0x3c498000, 0xbcc98000, 0xbd172000, 0x80000000, 0xbd7be000, 0xbc498000, 0xbdb05000, 0x3db05000,
    0xbd972000, 0xbd172000, 0xbd972000, 0xbdb05000, 0xbd498000, 0x3d498000, 0xbd172000, 0xbdb05000};
/* q4_1: 60 bytes, 96 values */
static const char q4_1_src[] =
    "\xfb\x32\xfc\xbc\x67\x3b\xf5\xab\x65\x6b\xb9\x57\xb9\x83\x16\x81\x90\x79\x95\xa9\x22\x32\x2f\xbd\x55\xbf"
    "\xc7\x9a\x01\x9a\x39\x85\x79\x39\x2a\xa9\xf5\x77\x81\x57\x4c\xa2\xff\x83\xc5\x09\xb9\xf1\x8c\xf6\x2b\x24"
    "\xe0\xa3\x1a\x04\xe9\xfc\x57\xf6";
static const uint32_t q4_1_want[96] = {
    0x3e8fd000, 0x3f93a400, 0xbe1f2000, 0x3f93a400, 0xbe1f2000, 0x3f93a400, 0x3f379800, 0x3e8fd000,
    0x3f379800, 0xbf177800, 0x3d808000, 0xbf839400, 0xbf9f8000, 0x3f379800, 0xbe1f2000, 0x3f379800,
    0x3d808000, 0xbf177800, 0x4001aa00, 0x3f6f7000, 0x3d808000, 0x3d808000, 0x3f93a400, 0xbe1f2000,
    0x3f93a400, 0x3eff8000, 0xbf839400, 0x3eff8000, 0x3f379800, 0x3e8fd000, 0x3f379800, 0x3f6f7000,
    0xbeace000, 0x3fca1800, 0x3d3b0000, 0x3f1ee000, 0xbf8d5800, 0x3f1ee000, 0x3edba000, 0xbeace000,
    0x3edba000, 0x3edba000, 0x3f1ee000, 0x3edba000, 0xbeace000, 0x3d3b0000, 0xbf8d5800, 0x3d3b0000,
    0xbeace000, 0x3f4ff000, 0x3f808000, 0x3edba000, 0xbfa5e000, 0x3edba000, 0xbf389000, 0x3e730000,
    0x3d3b0000, 0xbf389000, 0xbf69a000, 0x3f1ee000, 0x3fca1800, 0x3d3b0000, 0x3e730000, 0xbeace000,
    0xbd7c1ff0, 0xbde2cff8, 0xbde2cff8, 0xbc4a7fc0, 0xbe172ffc, 0xbd973ff8, 0xbe0a97fc, 0xbd49bff0,
    0xb87fc000, 0xbd175ff0, 0xbdfbfff8, 0xbd49bff0, 0xbde2cff8, 0xbe172ffc, 0xbdb06ff8, 0xbd973ff8,
    0xbe172ffc, 0xb87fc000, 0xbe0a97fc, 0xbe3cf7fc, 0xbdc99ff8, 0xbe3cf7fc, 0xbcc9ffe0, 0xbcc9ffe0,
    0xbe305ffc, 0xbdfbfff8, 0xbc4a7fc0, 0xb87fc000, 0xbe305ffc, 0xbe3cf7fc, 0xbd7c1ff0, 0xbe3cf7fc};
/* q8_0: 102 bytes, 96 values */
static const char q8_0_src[] =
    "\xca\x21\x05\x0c\xed\x07\xea\x53\xfb\x10\x3c\x0c\x19\x8f\xf1\x77\x18\x3f\x18\x75\xd2\xce\x29\x31\x14\x12"
    "\xd7\x40\x02\x1f\xe2\x7f\xe4\x0a\xb4\x23\xcd\xda\xfe\xda\x06\xd9\x06\x01\x39\xe9\xcd\xdb\x9b\x9a\x2f\x63"
    "\xee\x04\xeb\x2c\xf8\xfa\xf9\xb5\x26\xc7\x67\x3f\x09\x81\x02\x22\x4c\xa2\x6f\x1e\x0e\x07\x8b\xce\x78\x0d"
    "\x79\xc8\x53\xda\xf5\x0d\xe9\xd0\x2f\xed\x62\xe3\x53\x19\x9a\xde\x80\x8e\xa5\x41\xa0\x8d\xd3\x51";
static const uint32_t q8_0_want[96] = {
    0x3d679000, 0x3e0af000, 0xbe5bfc00, 0x3da21800, 0xbe7eb800, 0x3f703f00, 0xbd679000, 0x3e394000,
    0x3f2dac00, 0x3e0af000, 0x3e90ba00, 0xbfa38a80, 0xbe2dac00, 0x3fac3980, 0x3e8af000, 0x3f365b00,
    0x3e8af000, 0x3fa95480, 0xbf052600, 0xbf10ba00, 0x3eed5a00, 0x3f0dd500, 0x3e679000, 0x3e506800,
    0xbeed5a00, 0x3f394000, 0x3cb94000, 0x3eb37600, 0xbeadac00, 0x3fb7cd80, 0xbea21800, 0x3de79000,
    0xbf446e00, 0xbf125c00, 0xbcf68000, 0xbf125c00, 0x3db8e000, 0xbf163600, 0x3db8e000, 0x3c768000,
    0x3f5b8a00, 0xbeb12c00, 0xbf446e00, 0xbf0e8200, 0xbfc28100, 0xbfc46e00, 0x3f350600, 0x3fbea700,
    0xbe8aa800, 0x3d768000, 0xbea1c400, 0x3f297800, 0xbdf68000, 0xbdb8e000, 0xbdd7b000, 0xbf906f00,
    0x3f125c00, 0xbf5b8a00, 0x3fc65b00, 0x3f72a600, 0x3e0aa800, 0xbff49300, 0x3cf68000, 0x3f02f400,
    0xbfaebd00, 0xbebce800, 0xbe305000, 0xbdb05000, 0x3fb82f00, 0x3f1d6c00, 0xbfbce800, 0xbe23b800,
    0xbfbe7b00, 0x3f305000, 0xbf82a900, 0x3eef4800, 0x3e0a8800, 0xbe23b800, 0x3e90d400, 0x3f172000,
    0xbf13fa00, 0x3e6f4800, 0xbf9a4600, 0x3eb69c00, 0xbf82a900, 0xbe9d6c00, 0x3fa09200, 0x3ed61800,
    0x3fc98000, 0x3fb37600, 0x3f8f4100, 0xbf4ca600, 0x3f972000, 0x3fb50900, 0x3f0dae00, 0xbf7f0600};

/* q4_k: 288 bytes, 512 values */
static const char q4_k_src[] =
    "\x51\x22\x2a\x00\x77\xa1\xc1\x48\x82\xc3\x99\x5b\x91\x8d\xe6\xab\xff\x7b\x71\x1a\xb1\xfe\xc4\x3c\xbe"
    "\xeb\x6c\xb6\x70\x2d\xf1\x2d\x6b\xb9\xab\xd9\x1b\x54\xbc\x58\x5b\x2c\x77\x07\x27\xae\xf0\x26\x61\x94"
    "\xd8\x21\x5f\xd8\xb9\x4f\xa3\x0c\xb5\xf1\x01\x88\x2f\x3d\xd0\x18\x87\xeb\x51\x92\x26\x8b\x50\xf0\x54"
    "\xef\xf2\xf1\xee\xea\x54\x37\x9d\x07\x39\x55\xbb\x71\x47\x25\xe2\x89\x55\xfa\xa1\xc2\x8d\xbd\x6b\xbb"
    "\xb0\x99\x45\x93\xb5\xe8\xcf\xa7\x72\xd6\x0a\x83\x05\x4a\x03\x0b\xba\xa7\x3b\xa8\x95\x72\x40\xd3\x61"
    "\xe6\x5c\xf2\xbe\xb0\xc9\x71\xb9\x57\x51\xea\x62\x2a\x7c\x0e\x83\x4c\x61\xb8\xd9\xa9\xff\x1f\x5e\xd6"
    "\x6c\x1f\x7d\x1a\x8e\x44\xa9\x99\xca\xe8\x58\x19\x1a\x9d\x26\xa7\x99\xb6\xe5\xd5\x56\x50\x68\x0f\x72"
    "\x5a\x06\x47\x4b\x6d\xd8\x7f\xab\x38\x1b\x7f\x7e\xf0\x21\x09\x01\xea\x4d\x99\xc0\xb4\xdc\xdd\xd0\xd0"
    "\x9e\x5d\xd4\x20\x14\xc7\x1e\x57\x2a\x94\x7c\xb8\x0b\x3f\x7b\xf6\x9f\x6a\x6a\x4b\x57\xab\x0c\xaf\x0b"
    "\x9a\xd9\x77\xdd\x6d\x51\x09\xd7\xb3\xc2\x80\x0a\x0b\x88\x62\xe4\xdf\xa4\x19\x8f\xc9\x5f\x24\x97\x69"
    "\x43\x4b\xc5\x23\xad\x5a\x23\xd2\xfd\x41\x6c\x6e\xbc\xf7\x14\xd6\xc8\xf0\x58\x65\x78\x98\x07\xe9\x3d"
    "\x87\x88\x75\x52\x65\x28\x46\x44\x94\x3e\xab\x12\x2f";
static const uint32_t q4_k_want[512] = {
    0x4122d843, 0x40eed6c6, 0x3f2db32c, 0x40d92056, 0x3f2db32c, 0x4117fd0b, 0x402db36b, 0x4102469b,
    0x4117fd0b, 0x40eed6c6, 0x4102469b, 0x40824696, 0xb6a80000, 0x410d21d3, 0x3f2db32c, 0x410d21d3,
    0x40eed6c6, 0x40c369e6, 0x40eed6c6, 0x40c369e6, 0x40eed6c6, 0x402db36b, 0x4102469b, 0x40adb376,
    0x40eed6c6, 0x4102469b, 0x4097fd06, 0x4097fd06, 0x4097fd06, 0x4117fd0b, 0xb6a80000, 0x40824696,
    0x40c369e0, 0x403662c0, 0x403662c0, 0x3ed07004, 0x408f4da0, 0x40c369e0, 0x409c54b0, 0x3f9c5481,
    0x408f4da0, 0x40b662d0, 0x401c54a0, 0x408f4da0, 0x403662c0, 0x3f507082, 0x40c369e0, 0x3f507082,
    0x401c54a0, 0x408f4da0, 0x40824690, 0x40a95bc0, 0x3ed07004, 0x40024680, 0x408f4da0, 0x40024680,
    0x40024680, 0x3f507082, 0x403662c0, 0xb6fc0000, 0x3f507082, 0x40824690, 0x40c369e0, 0x3f507082,
    0x3c491980, 0x3d49de60, 0x3dc9ff30, 0x3c491980, 0x3e3d6d98, 0x3dc9ff30, 0x3de34330, 0x3e3d6d98,
    0x3d175660, 0x3e178798, 0x3d7c6660, 0x3c491980, 0x3c491980, 0x3dc9ff30, 0x3e3d6d98, 0x3e242998,
    0xb8834000, 0x3dc9ff30, 0x3db0bb30, 0x3e0ae598, 0x3c491980, 0x3cc99cc0, 0x3d977730, 0x3e0ae598,
    0xb8834000, 0xb8834000, 0x3d49de60, 0x3e3d6d98, 0x3cc99cc0, 0x3c491980, 0x3e30cb98, 0x3dfc8730,
    0x3f179392, 0x3f635f92, 0x3fa437c9, 0x3e4a0e48, 0x3efc9f24, 0x3fa437c9, 0x3f8af3c9, 0x3eca1724,
    0x3f7ca392, 0xb88dc000, 0x3f8af3c9, 0x3fbd7bc9, 0xb88dc000, 0x3f4a1b92, 0x3e4a0e48, 0x3e978f24,
    0x3fa437c9, 0x3dc9fc90, 0x3f4a1b92, 0x3fb0d9c9, 0x3efc9f24, 0x3f635f92, 0x3e4a0e48, 0x3f4a1b92,
    0x3efc9f24, 0x3fbd7bc9, 0x3efc9f24, 0x3fb0d9c9, 0x3fbd7bc9, 0x3fbd7bc9, 0x3fb0d9c9, 0x3fb0d9c9,
    0x3f56bb46, 0x3fbbe663, 0x402e7bf2, 0x3fbbe663, 0x3ff196e3, 0x3f8635e3, 0x4013a3b2, 0x3e56a718,
    0x3fbbe663, 0x3f8635e3, 0x3ed6b48c, 0x3ff196e3, 0x3f8635e3, 0x40063792, 0x3e56a718, 0x3ed6b48c,
    0x402e7bf2, 0x402e7bf2, 0x4013a3b2, 0x4013a3b2, 0xb8d74000, 0x3ff196e3, 0x3f8635e3, 0x3f210ac6,
    0x3f8635e3, 0x3fd6bea3, 0x40495432, 0x3fbbe663, 0x3ed6b48c, 0x3fa10e23, 0x40063792, 0x3f210ac6,
    0x4031a3d4, 0x3fd52928, 0x409fe12a, 0xb9130000, 0x3fd52928, 0x4031a3d4, 0x40c368ca, 0x4078b314,
    0x400e1c34, 0x3f8e19e8, 0x40f8b43a, 0x408e1d5a, 0x4031a3d4, 0x41053c05, 0x40b1a4fa, 0x40d52c9a,
    0x408e1d5a, 0x40c368ca, 0x40552b74, 0x40c368ca, 0x40c368ca, 0x409fe12a, 0x400e1c34, 0x409fe12a,
    0x40c368ca, 0x40f8b43a, 0x40d52c9a, 0x40b1a4fa, 0x4078b314, 0x40e6f06a, 0xb9130000, 0x408e1d5a,
    0x40552bdd, 0x40d52cce, 0x3fffccba, 0x40ea7e2e, 0x40d52cce, 0x409538ae, 0x40ea7e2e, 0x40aa8a0e,
    0x40552bdd, 0x3faa873a, 0xb8f18000, 0x3fffccba, 0x3f2a8374, 0x407fce9d, 0x40ffcf8e, 0x3faa873a,
    0x41153927, 0xb8f18000, 0x40bfdb6e, 0x3f2a8374, 0x40bfdb6e, 0x409538ae, 0x3f2a8374, 0x40d52cce,
    0x3faa873a, 0x40d52cce, 0x40ffcf8e, 0x41153927, 0x3fffccba, 0x40ffcf8e, 0x3f2a8374, 0x40aa8a0e,
    0xb8888000, 0x3faa88de, 0xb8888000, 0xb8888000, 0x406a7e0f, 0x40552caf, 0x3f7fcc3c, 0x40552caf,
    0x403fdb4f, 0x4015388f, 0x3faa88de, 0x408a9068, 0x3fffce5e, 0x40953918, 0x3fd52b9e, 0x409fe1c8,
    0x406a7e0f, 0x406a7e0f, 0x407fcf6f, 0x4015388f, 0x406a7e0f, 0x3fd52b9e, 0x3fd52b9e, 0x40953918,
    0x3fffce5e, 0x3f2a86bc, 0x4015388f, 0xb8888000, 0x402a89ef, 0x3faa88de, 0x3fffce5e, 0x406a7e0f,
    0xc1370d0c, 0xc14cfacc, 0xc162e88c, 0xc19258e6, 0xc10b318c, 0xc1211f4c, 0xc14cfacc, 0xc10b318c,
    0xc0ea8798, 0xc0ea8798, 0xc10b318c, 0xbef3e180, 0xc1370d0c, 0xc1a846a6, 0xc04dea30, 0xc162e88c,
    0xc10b318c, 0xc1211f4c, 0xc178d64c, 0xc19258e6, 0xc1370d0c, 0xc1a846a6, 0xc178d64c, 0xc1370d0c,
    0xc178d64c, 0xc1a846a6, 0xc19d4fc6, 0xbef3e180, 0xbfec6660, 0xc14cfacc, 0xbfec6660, 0xc162e88c,
    0xc0a74eb0, 0xbf9aa2c0, 0xbf9aa2c0, 0xc113fa58, 0xc00da460, 0xc1240f18, 0xc113fa58, 0xc13423d8,
    0xc1646218, 0xc1544d58, 0xc0a74eb0, 0xc0a74eb0, 0xc0c77830, 0xbe4fe600, 0xc0e7a1b0, 0xc0a74eb0,
    0xbe4fe600, 0xc0872530, 0xc0872530, 0xc0c77830, 0xc1544d58, 0xc0e7a1b0, 0xc1240f18, 0xc04df760,
    0xbf9aa2c0, 0xc0e7a1b0, 0xc0e7a1b0, 0xc17476d8, 0xc00da460, 0xbe4fe600, 0xbe4fe600, 0xc1646218,
    0xc1d1eda4, 0xc1919aa4, 0xbddfe400, 0xc10265c8, 0xc1c1d8e4, 0xc1d1eda4, 0xbddfe400, 0xbddfe400,
    0xc1e20264, 0xc1d1eda4, 0xc10265c8, 0xbddfe400, 0xc10265c8, 0xc162e248, 0xc1e20264, 0xc162e248,
    0xc1a1af64, 0xc10265c8, 0xc1c1d8e4, 0xc18185e4, 0xc1b1c424, 0xc1f21724, 0xc1b1c424, 0xc142b8c8,
    0xc1f21724, 0xc1a1af64, 0xc1a1af64, 0xc1b1c424, 0xc162e248, 0xc1b1c424, 0xc1c1d8e4, 0xc1f21724,
    0xc0b646e0, 0xc14c6fd0, 0xc1883538, 0xc179c190, 0xc19389a8, 0xc19389a8, 0xc19389a8, 0xc19389a8,
    0xc14c6fd0, 0xc0e398a0, 0xc19389a8, 0xc03746c0, 0xbfb94680, 0xc1883538, 0xbfb94680, 0xc0e398a0,
    0xc03746c0, 0xc14c6fd0, 0xc11f1e10, 0xc179c190, 0xbcffe000, 0xc088f520, 0xc11f1e10, 0xc1aa3288,
    0xc14c6fd0, 0xc1087530, 0xc1087530, 0xc0b646e0, 0xc0e398a0, 0xc16318b0, 0xbcffe000, 0xc16318b0,
    0xc14c42f8, 0xc139fcd8, 0xc127b6b8, 0xc1032a78, 0xc170cf38, 0xc170cf38, 0xbfac2dc0, 0xc127b6b8,
    0xc1032a78, 0xc06847e0, 0xc01f2f60, 0xbe4fe600, 0xc139fcd8, 0xc14c42f8, 0xc1157098, 0xc01f2f60,
    0xc098b030, 0xc18aadbc, 0xc098b030, 0xc127b6b8, 0xc18aadbc, 0xc127b6b8, 0xc18aadbc, 0xc098b030,
    0xc1032a78, 0xc127b6b8, 0xc06847e0, 0xc14c42f8, 0xc0bd3c70, 0xc06847e0, 0xc170cf38, 0xc139fcd8,
    0xbd8fee00, 0xc1bc0d7e, 0xc207b0df, 0xc192635e, 0xc207b0df, 0xc17b1c9c, 0xc151727c, 0xbd8fee00,
    0xc207b0df, 0xc1e5b79e, 0xc1fa8cae, 0xc1a7386e, 0xbd8fee00, 0xbd8fee00, 0xc1a7386e, 0xc17b1c9c,
    0xc2121b67, 0xc207b0df, 0xc1d0e28e, 0xc02b27f0, 0xc1a7386e, 0xc1fa8cae, 0xc151727c, 0xc0a8e838,
    0xc1bc0d7e, 0xc17b1c9c, 0xc127c85c, 0xc127c85c, 0xc1fa8cae, 0xc0a8e838, 0xc1d0e28e, 0xc151727c,
    0xc07a0c40, 0xc02e0740, 0xc17c8f90, 0xbfc40480, 0xc1698e50, 0xc187c868, 0xc1698e50, 0xc10a8810,
    0xc0a308a0, 0xc0ef0da0, 0xc11d8950, 0xbeafea00, 0xc11d8950, 0xc0c90b20, 0xc11d8950, 0xc11d8950,
    0xc10a8810, 0xc1308a90, 0xc17c8f90, 0xc10a8810, 0xc11d8950, 0xc0c90b20, 0xc02e0740, 0xc0c90b20,
    0xc11d8950, 0xc0ef0da0, 0xc0a308a0, 0xc0a308a0, 0xc187c868, 0xc1568d10, 0xc02e0740, 0xc1914908,
    0xbf771880, 0xc09f8910, 0xc0b6ed10, 0xbfd91c40, 0xc01b5620, 0xc01b5620, 0xc0882510, 0xc0b6ed10,
    0xbf198880, 0xc09f8910, 0xc093d710, 0xc0b6ed10, 0xc003f220, 0xc01b5620, 0xc032ba20, 0xc0618220,
    0xbe6fe200, 0xc0ab3b10, 0xbfaa5440, 0xc04a1e20, 0xc04a1e20, 0xc032ba20, 0xc003f220, 0xc01b5620,
    0xbf771880, 0xbfd91c40, 0xbfd91c40, 0xc0618220, 0xbfaa5440, 0xc078e620, 0xbf198880, 0xbf771880};
/* q6_k: 420 bytes, 512 values */
static const char q6_k_src[] =
    "\xc3\x0d\x3d\x99\xfe\x53\x05\x47\x99\xfb\x3a\x8f\x5a\xdf\xde\xb7\xce\x5c\x28\x1d\x45\x25\xc1\xea\xb3"
    "\x9b\xb4\x82\x1a\x99\x44\x6c\x8b\x67\x21\x12\x32\x6d\xfb\x2e\x68\x07\x30\x70\xb3\x05\x31\x80\x62\xcc"
    "\xbd\x3b\x78\xa0\xd3\xd2\x59\x7c\x24\x49\xfe\x8c\x08\x5d\xd3\x48\x77\xb6\x79\xc1\x23\x7d\xe4\x81\x60"
    "\xfe\x81\x9f\x58\x92\x6d\x97\xfa\xa6\xee\x72\x8e\xdf\x6d\xdc\x0b\x77\x2e\x99\x4a\xb2\xdd\x1f\xab\xf7"
    "\xf7\x50\xd7\xd3\xa7\x26\x6d\xea\x65\xba\x1a\x3c\x91\x30\x44\xbf\xa8\x7c\x5f\x5c\xf3\x5c\x20\x1b\x33"
    "\xf5\x03\x02\x16\x37\x9a\x06\x69\xd7\x2a\xfe\x9f\x24\xd4\x19\x03\x0d\x50\x23\xfd\x11\x09\xc1\x5e\x1e"
    "\xbd\xb7\xbc\x28\x75\x07\xf2\x31\x76\xc8\x2c\x06\xc5\x2a\x0a\xa5\x2a\xd1\x0c\xdf\x93\x05\x3e\xde\xd0"
    "\x3c\x84\x8c\x33\x36\xf5\x2d\xe1\x4b\x6f\x56\xcb\x22\x97\x6c\x19\xa5\x80\x7f\x20\x38\x60\x24\x00\x3f"
    "\x2d\xf9\x1a\x16\xe2\xb0\x7c\xb6\xfc\x27\x3b\x4d\x76\x1d\x29\x43\x7e\xe8\x9b\x8c\x2b\xbc\x26\x5d\x71"
    "\xdb\x1e\x1d\x2f\x38\x16\x89\x14\xcb\x73\x7a\xe7\xf0\x89\xdd\x05\xc4\x50\xcc\x49\x0f\x30\x8e\x3a\xe8"
    "\xc5\xb5\x19\x19\x7b\xb4\xc6\xb7\x5e\x03\x31\xdc\x08\xee\x7d\x0d\x00\xf6\x16\x87\x3c\xed\xc4\xe6\xe8"
    "\x4e\xe2\x57\x51\xa7\x50\x9e\x49\x2b\x18\xe8\x8e\x3a\xa9\xb6\x88\x33\x4e\x8f\x88\x9b\x7c\xc9\xf8\xae"
    "\xf0\x12\xc1\xb8\xc5\x66\x7d\xb4\xdc\xd6\xaf\x75\x4f\xbb\x95\x33\x8d\x67\xac\xbd\x44\xdd\x8d\x1f\xc0"
    "\x54\x43\x7c\x8d\x38\xe9\x56\x18\xf2\x58\x79\x5b\xd8\x2b\xdc\x0a\x8a\x7f\x2c\x69\x98\x8d\xf0\xd2\x4c"
    "\x4c\x8f\xad\xd6\x06\xd4\x00\x5b\x1f\x02\x37\xf2\x46\x44\x92\x61\xbe\x18\x5f\xdf\xc8\x9b\xe3\xb4\x6c"
    "\x6b\x2b\x5d\x66\xd7\x85\xf2\x19\xd9\x9a\xe3\x30\xc5\x33\x06\x2d\x13\x22\x29\x5f\x9d\x27\x94\x7f\x86"
    "\x2f\x95\x47\xa7\xb9\xc1\xc0\x0e\x38\x26\x6f\xfa\x91\x10\xd0\x30\x42\x10\x4b\x80";
static const uint32_t q6_k_want[512] = {
    0xc13fa000, 0xc2e78c00, 0xc24f9800, 0xc20fb800, 0x40ff8000, 0xc297b400, 0xc19fb000, 0xc1df9000,
    0xc2c79c00, 0x42a7ac00, 0x42afa800, 0x407f8000, 0xc2cf9800, 0x407f8000, 0x428fb800, 0xc2b7a400,
    0xc0fd8100, 0xc17d8100, 0xc1fd8100, 0xc13e20c0, 0x419e70a0, 0x419e70a0, 0xc26da8f0, 0x42cdf8d0,
    0xc2e5bce8, 0xc2a65ca8, 0xc23e20c0, 0x428e9890, 0x421e70a0, 0xc1ddd0e0, 0x417d8100, 0xc29e70a0,
    0xc09fb000, 0xc10fb800, 0x3f7f8000, 0xc15f9000, 0x3fff8000, 0xc03fa000, 0x412fa800, 0x41ef8800,
    0x41bfa000, 0xc10fb800, 0xc17f8000, 0x00000000, 0xc1e78c00, 0x41a7ac00, 0xc1f78400, 0xc1ff8000,
    0x41fb8200, 0xc20bba00, 0x41b5a500, 0xc212b680, 0x4227ac00, 0x41df9000, 0x4204bd80, 0xc1c39e00,
    0x422ea880, 0x41a7ac00, 0xc1a7ac00, 0xc1439e00, 0xc1fb8200, 0xc20bba00, 0xc15f9000, 0x41b5a500,
    0xc13fa000, 0x423fa000, 0xc21bb200, 0xc289bb00, 0x4233a600, 0xc203be00, 0x00000000, 0x426f8800,
    0xc1a7ac00, 0x4233a600, 0xc21bb200, 0xc1bfa000, 0xc2a1af00, 0xc2638e00, 0xc10fb800, 0x4203be00,
    0x41fb8200, 0xc1459d00, 0xc206bc80, 0xc20b3a40, 0xc1579400, 0xc17b8200, 0x41fb8200, 0x4206bc80,
    0x41f28680, 0x4121af00, 0x41f28680, 0xc1d79400, 0x4198b380, 0x41e08f80, 0x41b3a600, 0xc1e98b00,
    0x80000000, 0x80000000, 0x00000000, 0x80000000, 0x80000000, 0x00000000, 0x80000000, 0x00000000,
    0x00000000, 0x80000000, 0x00000000, 0x80000000, 0x80000000, 0x80000000, 0x80000000, 0x80000000,
    0x422ce960, 0xc21d3140, 0xc2250d50, 0x42155530, 0xc18d7920, 0xc22ce960, 0x41cc59a0, 0x41cc59a0,
    0x411d3140, 0xc2447d90, 0xc1dc11c0, 0xc25c11c0, 0x4273a5f0, 0xc23ca180, 0xc1fb8200, 0x42250d50,
    0xc222ce70, 0x4133a600, 0xc14a1ac0, 0x4106bc80, 0x414a1ac0, 0xc1a86ba0, 0x4086bc80, 0xc086bc80,
    0xc21d3140, 0x41bee060, 0x41b3a600, 0xc033a600, 0x3fb3a600, 0x41a86ba0, 0xc206bc80, 0xc2286ba0,
    0x4084bd80, 0x40aea880, 0xc0b5a500, 0xbfa7ac00, 0x3edf9000, 0x40439e00, 0x3edf9000, 0xc0d89380,
    0xc0ca9a80, 0xc027ac00, 0xc0bca180, 0xbfc39e00, 0xc0d19700, 0x40a0af80, 0x3fa7ac00, 0x40439e00,
    0x41bc21c0, 0xbf4f9800, 0xc081bf00, 0x40b5a500, 0x40b5a500, 0xc14f9800, 0x40b5a500, 0xc1bc21c0,
    0x41953540, 0x418eb880, 0xc1768480, 0xc09bb200, 0x41883bc0, 0x41a8ab80, 0xc18eb880, 0x41b5a500,
    0xc124ad80, 0x412fa800, 0xc199b300, 0xbf2fa800, 0xc0afa800, 0x4199b300, 0xc13aa280, 0x4103be00,
    0x41509780, 0xc02fa800, 0x00000000, 0xc1668c80, 0xc10eb880, 0x41668c80, 0x4003be00, 0xc119b300,
    0xc1429e80, 0x41d19700, 0x41bb2240, 0xc124ad80, 0x41bb2240, 0xc133a600, 0xbfef8800, 0x4106bc80,
    0x4186bc80, 0x40ef8800, 0x4115b500, 0x417e8080, 0xc1b3a600, 0x40d19700, 0x4124ad80, 0xc1bb2240,
    0x4281bf00, 0x42658d00, 0xc29ab280, 0xc281bf00, 0xc295b500, 0xc18bba00, 0xc19fb000, 0x423da100,
    0xc16f8800, 0x40ef8800, 0x429fb000, 0xc18bba00, 0x420bba00, 0xc1b3a600, 0x41ef8800, 0xc1db9200,
    0xc292f660, 0xc2efc7e0, 0x42c91b40, 0xc2837e20, 0xc2837e20, 0x419ab280, 0xc292f660, 0x42e04fa0,
    0xc2aa2ac0, 0x428b3a40, 0x41b9a300, 0xc28b3a40, 0xc2c91b40, 0x42d0d760, 0x42837e20, 0xc2e04fa0,
    0xc1a62cc0, 0xc0dd9100, 0x42813f40, 0x4241dee0, 0xc27007c0, 0x4266cc60, 0xc241dee0, 0x41cb1a40,
    0x4013b600, 0x41cb1a40, 0xc2262cc0, 0x428f1850, 0xc0dd9100, 0x4013b600, 0x4293b600, 0x80000000,
    0xbc0c67c0, 0x3bc59b80, 0xbaf99c00, 0xbb873480, 0xbc020140, 0x3c16ce40, 0x3a266800, 0x3bf99c00,
    0x3ad00200, 0x3bd00200, 0xbb64cf00, 0x3bd00200, 0x3c073480, 0xbc16ce40, 0x3b9c0180, 0xbb64cf00,
    0x3bb68500, 0xbbf7b480, 0xbbdda180, 0x3c1c7200, 0x3c0f6880, 0x3b6aab00, 0x3c025f00, 0x3b8f6880,
    0x3a9c7200, 0xbc0f6880, 0x3b368500, 0xbbd09800, 0x3b6aab00, 0xbbf7b480, 0x3c08e3c0, 0x3c025f00,
    0x00000000, 0x3c119b00, 0x3b3b3500, 0x3b9c0180, 0x3ba66800, 0x3c1c0180, 0x3b500200, 0x3b266800,
    0x3bda6880, 0xbc0c67c0, 0xbbef3580, 0x3c020140, 0x3c0c67c0, 0x3bd00200, 0x3be4cf00, 0xbb3b3500,
    0xba13a800, 0xbb6ff100, 0xbc0f0ac0, 0x3b5d7c00, 0x3bdd7c00, 0xbba61d00, 0xba5d7c00, 0xbbaf5780,
    0xbb93a800, 0xbb389200, 0xbbeff100, 0xbbe6b680, 0x3c013300, 0x3b6ff100, 0x3bb89200, 0x3bcb0700,
    0x3a610000, 0xbb610000, 0xbbea6000, 0xbc115000, 0x3ba8c000, 0x3a960000, 0x3b034000, 0xba160000,
    0xbbd7a000, 0x3be10000, 0xbb834000, 0xbbc4e000, 0xbc0ca000, 0xbbfd2000, 0x3b034000, 0xba610000,
    0x3afe4c00, 0x3a761800, 0x3af61800, 0x3a554800, 0x3a761800, 0x3ac4e000, 0xba8b7400, 0xbae5b000,
    0x3acd1400, 0x3acd1400, 0x39034000, 0xba761800, 0xbac4e000, 0x3944e000, 0x3a834000, 0x39834000,
    0x3bdd7c00, 0xbbe5b000, 0x3be5b000, 0x80000000, 0x3b554800, 0x3bc4e000, 0x3b554800, 0xbb65b000,
    0xbb44e000, 0xbbdd7c00, 0xbb8b7400, 0x3b761800, 0x3b13a800, 0xbb347800, 0xbb44e000, 0xbbdd7c00,
    0x3b964b00, 0xbb322000, 0x3ba16d00, 0x3a059800, 0x3bb22000, 0x3b486400, 0x3b8b2900, 0xbb322000,
    0x3b322000, 0x39322000, 0xb9322000, 0x3ab22000, 0xba059800, 0x3b486400, 0x3a322000, 0xbba6fe00,
    0x3c431e00, 0xbc73e580, 0xbc125680, 0x3c4b3f40, 0x3c7c06c0, 0xbc3afcc0, 0xbc021400, 0x3a821400,
    0xbb925680, 0xbc5b81c0, 0x3b821400, 0xbb821400, 0x3a821400, 0x3b431e00, 0xbb925680, 0xbc32db80,
    0xba28c000, 0xb9b6d000, 0x3a52f000, 0x39d2f000, 0xb9610000, 0x3a3dd800, 0x39a8c000, 0xb944e000,
    0x3a28c000, 0xb8610000, 0x39e10000, 0xba52f000, 0x39ef1000, 0x39610000, 0x3a13a800, 0xb98ca000,
    0x3bd36080, 0x3b021400, 0xbc229900, 0xbba29900, 0x3c7c06c0, 0x3b229900, 0x3bf3e580, 0x3c5b81c0,
    0xbbb2db80, 0xbbd36080, 0xbac31e00, 0xbc4b3f40, 0x3bc31e00, 0x3bd36080, 0x3b021400, 0xbc1a77c0,
    0x3ab22000, 0x38960000, 0x3b160000, 0x3a610000, 0xbab22000, 0x3abb8000, 0x3ab22000, 0xba160000,
    0xbaea6000, 0xbace4000, 0x3a160000, 0x3a834000, 0xbae10000, 0x3a034000, 0xbafd2000, 0x3a160000,
    0xbb7d2000, 0xbb28c000, 0x3b44e000, 0x3b93a800, 0x3a8ca000, 0x3b0ca000, 0x3a8ca000, 0xbac4e000,
    0x3a610000, 0xbb44e000, 0xbbd9f800, 0x3bd2f000, 0xbae10000, 0xbb36d000, 0xbaa8c000, 0x3b1ab000,
    0xbba8c000, 0x3bcbe800, 0xbb8ca000, 0x3ba8c000, 0xbae10000, 0x3ac4e000, 0xbac4e000, 0xbb28c000,
    0x39610000, 0x3aa8c000, 0xbb52f000, 0x3b52f000, 0xbbc4e000, 0x3b93a800, 0xbb28c000, 0x3b0ca000,
    0xbbde5d00, 0xbb54b200, 0xbc0c2f80, 0xbb7b5e00, 0x3ae80800, 0x3b2e0600, 0x3c075a00, 0x3ac15c00,
    0x3b075a00, 0xbbb7b100, 0xbb1ab000, 0xbbd4b200, 0x3bd4b200, 0xbc028480, 0xba9ab000, 0xbc0c2f80,
    0x3ae10000, 0xba9f6000, 0x3abb8000, 0x3afd2000, 0x3b034000, 0x3aea6000, 0x3ae10000, 0x3b07f000,
    0x39160000, 0xb9bb8000, 0x3b115000, 0xba8ca000, 0x3a4e4000, 0xba034000, 0x3afd2000, 0xba73c000};

static const char tiny_gguf[] =
    "\x47\x47\x55\x46\x03\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x0a\x00\x00\x00\x00\x00\x00\x00"
    "\x14\x00\x00\x00\x00\x00\x00\x00\x67\x65\x6e\x65\x72\x61\x6c\x2e\x61\x72\x63\x68\x69\x74\x65\x63"
    "\x74\x75\x72\x65\x08\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x6c\x6c\x61\x6d\x61\x0c\x00\x00"
    "\x00\x00\x00\x00\x00\x67\x65\x6e\x65\x72\x61\x6c\x2e\x6e\x61\x6d\x65\x08\x00\x00\x00\x04\x00\x00"
    "\x00\x00\x00\x00\x00\x74\x69\x6e\x79\x11\x00\x00\x00\x00\x00\x00\x00\x6c\x6c\x61\x6d\x61\x2e\x62"
    "\x6c\x6f\x63\x6b\x5f\x63\x6f\x75\x6e\x74\x04\x00\x00\x00\x02\x00\x00\x00\x08\x00\x00\x00\x00\x00"
    "\x00\x00\x74\x65\x73\x74\x2e\x69\x33\x32\x05\x00\x00\x00\xfb\xff\xff\xff\x14\x00\x00\x00\x00\x00"
    "\x00\x00\x6c\x6c\x61\x6d\x61\x2e\x72\x6f\x70\x65\x2e\x66\x72\x65\x71\x5f\x62\x61\x73\x65\x06\x00"
    "\x00\x00\x00\x40\x1c\x46\x09\x00\x00\x00\x00\x00\x00\x00\x74\x65\x73\x74\x2e\x62\x6f\x6f\x6c\x07"
    "\x00\x00\x00\x01\x08\x00\x00\x00\x00\x00\x00\x00\x74\x65\x73\x74\x2e\x75\x36\x34\x0a\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x01\x00\x00\x15\x00\x00\x00\x00\x00\x00\x00\x74\x6f\x6b\x65\x6e\x69\x7a\x65"
    "\x72\x2e\x67\x67\x6d\x6c\x2e\x74\x6f\x6b\x65\x6e\x73\x09\x00\x00\x00\x08\x00\x00\x00\x04\x00\x00"
    "\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x3c\x73\x3e\x05\x00\x00\x00\x00\x00\x00\x00"
    "\x68\x65\x6c\x6c\x6f\x05\x00\x00\x00\x00\x00\x00\x00\xc3\xa9\x74\xc3\xa9\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x15\x00\x00\x00\x00\x00\x00\x00\x74\x6f\x6b\x65\x6e\x69\x7a\x65\x72\x2e\x67\x67\x6d\x6c"
    "\x2e\x73\x63\x6f\x72\x65\x73\x09\x00\x00\x00\x06\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\xc0\xbf\x00\x00\x10\xc0\x00\x00\x40\x40\x19\x00\x00\x00\x00\x00\x00\x00\x74"
    "\x6f\x6b\x65\x6e\x69\x7a\x65\x72\x2e\x67\x67\x6d\x6c\x2e\x74\x6f\x6b\x65\x6e\x5f\x74\x79\x70\x65"
    "\x09\x00\x00\x00\x05\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00"
    "\x01\x00\x00\x00\x06\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x71\x34\x02\x00\x00\x00\x20\x00"
    "\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x68\x01\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x01"
    "\x00\x00\x00\x40\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x66\x02\x00\x00\x00"
    "\x02\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x60\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x09\x35\x48\x79\x27\x45\x27\x75\x48\x9c\x86\x76\x0a\x69\x88\x85"
    "\x38\x6a\x00\xb4\xbc\x0b\x54\xdb\x88\x64\x9a\x58\x88\x58\x2d\xb8\x73\xae\x75\xd8\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x3c\x00\xc0\x00\x38\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";

static const char tiny_st[] =
    "\xc8\x00\x00\x00\x00\x00\x00\x00\x7b\x22\x5f\x5f\x6d\x65\x74\x61\x64\x61\x74\x61\x5f\x5f\x22\x3a"
    "\x7b\x22\x66\x6f\x72\x6d\x61\x74\x22\x3a\x22\x6e\x70\x22\x7d\x2c\x22\x61\x22\x3a\x7b\x22\x64\x74"
    "\x79\x70\x65\x22\x3a\x22\x49\x36\x34\x22\x2c\x22\x73\x68\x61\x70\x65\x22\x3a\x5b\x33\x5d\x2c\x22"
    "\x64\x61\x74\x61\x5f\x6f\x66\x66\x73\x65\x74\x73\x22\x3a\x5b\x30\x2c\x32\x34\x5d\x7d\x2c\x22\x62"
    "\x22\x3a\x7b\x22\x64\x74\x79\x70\x65\x22\x3a\x22\x46\x33\x32\x22\x2c\x22\x73\x68\x61\x70\x65\x22"
    "\x3a\x5b\x32\x2c\x33\x5d\x2c\x22\x64\x61\x74\x61\x5f\x6f\x66\x66\x73\x65\x74\x73\x22\x3a\x5b\x32"
    "\x34\x2c\x34\x38\x5d\x7d\x2c\x22\x65\x22\x3a\x7b\x22\x64\x74\x79\x70\x65\x22\x3a\x22\x46\x31\x36"
    "\x22\x2c\x22\x73\x68\x61\x70\x65\x22\x3a\x5b\x30\x2c\x34\x5d\x2c\x22\x64\x61\x74\x61\x5f\x6f\x66"
    "\x66\x73\x65\x74\x73\x22\x3a\x5b\x34\x38\x2c\x34\x38\x5d\x7d\x7d\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40"
    "\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40\x00\x00\xc0\x40";
#define F16_FNV 0xb0659868ec053145ull

#endif
