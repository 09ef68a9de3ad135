/* fuzz_tokenizer.c — the tokenizer (runtime/rt_tokenizer.c) on hostile text: a byte-level BPE vocabulary
 * (all 256 bytes, a few merges, control and user-defined tokens) under each pre-tokenizer, and a
 * SentencePiece-style one (byte fallback). The first input byte picks the tokenizer and flags; the rest
 * is the text. Invariants besides "no crash, no leak, no UB": byte-level BPE is lossless, so decoding
 * what was encoded gives the text back byte for byte (special tokens decoded as their text when they
 * were parsed); the count-only call agrees with the writing call; every id is in the vocabulary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/rt_tokenizer.h"

enum { N_BYTE = 256 };

static const char *const extra[] = {"he", "ll", "hell", "\xc4\xa0t", "\xc4\xa0th", "in", "er", "12"};
static const char *const merges[] = {"h e", "l l", "he ll", "\xc4\xa0 t", "\xc4\xa0t h", "i n", "e r", "1 2"};
static const char *const specials[] = {"<|im_start|>", "<|im_end|>", "<tool>"};

/* GPT-2's byte alphabet: byte b as the UTF-8 of its code point (printable bytes stand for themselves). */
static int byte_char(int b, char *out)
{
    int cp = b, n = 0;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
        for (int c = 0; c < b; c++)
            n += !((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255));
        cp = 256 + n;
    }
    if (cp < 0x80) return out[0] = (char)cp, 1;
    out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

static RtTokenizer *make_bpe(RtTokPre pre)
{
    enum { N = N_BYTE + 8 + 3 };
    static char bytes[N_BYTE][2];
    RtTokText toks[N], mt[8];
    int32_t types[N];
    int n = 0;
    for (int b = 0; b < N_BYTE; b++)
        toks[n].s = bytes[b], toks[n].len = (size_t)byte_char(b, bytes[b]), types[n++] = RT_TOK_TYPE_NORMAL;
    for (int i = 0; i < 8; i++) {
        toks[n].s = extra[i], toks[n].len = strlen(extra[i]), types[n++] = RT_TOK_TYPE_NORMAL;
        mt[i].s = merges[i], mt[i].len = strlen(merges[i]);
    }
    for (int i = 0; i < 3; i++)
        toks[n].s = specials[i], toks[n].len = strlen(specials[i]),
        types[n++] = i < 2 ? RT_TOK_TYPE_CONTROL : RT_TOK_TYPE_USER_DEFINED;
    RtTokSpec s = {.model = RT_TOK_MODEL_GPT2, .pre = pre, .n_tokens = n, .tokens = toks, .types = types,
                   .n_merges = 8, .merges = mt, .bos = N_BYTE + 8, .eos = N_BYTE + 9, .unk = -1, .pad = -1};
    RtTokenizer *t = NULL;
    char err[256];
    if (rt_tok_create(&s, &t, err, sizeof err) != KILN_OK) fz_fail("the fuzz vocabulary: %s", err);
    return t;
}

static RtTokenizer *make_spm(void)
{
    enum { N = 3 + N_BYTE + 4 };
    static char bytes[N_BYTE][8];
    static const char *const pieces[] = {"\xe2\x96\x81the", "\xe2\x96\x81", "ab", "c"};
    RtTokText toks[N];
    float scores[N];
    int n = 0;
    toks[n].s = "<unk>", toks[n].len = 5, scores[n++] = 0;
    toks[n].s = "<s>", toks[n].len = 3, scores[n++] = 0;
    toks[n].s = "</s>", toks[n].len = 4, scores[n++] = 0;
    for (int b = 0; b < N_BYTE; b++)
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b), toks[n].s = bytes[b], toks[n].len = 6, scores[n++] = 0;
    for (int i = 0; i < 4; i++)
        toks[n].s = pieces[i], toks[n].len = strlen(pieces[i]), scores[n++] = -(float)i;
    RtTokSpec s = {.model = RT_TOK_MODEL_LLAMA, .pre = RT_TOK_PRE_NONE, .n_tokens = n, .tokens = toks,
                   .scores = scores, .bos = 1, .eos = 2, .unk = 0, .pad = -1, .add_bos = 1,
                   .add_space_prefix = 1};
    RtTokenizer *t = NULL;
    char err[256];
    if (rt_tok_create(&s, &t, err, sizeof err) != KILN_OK) fz_fail("the fuzz vocabulary: %s", err);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static RtTokenizer *tok[4];
    if (!tok[0])
        tok[0] = make_bpe(RT_TOK_PRE_GPT2), tok[1] = make_bpe(RT_TOK_PRE_SMOLLM), tok[2] = make_bpe(RT_TOK_PRE_LLAMA3),
        tok[3] = make_spm();
    if (size < 1) return 0;
    const RtTokenizer *t = tok[data[0] % 4];
    int flags = (data[0] >> 2) & (RT_TOK_ADD_BOS | RT_TOK_PARSE_SPECIAL);
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char err[256];
    int n = 0, n2 = 0;
    if (rt_tok_encode(t, text, len, flags, NULL, 0, &n, err, sizeof err) != KILN_OK) fz_fail("count: %s", err);
    int32_t *ids = malloc(sizeof *ids * (size_t)(n + 1));
    if (rt_tok_encode(t, text, len, flags, ids, n, &n2, err, sizeof err) != KILN_OK || n2 != n)
        fz_fail("encode: %d ids counted, %d written: %s", n, n2, err);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= rt_tok_n_vocab(t)) fz_fail("id %d out of the vocabulary", ids[i]);
    size_t cap = len * 4 + 64, got = 0;
    char *back = malloc(cap);
    int dflags = (flags & RT_TOK_PARSE_SPECIAL) ? RT_TOK_DEC_SPECIAL : 0;
    if (rt_tok_decode(t, ids, n, dflags, back, cap, &got, err, sizeof err) != KILN_OK) fz_fail("decode: %s", err);
    /* the BOS (a control token here) decodes to its text only with RT_TOK_DEC_SPECIAL */
    size_t lead = (flags & RT_TOK_ADD_BOS) && dflags ? strlen(specials[0]) : 0;
    if (data[0] % 4 < 3 && (got != lead + len || memcmp(back, specials[0], lead) || memcmp(back + lead, text, len)))
        fz_fail("byte-level BPE is not lossless: %zu bytes in, %zu out", len, got);
    free(back);
    free(ids);
    return 0;
}
