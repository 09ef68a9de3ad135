/* cmd_run.c — `kiln run PACKAGE --weights PATH --prompt TEXT ...`: generate text with the engine of kiln.h,
 * streaming it to stdout as the tokens come. The engine is driven through kiln.h alone (the example
 * embedders can read); beyond it, rt_engine_open for --random-weights (no weights file), rt_now_s for
 * the timings -v prints, and the CLI's rule for the tuning store's path (cli_tune_db_path). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_num.h"
#include "kiln.h"
#include "rt_engine.h"
#include "rt_file.h"

static const char run_usage[] =
    "usage: kiln run PACKAGE --weights PATH (--prompt TEXT | --prompt-ids \"1 2 3\") [options]\n"
    "  --weights PATH      GGUF file, safetensors file or index, or a directory holding one\n"
    "  --random-weights S  random weights from seed S (0..2^64-1) instead (timing without a checkpoint)\n"
    "  --tokenizer PATH    a Hugging Face tokenizer.json (or its directory) instead of the weights' own\n"
    "  --prompt TEXT       the prompt (tokenized with the GGUF's tokenizer; \"<|im_end|>\" in it is text);\n"
    "                      repeat it to generate for several prompts at once (continuous batching)\n"
    "  --chat              wrap the prompt in the ChatML template (<|im_start|>user ... assistant): the\n"
    "                      template's control tokens are real, the prompt's text stays text\n"
    "  --special           special-token texts in --prompt (<|im_start|>) become their control ids: for a\n"
    "                      prompt you wrote with its template (never for text from someone else)\n"
    "  --prompt-ids IDS    the prompt as token ids 0..2147483647 (space or comma separated)\n"
    "  --max-tokens N      new tokens at most, 1..16777216 (default 128)\n"
    "  --temperature T     0..100; 0 (default): greedy\n"
    "  --top-k K           0..16777216 most likely tokens (0, default: off)\n"
    "  --top-p P           (0, 1]: nucleus (1, default: off)\n"
    "  --seed S            0..2^64-1 (default 0)\n"
    "  --ignore-eos        go on past the end-of-sequence token\n"
    "  --spec ngram|draft|none  speculative decoding, verified in one step, the output the same as\n"
    "                      without: ngram proposes the tokens that followed the latest earlier occurrence "
    "of\n"
    "                      the last 4..1 tokens; draft, the --draft model's greedy tokens (default: none)\n"
    "  --draft PACKAGE     the draft model (the target's vocabulary), with --draft-weights PATH (with\n"
    "                      --random-weights S it takes random weights from S too)\n"
    "  --spec-k K          draft tokens per step at most, 1..32 (default 4; adapted to what is accepted)\n"
    "  --spec-branches B   with --spec draft: B candidates per depth, 1..8 (default 1, a chain): a draft\n"
    "                      tree verified in one step (a target compiled with --set tree=true)\n"
    "  --device D          auto (default), host, or a GPU number 0..1023\n"
    "  --kv-cache-mb N     KV-cache pool size, 1..16777216 and within the device's memory (default: from\n"
    "                      free memory)\n"
    "  --threads N         host threads per kernel launch, 1..1024 (default: every CPU)\n"
    "  --print-ids         print the generated token ids (one line per prompt) instead of text\n"
    "  --print-prompt-ids  first print each prompt's token ids (one line per prompt)\n"
    "  --profile           time every kernel (GPU events; graphs off) and print a table (with -v)\n"
    "  --no-cuda-graphs    launch decode steps kernel by kernel\n"
    "  --check-weights     check every weight value for NaN/Inf (default: a sample of each tensor)\n"
    "  --db FILE           the tuning store (default $KILN_TUNE_DB, else ~/.cache/kiln/tune.db when it\n"
    "                      exists); its tuned binaries for this device replace default configs\n"
    "  --no-db             use no tuning store\n"
    "  -v                  say what the engine does, and timings\n";

typedef struct RunState {
    KilnEngine *e;
    int print_ids, stream, n_out;
    int no_text; /* the package cannot detokenize (random weights, no tokenizer): ids are printed instead */
    KilnFinish finish; /* how the request ended (ERROR and ABORT fail the run) */
    double t_first, t_start;
    int32_t *out;
    int cap;
    size_t printed; /* bytes of decoded text already written */
    char *text;
    size_t text_cap;
} RunState;

enum { MAX_PROMPTS = 64 };

/* The engine's log: everything with -v, else only its warnings (a weights file that contradicts the
 * package where the package wins). */
static void on_log(void *user, const char *line)
{
    if (*(const int *)user || !strncmp(line, "warning: ", 9)) fprintf(stderr, "kiln: %s\n", line);
}

/* Streams text: decodes everything so far and writes the new bytes (a token can complete a character
 * that an earlier one started, so decoding token by token would split it). */
static int on_token(void *user, int64_t req, int32_t tok, KilnFinish fin)
{
    RunState *r = user;
    (void)req;
    if (!r->n_out) r->t_first = rt_now_s();
    if (fin != KILN_FINISH_NONE) r->finish = fin;
    if (tok < 0) return 0;
    if (r->n_out == r->cap) {
        int cap = r->cap ? 2 * r->cap : 256;
        int32_t *o = realloc(r->out, (size_t)cap * sizeof *o);
        if (!o) return 1;
        r->out = o, r->cap = cap;
    }
    r->out[r->n_out++] = tok;
    if (r->print_ids || !r->stream) return 0;
    size_t len = 0;
    KilnStatus st = kiln_engine_detokenize(r->e, r->out, r->n_out, r->text, r->text_cap, &len);
    if (st == KILN_ERR_UNSUPPORTED && r->n_out == 1) { /* no tokenizer (kiln.h): go on, print the ids */
        r->stream = 0, r->no_text = 1;
        return 0;
    }
    if (st != KILN_OK) return 1;
    if (len > r->text_cap) {
        char *t = realloc(r->text, len * 2);
        if (!t) return 1;
        r->text = t, r->text_cap = len * 2;
        kiln_engine_detokenize(r->e, r->out, r->n_out, r->text, r->text_cap, &len);
    }
    /* hold back an incomplete UTF-8 tail unless this is the end */
    size_t end = len;
    if (fin == KILN_FINISH_NONE)
        for (size_t k = 1; k <= 3 && k <= len; k++) {
            unsigned char c = (unsigned char)r->text[len - k];
            if ((c & 0xC0) == 0x80) continue;
            int need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            if ((size_t)need > k) end = len - k;
            break;
        }
    if (end > r->printed) {
        fwrite(r->text + r->printed, 1, end - r->printed, stdout);
        fflush(stdout);
        r->printed = end;
    }
    return 0;
}

/* "1 2 3" or "1,2,3" into *ids (malloc'd): each a whole number in 0..INT32_MAX (the engine then checks
 * the vocabulary). Returns 0, or 2 after the one-line usage error. */
static int parse_ids(const char *s, int32_t **ids, int *n)
{
    int cap = 64;
    *n = 0;
    if (!(*ids = malloc((size_t)cap * sizeof **ids))) {
        cli_error("out of memory");
        return 1;
    }
    while (*s == ' ')
        s++;
    while (*s) {
        char one[24];
        size_t len = strcspn(s, " ,");
        int64_t v = -1;
        snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one ? len : sizeof one - 1), s);
        if (len >= sizeof one || !cli_num_int_ok(one, 0, INT32_MAX, &v)) {
            snprintf(one, sizeof one, "%.*s", (int)(len < 20 ? len : 20), s);
            return cli_num_error("run", "--prompt-ids",
                                 "token ids in 0..2147483647 separated by spaces or commas", one);
        }
        if (*n == cap) {
            int32_t *t = cap < (1 << 24) ? realloc(*ids, (size_t)(cap *= 2) * sizeof *t) : NULL;
            if (!t) return cli_num_error("run", "--prompt-ids", "at most 16777216 ids", "...");
            *ids = t;
        }
        (*ids)[(*n)++] = (int32_t)v;
        s += len; /* the separator: spaces, at most one comma among them, and an id after it */
        while (*s == ' ')
            s++;
        if (*s == ',') {
            for (s++; *s == ' ';)
                s++;
            if (!*s || *s == ',')
                return cli_num_error("run", "--prompt-ids",
                                     "token ids in 0..2147483647 separated by spaces or commas",
                                     *s ? ",," : "a trailing comma");
        }
    }
    if (!*n) return cli_num_error("run", "--prompt-ids", "at least one token id", "");
    return 0;
}

KilnStatus cli_add_text(KilnEngine *e, const char *text, int flags, int32_t **ids, int *n, int *cap)
{
    int got = 0;
    size_t len = strlen(text);
    KilnStatus st = kiln_engine_tokenize_v2(e, text, len, flags, NULL, 0, &got);
    if (st != KILN_OK) return st;
    if (got > *cap - *n) {
        int want = *n + got + 64;
        int32_t *t = realloc(*ids, (size_t)want * sizeof *t);
        if (!t) return KILN_ERR_NOMEM;
        *ids = t, *cap = want;
    }
    st = kiln_engine_tokenize_v2(e, text, len, flags, *ids + *n, *cap - *n, &got);
    if (st == KILN_OK) *n += got;
    return st;
}

/* The token ids of prompt text into *ids (malloc'd). The user's text is tokenized with special-token
 * parsing off unless --special asked for it, so "<|im_end|>" typed in a prompt stays text; --chat wraps
 * it in the ChatML template, whose own control tokens are tokenized with parsing on. */
static int tokenize(KilnEngine *e, const char *prompt, int chat, int special, int32_t **ids, int *n)
{
    int cap = 0;
    *ids = NULL, *n = 0;
    int user = (special ? KILN_TOKENIZE_SPECIAL : 0) | (chat ? KILN_TOKENIZE_NO_BOS : 0);
    KilnStatus st = KILN_OK;
    if (chat) st = cli_add_text(e, "<|im_start|>user\n", KILN_TOKENIZE_SPECIAL, ids, n, &cap);
    if (st == KILN_OK) st = cli_add_text(e, prompt, user, ids, n, &cap);
    if (st == KILN_OK && chat)
        st = cli_add_text(e, "<|im_end|>\n<|im_start|>assistant\n",
                          KILN_TOKENIZE_SPECIAL | KILN_TOKENIZE_NO_BOS, ids, n, &cap);
    if (st != KILN_OK || !*n) {
        cli_error("%s", st == KILN_ERR_NOMEM ? "out of memory"
                        : st != KILN_OK      ? kiln_engine_errmsg(e)
                                             : "empty prompt");
        free(*ids);
        *ids = NULL;
        return 0;
    }
    return 1;
}

static void print_ids(const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
}

/* Reads the value of numeric option a (v) into the sampling and engine options. Returns 0, or 2 after the
 * one-line usage error. The ranges are kiln.h's (KilnSampling, KilnEngineOptions), tightened where a
 * command line has no use for a value: --max-tokens 0 (until the context is full) is left to the API. */
static int run_number(const char *a, const char *v, KilnSampling *s, KilnEngineOptions *o,
                      uint64_t *random_seed)
{
    int64_t i = 0;
    double f = 0;
    int rc = 0;
    if (!strcmp(a, "--max-tokens")) {
        if (!(rc = cli_num_int("run", a, v, 1, CLI_MAX_TOKENS, &i))) s->max_tokens = (int)i;
    } else if (!strcmp(a, "--temperature")) {
        if (!(rc = cli_num_real("run", a, v, 0, 100, 0, &f))) s->temperature = (float)f;
    } else if (!strcmp(a, "--top-k")) {
        if (!(rc = cli_num_int("run", a, v, 0, CLI_MAX_TOKENS, &i))) s->top_k = (int)i;
    } else if (!strcmp(a, "--top-p")) {
        if (!(rc = cli_num_real("run", a, v, 0, 1, 1, &f))) s->top_p = (float)f;
        if (!rc && s->top_p <= 0) rc = cli_num_error("run", a, "a number in (0, 1]", v); /* below FLT_MIN */
    } else if (!strcmp(a, "--spec-k")) {
        if (!(rc = cli_num_int("run", a, v, 1, KILN_MAX_SPEC_K, &i))) s->spec_k = (int)i;
    } else if (!strcmp(a, "--spec-branches")) {
        if (!(rc = cli_num_int("run", a, v, 1, KILN_MAX_SPEC_BRANCHES, &i))) s->spec_branches = (int)i;
    } else if (!strcmp(a, "--spec")) {
        if (!strcmp(v, "ngram") || !strcmp(v, "none"))
            s->spec = !strcmp(v, "ngram") ? KILN_SPEC_NGRAM : KILN_SPEC_NONE;
        else if (!strcmp(v, "draft"))
            s->spec = KILN_SPEC_DRAFT;
        else
            rc = cli_num_error("run", a, "ngram, draft or none", v);
    } else if (!strcmp(a, "--seed")) {
        rc = cli_num_u64("run", a, v, &s->seed);
    } else if (!strcmp(a, "--random-weights")) {
        rc = cli_num_u64("run", a, v, random_seed);
    } else if (!strcmp(a, "--threads")) {
        if (!(rc = cli_num_int("run", a, v, 1, CLI_MAX_THREADS, &i))) o->host_threads = (int)i;
    } else if (!strcmp(a, "--kv-cache-mb")) {
        if (!(rc = cli_num_int("run", a, v, 1, CLI_MAX_KV_MB, &i))) o->kv_cache_bytes = i << 20;
    } else if (!strcmp(a, "--device")) {
        if (!strcmp(v, "host"))
            o->device = -2;
        else if (!strcmp(v, "auto"))
            o->device = -1;
        else if (cli_num_int_ok(v, 0, CLI_MAX_DEVICE, &i))
            o->device = (int)i;
        else
            rc = cli_num_error("run", a, "auto, host or a GPU number in 0..1023", v);
    }
    return rc;
}

int cli_run(int argc, char **argv)
{
    const char *pkg = NULL, *weights = NULL, *db = NULL;
    const char *prompts[MAX_PROMPTS];
    int n_prompts = 0, ids_given = 0, verbose = 0, chat = 0, want_ids = 0, want_prompt_ids = 0, no_db = 0;
    int special = 0, random = 0, spec_k_given = 0, branches_given = 0;
    uint64_t random_seed = 0;
    KilnSampling s;
    kiln_sampling_init(&s);
    s.max_tokens = 128;
    KilnEngineOptions o;
    kiln_engine_options_init(&o);
    CliSeen seen = {0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = !strcmp(a, "--weights") || !strcmp(a, "--prompt") || !strcmp(a, "--prompt-ids") ||
                    !strcmp(a, "--db") || !strcmp(a, "--draft") || !strcmp(a, "--draft-weights") ||
                    !strcmp(a, "--tokenizer");
        int number = !strcmp(a, "--max-tokens") || !strcmp(a, "--temperature") || !strcmp(a, "--top-k") ||
                     !strcmp(a, "--top-p") || !strcmp(a, "--seed") || !strcmp(a, "--device") ||
                     !strcmp(a, "--kv-cache-mb") || !strcmp(a, "--threads") ||
                     !strcmp(a, "--random-weights") || !strcmp(a, "--spec") || !strcmp(a, "--spec-k") ||
                     !strcmp(a, "--spec-branches");
        if ((takes || number) && !v) {
            fprintf(stderr, "kiln run: %s wants a value\n", a);
            return 2;
        }
        if (takes && !*v && strcmp(a, "--prompt-ids")) return cli_empty_error("run", a);
        if (((takes && strncmp(a, "--prompt", 8)) || number) && cli_seen(&seen, "run", a)) return 2;
        if (takes || number) i++;
        if (number) {
            if (run_number(a, v, &s, &o, &random_seed)) return 2;
            random |= !strcmp(a, "--random-weights");
            spec_k_given |= !strcmp(a, "--spec-k");
            branches_given |= !strcmp(a, "--spec-branches");
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
            verbose = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(run_usage, stdout);
            return 0;
        } else if (!strcmp(a, "--chat"))
            chat = 1;
        else if (!strcmp(a, "--special"))
            special = 1;
        else if (!strcmp(a, "--print-ids"))
            want_ids = 1;
        else if (!strcmp(a, "--print-prompt-ids"))
            want_prompt_ids = 1;
        else if (!strcmp(a, "--ignore-eos"))
            s.ignore_eos = 1;
        else if (!strcmp(a, "--profile"))
            o.profile = 1;
        else if (!strcmp(a, "--no-cuda-graphs"))
            o.no_cuda_graphs = 1;
        else if (!strcmp(a, "--check-weights"))
            o.check_weights = 1;
        else if (!strcmp(a, "--no-db"))
            no_db = 1;
        else if (!strcmp(a, "--db"))
            db = v;
        else if (!strcmp(a, "--weights"))
            weights = v;
        else if (!strcmp(a, "--draft"))
            o.draft_package = v;
        else if (!strcmp(a, "--draft-weights"))
            o.draft_weights = v;
        else if (!strcmp(a, "--tokenizer"))
            o.tokenizer = v;
        else if (!strcmp(a, "--prompt") || !strcmp(a, "--prompt-ids")) {
            if (n_prompts == MAX_PROMPTS || (n_prompts && ids_given != !strcmp(a, "--prompt-ids"))) {
                fprintf(stderr, "kiln run: at most %d prompts, all text or all ids\n", MAX_PROMPTS);
                return 2;
            }
            ids_given = !strcmp(a, "--prompt-ids");
            prompts[n_prompts++] = v;
        } else if (a[0] == '-' || pkg) {
            fprintf(stderr, "kiln run: unexpected argument %s\n%s", a, run_usage);
            return 2;
        } else
            pkg = a;
    }
    if (!pkg || !weights == !random || !n_prompts) {
        fputs(run_usage, stderr);
        return 2;
    }
    if ((s.spec == KILN_SPEC_DRAFT) != !!o.draft_package || (o.draft_weights && !weights) ||
        (o.draft_package && weights && !o.draft_weights)) {
        fprintf(
            stderr,
            "kiln run: --spec draft goes with --draft PACKAGE, and --draft-weights PATH with --weights\n");
        return 2;
    }
    if (spec_k_given && s.spec == KILN_SPEC_NONE) {
        fprintf(stderr, "kiln run: --spec-k goes with --spec ngram or --spec draft\n");
        return 2;
    }
    if (branches_given && s.spec != KILN_SPEC_DRAFT) {
        fprintf(stderr, "kiln run: --spec-branches goes with --spec draft\n");
        return 2;
    }
    if ((chat || special) && ids_given) {
        fprintf(stderr, "kiln run: --chat and --special apply to --prompt text, not --prompt-ids\n");
        return 2;
    }
    /* token ids are checked before anything is opened (a usage error costs nothing) */
    int32_t *given_ids[MAX_PROMPTS] = {0};
    int given_n[MAX_PROMPTS] = {0};
    for (int p = 0; ids_given && p < n_prompts; p++)
        if (parse_ids(prompts[p], &given_ids[p], &given_n[p])) {
            for (int q = 0; q <= p; q++)
                free(given_ids[q]);
            return 2;
        }
    o.log = on_log, o.log_user = &verbose;
    /* the store: given (--db, $KILN_TUNE_DB) must open; the default path is used when it exists */
    char db_buf[1024];
    int is_default = 0;
    struct stat st_db;
    if (!no_db && cli_tune_db_env_empty(db)) {
        for (int p = 0; p < n_prompts; p++)
            free(given_ids[p]);
        return 1;
    }
    o.tune_db = no_db ? NULL : cli_tune_db_path(db, db_buf, sizeof db_buf, &is_default);
    if (o.tune_db && is_default && stat(o.tune_db, &st_db) != 0) o.tune_db = NULL;

    RunState r[MAX_PROMPTS] = {{0}};
    double t0 = rt_now_s();
    KilnEngine *e = NULL;
    char err[512];
    KilnStatus opened = random ? rt_engine_open(pkg, NULL, random_seed, &o, &e, err, sizeof err)
                               : kiln_engine_open(pkg, weights, &o, &e, err, sizeof err);
    int rc = 1, n_prompt_tokens = 0;
    if (opened != KILN_OK) {
        cli_error("%s", err);
        goto done;
    }
    double t_open = rt_now_s() - t0;
    for (int p = 0; p < n_prompts; p++) {
        int32_t *ids = given_ids[p];
        int n = given_n[p];
        given_ids[p] = NULL;
        r[p].e = e, r[p].print_ids = want_ids, r[p].stream = n_prompts == 1;
        if (!ids_given && !tokenize(e, prompts[p], chat, special, &ids, &n)) goto done;
        if (want_prompt_ids) print_ids(ids, n);
        n_prompt_tokens += n;
        int64_t id;
        KilnStatus st = kiln_engine_submit(e, ids, n, &s, on_token, &r[p], &id);
        free(ids);
        if (st != KILN_OK) {
            cli_error("%s", kiln_engine_errmsg(e));
            goto done;
        }
    }
    double t_gen = rt_now_s();
    int pending = 1;
    while (pending)
        if (kiln_engine_step(e, &pending) != KILN_OK) {
            cli_error("%s", kiln_engine_errmsg(e));
            goto done;
        }
    double t_end = rt_now_s();
    for (int p = 0; p < n_prompts; p++)
        if (r[p].finish == KILN_FINISH_ERROR || r[p].finish == KILN_FINISH_ABORT) {
            cli_error("prompt %d: %s%s", p + 1,
                      r[p].finish == KILN_FINISH_ABORT ? "its text could not be decoded or kept: " : "",
                      kiln_engine_errmsg(e)[0] ? kiln_engine_errmsg(e) : "out of memory");
            goto done;
        }
    int n_out = 0;
    for (int p = 0; p < n_prompts; p++) {
        n_out += r[p].n_out;
        if (want_ids || r[p].no_text) {
            print_ids(r[p].out, r[p].n_out);
        } else if (n_prompts > 1) {
            size_t len = 0;
            char *text = NULL;
            if (kiln_engine_detokenize(e, r[p].out, r[p].n_out, NULL, 0, &len) == KILN_OK &&
                (text = malloc(len + 1)) &&
                kiln_engine_detokenize(e, r[p].out, r[p].n_out, text, len, &len) == KILN_OK)
                printf("--- %d\n%.*s\n", p + 1, (int)len, text);
            else if (!text) /* no tokenizer: the ids */
                print_ids(r[p].out, r[p].n_out);
            free(text);
        } else {
            printf("\n");
        }
    }
    fflush(stdout);
    if (verbose) {
        KilnEngineStats st;
        kiln_engine_stats(e, &st, sizeof st);
        fprintf(stderr,
                "kiln: %lld steps, %lld prompt tokens computed, %lld read from shared prefixes, %lld "
                "preemptions (%lld tokens recomputed)\n",
                (long long)st.steps, (long long)st.prompt_tokens, (long long)st.prefix_tokens,
                (long long)st.preemptions, (long long)st.recomputed_tokens);
        if (st.spec_verifies)
            fprintf(stderr,
                    "kiln: speculation: %lld verifies, %lld of %lld draft tokens accepted (%.1f%%), "
                    "%.2f tokens per verify\n",
                    (long long)st.spec_verifies, (long long)st.spec_accepted, (long long)st.spec_proposed,
                    100.0 * (double)st.spec_accepted / (double)(st.spec_proposed ? st.spec_proposed : 1),
                    (double)(st.spec_accepted + st.spec_verifies) / (double)st.spec_verifies);
        if (st.spec_siblings)
            fprintf(stderr, "kiln: draft trees: %lld sibling tokens verified, %lld kept\n",
                    (long long)st.spec_siblings, (long long)st.spec_sibling_hits);
        char draft[64] = "";
        if (st.draft_seconds > 0)
            snprintf(draft, sizeof draft, ", draft model %.3f ms per step",
                     1e3 * st.draft_seconds / (double)(st.steps ? st.steps : 1));
        if (st.decode_steps || st.verify_steps)
            fprintf(stderr,
                    "kiln: step times: %lld decode steps %.3f ms each, %lld verify steps %.3f ms each%s\n",
                    (long long)st.decode_steps,
                    st.decode_steps ? 1e3 * st.decode_seconds / (double)st.decode_steps : 0,
                    (long long)st.verify_steps,
                    st.verify_steps ? 1e3 * st.verify_seconds / (double)st.verify_steps : 0, draft);
        double decode = t_end - r[0].t_first;
        fprintf(stderr,
                "kiln: %s; open %.2f s, %d prompt tokens, first token after %.3f s, %d tokens in %.2f s "
                "(%.1f tok/s after the first)\n",
                kiln_engine_device(e), t_open, n_prompt_tokens, r[0].t_first - t_gen, n_out, t_end - t_gen,
                n_out > n_prompts && decode > 0 ? (n_out - n_prompts) / decode : 0.0);
    }
    rc = 0;
done:
    for (int p = 0; p < n_prompts; p++)
        free(r[p].out), free(r[p].text), free(given_ids[p]);
    kiln_engine_close(e);
    return rc;
}
