/* rt_tokenizer_hf.c — a tokenizer from a Hugging Face tokenizer.json (and tokenizer_config.json,
 * generation_config.json beside it), read with jansson into an RtTokSpec for rt_tok_create
 * (docs/TOKENIZER.md, "Hugging Face tokenizer.json"). Only what rt_tokenizer.c implements is accepted;
 * anything else is refused naming the key, never approximated. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_file.h"
#include "rt_tokenizer.h"

/* The pre-tokenizer patterns of tokenizer.json's Split, as the JSON text decodes (backslashes literal). */
static const char LLAMA3_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char SPACE_MARK[] = "\xE2\x96\x81"; /* U+2581, SentencePiece's space */

typedef struct Hf {
    const char *path;
    char *err;
    int errlen;
} Hf;

static KilnStatus fail(const Hf *h, KilnStatus s, const char *what, const char *detail)
{
    return rt_file_errf(h->err, h->errlen, s, "tokenizer: %s: %s%s", h->path, what, detail ? detail : "");
}

/* Loads a JSON file; missing is *out NULL when optional. */
static KilnStatus load(const Hf *h, const char *path, int optional, json_t **out)
{
    *out = NULL;
    unsigned char *map = NULL;
    size_t size = 0;
    char why[400];
    if (optional && access(path, F_OK) != 0) return KILN_OK;
    KilnStatus s = rt_file_map(path, "JSON file", &map, &size, why, sizeof why);
    if (s != KILN_OK) return rt_file_errf(h->err, h->errlen, s, "tokenizer: %s", why);
    json_error_t je;
    *out = json_loadb((const char *)map, size, JSON_REJECT_DUPLICATES, &je);
    rt_file_unmap(map, size);
    if (!*out)
        return rt_file_errf(h->err, h->errlen, KILN_ERR_CORRUPT, "tokenizer: %s:%d:%d: %s", path, je.line,
                            je.column, je.text);
    return KILN_OK;
}

/* A special token's text: "text" or {"content": "text"}. */
static const char *token_text(json_t *v)
{
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int32_t find_id(json_t *vocab, json_t *added, const char *text)
{
    if (!text) return -1;
    json_t *v = json_object_get(vocab, text);
    if (json_is_integer(v)) return (int32_t)json_integer_value(v);
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a)
    {
        json_t *c = json_object_get(a, "content");
        if (json_is_string(c) && !strcmp(json_string_value(c), text))
            return (int32_t)json_integer_value(json_object_get(a, "id"));
    }
    return -1;
}

static int is_type(json_t *o, const char *type)
{
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) && !strcmp(json_string_value(t), type);
}

/* The pre-tokenizer (and, for SentencePiece-style files, the model and space prefix). */
static KilnStatus pre_tokenizer(const Hf *h, json_t *root, json_t *model, RtTokSpec *spec)
{
    json_t *pre = json_object_get(root, "pre_tokenizer"), *norm = json_object_get(root, "normalizer");
    json_t *list = is_type(pre, "Sequence") ? json_object_get(pre, "pretokenizers") : NULL;
    int digits = 0, llama3 = 0, bytelevel = 0, regex = 1, metaspace = 0;
    size_t n = list ? json_array_size(list) : pre && !json_is_null(pre) ? 1 : 0;
    for (size_t i = 0; i < n; i++) {
        json_t *p = list ? json_array_get(list, i) : pre;
        json_t *t = json_object_get(p, "type");
        const char *type = json_is_string(t) ? json_string_value(t) : "?";
        if (!strcmp(type, "Digits") && json_is_true(json_object_get(p, "individual_digits"))) {
            digits = 1;
        } else if (!strcmp(type, "ByteLevel")) {
            bytelevel = 1;
            regex = !json_is_false(json_object_get(p, "use_regex"));
            if (json_is_true(json_object_get(p, "add_prefix_space")))
                return fail(h, KILN_ERR_UNSUPPORTED, "pre_tokenizer ByteLevel with add_prefix_space", NULL);
        } else if (!strcmp(type, "Split")) {
            const char *pat = token_text(json_object_get(json_object_get(p, "pattern"), "Regex"));
            if (!pat || strcmp(pat, LLAMA3_PATTERN))
                return fail(h, KILN_ERR_UNSUPPORTED,
                            "pre_tokenizer Split pattern is not Llama 3's: ", pat ? pat : "(not a Regex)");
            llama3 = 1;
        } else if (!strcmp(type, "Metaspace")) {
            const char *rep = token_text(json_object_get(p, "replacement")),
                       *scheme = token_text(json_object_get(p, "prepend_scheme"));
            if (!rep || strcmp(rep, SPACE_MARK) || json_is_true(json_object_get(p, "split")))
                return fail(h, KILN_ERR_UNSUPPORTED,
                            "pre_tokenizer Metaspace other than U+2581 without split", NULL);
            metaspace = scheme && !strcmp(scheme, "never") ? 1 : 2;
        } else {
            return fail(h, KILN_ERR_UNSUPPORTED, "pre_tokenizer type ", type);
        }
    }
    if (bytelevel) {
        if (!json_is_null(norm) && norm)
            return fail(h, KILN_ERR_UNSUPPORTED, "a normalizer with a ByteLevel pre-tokenizer", NULL);
        spec->model = RT_TOK_MODEL_GPT2;
        if (llama3 && !regex && !digits)
            spec->pre = RT_TOK_PRE_LLAMA3;
        else if (digits && regex && !llama3)
            spec->pre = RT_TOK_PRE_SMOLLM;
        else if (regex && !digits && !llama3)
            spec->pre = RT_TOK_PRE_GPT2;
        else
            return fail(h, KILN_ERR_UNSUPPORTED,
                        "this combination of pre-tokenizers (kiln: ByteLevel; Digits + "
                        "ByteLevel; Llama 3's Split + ByteLevel without regex)",
                        NULL);
        return KILN_OK;
    }
    /* SentencePiece-style: byte fallback, spaces as U+2581 (a normalizer or Metaspace), no other split */
    if (!json_is_true(json_object_get(model, "byte_fallback")))
        return fail(h, KILN_ERR_UNSUPPORTED, "a BPE model without ByteLevel pre-tokenizer or byte_fallback",
                    NULL);
    if (digits || llama3)
        return fail(h, KILN_ERR_UNSUPPORTED, "a split pre-tokenizer with byte_fallback", NULL);
    spec->model = RT_TOK_MODEL_LLAMA, spec->pre = RT_TOK_PRE_NONE;
    spec->add_space_prefix = metaspace == 2;
    json_t *nl = is_type(norm, "Sequence") ? json_object_get(norm, "normalizers") : NULL;
    size_t nn = nl ? json_array_size(nl) : norm && !json_is_null(norm) ? 1 : 0;
    int replaced = metaspace > 0;
    for (size_t i = 0; i < nn; i++) {
        json_t *p = nl ? json_array_get(nl, i) : norm;
        if (is_type(p, "Prepend") && token_text(json_object_get(p, "prepend")) &&
            !strcmp(token_text(json_object_get(p, "prepend")), SPACE_MARK)) {
            spec->add_space_prefix = 1;
        } else if (is_type(p, "Replace") && token_text(json_object_get(p, "content")) &&
                   !strcmp(token_text(json_object_get(p, "content")), SPACE_MARK)) {
            replaced = 1;
        } else {
            json_t *t = json_object_get(p, "type");
            return fail(h, KILN_ERR_UNSUPPORTED, "normalizer ",
                        json_is_string(t) ? json_string_value(t) : "?");
        }
    }
    if (!replaced) return fail(h, KILN_ERR_UNSUPPORTED, "byte_fallback without spaces as U+2581", NULL);
    return KILN_OK;
}

/* BOS from the post-processor's template (its first special token), else tokenizer_config.json. */
static int32_t template_bos(json_t *pp, json_t *vocab, json_t *added)
{
    if (is_type(pp, "Sequence")) {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(pp, "processors"), i, p)
        {
            int32_t id = template_bos(p, vocab, added);
            if (id >= 0) return id;
        }
        return -1;
    }
    if (!is_type(pp, "TemplateProcessing")) return -1;
    json_t *first = json_array_get(json_object_get(pp, "single"), 0);
    return find_id(vocab, added, token_text(json_object_get(json_object_get(first, "SpecialToken"), "id")));
}

static KilnStatus build(const Hf *h, json_t *root, json_t *cfg, json_t *gen, RtTokenizer **out)
{
    json_t *model = json_object_get(root, "model"), *vocab = json_object_get(model, "vocab");
    json_t *merges = json_object_get(model, "merges"), *added = json_object_get(root, "added_tokens");
    if (!json_is_object(model) || !is_type(model, "BPE")) {
        json_t *t = json_object_get(model, "type");
        return fail(h, KILN_ERR_UNSUPPORTED, "model type ",
                    json_is_string(t) ? json_string_value(t) : "(none)");
    }
    if (!json_is_object(vocab) || !json_is_array(merges))
        return fail(h, KILN_ERR_CORRUPT, "model.vocab must be an object and model.merges an array", NULL);
    if (added && !json_is_array(added))
        return fail(h, KILN_ERR_CORRUPT, "added_tokens must be an array", NULL);
    RtTokSpec spec = {.bos = -1, .eos = -1, .unk = -1, .pad = -1};
    KilnStatus s = pre_tokenizer(h, root, model, &spec);
    if (s) return s;
    /* ids: the vocabulary's and the added tokens', dense from 0 */
    json_int_t n = 0;
    const char *key;
    json_t *v;
    size_t i;
    json_object_foreach(vocab, key, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= RT_TOK_MAX_TOKENS)
            return fail(h, KILN_ERR_CORRUPT, "model.vocab holds an id that is not in 0..2^24: ", key);
        if (json_integer_value(v) >= n) n = json_integer_value(v) + 1;
    }
    json_array_foreach(added, i, v)
    {
        json_t *id = json_object_get(v, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= RT_TOK_MAX_TOKENS || !json_is_string(json_object_get(v, "content")))
            return fail(h, KILN_ERR_CORRUPT, "added_tokens: an entry without an id in 0..2^24 or a content",
                        NULL);
        if (json_integer_value(id) >= n) n = json_integer_value(id) + 1;
    }
    if (n < 1) return fail(h, KILN_ERR_CORRUPT, "model.vocab is empty", NULL);
    RtTokText *tokens = calloc((size_t)n, sizeof *tokens),
              *mg = calloc(json_array_size(merges) + 1, sizeof *mg);
    int32_t *types = calloc((size_t)n, sizeof *types);
    char **owned = calloc(json_array_size(merges) + 1, sizeof *owned);
    if (!tokens || !mg || !types || !owned) {
        s = fail(h, KILN_ERR_NOMEM, "out of memory", NULL);
        goto done;
    }
    json_object_foreach(vocab, key, v)
    {
        json_int_t id = json_integer_value(v);
        tokens[id] = (RtTokText){key, strlen(key)}, types[id] = RT_TOK_TYPE_NORMAL;
    }
    json_array_foreach(added, i, v)
    {
        json_int_t id = json_integer_value(json_object_get(v, "id"));
        json_t *c = json_object_get(v, "content");
        tokens[id] = (RtTokText){json_string_value(c), json_string_length(c)};
        types[id] =
            json_is_true(json_object_get(v, "special")) ? RT_TOK_TYPE_CONTROL : RT_TOK_TYPE_USER_DEFINED;
    }
    for (json_int_t k = 0; k < n; k++) {
        int byte;
        if (!tokens[k].s) {
            char what[64];
            snprintf(what, sizeof what, "%lld", (long long)k);
            s = fail(h, KILN_ERR_CORRUPT, "no token has id ", what);
            goto done;
        }
        if (spec.model == RT_TOK_MODEL_LLAMA && tokens[k].len == 6 && !strncmp(tokens[k].s, "<0x", 3) &&
            tokens[k].s[5] == '>' && sscanf(tokens[k].s + 3, "%2x", (unsigned *)&byte) == 1)
            types[k] = RT_TOK_TYPE_BYTE;
    }
    json_array_foreach(merges, i, v)
    {
        if (json_is_string(v)) {
            mg[i] = (RtTokText){json_string_value(v), json_string_length(v)};
        } else if (json_is_array(v) && json_array_size(v) == 2 && json_is_string(json_array_get(v, 0)) &&
                   json_is_string(json_array_get(v, 1))) { /* the newer ["left", "right"] form */
            json_t *a = json_array_get(v, 0), *b = json_array_get(v, 1);
            size_t la = json_string_length(a), lb = json_string_length(b);
            if (!(owned[i] = malloc(la + lb + 1))) {
                s = fail(h, KILN_ERR_NOMEM, "out of memory", NULL);
                goto done;
            }
            memcpy(owned[i], json_string_value(a), la), owned[i][la] = ' ';
            memcpy(owned[i] + la + 1, json_string_value(b), lb);
            mg[i] = (RtTokText){owned[i], la + lb + 1};
        } else {
            s = fail(h, KILN_ERR_CORRUPT, "model.merges holds an entry that is neither \"a b\" nor [a, b]",
                     NULL);
            goto done;
        }
    }
    spec.n_tokens = (int)n, spec.tokens = tokens, spec.types = types;
    spec.n_merges = (int)json_array_size(merges), spec.merges = mg;
    spec.unk = find_id(vocab, added, token_text(json_object_get(model, "unk_token")));
    spec.bos = template_bos(json_object_get(root, "post_processor"), vocab, added);
    spec.add_bos = spec.bos >= 0;
    if (spec.bos < 0) spec.bos = find_id(vocab, added, token_text(json_object_get(cfg, "bos_token")));
    json_t *ab = json_object_get(cfg, "add_bos_token");
    if (json_is_boolean(ab)) spec.add_bos = json_is_true(ab) && spec.bos >= 0;
    json_t *eos = json_object_get(gen, "eos_token_id");
    if (json_is_array(eos)) eos = json_array_get(eos, 0); /* kiln stops at one id (others: stop tokens) */
    spec.eos = json_is_integer(eos) && json_integer_value(eos) >= 0 && json_integer_value(eos) < n
                   ? (int32_t)json_integer_value(eos)
                   : find_id(vocab, added, token_text(json_object_get(cfg, "eos_token")));
    spec.pad = find_id(vocab, added, token_text(json_object_get(cfg, "pad_token")));
    s = rt_tok_create(&spec, out, h->err, h->errlen);
done:
    for (size_t k = 0; owned && k < json_array_size(merges); k++)
        free(owned[k]);
    free(owned), free(tokens), free(mg), free(types);
    return s;
}

/* tokenizer_config.json's chat template ("chat_template": a string, or the one named "default" of a list),
 * malloc'd; NULL when there is none. */
static char *chat_template(json_t *cfg)
{
    json_t *ct = json_object_get(cfg, "chat_template"), *one;
    size_t i;
    if (json_is_array(ct)) /* named templates: the default one */
        json_array_foreach(ct, i, one)
        {
            json_t *name = json_object_get(one, "name");
            if (json_is_string(name) && !strcmp(json_string_value(name), "default"))
                ct = json_object_get(one, "template");
        }
    return json_is_string(ct) ? strdup(json_string_value(ct)) : NULL;
}

KilnStatus rt_tok_create_hf(const char *path, RtTokenizer **out, char **tpl, char *err, int errlen)
{
    if (out) *out = NULL;
    if (tpl) *tpl = NULL;
    if (!path || !out) return rt_file_errf(err, errlen, KILN_ERR_ARG, "tokenizer: NULL path or out");
    Hf h = {path, err, errlen};
    json_t *root = NULL, *cfg = NULL, *gen = NULL;
    KilnStatus s = load(&h, path, 0, &root);
    if (!s && !json_is_object(root)) s = fail(&h, KILN_ERR_CORRUPT, "not a JSON object", NULL);
    /* tokenizer_config.json and generation_config.json beside it, when there */
    size_t dir = strrchr(path, '/') ? (size_t)(strrchr(path, '/') - path + 1) : 0;
    char *side = malloc(dir + 32);
    if (!s && !side) s = fail(&h, KILN_ERR_NOMEM, "out of memory", NULL);
    if (!s) {
        memcpy(side, path, dir), strcpy(side + dir, "tokenizer_config.json");
        s = load(&h, side, 1, &cfg);
    }
    if (!s) {
        strcpy(side + dir, "generation_config.json");
        s = load(&h, side, 1, &gen);
    }
    if (!s) s = build(&h, root, cfg, gen, out);
    if (!s && tpl) *tpl = chat_template(cfg);
    free(side);
    json_decref(root), json_decref(cfg), json_decref(gen);
    return s;
}
