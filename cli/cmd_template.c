/* cmd_template.c — `kiln template FILE [--bos TEXT] [--eos TEXT] [--no-generation] [--marks] < MESSAGES`:
 * renders a chat template (chat_tpl.c; FILE: the Jinja text, or a GGUF model whose
 * tokenizer.chat_template it is) for the messages on standard input, a JSON array of {"role", "content"};
 * prints the text, or with --marks one character per byte: T (from the template) or . (from a message).
 * For looking at what a model is given, and for tests/cli/chat_templates.sh. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_tpl.h"
#include "cli.h"
#include "rt_file.h"
#include "rt_gguf.h"

static const char usage[] =
    "usage: kiln template FILE [--bos TEXT] [--eos TEXT] [--no-generation] [--marks] < MESSAGES\n"
    "  FILE: a chat template (Jinja) or a GGUF model; MESSAGES: [{\"role\": ..., \"content\": ...}]\n";

/* The template text of FILE (malloc'd): a GGUF's tokenizer.chat_template, else the file itself. */
static char *template_of(const char *file)
{
    char err[512];
    RtGgufFile *g = NULL;
    if (rt_gguf_open(file, &g, err, sizeof err) == KILN_OK) {
        const RtGgufKv *kv = rt_gguf_kv_find(g, "tokenizer.chat_template");
        char *t = kv && kv->type == RT_GGUF_VAL_STRING ? malloc((size_t)kv->len + 1) : NULL;
        if (t) memcpy(t, kv->data, (size_t)kv->len), t[kv->len] = 0;
        rt_gguf_close(g);
        if (!t) cli_error("%s: no tokenizer.chat_template", file);
        return t;
    }
    char *t = ct_read_file(file, err, sizeof err);
    if (!t) cli_error("%s", err);
    return t;
}

int cli_template(int argc, char **argv)
{
    const char *file = NULL, *bos = "", *eos = "";
    int gen = 1, marks = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--bos") && i + 1 < argc)
            bos = argv[++i];
        else if (!strcmp(argv[i], "--eos") && i + 1 < argc)
            eos = argv[++i];
        else if (!strcmp(argv[i], "--no-generation"))
            gen = 0;
        else if (!strcmp(argv[i], "--marks"))
            marks = 1;
        else if (argv[i][0] != '-' && !file)
            file = argv[i];
        else
            return fputs(usage, stderr), 2;
    }
    if (!file) return fputs(usage, stderr), 2;
    char *tpl = template_of(file);
    if (!tpl) return 1;
    json_error_t je;
    json_t *root = json_loadf(stdin, JSON_REJECT_DUPLICATES, &je);
    int n = json_is_array(root) ? (int)json_array_size(root) : -1, rc = 0;
    CtMsg *msgs = n > 0 ? calloc((size_t)n, sizeof *msgs) : NULL;
    for (int i = 0; msgs && i < n; i++) {
        json_t *m = json_array_get(root, (size_t)i), *r = json_object_get(m, "role"),
               *c = json_object_get(m, "content");
        msgs[i].role = json_is_string(r) ? json_string_value(r) : "";
        msgs[i].content = json_is_string(c) ? json_string_value(c) : "";
    }
    if (n <= 0 || !msgs) {
        cli_error("standard input: want a non-empty JSON array of messages%s%s", root ? "" : ": ",
                  root ? "" : je.text);
        rc = 1;
    } else {
        CtOut out;
        char err[512];
        int st = ct_render(tpl, msgs, n, bos, eos, gen, &out, err, sizeof err);
        if (st != CT_OK) {
            cli_error("%s: %s", file, err);
            rc = st == CT_ERR_REFUSED ? 3 : 1;
        } else {
            for (size_t i = 0; marks && i < out.len; i++)
                putchar(out.marks[i] ? 'T' : '.');
            if (!marks) fwrite(out.text, 1, out.len, stdout);
            ct_out_free(&out);
        }
    }
    free(msgs), free(tpl);
    json_decref(root);
    return rc;
}
