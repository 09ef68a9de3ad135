/* rt_tokenizer.h — the tokenizer of the CLI and the runtime: text -> token ids -> text, loaded from a GGUF
 * file's tokenizer.ggml.* metadata (or from arrays). Prefix rt_tok_. Design notes: docs/TOKENIZER.md.
 *
 *     RtGgufFile *g;
 *     RtTokenizer *tok;
 *     char err[512];
 *     if (rt_gguf_open("model.gguf", &g, err, sizeof err) || rt_tok_create_gguf(g, &tok, err, sizeof err))
 *         fail(err);
 *     rt_gguf_close(g);                                 // the tokenizer keeps copies of what it needs
 *     int32_t ids[256];
 *     int n;
 *     if (rt_tok_encode(tok, text, strlen(text), RT_TOK_ADD_BOS | RT_TOK_PARSE_SPECIAL, ids, 256, &n, err,
 *                       sizeof err))
 *         fail(err);                                    // n > 256: only 256 written; call again with n
 *     RtTokDecoder d;                                   // streaming: one id at a time
 *     rt_tok_decoder_init(&d, 0);
 *     char *buf = malloc(rt_tok_decode_cap(tok));
 *     for (int i = 0; i < n; i++) fwrite(buf, 1, rt_tok_decode_next(tok, &d, ids[i], buf), stdout);
 *     fwrite(buf, 1, rt_tok_decoder_flush(&d, buf), stdout);
 *     rt_tok_destroy(tok);
 *
 * Models (tokenizer.ggml.model):
 *   "gpt2"  byte-level BPE (GPT-2, SmolLM2, Llama 3, ...): every byte of the text is mapped to a printable
 *           code point (GPT-2's bytes_to_unicode), the text is cut into pieces by the pre-tokenizer that
 *           tokenizer.ggml.pre names, and each piece is merged by tokenizer.ggml.merges in rank order.
 *           Pre-tokenizers: "smollm" (digits one by one, then GPT-2's regex), "llama-bpe"/"llama3"
 *           (Llama 3's regex), "gpt2" (GPT-2's regex; also used when the key is absent). Others refused.
 *   "llama" SentencePiece-style BPE (Llama 2): spaces become U+2581, adjacent pieces merge by the highest
 *           tokenizer.ggml.scores of the merged token, pieces outside the vocabulary fall back to <0xNN>
 *           byte tokens.
 * Special tokens: with RT_TOK_PARSE_SPECIAL, the text of every CONTROL or USER_DEFINED token is found by
 * exact match in the input (leftmost, then longest) and becomes that id; the text between is tokenized
 * normally. Without the flag, "<|im_start|>" is just text.
 *
 * Any bytes are accepted (no UTF-8 requirement): a byte that is not part of a well-formed UTF-8 sequence
 * is a punctuation-like character of its own to the pre-tokenizer. decode(encode(s)) == s exactly for any
 * s when the vocabulary covers all 256 bytes (RT_TOK_DEC_SPECIAL and RT_TOK_DEC_STRIP_SPACE when special
 * tokens were parsed or a space prefix added; LLAMA: but a U+2581 in the input comes back as a space, as
 * in SentencePiece).
 *
 * Ownership and threads: a tokenizer owns copies of everything; it is never modified after creation, so
 * any number of threads may encode and decode with it at once (each with its own RtTokDecoder).
 */
#ifndef KILN_RT_TOKENIZER_H
#define KILN_RT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "kiln.h"
#include "rt_gguf.h"

#define RT_TOK_MAX_TOKENS    (1 << 24) /* vocabulary entries; more is refused */
#define RT_TOK_MAX_TOKEN_LEN 65536     /* bytes of one token's text; longer is refused */

typedef enum RtTokModel {
    RT_TOK_MODEL_GPT2,  /* byte-level BPE with ranked merges */
    RT_TOK_MODEL_LLAMA, /* SentencePiece-style BPE with scores and byte fallback */
} RtTokModel;

/* Pre-tokenizers of the GPT2 model; the LLAMA model has none (RT_TOK_PRE_NONE). */
typedef enum RtTokPre {
    RT_TOK_PRE_NONE,
    RT_TOK_PRE_GPT2,   /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    RT_TOK_PRE_SMOLLM, /* each \p{N} alone, then RT_TOK_PRE_GPT2 on the text between */
    RT_TOK_PRE_LLAMA3, /* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
                          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ ; whole-piece vocabulary
                          matches win over merges (ignore_merges) */
} RtTokPre;

/* Token types (tokenizer.ggml.token_type), numbered as llama.cpp's llama_token_type. */
typedef enum RtTokType {
    RT_TOK_TYPE_UNDEFINED = 0,
    RT_TOK_TYPE_NORMAL = 1,
    RT_TOK_TYPE_UNKNOWN = 2,      /* <unk>: decoded only with RT_TOK_DEC_SPECIAL */
    RT_TOK_TYPE_CONTROL = 3,      /* <s>, <|im_start|>: matched with RT_TOK_PARSE_SPECIAL; decoded only
                                     with RT_TOK_DEC_SPECIAL */
    RT_TOK_TYPE_USER_DEFINED = 4, /* matched with RT_TOK_PARSE_SPECIAL; decoded as their text */
    RT_TOK_TYPE_UNUSED = 5,
    RT_TOK_TYPE_BYTE = 6, /* <0xNN>: decoded as that one byte */
} RtTokType;

/* A string that is not NUL-terminated and may hold any bytes. */
typedef struct RtTokText {
    const char *s;
    size_t len;
} RtTokText;

/* What rt_tok_create needs; everything is copied. Ids are -1 when absent. */
typedef struct RtTokSpec {
    RtTokModel model;
    RtTokPre pre;            /* GPT2: GPT2, SMOLLM or LLAMA3; LLAMA: NONE */
    int n_tokens;            /* 1 .. RT_TOK_MAX_TOKENS */
    const RtTokText *tokens; /* n_tokens; the vocabulary's text (GPT2: in the byte-to-unicode alphabet) */
    const float *scores;     /* n_tokens, or NULL (all 0); used by LLAMA */
    const int32_t *types;    /* n_tokens RtTokType values, or NULL (LLAMA: "<0xNN>" are BYTE, the rest NORMAL;
                                GPT2: all NORMAL) */
    int n_merges;            /* "left right" strings in rank order: GPT2; LLAMA: optional (a Hugging Face
                                tokenizer.json: pairs then merge by rank, not by score) */
    const RtTokText *merges;
    int32_t bos, eos, unk, pad;
    int add_bos;          /* the model's default for RT_TOK_ADD_BOS (rt_tok_add_bos) */
    int add_space_prefix; /* LLAMA: prefix a space to text at the start and after a special token */
} RtTokSpec;

typedef struct RtTokenizer RtTokenizer;

/* Builds a tokenizer from spec. KILN_OK and *out; else *out NULL and a one-line message starting with
 * "tokenizer: " in err: KILN_ERR_ARG (NULL spec/out, n_tokens out of range, NULL arrays),
 * KILN_ERR_UNSUPPORTED (a token longer than RT_TOK_MAX_TOKEN_LEN), KILN_ERR_CORRUPT (a type outside 0..6, an
 * id out of range, a merge without a space; LLAMA: neither all 256 <0xNN> tokens nor an unk id),
 * KILN_ERR_NOMEM. GPT2: a byte whose byte-alphabet token the vocabulary lacks (SmolLM2 lacks 21, e.g. 0x04
 * and 0xC0) is dropped by encode, as llama.cpp and HF tokenizers (no unk) do. Merges whose two parts or
 * result are not in the vocabulary are ignored (counted in rt_tok_n_merges_ignored). A text that appears
 * twice in the vocabulary maps to its first id. */
KilnStatus rt_tok_create(const RtTokSpec *spec, RtTokenizer **out, char *err, int errlen);
/* Builds a tokenizer from an open GGUF file's metadata: tokenizer.ggml.model (required: "gpt2" or
 * "llama"), .tokens (required), .token_type, .scores, .merges (required for gpt2), .pre, .bos_token_id,
 * .eos_token_id, .unknown_token_id, .padding_token_id, .add_bos_token (default: llama 1, gpt2 0),
 * .add_space_prefix (default: llama 1, gpt2 0). Errors as rt_tok_create, plus: a missing required key
 * (KILN_ERR_FORMAT, "tokenizer: the file has no key 'tokenizer.ggml.tokens'"), a key of the wrong type or an
 * array of the wrong length (KILN_ERR_CORRUPT), an unknown model or pre-tokenizer (KILN_ERR_UNSUPPORTED). The
 * tokenizer keeps no pointer into g. */
KilnStatus rt_tok_create_gguf(const RtGgufFile *g, RtTokenizer **out, char *err, int errlen);
/* Builds a tokenizer from a Hugging Face tokenizer.json (rt_tokenizer_hf.c; docs/TOKENIZER.md) and, when
 * chat_template is not NULL, gives the chat template of the tokenizer_config.json beside it (a string, or
 * the one named "default" of a list; malloc'd, NULL when none): model BPE
 * with a ByteLevel pre-tokenizer (GPT2: the plain, SmolLM2 digits and Llama-3 split patterns) or with
 * byte_fallback and SentencePiece's U+2581 spaces (LLAMA, ranked merges); added tokens (special: CONTROL,
 * else USER_DEFINED); BOS from the post-processor's template or tokenizer_config.json, EOS from
 * generation_config.json or tokenizer_config.json (both read from the file's directory when there).
 * Errors as rt_tok_create, plus KILN_ERR_IO/FORMAT/CORRUPT for the files and KILN_ERR_UNSUPPORTED for a
 * model or pre-tokenizer kiln does not implement, each naming the file and the JSON key. */
KilnStatus rt_tok_create_hf(const char *path, RtTokenizer **out, char **chat_template, char *err, int errlen);
/* Frees everything (NULL is fine). */
void rt_tok_destroy(RtTokenizer *t);

RtTokModel rt_tok_model(const RtTokenizer *t);
RtTokPre rt_tok_pre(const RtTokenizer *t);
int rt_tok_n_vocab(const RtTokenizer *t);
int32_t rt_tok_bos(const RtTokenizer *t); /* -1 when the model has none */
int32_t rt_tok_eos(const RtTokenizer *t);
int32_t rt_tok_unk(const RtTokenizer *t);
int32_t rt_tok_pad(const RtTokenizer *t);
int rt_tok_add_bos(const RtTokenizer *t); /* whether the model expects RT_TOK_ADD_BOS */
int rt_tok_n_merges_ignored(const RtTokenizer *t);
/* A token's vocabulary text (owned by t, not NUL-terminated) and its length, or NULL for an id out of
 * range; its type (RT_TOK_TYPE_UNDEFINED out of range). rt_tok_find: the id whose text is exactly
 * (s, len), or -1. */
const char *rt_tok_text(const RtTokenizer *t, int32_t id, size_t *len);
RtTokType rt_tok_type(const RtTokenizer *t, int32_t id);
int32_t rt_tok_find(const RtTokenizer *t, const char *s, size_t len);

enum {
    RT_TOK_ADD_BOS = 1 << 0,       /* encode: start with the BOS id (when the model has one) */
    RT_TOK_PARSE_SPECIAL = 1 << 1, /* encode: CONTROL / USER_DEFINED token texts become their ids */
};

/* Encodes len bytes at text (any bytes). KILN_OK and *n, the number of ids; the first min(*n, cap) are
 * written to ids (ids may be NULL when cap is 0: a way to count). KILN_ERR_ARG (NULL t/n, NULL text with
 * len > 0, cap < 0, NULL ids with cap > 0, more than INT32_MAX ids), KILN_ERR_NOMEM; messages start with
 * "tokenizer: ". Time O(len log len); memory O(len). */
KilnStatus rt_tok_encode(const RtTokenizer *t, const char *text, size_t len, int flags, int32_t *ids, int cap,
                         int *n, char *err, int errlen);

/* rt_tok_encode where, with RT_TOK_PARSE_SPECIAL, a special token's text becomes its id only where every
 * byte of it is marked (marks: len bytes, nonzero: the caller's own text, a chat template's; else a
 * user's): the text is tokenized as one, so merges across the marks are those of the whole text. */
KilnStatus rt_tok_encode_marked(const RtTokenizer *t, const char *text, size_t len,
                                const unsigned char *marks, int flags, int32_t *ids, int cap, int *n,
                                char *err, int errlen);

enum {
    RT_TOK_DEC_SPECIAL = 1 << 0,     /* CONTROL and UNKNOWN tokens decode to their text (else nothing) */
    RT_TOK_DEC_STRIP_SPACE = 1 << 1, /* undo the encoder's space prefix (models with add_space_prefix):
                                        drop one leading space of the first token decoded at the start and
                                        after each CONTROL token */
};

/* A streaming decoder: caller-owned state, no heap, no tie to one tokenizer beyond the calls. Bytes of
 * an incomplete UTF-8 character are held back until it completes (or turns out invalid, when they are
 * given out as they are), so every chunk ends on a character boundary of well-formed text and the chunks
 * together are exactly the decoded bytes. */
typedef struct RtTokDecoder {
    int flags;  /* RT_TOK_DEC_* */
    int strip;  /* the next text token loses one leading space */
    int n_pend; /* held-back bytes, 0 .. 3 */
    unsigned char pend[4];
} RtTokDecoder;

void rt_tok_decoder_init(RtTokDecoder *d, int flags);
/* Bytes that one call of rt_tok_decode_next or rt_tok_decoder_flush may write: size out with it. */
size_t rt_tok_decode_cap(const RtTokenizer *t);
/* Decodes one id into out (at least rt_tok_decode_cap(t) bytes): returns the bytes written (0 is common:
 * a held-back partial character, a control token), or -1 for an id out of range (d unchanged). */
int rt_tok_decode_next(const RtTokenizer *t, RtTokDecoder *d, int32_t id, char *out);
/* Gives out the held-back bytes (at most 3) and resets d for a new stream (same flags). Returns the
 * bytes written. */
int rt_tok_decoder_flush(RtTokDecoder *d, char *out);

/* Decodes n ids at once (rt_tok_decode_next over all, then flush). KILN_OK and *len, the decoded bytes;
 * the first min(*len, cap) are written to out (no NUL added). KILN_ERR_ARG: NULL t/len, NULL ids with
 * n > 0, NULL out with cap > 0, an id out of range (named in err). */
KilnStatus rt_tok_decode(const RtTokenizer *t, const int32_t *ids, int n, int flags, char *out, size_t cap,
                         size_t *len, char *err, int errlen);

/* The pre-tokenizer alone, for tests and tools: cuts len bytes at text into pieces and writes the end
 * offset (bytes) of each piece to ends (the first min(count, cap)); returns the number of pieces, or -1
 * for bad arguments (RT_TOK_PRE_NONE yields one piece for non-empty text). */
long rt_tok_pre_split(RtTokPre pre, const char *text, size_t len, size_t *ends, size_t cap);

#endif
