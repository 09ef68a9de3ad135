/* srv_api.c — the OpenAI API's JSON for `kiln serve` (docs/SERVER.md), through jansson: request bodies of
 * /v1/completions and /v1/chat/completions into jobs (every field typed and ranged; an unknown field, or a
 * known one kiln cannot honour yet, is a 400 that names it), and jobs into response bodies, stream chunks
 * and error bodies. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

typedef struct Parse {
    const SrvServer *sv;
    SrvJob *j;
    char *err;
    size_t errlen;
    int status;
} Parse;

static int bad(Parse *p, const char *fmt, const char *a, const char *b)
{
    snprintf(p->err, p->errlen, fmt, a, b);
    if (!p->status) p->status = 400;
    return -1;
}

/* A JSON number as a double (integers too); -1 with a 400 when v is not a number. */
static int number(Parse *p, const char *key, json_t *v, double lo, double hi, double *out)
{
    if (!json_is_number(v)) return bad(p, "'%s' must be a number%s", key, "");
    double x = json_number_value(v);
    char range[96];
    snprintf(range, sizeof range, " in [%g, %g], got %g", lo, hi, x);
    if (!isfinite(x) || x < lo || x > hi) return bad(p, "'%s' must be a number%s", key, range);
    *out = x;
    return 0;
}

static int integer(Parse *p, const char *key, json_t *v, json_int_t lo, json_int_t hi, json_int_t *out)
{
    char range[96];
    snprintf(range, sizeof range, " in [%lld, %lld]", (long long)lo, (long long)hi);
    if (!json_is_integer(v)) return bad(p, "'%s' must be an integer%s", key, range);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return bad(p, "'%s' must be an integer%s", key, range);
    *out = x;
    return 0;
}

static int boolean(Parse *p, const char *key, json_t *v, int *out)
{
    if (!json_is_boolean(v)) return bad(p, "'%s' must be true or false%s", key, "");
    *out = json_is_true(v);
    return 0;
}

static char *dup_str(Parse *p, const char *key, json_t *v)
{
    if (!json_is_string(v)) {
        bad(p, "'%s' must be a string%s", key, "");
        return NULL;
    }
    char *s = strdup(json_string_value(v));
    if (!s) bad(p, "out of memory reading '%s'%s", key, "");
    return s;
}

static int stops(Parse *p, json_t *v)
{
    if (json_is_null(v)) return 0;
    json_t *one = json_is_string(v) ? v : NULL;
    size_t n = one ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!one && !json_is_array(v))
        return bad(p, "'stop' must be a string or an array of strings%s%s", "", "");
    if (n > SRV_MAX_STOP) return bad(p, "'stop' holds at most 4 strings%s%s", "", "");
    for (size_t i = 0; i < n; i++) {
        json_t *s = one ? one : json_array_get(v, i);
        if (!json_is_string(s) || !json_string_length(s))
            return bad(p, "'stop' must hold non-empty strings%s%s", "", "");
        if (!(p->j->stop[p->j->n_stop] = dup_str(p, "stop", s))) return -1;
        p->j->n_stop++;
    }
    return 0;
}

static int prompt(Parse *p, json_t *v)
{
    SrvJob *j = p->j;
    if (json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0)))
        v = json_array_get(v, 0); /* a batch of one */
    if (json_is_string(v)) return (j->prompt = dup_str(p, "prompt", v)) ? 0 : -1;
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (!n) return bad(p, "'prompt' must be a string or a non-empty array of token ids%s%s", "", "");
    if (n > (size_t)p->sv->max_ctx)
        return bad(p, "'prompt' holds more token ids than the context%s%s", "", "");
    if (!(j->prompt_ids = malloc(n * sizeof *j->prompt_ids))) return bad(p, "out of memory%s%s", "", "");
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(v, i);
        if (json_is_string(t))
            return bad(p, "'prompt': a batch of several prompts is not supported%s%s", "", "");
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= p->sv->vocab) {
            char what[64];
            snprintf(what, sizeof what, "%d", p->sv->vocab - 1);
            return bad(p, "'prompt': token ids must be integers in [0, %s]%s", what, "");
        }
        j->prompt_ids[i] = (int32_t)json_integer_value(t);
    }
    j->n_prompt_ids = (int)n;
    return 0;
}

/* A message's content: a string, or an array of {"type": "text", "text": ...} parts (joined). */
static char *content(Parse *p, json_t *v)
{
    if (json_is_string(v)) return dup_str(p, "content", v);
    if (!json_is_array(v)) {
        bad(p, "a message's 'content' must be a string or an array of text parts%s%s", "", "");
        return NULL;
    }
    size_t len = 0;
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *part = json_array_get(v, i), *type = json_object_get(part, "type");
        json_t *text = json_object_get(part, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text)) {
            bad(p, "a message's content parts must be {\"type\": \"text\", \"text\": ...}%s%s", "", "");
            return NULL;
        }
        len += json_string_length(text);
    }
    char *s = malloc(len + 1);
    if (!s) {
        bad(p, "out of memory%s%s", "", "");
        return NULL;
    }
    s[0] = 0;
    for (size_t i = 0, at = 0; i < json_array_size(v); i++) {
        json_t *text = json_object_get(json_array_get(v, i), "text");
        memcpy(s + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
        s[at] = 0;
    }
    return s;
}

static int messages(Parse *p, json_t *v)
{
    SrvJob *j = p->j;
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (!n) return bad(p, "'messages' must be a non-empty array%s%s", "", "");
    if (n > SRV_MAX_MESSAGES) return bad(p, "'messages' holds at most 1024 messages%s%s", "", "");
    if (!(j->msgs = calloc(n, sizeof *j->msgs))) return bad(p, "out of memory%s%s", "", "");
    for (size_t i = 0; i < n; i++, j->n_msgs++) {
        json_t *m = json_array_get(v, i), *role = json_object_get(m, "role");
        if (!json_is_object(m)) return bad(p, "each message must be an object%s%s", "", "");
        const char *key;
        json_t *val;
        json_object_foreach(m, key, val)
        {
            if (strcmp(key, "role") && strcmp(key, "content") && strcmp(key, "name"))
                return bad(p, "unknown field 'messages[].%s'%s", key, "");
        }
        const char *r = json_is_string(role) ? json_string_value(role) : "";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "developer"))
            return bad(p, "a message's 'role' must be system, developer, user or assistant%s%s", "", "");
        if (!(j->msgs[i].role = strdup(!strcmp(r, "developer") ? "system" : r)) ||
            !(j->msgs[i].content = content(p, json_object_get(m, "content"))))
            return -1;
    }
    return 0;
}

/* logit_bias: {"token id": bias in -100..100, ...} (OpenAI's form: the ids as keys). */
static int logit_bias(Parse *p, json_t *v)
{
    SrvJob *j = p->j;
    if (json_is_null(v)) return 0;
    size_t n = json_is_object(v) ? json_object_size(v) : 0;
    if (!json_is_object(v) || n > KILN_MAX_LOGIT_BIAS)
        return bad(p, "'logit_bias' must be an object of at most 4096 token ids%s%s", "", "");
    if (!(j->bias = malloc((n ? n : 1) * sizeof *j->bias))) return bad(p, "out of memory%s%s", "", "");
    const char *key;
    json_t *b;
    json_object_foreach(v, key, b)
    {
        char *end = NULL;
        long id = strtol(key, &end, 10);
        if (!*key || *end || id < 0 || id >= p->sv->vocab || !json_is_number(b) ||
            !(json_number_value(b) >= -100 && json_number_value(b) <= 100))
            return bad(
                p, "'logit_bias' must map token ids of the vocabulary to numbers in [-100, 100] (got '%s')%s",
                key, "");
        j->bias[j->s.n_logit_bias++] = (KilnLogitBias){(int32_t)id, (float)json_number_value(b)};
    }
    j->s.logit_bias = j->bias;
    return 0;
}

/* One top-level field. */
static int field(Parse *p, const char *key, json_t *v)
{
    SrvJob *j = p->j;
    KilnSampling *s = &j->s;
    int chat = j->kind == SRV_CHAT, b = 0;
    double x;
    json_int_t i;
    if (!strcmp(key, "model")) {
        if (!json_is_string(v)) return bad(p, "'model' must be a string%s%s", "", "");
        if (strcmp(json_string_value(v), p->sv->model)) {
            p->status = 404;
            return bad(p, "the model '%s' does not exist (this server has '%s')", json_string_value(v),
                       p->sv->model);
        }
        return 0;
    }
    if (!strcmp(key, "prompt") && !chat) return prompt(p, v);
    if (!strcmp(key, "messages") && chat) return messages(p, v);
    if (!strcmp(key, "max_tokens") || (chat && !strcmp(key, "max_completion_tokens"))) {
        if (json_is_null(v)) return 0;
        if (integer(p, key, v, 1, p->sv->max_ctx, &i)) return -1;
        s->max_tokens = (int)i;
        return 0;
    }
    if (!strcmp(key, "temperature")) {
        if (json_is_null(v)) return 0;
        if (number(p, key, v, 0, 2, &x)) return -1;
        s->temperature = (float)x;
        return 0;
    }
    if (!strcmp(key, "top_p")) {
        if (json_is_null(v)) return 0;
        if (number(p, key, v, 0, 1, &x)) return -1;
        if (x <= 0) return bad(p, "'top_p' must be in (0, 1]%s%s", "", "");
        s->top_p = (float)x;
        return 0;
    }
    if (!strcmp(key, "top_k")) { /* vLLM's extension; -1 and 0: off */
        if (json_is_null(v)) return 0;
        if (integer(p, key, v, -1, 1 << 24, &i)) return -1;
        s->top_k = i < 0 ? 0 : (int)i;
        return 0;
    }
    if (!strcmp(key, "seed")) {
        if (json_is_null(v)) return 0;
        if (!json_is_integer(v)) return bad(p, "'seed' must be an integer%s%s", "", "");
        s->seed = (uint64_t)json_integer_value(v), j->seeded = 1;
        return 0;
    }
    if (!strcmp(key, "stop")) return stops(p, v);
    if (!strcmp(key, "stream")) return json_is_null(v) ? 0 : boolean(p, key, v, &j->stream);
    if (!strcmp(key, "stream_options")) {
        if (json_is_null(v)) return 0;
        json_t *u = json_object_get(v, "include_usage");
        if (!json_is_object(v) || json_object_size(v) != (u ? 1u : 0u))
            return bad(p, "'stream_options' may hold only include_usage%s%s", "", "");
        return u ? boolean(p, "stream_options.include_usage", u, &j->include_usage) : 0;
    }
    if (!strcmp(key, "echo") && !chat) return boolean(p, key, v, &j->echo);
    if (!strcmp(key,
                "stop_token_ids")) { /* vLLM's extension: ids that end the request (shown, as EOS is not) */
        size_t n = json_is_array(v) ? json_array_size(v) : 0;
        if (json_is_null(v)) return 0;
        if (!json_is_array(v) || n > 64)
            return bad(p, "'stop_token_ids' must be an array of at most 64 ids%s%s", "", "");
        if (!(j->stop_ids = malloc((n ? n : 1) * sizeof *j->stop_ids)))
            return bad(p, "out of memory%s%s", "", "");
        for (size_t k = 0; k < n; k++) {
            json_t *t = json_array_get(v, k);
            if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= p->sv->vocab)
                return bad(p, "'stop_token_ids' must hold ids of the vocabulary%s%s", "", "");
            j->stop_ids[k] = (int32_t)json_integer_value(t);
        }
        s->stop_tokens = j->stop_ids, s->n_stop = (int)n;
        return 0;
    }
    if (!strcmp(key, "ignore_eos")) { /* vLLM's extension */
        if (boolean(p, key, v, &b)) return -1;
        s->ignore_eos = b;
        return 0;
    }
    if (!strcmp(key, "user"))
        return json_is_string(v) || json_is_null(v) ? 0 : bad(p, "'user' must be a string%s%s", "", "");
    if (!strcmp(key, "n")) {
        if (json_is_null(v)) return 0;
        if (integer(p, key, v, 1, SRV_MAX_N, &i)) return -1;
        j->n = (int)i;
        return 0;
    }
    if (!strcmp(key, "logprobs") && chat) { /* chat: a bool; top_logprobs says how many alternatives */
        if (json_is_null(v)) return 0;
        if (boolean(p, key, v, &b)) return -1;
        if (b && s->logprobs < 0) s->logprobs = 0;
        if (!b) s->logprobs = -1;
        return 0;
    }
    if (!strcmp(key, "logprobs") || (chat && !strcmp(key, "top_logprobs"))) { /* completions: how many */
        if (json_is_null(v)) return 0;
        if (integer(p, key, v, 0, KILN_MAX_LOGPROBS, &i)) return -1;
        s->logprobs = (int)i;
        j->top_given |= chat;
        return 0;
    }
    /* penalties, min_p (vLLM's) and logit_bias: the host's sampling path (docs/SERVER.md) */
    int presence = !strcmp(key, "presence_penalty"), frequency = !strcmp(key, "frequency_penalty");
    if (presence || frequency) {
        if (json_is_null(v)) return 0;
        if (number(p, key, v, -2, 2, &x)) return -1;
        *(presence ? &s->presence_penalty : &s->frequency_penalty) = (float)x;
        return 0;
    }
    if (!strcmp(key, "repetition_penalty")) {
        if (json_is_null(v)) return 0;
        if (number(p, key, v, 0, 100, &x)) return -1;
        if (x <= 0) return bad(p, "'repetition_penalty' must be in (0, 100]%s%s", "", "");
        s->repetition_penalty = (float)x;
        return 0;
    }
    if (!strcmp(key, "min_p")) {
        if (json_is_null(v)) return 0;
        if (number(p, key, v, 0, 1, &x)) return -1;
        s->min_p = (float)x;
        return 0;
    }
    if (!strcmp(key, "logit_bias")) return logit_bias(p, v);
    static const char *const later[] = {
        "suffix",          "best_of",   "tools",         "tool_choice",
        "response_format", "functions", "function_call", "parallel_tool_calls"};
    for (size_t k = 0; k < sizeof later / sizeof later[0]; k++) /* null: as if absent */
        if (!strcmp(key, later[k]))
            return json_is_null(v) ? 0 : bad(p, "'%s' is not supported yet%s", key, "");
    return bad(p, "unknown field '%s'%s", key, "");
}

int srv_parse(const SrvServer *sv, int kind, const char *body, size_t len, SrvJob **out, char *err,
              size_t errlen)
{
    *out = NULL;
    json_error_t je;
    /* duplicate keys are refused (which one would win?); the whole body must be one JSON value */
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
                 je.column);
        return 400;
    }
    Parse p = {.sv = sv, .err = err, .errlen = errlen};
    SrvJob *j = p.j = calloc(1, sizeof *j);
    if (!j || !json_is_object(root)) {
        json_decref(root);
        free(j);
        snprintf(err, errlen, j ? "the body must be a JSON object" : "out of memory");
        return j ? 400 : 500;
    }
    j->refs = 1, j->kind = kind, j->n = 1;
    kiln_sampling_init(&j->s);
    j->s.max_tokens = kind == SRV_CHAT ? 0 : 16; /* OpenAI's defaults: the context; 16 for completions */
    j->s.spec = sv->spec, j->s.spec_k = sv->spec_k;
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(root, key, v)
    {
        if ((rc = field(&p, key, v))) break;
    }
    if (!rc && !json_object_get(root, "model")) rc = bad(&p, "'model' is required%s%s", "", "");
    if (!rc && kind == SRV_CHAT && !j->n_msgs) rc = bad(&p, "'messages' is required%s%s", "", "");
    if (!rc && kind == SRV_COMPLETION && !j->prompt && !j->prompt_ids)
        rc = bad(&p, "'prompt' is required%s%s", "", "");
    if (!rc && j->include_usage && !j->stream) rc = bad(&p, "'stream_options' goes with stream%s%s", "", "");
    if (!rc && kind == SRV_CHAT && j->top_given && !json_is_true(json_object_get(root, "logprobs")))
        rc = bad(&p, "'top_logprobs' goes with logprobs: true%s%s", "", "");
    json_decref(root);
    if (rc) {
        srv_job_release(j);
        return p.status;
    }
    *out = j;
    return 0;
}

void srv_job_release(SrvJob *j)
{
    if (!j || --j->refs > 0) return;
    free(j->prompt), free(j->prompt_ids), free(j->stop_ids), free(j->bias);
    for (int i = 0; i < j->n_msgs; i++)
        free(j->msgs[i].role), free(j->msgs[i].content);
    free(j->msgs);
    for (int i = 0; i < j->n_stop; i++)
        free(j->stop[i]);
    for (int i = 0; j->ch && i < j->n; i++)
        free(j->ch[i].ids), free(j->ch[i].text), free(j->ch[i].lp), free(j->ch[i].sse);
    free(j->ch), free(j->out);
    free(j);
}

static char *dump(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

char *srv_error_json(int status, const char *msg)
{
    const char *type = status == 401   ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 429 ? "rate_limit_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    return dump(
        json_pack("{s:{s:s,s:s,s:n,s:i}}", "error", "message", msg, "type", type, "param", "code", status));
}

static json_t *usage(const SrvJob *j)
{
    return json_pack("{s:i,s:i,s:i}", "prompt_tokens", j->n_prompt_tokens, "completion_tokens",
                     j->n_generated, "total_tokens", j->n_prompt_tokens + j->n_generated);
}

/* Bytes as a JSON string: invalid UTF-8 (a model may write any bytes) becomes U+FFFD. */
static json_t *utf8_string(const char *t, size_t n)
{
    json_t *v = json_stringn(t ? t : "", t ? n : 0);
    if (v) return v;
    char *u = malloc(n * 3 + 1);
    size_t k = 0;
    for (size_t i = 0; u && i < n;) {
        unsigned char c = (unsigned char)t[i];
        int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        json_t *one = len && i + (size_t)len <= n ? json_stringn(t + i, (size_t)len) : NULL;
        if (one) {
            memcpy(u + k, t + i, (size_t)len), k += (size_t)len, i += (size_t)len;
            json_decref(one);
        } else {
            memcpy(u + k, "\xef\xbf\xbd", 3), k += 3, i++;
        }
    }
    v = u ? json_stringn(u, k) : NULL;
    free(u);
    return v;
}

/* The bytes of one token as the client sees it (its text in the output), as a string and a byte list. */
static json_t *token_str(const SrvServer *sv, int32_t id, json_t **bytes, size_t *len)
{
    char buf[256];
    size_t n = 0;
    if (kiln_engine_detokenize(sv->e, &id, 1, buf, sizeof buf, &n) != KILN_OK || n > sizeof buf) n = 0;
    if (bytes) {
        *bytes = json_array();
        for (size_t k = 0; k < n; k++)
            json_array_append_new(*bytes, json_integer((unsigned char)buf[k]));
    }
    if (len) *len = n;
    return utf8_string(buf, n);
}

/* A choice's logprobs: completions' {tokens, token_logprobs, top_logprobs, text_offset}, chat's {content}. */
/* ... of its tokens [from, to) (a stream chunk's; the whole answer: 0, n_ids). */
static json_t *logprobs_json(const SrvServer *sv, const SrvJob *j, const SrvChoice *c, int from, int to)
{
    int k = j->s.logprobs;
    if (k < 0 || !c->lp || from < 0) return json_null();
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    json_t *content = json_array();
    size_t at = c->text0, n0 = 0;
    if (from > 0 && kiln_engine_detokenize(sv->e, c->ids, from, NULL, 0, &n0) == KILN_OK) at += n0;
    for (int t = from; t < to; t++) {
        const KilnLogprob *row = c->lp + (size_t)t * (size_t)(k + 1);
        json_t *bytes = NULL;
        size_t n = 0;
        json_t *s = token_str(sv, row[0].token, j->kind == SRV_CHAT ? &bytes : NULL, &n);
        if (j->kind == SRV_CHAT) {
            json_t *alts = json_array();
            for (int a = 1; a <= k; a++) {
                json_t *ab = NULL, *as = token_str(sv, row[a].token, &ab, NULL);
                json_array_append_new(alts, json_pack("{s:o,s:f,s:o}", "token", as, "logprob",
                                                      (double)row[a].logprob, "bytes", ab));
            }
            json_array_append_new(content,
                                  json_pack("{s:o,s:f,s:o,s:o}", "token", s, "logprob",
                                            (double)row[0].logprob, "bytes", bytes, "top_logprobs", alts));
        } else {
            json_t *top = json_object();
            for (int a = 1; a <= k; a++) {
                json_t *as = token_str(sv, row[a].token, NULL, NULL);
                json_object_set_new(top, json_string_value(as), json_real(row[a].logprob));
                json_decref(as);
            }
            json_array_append_new(toks, s);
            json_array_append_new(lps, json_real(row[0].logprob));
            json_array_append_new(tops, top);
            json_array_append_new(offs, json_integer((json_int_t)at));
        }
        at += n;
    }
    if (j->kind == SRV_CHAT) {
        json_decref(toks), json_decref(lps), json_decref(tops), json_decref(offs);
        return json_pack("{s:o}", "content", content);
    }
    json_decref(content);
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

char *srv_final_json(const SrvServer *sv, const SrvJob *j)
{
    json_t *choices = json_array();
    for (int i = 0; i < j->n; i++) {
        const SrvChoice *c = &j->ch[i];
        json_t *text = utf8_string(c->text, c->text_len), *one;
        if (j->kind == SRV_CHAT)
            one = json_pack("{s:i,s:{s:s,s:o},s:o,s:s}", "index", i, "message", "role", "assistant",
                            "content", text, "logprobs", logprobs_json(sv, j, c, 0, c->n_ids),
                            "finish_reason", c->reason ? c->reason : "stop");
        else
            one = json_pack("{s:i,s:o,s:o,s:s}", "index", i, "text", text, "logprobs",
                            logprobs_json(sv, j, c, 0, c->n_ids), "finish_reason",
                            c->reason ? c->reason : "stop");
        json_array_append_new(choices, one);
    }
    return dump(json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}", "id", j->id, "object",
                          j->kind == SRV_CHAT ? "chat.completion" : "text_completion", "created",
                          (json_int_t)j->created, "model", sv->model, "choices", choices, "usage", usage(j)));
}

char *srv_sse(char *json)
{
    if (!json) return NULL;
    size_t n = strlen(json);
    char *ev = malloc(n + 9);
    if (ev) memcpy(ev, "data: ", 6), memcpy(ev + 6, json, n), memcpy(ev + 6 + n, "\n\n", 3);
    free(json);
    return ev;
}

char *srv_chunk_sse(const SrvServer *sv, const SrvJob *j, const SrvChoice *c, const char *text, size_t len,
                    int first, const char *finish, int lp_from, int lp_to)
{
    json_t *choices = json_array();
    if (c) {
        json_t *t = utf8_string(text, len), *one;
        if (j->kind == SRV_CHAT) {
            json_t *delta = json_object();
            if (first) json_object_set_new(delta, "role", json_string("assistant"));
            if (len || !finish)
                json_object_set_new(delta, "content", t);
            else
                json_decref(t);
            one = json_pack("{s:i,s:o,s:o}", "index", c->index, "delta", delta, "logprobs",
                            logprobs_json(sv, j, c, lp_from, lp_to));
        } else {
            one = json_pack("{s:i,s:o,s:o}", "index", c->index, "text", t, "logprobs",
                            logprobs_json(sv, j, c, lp_from, lp_to));
        }
        json_object_set_new(one, "finish_reason", finish ? json_string(finish) : json_null());
        json_array_append_new(choices, one);
    }
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", j->id, "object",
                          j->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)j->created, "model", sv->model, "choices", choices);
    if (o && j->include_usage) json_object_set_new(o, "usage", c ? json_null() : usage(j));
    return srv_sse(dump(o));
}

/* text[0..n) as the inside of a JSON string at o (room for 6n bytes): its length, or -1 where the text is
 * not valid UTF-8 (overlong, surrogate, past U+10FFFF, cut short: the caller takes jansson's path, which
 * replaces such bytes, as utf8_string does). */
static long json_escape(const unsigned char *t, size_t n, char *o)
{
    static const char hex[] = "0123456789abcdef";
    char *w = o;
    for (size_t i = 0; i < n;) {
        unsigned c = t[i];
        if (c < 0x80) {
            const char *e = c == '"'    ? "\\\""
                            : c == '\\' ? "\\\\"
                            : c == '\n' ? "\\n"
                            : c == '\r' ? "\\r"
                            : c == '\t' ? "\\t"
                                        : NULL;
            if (e)
                *w++ = e[0], *w++ = e[1];
            else if (c < 0x20)
                memcpy(w, "\\u00", 4), w[4] = hex[c >> 4], w[5] = hex[c & 15], w += 6;
            else
                *w++ = (char)c;
            i++;
            continue;
        }
        size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (c < 0xC2 || c > 0xF4 || i + len > n) return -1;
        uint32_t cp = c & (0xFFu >> (len + 1));
        for (size_t k = 1; k < len; k++) {
            if ((t[i + k] & 0xC0) != 0x80) return -1;
            cp = cp << 6 | (t[i + k] & 0x3Fu);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return -1;
        memcpy(w, t + i, len), w += len, i += len;
    }
    return (long)(w - o);
}

char *srv_chunk_text_sse(const SrvServer *sv, const SrvJob *j, SrvChoice *c, const char *text, size_t len)
{
    if (!c->sse) { /* the chunk with text U+0001, cut around it: head up to its quote, tail from the other */
        char *ev = srv_chunk_sse(sv, j, c, "\x01", 1, 0, NULL, -1, 0),
             *at = ev ? strstr(ev, "\"\\u0001\"") : NULL;
        if (!at || strstr(at + 7, "\\u0001")) { /* one place only */
            free(ev);
            return srv_chunk_sse(sv, j, c, text, len, 0, NULL, -1, 0);
        }
        c->sse = ev, c->sse_head = (size_t)(at - ev) + 1, c->sse_len = strlen(ev);
    }
    size_t tail = c->sse_len - c->sse_head - 6; /* what follows the 6 bytes of \u0001 */
    char *ev = malloc(c->sse_head + 6 * len + tail + 1);
    long n = ev ? json_escape((const unsigned char *)text, len, ev + c->sse_head) : -1;
    if (n < 0) {
        free(ev);
        return srv_chunk_sse(sv, j, c, text, len, 0, NULL, -1, 0);
    }
    memcpy(ev, c->sse, c->sse_head);
    memcpy(ev + c->sse_head + n, c->sse + c->sse_head + 6, tail + 1);
    return ev;
}

char *srv_models_json(const SrvServer *sv)
{
    return dump(json_pack("{s:s,s:[{s:s,s:s,s:i,s:s}]}", "object", "list", "data", "id", sv->model, "object",
                          "model", "created", 0, "owned_by", "kiln"));
}
