/* cmd_compile.c — `kiln compile`, `kiln ir`, `kiln models`: argument checks, then the pipeline
 * (pipeline/pl.h: recipe -> graph -> passes -> schedule -> kernels -> binaries -> package), and the
 * timings -v prints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pipeline/pl.h"

static PlOptions pl_opts(const CliArgs *a)
{
    PlOptions o = pl_options_default();
    o.recipe = a->input;
    o.model = a->model;
    o.sets = a->sets;
    o.n_sets = a->n_sets;
    o.output = a->output;
    o.threads = a->jobs;
    o.cache_dir = a->cache_dir;
    o.emit_source = a->emit_source;
    o.dump_after = a->dump_after;
    return o;
}

int cli_ir(const CliArgs *a)
{
    IrBuf out = {0};
    if (a->dump_after) {
        int known = !strcmp(a->dump_after, "all");
        for (int i = 0; i < gir_pass_count(); i++)
            known |= !strcmp(gir_pass_name(i), a->dump_after);
        if (!known) {
            cli_error("--dump-after: unknown pass '%s'", a->dump_after);
            return 2;
        }
    }
    PlOptions o = pl_opts(a);
    o.dump = &out;
    GirGraph *g = NULL;
    IrDiag d = {0};
    /* not raw: the schedule and every kernel's spec checked as kiln compile checks them, so that ir
     * refuses what compile would (at the recipe line of the op) */
    if (pl_graph(&o, a->raw, &g, &d) != IR_OK || (!a->raw && pl_check(&o, g, &d) != IR_OK)) {
        cli_error("%s", d.msg);
        ir_buf_free(&out);
        gir_graph_destroy(g);
        return 1;
    }
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
    FeOptions o = fe_options_default();
    o.model = a->model;
    o.sets = a->sets;
    o.n_sets = a->n_sets;
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

int cli_compile(const CliArgs *a)
{
    if (!a->output) {
        cli_error("compile: missing -o OUT.kiln");
        return 2;
    }
    if (a->dump_after && !pl_dump_known(a->dump_after)) {
        cli_error("--dump-after: unknown pass or stage '%s' (a pass, schedule, kernels or all)",
                  a->dump_after);
        return 2;
    }
    const CgTarget *tv[CLI_MAX_TARGETS];
    for (int i = 0; i < a->n_targets; i++) {
        if (!(tv[i] = cg_target_find(a->targets[i]))) {
            int n;
            const CgTarget *all = cg_targets(&n);
            IrBuf known = {0};
            for (int k = 0; k < n; k++)
                ir_buf_printf(&known, "%s%s", k ? ", " : "", all[k].name);
            cli_error("--target: unknown target '%s' (known: %s)", a->targets[i], known.s ? known.s : "");
            ir_buf_free(&known);
            return 2;
        }
    }
    IrBuf dump = {0};
    PlOptions o = pl_opts(a);
    o.targets = tv;
    o.n_targets = a->n_targets;
    o.log = a->verbose ? stderr : NULL;
    if (a->dump_after) o.dump = &dump;
    PlStats st;
    IrDiag d = {0};
    IrStatus s = pl_compile(&o, &st, &d);
    if (st.warning[0]) fprintf(stderr, "kiln: warning: %s\n", st.warning);
    if (dump.s) fputs(dump.s, stdout);
    ir_buf_free(&dump);
    if (s != IR_OK) {
        cli_error("%s", d.msg);
        return 1;
    }
    if (a->verbose) {
        fprintf(
            stderr,
            "kiln: compiled %s (%s): %d nodes, %d launches, %d kernels (%d not implemented yet)\n"
            "kiln: frontend %.1f ms, passes %.1f ms, schedule %.1f ms, kernel IR %.1f ms, package %.1f ms\n",
            a->input, st.model, st.nodes, st.launches, st.kernels, st.missing, st.ms_frontend, st.ms_passes,
            st.ms_schedule, st.ms_kernels, st.ms_package);
        if (a->n_targets) {
            char targets[256] = "";
            for (int i = 0; i < a->n_targets; i++)
                snprintf(targets + strlen(targets), sizeof targets - strlen(targets), "%s%s", i ? "," : "",
                         tv[i]->name);
            fprintf(stderr, "kiln: %d binaries for %s (%d from cache) in %.1f ms\n", st.binaries, targets,
                    st.cached, st.ms_binaries);
        }
        fprintf(stderr, "kiln: total %.1f ms\n", st.ms_total);
    }
    return 0;
}
