/* cmd_tokenize.c — `kiln tokenize FILE [--special] [--no-bos] [--decode]`: the tokenizer of a GGUF file or
 * of a Hugging Face tokenizer.json on standard input: text to ids (one line of space-separated ids), or
 * with --decode ids to text. For looking at what a model sees, and for the tests against the `tokenizers`
 * library (tests/cli/hf_tokenizer.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rt_gguf.h"
#include "rt_tokenizer.h"

static const char usage[] =
    "usage: kiln tokenize FILE [--special] [--no-bos] [--decode] < INPUT\n"
    "  FILE: a GGUF model or a tokenizer.json; INPUT: text (to ids), or ids with --decode\n"
    "  --special  control-token texts in the input become their ids\n"
    "  --no-bos   no BOS even where the model adds one\n";

static char *read_all(size_t *n)
{
    size_t cap = 4096;
    char *b = malloc(cap);
    *n = 0;
    for (size_t got; b && (got = fread(b + *n, 1, cap - *n, stdin)) > 0;) {
        *n += got;
        if (*n == cap) {
            char *nb = cap < ((size_t)1 << 30) ? realloc(b, cap *= 2) : NULL;
            if (!nb) free(b);
            b = nb;
        }
    }
    return b;
}

int cli_tokenize(int argc, char **argv)
{
    const char *file = NULL;
    int special = 0, bos = 1, decode = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--special"))
            special = 1;
        else if (!strcmp(argv[i], "--no-bos"))
            bos = 0;
        else if (!strcmp(argv[i], "--decode"))
            decode = 1;
        else if (argv[i][0] != '-' && !file)
            file = argv[i];
        else
            return fputs(usage, stderr), 2;
    }
    if (!file) return fputs(usage, stderr), 2;
    char err[512];
    RtTokenizer *tok = NULL;
    size_t len = strlen(file);
    KilnStatus s;
    if (len >= 5 && !strcmp(file + len - 5, ".json")) {
        s = rt_tok_create_hf(file, &tok, NULL, err, sizeof err);
    } else {
        RtGgufFile *g = NULL;
        s = rt_gguf_open(file, &g, err, sizeof err);
        if (!s) s = rt_tok_create_gguf(g, &tok, err, sizeof err);
        rt_gguf_close(g);
    }
    if (s) {
        cli_error("%s", err);
        return 1;
    }
    size_t n = 0;
    char *in = read_all(&n);
    int rc = 0;
    if (!in) {
        cli_error("out of memory reading the input");
        rc = 1;
    } else if (decode) {
        int32_t *ids = malloc((n / 2 + 1) * sizeof *ids);
        int k = 0;
        in[n > 0 && in[n - 1] == '\n' ? n - 1 : n] = 0;
        for (char *p = strtok(in, " \n"); ids && p; p = strtok(NULL, " \n"))
            ids[k++] = (int32_t)strtol(p, NULL, 10);
        size_t out_len = 0;
        char *out = NULL;
        s = ids ? rt_tok_decode(tok, ids, k, (special ? RT_TOK_DEC_SPECIAL : 0) | RT_TOK_DEC_STRIP_SPACE,
                                NULL, 0, &out_len, err, sizeof err)
                : KILN_ERR_NOMEM;
        if (!s && !(out = malloc(out_len + 1))) s = KILN_ERR_NOMEM;
        if (!s)
            s = rt_tok_decode(tok, ids, k, (special ? RT_TOK_DEC_SPECIAL : 0) | RT_TOK_DEC_STRIP_SPACE, out,
                              out_len, &out_len, err, sizeof err);
        if (!s) fwrite(out, 1, out_len, stdout);
        if (s) cli_error("%s", s == KILN_ERR_NOMEM ? "out of memory" : err), rc = 1;
        free(out), free(ids);
    } else {
        int flags = (special ? RT_TOK_PARSE_SPECIAL : 0) | (bos && rt_tok_add_bos(tok) ? RT_TOK_ADD_BOS : 0),
            k = 0;
        int32_t *ids = NULL;
        s = rt_tok_encode(tok, in, n, flags, NULL, 0, &k, err, sizeof err);
        if (!s && !(ids = malloc(((size_t)k + 1) * sizeof *ids))) s = KILN_ERR_NOMEM;
        if (!s) s = rt_tok_encode(tok, in, n, flags, ids, k, &k, err, sizeof err);
        for (int i = 0; !s && i < k; i++)
            printf("%s%d", i ? " " : "", ids[i]);
        if (!s) printf("\n");
        if (s) cli_error("%s", s == KILN_ERR_NOMEM ? "out of memory" : err), rc = 1;
        free(ids);
    }
    free(in);
    rt_tok_destroy(tok);
    return rc;
}
