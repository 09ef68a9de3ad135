/* cmd_compile.c — `kiln compile`, `kiln ir`, `kiln models`: recipe -> graph -> passes -> package.
 * compile writes the package through rt_pkgw (atomic: after any error no file is left at -o).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "codegen/cg_target.h"
#include "rt_package.h"

static FeOptions fe_opts(const CliArgs *a)
{
    FeOptions o = fe_options_default();
    o.model = a->model;
    o.sets = a->sets;
    o.n_sets = a->n_sets;
    return o;
}

/* Builds the graph and runs the passes (unless raw). Returns NULL after printing the error. */
static GirGraph *build(const CliArgs *a, int raw, IrBuf *dump, double *t_fe, double *t_pass)
{
    FeOptions o = fe_opts(a);
    GirGraph *g = NULL;
    IrDiag d = {0};
    double t0 = ir_now_ms();
    if (fe_recipe_build(a->input, &o, &g, &d) != IR_OK) {
        cli_error("%s", d.msg);
        return NULL;
    }
    double t1 = ir_now_ms();
    GirPassOptions po = {.dump_after = a->dump_after, .dump = dump};
    if (!raw && gir_run_passes(g, &po, &d) != IR_OK) {
        cli_error("%s: %s", a->input, d.msg);
        gir_graph_destroy(g);
        return NULL;
    }
    if (t_fe) *t_fe = t1 - t0;
    if (t_pass) *t_pass = ir_now_ms() - t1;
    return g;
}

int cli_ir(const CliArgs *a)
{
    IrBuf out = {0};
    if (a->dump_after) {
        int known = !strcmp(a->dump_after, "all");
        for (const char *const *p = gir_pass_names(); *p; p++)
            known |= !strcmp(*p, a->dump_after);
        if (!known) {
            cli_error("--dump-after: unknown pass '%s'", a->dump_after);
            return 2;
        }
    }
    GirGraph *g = build(a, a->raw, &out, NULL, NULL);
    if (!g) return 1;
    if (!a->dump_after) gir_print(g, a->locs, &out);
    int rc = 0;
    if (out.oom) {
        cli_error("out of memory");
        rc = 1;
    } else {
        fputs(out.s ? out.s : "", stdout);
    }
    ir_buf_free(&out);
    gir_graph_destroy(g);
    return rc;
}

int cli_models(const CliArgs *a)
{
    FeOptions o = fe_opts(a);
    IrBuf names = {0};
    IrDiag d = {0};
    if (fe_recipe_models(a->input, &o, &names, &d) != IR_OK) {
        cli_error("%s", d.msg);
        ir_buf_free(&names);
        return 1;
    }
    fputs(names.s ? names.s : "", stdout);
    ir_buf_free(&names);
    return 0;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    IrBuf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        ir_buf_put(&b, chunk, n);
    int err = ferror(f) || b.oom;
    fclose(f);
    if (err) {
        ir_buf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.s ? b.s : calloc(1, 1);
}

static void attr_text(const GirAttr *c, char *buf, size_t n)
{
    switch (c->kind) {
    case GIR_ATTR_INT: snprintf(buf, n, "%lld", (long long)c->i); break;
    case GIR_ATTR_FLOAT: snprintf(buf, n, "%.9g", c->f); break;
    case GIR_ATTR_STR: snprintf(buf, n, "%s", c->s); break;
    }
}

/* Writes every row of the package; returns the first failing status (rt_pkgw errors are sticky). */
static KilnStatus write_rows(RtPkgWriter *w, const GirGraph *g, const CliArgs *a, const char *recipe_hash,
                             const char *targets, const IrBuf *text)
{
    char buf[512];
    rt_pkgw_meta(w, "recipe", g->name);
    rt_pkgw_meta(w, "recipe_file", a->input);
    rt_pkgw_meta(w, "recipe_hash", recipe_hash);
    rt_pkgw_meta(w, "model", g->model ? g->model : "");
    rt_pkgw_meta(w, "targets", targets);
    for (int i = 0; i < g->n_cfg; i++) {
        attr_text(&g->cfg[i], buf, sizeof buf);
        rt_pkgw_config(w, g->cfg[i].key, buf);
    }
    rt_pkgw_graph(w, text->s);
    KilnStatus s = KILN_OK;
    for (int i = 0; i < g->n_nodes && s == KILN_OK; i++) {
        const GirNode *n = g->nodes[i];
        if (n->op != GIR_OP_WEIGHT) continue;
        const GirType *t = &n->out[0]->type;
        IrBuf shape = {0};
        int64_t elems = 1;
        ir_buf_put(&shape, "[", 1);
        for (int k = 0; k < t->rank; k++) {
            ir_buf_printf(&shape, "%s%lld", k ? "," : "", (long long)t->dim[k].n);
            elems *= t->dim[k].n;
        }
        ir_buf_put(&shape, "]", 1);
        int64_t nbytes = elems / gir_dtype_block_elems(t->dtype) * gir_dtype_block_bytes(t->dtype);
        s = shape.oom
                ? KILN_ERR_NOMEM
                : rt_pkgw_weight(w, gir_attr_s(n, "name", ""), gir_dtype_name(t->dtype), shape.s, nbytes);
        ir_buf_free(&shape);
    }
    return s;
}

int cli_compile(const CliArgs *a)
{
    if (!a->output) {
        cli_error("compile: missing -o OUT.kiln");
        return 2;
    }
    char targets[256] = "";
    for (int i = 0; i < a->n_targets; i++) {
        if (!cg_target_find(a->targets[i])) {
            int n;
            const CgTarget *all = cg_targets(&n);
            IrBuf known = {0};
            for (int k = 0; k < n; k++)
                ir_buf_printf(&known, "%s%s", k ? ", " : "", all[k].name);
            cli_error("--target: unknown target '%s' (known: %s)", a->targets[i], known.s ? known.s : "");
            ir_buf_free(&known);
            return 2;
        }
        snprintf(targets + strlen(targets), sizeof targets - strlen(targets), "%s%s", i ? "," : "",
                 a->targets[i]);
    }
    double t_start = ir_now_ms(), t_fe = 0, t_pass = 0;
    GirGraph *g = build(a, 0, NULL, &t_fe, &t_pass);
    if (!g) return 1;

    int rc = 1;
    size_t src_len = 0;
    char *src = read_file(a->input, &src_len);
    IrBuf text = {0};
    RtPkgWriter *w = NULL;
    char err[512], recipe_hash[17];
    double t_pkg = ir_now_ms();
    if (!src) {
        cli_error("%s: cannot read", a->input);
        goto done;
    }
    ir_hash64_hex(ir_hash64(src, src_len, IR_HASH_SEED), recipe_hash);
    gir_print(g, 0, &text);
    if (text.oom) {
        cli_error("out of memory");
        goto done;
    }
    if (rt_pkgw_create(a->output, &w, err, sizeof err) != KILN_OK) {
        cli_error("%s", err);
        goto done;
    }
    KilnStatus s = write_rows(w, g, a, recipe_hash, targets, &text);
    if (s != KILN_OK) {
        cli_error("%s: cannot write package (%s)", a->output, kiln_status_name(s));
        goto done;
    }
    s = rt_pkgw_commit(w, err, sizeof err);
    w = NULL;
    if (s != KILN_OK) {
        cli_error("%s", err);
        goto done;
    }
    rc = 0;
    if (a->verbose) {
        double t_end = ir_now_ms();
        fprintf(stderr,
                "kiln: compiled %s (%s): %d nodes; frontend %.1f ms, passes %.1f ms, package %.1f ms, "
                "total %.1f ms\n",
                a->input, g->model ? g->model : "-", g->n_nodes, t_fe, t_pass, t_end - t_pkg,
                t_end - t_start);
    }
done:
    rt_pkgw_abort(w);
    ir_buf_free(&text);
    free(src);
    gir_graph_destroy(g);
    return rc;
}
