/* at_compile.c — a candidate config compiled for a target (at_compile.h).
 *
 * Invariant: what at_compile returns is exactly what `kiln compile` would have put in a package for the
 * same kernel at that config: both go through the kernel stage cg_kernel_jobs (build, kir_verify under
 * the target's limits, the backend, the geometry the backend reports), so the runtime loads a tuned
 * binary as it loads a package's.
 */
#define _POSIX_C_SOURCE 200809L
#include "at_compile.h"

#include <stdlib.h>
#include <string.h>

#include "cg_kernel.h"
#include "rt_file.h" /* rt_file_errf */

static int is_int(const char *v)
{
    const char *p = v + (*v == '-');
    if (!*p) return 0;
    for (; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

static int is_number(const char *v)
{
    char *end;
    if (!*v) return 0;
    strtod(v, &end);
    return !*end;
}

KilnStatus at_spec_parse(IrArena *a, const char *text, KfamSpec *out, char *err, int errlen)
{
    char *t = ir_arena_strdup(a, text ? text : "");
    if (!t) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    char *save = NULL, *word = strtok_r(t, " ", &save);
    if (!word || !kfam_find(word))
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "kernel spec '%.80s': no kernel family '%.40s'",
                            text ? text : "", word ? word : "");
    *out = kfam_spec(word);
    while ((word = strtok_r(NULL, " ", &save))) {
        char *eq = strchr(word, '=');
        if (!eq || eq == word || out->n == KFAM_MAX_SPEC)
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "kernel spec '%.80s': bad item '%.40s'", text,
                                word);
        *eq = 0;
        const char *v = eq + 1;
        if (is_int(v))
            kfam_spec_int(out, word, strtoll(v, NULL, 10));
        else if (is_number(v))
            kfam_spec_float(out, word, strtod(v, NULL));
        else
            kfam_spec_str(out, word, v);
    }
    return KILN_OK;
}

KilnStatus at_config_parse(IrArena *a, const char *text, KirConfig *out, char *err, int errlen)
{
    memset(out, 0, sizeof *out);
    char *t = ir_arena_strdup(a, text ? text : ""), *save = NULL;
    if (!t) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    for (char *word = strtok_r(t, " ", &save); word; word = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(word, '=');
        if (!eq || eq == word || !is_int(eq + 1) || out->n == KIR_MAX_CFG)
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "config '%.80s': bad item '%.40s'", text, word);
        *eq = 0;
        kir_config_set(out, word, strtoll(eq + 1, NULL, 10)); /* word lives in the arena */
    }
    return KILN_OK;
}

KilnStatus at_ir_hash(const KfamFamily *f, const KfamSpec *s, char hash[17], char *err, int errlen)
{
    IrArena *a = ir_arena_create();
    KirConfig cfg = {0};
    KirKernel *k = NULL;
    IrDiag d = {0};
    IrBuf text = {0};
    if (!a) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    const KfamFacts *facts = cg_target_facts(cg_target_defaults()); /* as `kiln compile`'s kernel rows */
    f->defaults(s, facts, &cfg);
    KilnStatus st = KILN_OK;
    if (f->build(a, s, facts, &cfg, &k, &d) != IR_OK)
        st = rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: %s", f->name, d.msg);
    if (!st) kir_print(k, &text);
    if (!st && text.oom) st = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    if (!st) ir_hash64_hex(ir_hash64(text.s, text.len, IR_HASH_SEED), hash);
    ir_buf_free(&text);
    ir_arena_destroy(a);
    return st;
}

static char *buf_take(IrBuf *b)
{
    char *s = b->oom ? NULL : strdup(b->s ? b->s : "");
    ir_buf_free(b);
    return s;
}

KilnStatus at_compile(const KfamFamily *f, const KfamSpec *s, const KirConfig *cfg, const CgTarget *t,
                      const CgDriverOptions *o, AtCompiled *out, char *err, int errlen)
{
    memset(out, 0, sizeof *out);
    out->block = 1;
    if (!f || !s || !cfg || !t)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "at_compile: missing argument");
    IrArena *a = ir_arena_create();
    if (!a) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    CgKernelJob job = {.fam = f, .spec = s, .cfg = *cfg, .target = t};
    cg_kernel_jobs(&job, 1, a, o); /* the kernel stage of `kiln compile` (pipeline/pl_compile.c) */
    KilnStatus st = KILN_OK;
    if (job.status == IR_ERR_NOMEM)
        st = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    else if (job.stage == CG_STAGE_BUILD && job.status != IR_ERR_LIMIT && job.status != IR_ERR_UNSUPPORTED)
        st = rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: %s", f->name, job.msg);
    else if (job.status != IR_OK) /* a limit, or anything else the backend refuses: INVALID */
        st = rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED, "%s", job.msg);
    if (!st) {
        IrBuf conf = {0}, par = {0}, grid = {0};
        kir_config_print(&job.k->cfg, &conf), kir_params_print(job.k, &par), kir_grid_print(job.k, &grid);
        out->config = buf_take(&conf), out->params = buf_take(&par), out->grid = buf_take(&grid);
        out->bin = job.bin;
        out->block = job.bin.threads, out->smem = job.bin.smem;
        memset(&job.bin, 0, sizeof job.bin);
        if (!out->config || !out->params || !out->grid)
            st = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    }
    cg_kernel_jobs_free(&job, 1);
    ir_arena_destroy(a);
    return st;
}

void at_compiled_free(AtCompiled *c)
{
    if (!c) return;
    free(c->config), free(c->params), free(c->grid);
    cg_binary_free(&c->bin);
    memset(c, 0, sizeof *c);
}
