/* fuzz_tokjson.c — a Hugging Face tokenizer.json (runtime/rt_tokenizer_hf.c) from hostile bytes: any file
 * either builds a tokenizer or is refused with a one-line message starting "tokenizer: "; a tokenizer it
 * builds encodes a mixed text into ids of its vocabulary and decodes them without failing. Seeds: small
 * tokenizer.json files of each kind the reader accepts (corpus/tokjson, from the tokenizers library) and
 * some it refuses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/rt_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_file("tokenizer.json", data, size);
    RtTokenizer *t = NULL;
    char *tpl = NULL; /* tokenizer_config.json is not there: its reader still runs */
    char err[512] = "";
    KilnStatus s = rt_tok_create_hf(path, &t, &tpl, err, sizeof err);
    free(tpl);
    if (s != KILN_OK) {
        if (t || strncmp(err, "tokenizer: ", 11) || strchr(err, '\n'))
            fz_fail("refused without one line: '%s'", err);
        return 0;
    }
    static const char text[] = "Hello, world! 123 <|im_end|> caf\xc3\xa9 \xf0\x9f\xa4\x96\n\tx  y";
    int32_t ids[256];
    int n = 0;
    if (rt_tok_encode(t, text, sizeof text - 1, RT_TOK_PARSE_SPECIAL | RT_TOK_ADD_BOS, ids, 256, &n, err,
                      sizeof err))
        fz_fail("encode failed: %s", err);
    for (int i = 0; i < n && i < 256; i++)
        if (ids[i] < 0 || ids[i] >= rt_tok_n_vocab(t))
            fz_fail("id %d outside the vocabulary of %d", ids[i], rt_tok_n_vocab(t));
    size_t len = 0;
    char out[4096];
    if (rt_tok_decode(t, ids, n < 256 ? n : 256, RT_TOK_DEC_SPECIAL, out, sizeof out, &len, err, sizeof err))
        fz_fail("decode failed: %s", err);
    rt_tok_destroy(t);
    return 0;
}
