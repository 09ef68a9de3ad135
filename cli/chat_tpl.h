/* chat_tpl.h — chat templates: the documented subset of Jinja that models' chat templates use (ChatML,
 * Llama 2, Llama 3, Mistral, Qwen2, Gemma, SmolLM2), rendered with the provenance of every byte: text
 * from the template (its literals, bos_token, eos_token) is marked, text from the messages is not, so a
 * tokenizer parses control tokens only in the template's text (kiln_engine_tokenize_marked): a user's
 * "<|im_end|>" stays text. Prefix ct_. Syntax and semantics: docs/SERVER.md, "Chat templates". */
#ifndef KILN_CHAT_TPL_H
#define KILN_CHAT_TPL_H

#include <stddef.h>

typedef struct CtMsg {
    const char *role, *content;
} CtMsg;

typedef struct CtOut {
    char *text;           /* len bytes (and a NUL) */
    unsigned char *marks; /* len: 1 where the byte came from the template */
    size_t len, cap;
} CtOut;

enum { CT_OK = 0, CT_ERR_TEMPLATE = -1, CT_ERR_REFUSED = -2, CT_ERR_NOMEM = -3 };

/* Renders template tpl for msgs[0..n) with bos_token, eos_token and add_generation_prompt as HF's
 * apply_chat_template does (trim_blocks, lstrip_blocks). CT_OK and *out (ct_out_free it); else one line in
 * err: CT_ERR_TEMPLATE (a syntax error or a construct outside the subset, with its line), CT_ERR_REFUSED
 * (the template's raise_exception: its message), CT_ERR_NOMEM. */
int ct_render(const char *tpl, const CtMsg *msgs, int n, const char *bos, const char *eos, int add_generation,
              CtOut *out, char *err, size_t errlen);
void ct_out_free(CtOut *o);
/* A template file's text (malloc'd, NUL-terminated; at most CT_MAX_FILE bytes), or NULL with one line in err
 * (missing, unreadable, too large). */
enum { CT_MAX_FILE = 1 << 20 };
char *ct_read_file(const char *file, char *err, size_t errlen);

#endif
