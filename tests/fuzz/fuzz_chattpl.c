/* fuzz_chattpl.c — chat templates (cli/chat_tpl.c) from hostile bytes: a model file's template is the
 * model author's text, so any input renders, is refused with one line (CT_ERR_TEMPLATE, CT_ERR_REFUSED),
 * or runs out of memory; never crashes, loops or overflows the stack; marks cover exactly the output. */
#include <stdlib.h>
#include <string.h>

#include "cli/chat_tpl.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) return 0;
    char *tpl = malloc(size + 1);
    if (!tpl) return 0;
    memcpy(tpl, data, size), tpl[size] = 0;
    static const CtMsg msgs[] = {
        {"system", "be brief"}, {"user", "hi <|im_end|>"}, {"assistant", " ok "}, {"user", "x"}};
    CtOut out;
    char err[256] = "";
    int st = ct_render(tpl, msgs, 4, "<s>", "</s>", 1, &out, err, sizeof err);
    if (st == CT_OK) {
        if (!out.text || strlen(out.text) > out.len) fz_fail("output length %zu", out.len);
        ct_out_free(&out);
    } else if (!err[0] || strchr(err, '\n')) {
        fz_fail("refused without one line: '%s'", err);
    }
    free(tpl);
    return 0;
}
