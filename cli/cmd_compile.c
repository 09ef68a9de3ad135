/* cmd_compile.c — `kiln compile`, `kiln ir`, `kiln models`: recipe -> graph -> passes -> schedule ->
 * kernels -> binaries per target -> package. compile writes the package through rt_pkgw (atomic: after
 * any error no file is left at -o). Kernels compile in parallel through the disk cache (cg_driver).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cg_driver.h"
#include "cli.h"
#include "cuda/cg_cuda.h"
#include "ir/sched.h"
#include "rt_package.h"
#include "rt_weights.h"

/* g:file_dtype for the recipe: the weights file it names, opened once per path while the recipe runs. */
typedef struct FileDtypes {
    char path[4096];
    RtWeights *w;
} FileDtypes;

static int file_dtype(void *ctx, const char *path, const char *name, const char *fallback, char *out,
                      int outlen, char *err, int errlen)
{
    FileDtypes *f = ctx;
    if (!f->w || strcmp(f->path, path)) {
        rt_w_close(f->w);
        f->w = NULL;
        if (rt_w_open(path, &f->w, err, errlen) != KILN_OK) return -1;
        snprintf(f->path, sizeof f->path, "%s", path);
    }
    return rt_w_stored_dtype(f->w, name, fallback, out, outlen, err, errlen) == KILN_OK ? 0 : -1;
}

static FeOptions fe_opts(const CliArgs *a, FileDtypes *files)
{
    FeOptions o = fe_options_default();
    o.model = a->model;
    o.sets = a->sets;
    o.n_sets = a->n_sets;
    if (files) o.file_dtype = file_dtype, o.file_dtype_ctx = files; /* NULL: the recipe is not built */
    return o;
}

/* Builds the graph and runs the passes (unless raw). Returns NULL after printing the error. */
static GirGraph *build(const CliArgs *a, int raw, IrBuf *dump, double *t_fe, double *t_pass)
{
    FileDtypes files = {.w = NULL};
    FeOptions o = fe_opts(a, &files);
    GirGraph *g = NULL;
    IrDiag d = {0};
    double t0 = ir_now_ms();
    IrStatus st = fe_recipe_build(a->input, &o, &g, &d);
    rt_w_close(files.w);
    if (st != IR_OK) {
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
        for (int i = 0; i < gir_pass_count(); i++)
            known |= !strcmp(gir_pass_name(i), a->dump_after);
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
    FeOptions o = fe_opts(a, NULL);
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

static void shape_text(const GirGraph *g, const GirType *t, IrBuf *b)
{
    ir_buf_put(b, "[", 1);
    for (int k = 0; k < t->rank; k++) {
        if (k) ir_buf_put(b, ",", 1);
        if (t->dim[k].sym >= 0)
            ir_buf_printf(b, "%s", g->sym[t->dim[k].sym]);
        else
            ir_buf_printf(b, "%lld", (long long)t->dim[k].n);
    }
    ir_buf_put(b, "]", 1);
}

/* Meta, config, graph and weight rows. */
static void write_model_rows(RtPkgWriter *w, const GirGraph *g, const CliArgs *a, const char *recipe_hash,
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
    for (int i = 0; i < g->n_nodes; i++) {
        const GirNode *n = g->nodes[i];
        if (n->op != GIR_OP_WEIGHT) continue;
        const GirType *t = &n->out[0]->type;
        IrBuf shape = {0};
        int64_t elems = 1;
        for (int k = 0; k < t->rank; k++)
            elems *= t->dim[k].n;
        shape_text(g, t, &shape);
        int64_t nbytes = elems / gir_dtype_block_elems(t->dtype) * gir_dtype_block_bytes(t->dtype);
        rt_pkgw_weight(w, gir_attr_s(n, "name", ""), gir_dtype_name(t->dtype), shape.oom ? "" : shape.s,
                       nbytes);
        ir_buf_free(&shape);
    }
}

/* Buffer and launch-plan rows of the schedule. */
static void write_plan_rows(RtPkgWriter *w, const Schedule *s)
{
    static const char *const kinds[] = {"input", "weight", "act"};
    /* the maxima the arena was planned for: a step of the runtime stays within them */
    const struct {
        const char *key;
        int64_t v;
    } lim[] = {{"plan_max_tokens", s->opt.max_tokens},
               {"plan_max_seqs", s->opt.max_seqs},
               {"plan_max_rows", s->opt.max_rows},
               {"plan_max_split_rows", s->opt.max_split_rows},
               {"plan_act_bytes", s->act_bytes}};
    for (unsigned i = 0; i < sizeof lim / sizeof lim[0]; i++) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)lim[i].v);
        rt_pkgw_meta(w, lim[i].key, v);
    }
    for (int i = 0; i < s->n_bufs; i++) {
        const SchedBuf *b = &s->bufs[i];
        if (b->kind == SCHED_BUF_WEIGHT) continue; /* the weights table has them */
        IrBuf shape = {0};
        shape_text(s->g, &b->type, &shape);
        rt_pkgw_buffer(w, b->name, kinds[b->kind], gir_dtype_name(b->type.dtype), shape.oom ? "" : shape.s,
                       b->offset, b->bytes, b->output);
        ir_buf_free(&shape);
    }
    for (int i = 0; i < s->n_launches; i++) {
        IrBuf args = {0};
        sched_launch_args(s, &s->launches[i], &args);
        rt_pkgw_launch(w, i, s->launches[i].kernel, args.oom ? "" : args.s);
        ir_buf_free(&args);
    }
}

/* The compiler build's identity for the kernel cache: size and mtime of the running executable. */
static void build_salt(char *out, size_t n)
{
    struct stat st;
    if (stat("/proc/self/exe", &st) == 0)
        snprintf(out, n, "%lld-%lld", (long long)st.st_size, (long long)st.st_mtime);
    else
        snprintf(out, n, "unknown");
}

typedef struct KernelStats {
    int built, missing, jobs, cached;
    double build_ms, compile_ms;
} KernelStats;

static int same_config(const KirConfig *a, const KirConfig *b)
{
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (kir_config_get(b, a->key[i], a->val[i] + 1) != a->val[i]) return 0;
    return 1;
}

/* Every launch passes exactly its kernel's parameters (a lowering/family mismatch is a bug, caught here
 * rather than by a kernel writing through the wrong pointer at run time). */
static int check_launch_args(const Schedule *s, KirKernel *const *kk)
{
    for (int i = 0; i < s->n_launches; i++) {
        const SchedLaunch *l = &s->launches[i];
        const KirKernel *k = kk[l->kernel];
        if (k && k->n_params != l->n_args) {
            cli_error("internal error: launch %d passes %d arguments to %s, which takes %d", i, l->n_args,
                      k->name, k->n_params);
            return 1;
        }
    }
    return 0;
}

/* The default config does not fit job's target (INVALID there): walk the family's candidates, closest
 * to the default first, until one compiles. The job keeps the first failure when none does. */
static void retry_config(CgJob *job, const Schedule *s, KirKernel *const *kk, int nk, IrArena *arena,
                         const CgDriverOptions *o, int verbose)
{
    int kid = -1;
    for (int i = 0; i < nk; i++)
        if (kk[i] == job->k) kid = i;
    if (kid < 0) return;
    const SchedKernel *sk = &s->kernels[kid];
    KirConfig cands[12];
    int n = kfam_config_candidates(sk->fam, &sk->spec, cg_target_limits(job->target), cands, 12);
    for (int c = 0; c < n; c++) {
        KirKernel *k = NULL;
        IrDiag d = {0};
        if (same_config(&cands[c], &job->k->cfg)) continue; /* the default: it just failed */
        if (sk->fam->build(arena, &sk->spec, &cands[c], &k, &d) != IR_OK) continue;
        CgJob alt = {.k = k, .target = job->target, .prefer = job->prefer};
        cg_compile_jobs(&alt, 1, o);
        if (alt.status != IR_OK && verbose > 1) fprintf(stderr, "kiln: candidate: %s\n", alt.msg);
        if (alt.status != IR_OK) {
            cg_binary_free(&alt.bin);
            continue;
        }
        if (verbose) {
            IrBuf conf = {0};
            kir_config_print(&k->cfg, &conf);
            fprintf(stderr, "kiln: %s: default config does not fit %s; using %s\n", sk->name,
                    job->target->name, conf.s ? conf.s : "?");
            ir_buf_free(&conf);
        }
        cg_binary_free(&job->bin);
        *job = alt; /* the binary records alt's config and grid under kernel row kid */
        job->k = k;
        job->kernel_row = kid;
        return;
    }
}

/* Launch geometry of a compiled binary, stored with it (the runtime cannot recompute it): the CUDA
 * backend's block size and dynamic shared memory; the LLVM GPU lowering runs a program on one thread of
 * a block of any size, so 1 (docs/BACKENDS.md); host code: 1, no shared memory. */
static void launch_geometry(const CgJob *job, int *block, int *smem)
{
    *block = 1, *smem = 0;
    if (strcmp(job->backend, "cuda")) return;
    CgCudaLaunch li;
    IrDiag d = {0};
    if (cg_cuda_launch_info(job->k, job->target, &li, &d) == IR_OK)
        *block = li.threads, *smem = li.smem_bytes;
}

/* Small-M variants of a kernel whose family shapes its default by the typical row count (m_hint: the
 * linear layers): the defaults for m_hint 1, 16 and 64 that differ from the default config and from each
 * other and keep its parameters (so the launch plan serves all). A GPU target gets them beside the
 * default and the runtime picks one per launch by M (the smallest BM >= M, else the largest BM:
 * docs/RUNTIME.md); decode steps then run decode-shaped tiles. The host target gets only the first (the
 * host backend computes whole tiles, masked rows included, so small tiles never cost it). Returns how
 * many were written to out (max 3). */
static int small_m_variants(const SchedKernel *sk, const KirKernel *k, IrArena *arena, KirKernel **out)
{
    static const int hints[] = {1, 16, 64};
    int n = 0;
    if (kfam_spec_i(&sk->spec, "m_hint", 0) > 0) return 0;
    for (unsigned h = 0; h < sizeof hints / sizeof hints[0]; h++) {
        KfamSpec spec = sk->spec;
        KirConfig cfg = {0};
        KirKernel *vk = NULL;
        IrDiag d = {0};
        kfam_spec_int(&spec, "m_hint", hints[h]);
        sk->fam->defaults(&spec, &cfg);
        int dup = same_config(&cfg, &k->cfg);
        for (int i = 0; i < n && !dup; i++)
            dup = same_config(&cfg, &out[i]->cfg);
        /* a variant that splits K serves only rows its BM covers (kfam_matmul.c, ws=1): the runtime picks
         * it only below the default's BM */
        if (kir_config_get(&cfg, "SPLIT_K", 1) > 1 &&
            kir_config_get(&cfg, "BM", 0) >= kir_config_get(&k->cfg, "BM", 0))
            continue;
        if (dup || sk->fam->build(arena, &sk->spec, &cfg, &vk, &d) != IR_OK || vk->n_params != k->n_params)
            continue;
        out[n++] = vk;
    }
    return n;
}

/* Builds every kernel of the schedule at its default config, writes the kernel rows, compiles them for
 * every target (parallel, cached) and writes the binaries. Returns 0, or 1 after printing the error. */
static int write_kernels(RtPkgWriter *w, const Schedule *s, const CliArgs *a, const CgTarget **targets,
                         int n_targets, IrArena *arena, KernelStats *st)
{
    int rc = 1, nk = s->n_kernels;
    KirKernel **kk = calloc((size_t)nk + 1, sizeof *kk);
    CgJob *jobs = calloc((size_t)nk * (size_t)n_targets * 4 + 1, sizeof *jobs);
    /* optional[j]: job j is a small-M variant; one that does not fit its target is left out */
    char *optional = calloc((size_t)nk * (size_t)n_targets * 4 + 1, 1);
    char salt[64];
    if (!kk || !jobs || !optional) {
        cli_error("out of memory");
        goto done;
    }
    double t0 = ir_now_ms();
    for (int i = 0; i < nk; i++) {
        const SchedKernel *sk = &s->kernels[i];
        if (!sk->fam) {
            /* a graph-only package may describe ops kiln cannot run yet; a compiled one may not */
            st->missing++;
            if (n_targets) {
                cli_error("%s: kernel family '%s' is not implemented yet: cannot compile for %s", sk->name,
                          sk->spec.family, targets[0]->name);
                goto done;
            }
            if (a->verbose)
                fprintf(stderr, "kiln: %s: family '%s' not implemented yet: no kernel\n", sk->name,
                        sk->spec.family);
            continue;
        }
        KirConfig cfg = {0};
        IrDiag d = {0};
        sk->fam->defaults(&sk->spec, &cfg);
        if (sk->fam->build(arena, &sk->spec, &cfg, &kk[i], &d) != IR_OK) {
            cli_error("%s: %s", sk->name, d.msg);
            goto done;
        }
        IrBuf spec = {0}, conf = {0}, params = {0}, grid = {0}, text = {0};
        char hash[17];
        kfam_spec_print(&sk->spec, &spec);
        kir_config_print(&cfg, &conf);
        kir_params_print(kk[i], &params);
        kir_grid_print(kk[i], &grid);
        kir_print(kk[i], &text);
        ir_hash64_hex(ir_hash64(text.s, text.len, IR_HASH_SEED), hash);
        RtPkgKernel row = {i, sk->name, sk->spec.family, spec.s, conf.s, params.s, grid.s, hash, text.s};
        int oom = spec.oom || conf.oom || params.oom || grid.oom || text.oom;
        if (!oom) rt_pkgw_kernel(w, &row);
        ir_buf_free(&spec), ir_buf_free(&conf), ir_buf_free(&params), ir_buf_free(&grid), ir_buf_free(&text);
        if (oom) {
            cli_error("out of memory");
            goto done;
        }
        st->built++;
        KirKernel *var[3];
        int nv = small_m_variants(sk, kk[i], arena, var);
        for (int t = 0; t < n_targets; t++) {
            if (targets[t]->backend == CG_BACKEND_HOST) {
                KirKernel *hk = kk[i]; /* the first variant that does not split K (it serves any M) */
                for (int v = nv - 1; v >= 0; v--)
                    if (kir_config_get(&var[v]->cfg, "SPLIT_K", 1) == 1) hk = var[v];
                jobs[st->jobs++] = (CgJob){.k = hk, .target = targets[t], .kernel_row = i};
                continue;
            }
            jobs[st->jobs++] = (CgJob){.k = kk[i], .target = targets[t], .kernel_row = i};
            for (int v = 0; v < nv; v++) {
                optional[st->jobs] = 1;
                jobs[st->jobs++] = (CgJob){.k = var[v], .target = targets[t], .kernel_row = i};
            }
        }
    }
    st->build_ms = ir_now_ms() - t0;
    if (check_launch_args(s, kk)) goto done;
    build_salt(salt, sizeof salt);
    IrDiag cache_warn = {0};
    CgDriverOptions o = {.threads = a->jobs, .cache_dir = a->cache_dir, .salt = salt, .warn = &cache_warn,
                         .source = a->emit_source};
    t0 = ir_now_ms();
    cg_compile_jobs(jobs, st->jobs, &o);
    st->compile_ms = ir_now_ms() - t0;
    if (cache_warn.status != IR_OK) {
        fprintf(stderr, "kiln: warning: %s\n", cache_warn.msg);
        o.cache_dir = NULL; /* the retries below would only be refused again */
    }
    for (int j = 0; j < st->jobs; j++)
        if (!optional[j] && (jobs[j].status == IR_ERR_LIMIT || jobs[j].status == IR_ERR_UNSUPPORTED))
            retry_config(&jobs[j], s, kk, nk, arena, &o, a->verbose);
    for (int j = 0; j < st->jobs; j++) {
        CgJob *job = &jobs[j];
        if (optional[j] && job->status != IR_OK) continue;
        int dup = 0; /* a variant whose config the default's retry already took */
        for (int i = 0; i < j && optional[j] && !dup; i++)
            dup = jobs[i].status == IR_OK && jobs[i].kernel_row == job->kernel_row &&
                  jobs[i].target == job->target && same_config(&jobs[i].k->cfg, &job->k->cfg);
        if (dup) continue;
        if (job->status != IR_OK) {
            cli_error("%s for %s: %s", job->k->name, job->target->name, job->msg);
            goto done;
        }
        st->cached += job->cached;
        int kid = job->kernel_row, block = 1, smem = 0;
        launch_geometry(job, &block, &smem);
        IrBuf conf = {0}, grid = {0};
        kir_config_print(&job->k->cfg, &conf);
        kir_grid_print(job->k, &grid);
        rt_pkgw_binary(w, kid, job->target->name, conf.oom ? "" : conf.s, grid.oom ? "" : grid.s,
                       job->bin.format, job->bin.entry ? job->bin.entry : job->k->name, block, smem,
                       job->bin.data, job->bin.size, job->bin.compile_ms);
        ir_buf_free(&conf);
        ir_buf_free(&grid);
    }
    rc = 0;
done:
    for (int j = 0; jobs && j < st->jobs; j++)
        cg_binary_free(&jobs[j].bin);
    free(jobs);
    free(kk);
    free(optional);
    return rc;
}

int cli_compile(const CliArgs *a)
{
    if (!a->output) {
        cli_error("compile: missing -o OUT.kiln");
        return 2;
    }
    char targets[256] = "";
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
    IrArena *arena = ir_arena_create();
    Schedule *sched = NULL;
    KernelStats ks = {0};
    IrDiag d = {0};
    char err[512], recipe_hash[17];
    if (!src) {
        cli_error("%s: cannot read", a->input);
        goto done;
    }
    if (!arena) {
        cli_error("out of memory");
        goto done;
    }
    double t_sched = ir_now_ms();
    if (sched_build(g, NULL, arena, &sched, &d) != IR_OK) {
        cli_error("%s: %s", a->input, d.msg);
        goto done;
    }
    t_sched = ir_now_ms() - t_sched;
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
    write_model_rows(w, g, a, recipe_hash, targets, &text);
    write_plan_rows(w, sched);
    if (write_kernels(w, sched, a, tv, a->n_targets, arena, &ks)) goto done;
    double t_pkg = ir_now_ms();
    KilnStatus s = rt_pkgw_commit(w, err, sizeof err);
    w = NULL;
    if (s != KILN_OK) {
        cli_error("%s", err);
        goto done;
    }
    rc = 0;
    if (a->verbose) {
        double t_end = ir_now_ms();
        fprintf(
            stderr,
            "kiln: compiled %s (%s): %d nodes, %d launches, %d kernels (%d not implemented yet)\n"
            "kiln: frontend %.1f ms, passes %.1f ms, schedule %.1f ms, kernel IR %.1f ms, package %.1f ms\n",
            a->input, g->model ? g->model : "-", g->n_nodes, sched->n_launches, sched->n_kernels, ks.missing,
            t_fe, t_pass, t_sched, ks.build_ms, t_end - t_pkg);
        if (a->n_targets)
            fprintf(stderr, "kiln: %d binaries for %s (%d from cache) in %.1f ms\n", ks.jobs, targets,
                    ks.cached, ks.compile_ms);
        fprintf(stderr, "kiln: total %.1f ms\n", t_end - t_start);
    }
done:
    rt_pkgw_abort(w);
    ir_arena_destroy(arena);
    ir_buf_free(&text);
    free(src);
    gir_graph_destroy(g);
    return rc;
}
