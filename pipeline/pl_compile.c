/* pl_compile.c — the compile pipeline (pl.h): one stage a function, each verified, each a dump point.
 *
 *     recipe   fe_recipe_build: the Lua recipe -> graph (g:file_dtype reads weights headers)
 *     passes   gir_run_passes: inference, fusion, ... with gir_verify after each pass
 *     schedule sched_build: kernels (family + spec), launch plan, buffer plan
 *     kernels  each kernel at its family's default config, and its small-M variants
 *     binaries every (kernel, target): compiled through cg_kernel_jobs (parallel, cached, retried)
 *     package  rt_pkgw: meta, graph, weights, plan, kernels, binaries; committed atomically
 *
 * Invariant: a binary row's config, grid and geometry are those of the code in it (cg_kernel.h), and
 * every launch passes exactly its kernel's parameters (checked after the kernels stage).
 */
#include "pl.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cg_driver.h"
#include "cg_kernel.h"
#include "frontend/fe.h"
#include "ir/sched.h"
#include "rt_file.h"
#include "rt_package.h"
#include "rt_weights.h"

enum { MAX_VARIANTS = 4 };

PlOptions pl_options_default(void)
{
    PlOptions o;
    memset(&o, 0, sizeof o);
    o.defaults_target = cg_target_defaults();
    return o;
}

int pl_dump_known(const char *name)
{
    int known = !strcmp(name, "all") || !strcmp(name, "schedule") || !strcmp(name, "kernels");
    for (int i = 0; i < gir_pass_count(); i++)
        known |= !strcmp(gir_pass_name(i), name);
    return known;
}

static int dumps(const PlOptions *o, const char *stage)
{
    return o->dump && o->dump_after && (!strcmp(o->dump_after, "all") || !strcmp(o->dump_after, stage));
}

/* ---- recipe + passes ---- */

/* d's message prefixed with "<where>: " (d->msg cannot be a printf argument of its own rewrite). */
static IrStatus prefix(IrDiag *d, IrStatus s, const char *where)
{
    char msg[sizeof d->msg];
    snprintf(msg, sizeof msg, "%s", d->msg);
    return ir_diag_set(d, s, "%s: %s", where, msg);
}

/* g:file_dtype for the recipe: the weights file it names, opened once per path while the recipe runs. */
typedef struct FileDtypes {
    char path[4096];
    RtWeights *w;
    const char *output; /* the package being compiled (NULL: none): a weights file must not be it */
} FileDtypes;

static int file_dtype(void *ctx, const char *path, const char *name, const char *fallback, char *out,
                      int outlen, char *err, int errlen)
{
    FileDtypes *f = ctx;
    if (!f->w || strcmp(f->path, path)) {
        rt_w_close(f->w);
        f->w = NULL;
        if (f->output && rt_file_out_distinct(f->output, path, "weights file", err, errlen)) return -1;
        if (rt_w_open(path, &f->w, err, errlen) != KILN_OK) return -1;
        snprintf(f->path, sizeof f->path, "%s", path);
    }
    return rt_w_stored_dtype(f->w, name, fallback, out, outlen, err, errlen) == KILN_OK ? 0 : -1;
}

static IrStatus graph(const PlOptions *o, int raw, GirGraph **out, PlStats *st, IrDiag *d)
{
    FileDtypes files = {.w = NULL, .output = o->output};
    FeOptions fo = fe_options_default();
    fo.model = o->model, fo.sets = o->sets, fo.n_sets = o->n_sets;
    if (o->recipe_instr_limit > 0) fo.instr_limit = o->recipe_instr_limit;
    if (o->recipe_mem_limit > 0) fo.mem_limit = o->recipe_mem_limit;
    fo.file_dtype = file_dtype, fo.file_dtype_ctx = &files;
    double t0 = ir_now_ms();
    IrStatus s = fe_recipe_build(o->recipe, &fo, out, d);
    rt_w_close(files.w);
    if (s != IR_OK) return s;
    double t1 = ir_now_ms();
    GirPassOptions po = {.dump_after = o->dump ? o->dump_after : NULL, .dump = o->dump};
    if (!raw && (s = gir_run_passes(*out, &po, d)) != IR_OK) {
        prefix(d, s, o->recipe);
        gir_graph_destroy(*out);
        *out = NULL;
        return s;
    }
    st->ms_frontend = t1 - t0;
    st->ms_passes = ir_now_ms() - t1;
    return IR_OK;
}

IrStatus pl_graph(const PlOptions *o, int raw, GirGraph **out, IrDiag *d)
{
    PlStats st;
    return graph(o, raw, out, &st, d);
}

/* ---- package rows of the graph and the schedule ---- */

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
static void write_model_rows(RtPkgWriter *w, const GirGraph *g, const PlOptions *o, const char *recipe_hash,
                             const char *targets, const IrBuf *text)
{
    char buf[512];
    rt_pkgw_meta(w, "recipe", g->name);
    char file[4096]; /* for people (kiln inspect): control characters shown as '?' */
    snprintf(file, sizeof file, "%s", o->recipe);
    for (char *c = file; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    rt_pkgw_meta(w, "recipe_file", file);
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

/* ---- kernels ---- */

/* The compiler build's identity for the kernel cache: size and mtime of the running executable. */
static void build_salt(char *out, size_t n)
{
    struct stat st;
    if (stat("/proc/self/exe", &st) == 0)
        snprintf(out, n, "%lld-%lld", (long long)st.st_size, (long long)st.st_mtime);
    else
        snprintf(out, n, "unknown");
}

/* The schedule's verifier against its kernels: every launch passes exactly its kernel's parameters (a
 * lowering/family mismatch is a bug, caught here rather than by a kernel writing through the wrong
 * pointer at run time). */
static IrStatus check_launch_args(const Schedule *s, KirKernel *const *kk, IrDiag *d)
{
    for (int i = 0; i < s->n_launches; i++) {
        const SchedLaunch *l = &s->launches[i];
        const KirKernel *k = kk[l->kernel];
        if (k && k->n_params != l->n_args)
            return ir_diag_set(d, IR_ERR_INTERNAL,
                               "internal error: launch %d passes %d arguments to %s, which takes %d", i,
                               l->n_args, k->name, k->n_params);
    }
    return IR_OK;
}

/* Small-M variants of a kernel whose family shapes its default by the typical row count (m_hint: the
 * linear layers): the defaults (for facts) for m_hint 1, 16 and 64 that differ from the default config
 * and from each other and keep its parameters (so the launch plan serves all). Every target gets them
 * beside the default and the runtime picks one per launch by M (the smallest BM >= M, else the largest
 * BM: docs/RUNTIME.md): decode steps run decode-shaped tiles. On the host that is what makes a decode
 * step cheap: its lowering computes whole tiles, masked rows included, so a 1-row launch of a 16-row
 * tile does 16 rows' work. Returns how many were written to out (at most MAX_VARIANTS). */
static int small_m_variants(const SchedKernel *sk, const KfamFacts *facts, const KirKernel *k, IrArena *arena,
                            KirKernel **out)
{
    static const int hints[MAX_VARIANTS] = {1, 16, 64, 256};
    int n = 0;
    if (kfam_spec_i(&sk->spec, "m_hint", 0) > 0) return 0;
    for (int h = 0; h < MAX_VARIANTS; h++) {
        KfamSpec spec = sk->spec;
        KirConfig cfg = {0};
        KirKernel *vk = NULL;
        IrDiag d = {0};
        kfam_spec_int(&spec, "m_hint", hints[h]);
        sk->fam->defaults(&spec, facts, &cfg);
        int dup = cg_config_same(&cfg, &k->cfg);
        for (int i = 0; i < n && !dup; i++)
            dup = cg_config_same(&cfg, &out[i]->cfg);
        /* a variant that splits K serves only rows its BM covers (kfam_matmul.c, ws=1): the runtime picks
         * it only below the default's BM */
        if (kir_config_get(&cfg, "SPLIT_K", 1) > 1 &&
            kir_config_get(&cfg, "BM", 0) >= kir_config_get(&k->cfg, "BM", 0))
            continue;
        if (dup || sk->fam->build(arena, &sk->spec, facts, &cfg, &vk, &d) != IR_OK ||
            vk->n_params != k->n_params)
            continue;
        out[n++] = vk;
    }
    return n;
}

/* Sets d to "<file>:<line>: " and the printf-style rest, for kernel i of s: the recipe location of the
 * graph op behind its first launch (a kernel is that op's spec, so its errors are the op's), or the
 * recipe's path when no launch has one. Every kernel error goes through here. Returns st. */
static IrStatus kernel_error(const Schedule *s, const char *recipe, int i, IrDiag *d, IrStatus st,
                             const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static IrStatus kernel_error(const Schedule *s, const char *recipe, int i, IrDiag *d, IrStatus st,
                             const char *fmt, ...)
{
    char where[4200], what[1100];
    snprintf(where, sizeof where, "%s", recipe);
    for (int l = 0; l < s->n_launches; l++)
        if (s->launches[l].kernel == i) {
            const GirNode *n = s->g->nodes[s->launches[l].node];
            snprintf(where, sizeof where, "%s:%d", n->loc.file ? n->loc.file : recipe, n->loc.line);
            break;
        }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ir_diag_set(d, st, "%s: %s", where, what);
}

/* Kernel sk at its family's default config for facts, built into arena and verified. */
static IrStatus build_default(const SchedKernel *sk, const KfamFacts *facts, IrArena *arena, KirKernel **k,
                              IrDiag *d)
{
    KirConfig cfg = {0};
    sk->fam->defaults(&sk->spec, facts, &cfg);
    IrStatus st = sk->fam->build(arena, &sk->spec, facts, &cfg, k, d);
    return st == IR_OK ? kir_verify(*k, NULL, d) : st;
}

static const KfamFacts *defaults_facts(const PlOptions *o)
{
    return cg_target_facts(o->defaults_target ? o->defaults_target : cg_target_defaults());
}

/* The facts target t's binaries are shaped by: the reference's (the kernel rows' own: one row serves
 * every GPU, and the tuning store keys by its IR), except on a CPU, whose lowering is unlike any GPU's
 * (every tile a stack array, every masked row computed): the host shapes its binaries by its own row. */
static const KfamFacts *binary_facts(const PlOptions *o, const CgTarget *t)
{
    return cg_target_facts(t)->cpu ? cg_target_facts(t) : defaults_facts(o);
}

IrStatus pl_check(const PlOptions *o, const GirGraph *g, IrDiag *d)
{
    IrArena *arena = ir_arena_create();
    Schedule *s = NULL;
    if (!arena) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    IrStatus st = sched_build(g, NULL, arena, &s, d);
    for (int i = 0; st == IR_OK && i < s->n_kernels; i++) {
        KirKernel *k = NULL;
        IrDiag e = {0};
        if (s->kernels[i].fam &&
            (st = build_default(&s->kernels[i], defaults_facts(o), arena, &k, &e)) != IR_OK)
            kernel_error(s, o->recipe, i, d, st, "%s: %s", s->kernels[i].name, e.msg);
    }
    ir_arena_destroy(arena);
    return st;
}

/* The pipeline's state: what each stage leaves for the next. */
typedef struct Pl {
    const PlOptions *o;
    PlStats *st;
    IrDiag *d;
    IrArena *arena;
    GirGraph *g;
    Schedule *sched;
    KirKernel **kk;    /* [n_kernels] each kernel at its default config; NULL: no family yet */
    CgKernelJob *jobs; /* [n_jobs] (kernel, target) pairs, defaults first, then the variants */
    char *optional;    /* [n_jobs] 1: a small-M variant, left out where it does not fit its target */
    int n_jobs;
    RtPkgWriter *w;
} Pl;

static IrStatus oom(Pl *p)
{
    return ir_diag_set(p->d, IR_ERR_NOMEM, "out of memory");
}

/* The kernel row of kernel i (built at its default config) into the package. */
static IrStatus write_kernel_row(Pl *p, int i)
{
    const SchedKernel *sk = &p->sched->kernels[i];
    const KirKernel *k = p->kk[i];
    IrBuf spec = {0}, conf = {0}, params = {0}, grid = {0}, text = {0};
    char hash[17];
    kfam_spec_print(&sk->spec, &spec);
    kir_config_print(&k->cfg, &conf);
    kir_params_print(k, &params);
    kir_grid_print(k, &grid);
    kir_print(k, &text);
    ir_hash64_hex(ir_hash64(text.s, text.len, IR_HASH_SEED), hash);
    RtPkgKernel row = {i, sk->name, sk->spec.family, spec.s, conf.s, params.s, grid.s, hash, text.s};
    int no_mem = spec.oom || conf.oom || params.oom || grid.oom || text.oom;
    if (!no_mem) rt_pkgw_kernel(p->w, &row);
    if (!no_mem && dumps(p->o, "kernels"))
        ir_buf_printf(p->o->dump, "; kernel %d %s\n%s", i, sk->name, text.s);
    ir_buf_free(&spec), ir_buf_free(&conf), ir_buf_free(&params), ir_buf_free(&grid), ir_buf_free(&text);
    return no_mem ? oom(p) : IR_OK;
}

/* Stage kernels: every kernel at its default config (its package row) and its jobs for every target. */
static IrStatus stage_kernels(Pl *p)
{
    const Schedule *s = p->sched;
    const PlOptions *o = p->o;
    int nk = s->n_kernels, max_jobs = nk * o->n_targets * (1 + MAX_VARIANTS);
    p->kk = calloc((size_t)nk + 1, sizeof *p->kk);
    p->jobs = calloc((size_t)max_jobs + 1, sizeof *p->jobs);
    p->optional = calloc((size_t)max_jobs + 1, 1);
    if (!p->kk || !p->jobs || !p->optional) return oom(p);
    const KfamFacts *facts = defaults_facts(o);
    double t0 = ir_now_ms();
    for (int i = 0; i < nk; i++) {
        const SchedKernel *sk = &s->kernels[i];
        if (!sk->fam) {
            /* a graph-only package may describe ops kiln cannot run yet; a compiled one may not */
            p->st->missing++;
            if (o->n_targets)
                return kernel_error(s, o->recipe, i, p->d, IR_ERR_UNSUPPORTED,
                                    "%s: kernel family '%s' is not implemented yet: cannot compile for %s",
                                    sk->name, sk->spec.family, o->targets[0]->name);
            if (o->log)
                fprintf(o->log, "kiln: %s: family '%s' not implemented yet: no kernel\n", sk->name,
                        sk->spec.family);
            continue;
        }
        IrDiag d = {0};
        IrStatus st = build_default(sk, facts, p->arena, &p->kk[i], &d);
        if (st != IR_OK) return kernel_error(s, o->recipe, i, p->d, st, "%s: %s", sk->name, d.msg);
        if ((st = write_kernel_row(p, i)) != IR_OK) return st;
        KirKernel *ref_var[MAX_VARIANTS];
        int ref_nv = small_m_variants(sk, facts, p->kk[i], p->arena, ref_var);
        for (int t = 0; t < o->n_targets; t++) {
            const KfamFacts *tf = binary_facts(o, o->targets[t]);
            KirKernel *def = p->kk[i], *own_var[MAX_VARIANTS], **var = ref_var;
            int nv = ref_nv;
            if (tf != facts) { /* the target's own default and variants, with the row's parameters */
                if ((st = build_default(sk, tf, p->arena, &def, &d)) != IR_OK)
                    return kernel_error(s, o->recipe, i, p->d, st, "%s for %s: %s", sk->name,
                                        o->targets[t]->name, d.msg);
                if (def->n_params != p->kk[i]->n_params)
                    return kernel_error(s, o->recipe, i, p->d, IR_ERR_INTERNAL,
                                        "internal error: %s for %s takes %d parameters, its row %d", sk->name,
                                        o->targets[t]->name, def->n_params, p->kk[i]->n_params);
                nv = small_m_variants(sk, tf, def, p->arena, own_var);
                var = own_var;
            }
            CgKernelJob job = {.fam = sk->fam,
                               .spec = &sk->spec,
                               .facts = tf,
                               .k = def,
                               .target = o->targets[t],
                               .retry = 1,
                               .row = i};
            p->jobs[p->n_jobs++] = job;
            for (int v = 0; v < nv; v++) {
                job.k = var[v], job.retry = 0;
                p->optional[p->n_jobs] = 1;
                p->jobs[p->n_jobs++] = job;
            }
        }
    }
    p->st->ms_kernels = ir_now_ms() - t0;
    return check_launch_args(s, p->kk, p->d);
}

/* Stage binaries: every job compiled (a default that does not fit its target retried), then written. */
static IrStatus stage_binaries(Pl *p)
{
    const PlOptions *o = p->o;
    char salt[64];
    build_salt(salt, sizeof salt);
    IrDiag cache_warn = {0};
    CgDriverOptions co = {.threads = o->threads,
                          .cache_dir = o->cache_dir,
                          .salt = salt,
                          .warn = &cache_warn,
                          .source = o->emit_source};
    double t0 = ir_now_ms();
    cg_kernel_jobs(p->jobs, p->n_jobs, p->arena, &co);
    p->st->ms_binaries = ir_now_ms() - t0;
    p->st->binaries = p->n_jobs;
    if (cache_warn.status != IR_OK) snprintf(p->st->warning, sizeof p->st->warning, "%s", cache_warn.msg);
    for (int j = 0; j < p->n_jobs; j++) {
        CgKernelJob *job = &p->jobs[j];
        if (p->optional[j] && job->status != IR_OK) continue;
        int dup = 0; /* a variant whose config the default's retry already took */
        for (int i = 0; i < j && p->optional[j] && !dup; i++)
            dup = p->jobs[i].status == IR_OK && p->jobs[i].row == job->row &&
                  p->jobs[i].target == job->target && cg_config_same(&p->jobs[i].k->cfg, &job->k->cfg);
        if (dup) continue;
        if (job->status != IR_OK)
            return kernel_error(p->sched, o->recipe, job->row, p->d, job->status, "%s for %s: %s",
                                job->k->name, job->target->name, job->msg);
        IrBuf conf = {0}, grid = {0};
        kir_config_print(&job->k->cfg, &conf);
        kir_grid_print(job->k, &grid);
        if (job->retried && o->log)
            fprintf(o->log, "kiln: %s: default config does not fit %s; using %s\n",
                    p->sched->kernels[job->row].name, job->target->name, conf.oom ? "?" : conf.s);
        p->st->cached += job->cached;
        rt_pkgw_binary(p->w, job->row, job->target->name, conf.oom ? "" : conf.s, grid.oom ? "" : grid.s,
                       job->bin.format, job->bin.entry ? job->bin.entry : job->k->name, job->bin.threads,
                       job->bin.smem, job->bin.data, job->bin.size, job->bin.compile_ms);
        ir_buf_free(&conf);
        ir_buf_free(&grid);
    }
    return IR_OK;
}

/* Stage schedule, and the package's model and plan rows. */
static IrStatus stage_schedule(Pl *p)
{
    const PlOptions *o = p->o;
    char err[512], recipe_hash[17], targets[256] = "";
    size_t src_len = 0;
    char *src = NULL;
    IrBuf text = {0};
    IrStatus s = ir_file_read(o->recipe, SIZE_MAX, &src, &src_len, p->d); /* regular files only */
    if (s) return s;
    double t0 = ir_now_ms();
    if ((s = sched_build(p->g, NULL, p->arena, &p->sched, p->d)) != IR_OK) {
        prefix(p->d, s, o->recipe);
        goto done;
    }
    p->st->ms_schedule = ir_now_ms() - t0;
    if (dumps(o, "schedule")) sched_print(p->sched, o->dump);
    ir_hash64_hex(ir_hash64(src, src_len, IR_HASH_SEED), recipe_hash);
    gir_print(p->g, 0, &text);
    if (text.oom) {
        s = oom(p);
        goto done;
    }
    if (rt_pkgw_create(o->output, &p->w, err, sizeof err) != KILN_OK) {
        s = ir_diag_set(p->d, IR_ERR_INPUT, "%s", err);
        goto done;
    }
    for (int i = 0; i < o->n_targets; i++)
        snprintf(targets + strlen(targets), sizeof targets - strlen(targets), "%s%s", i ? "," : "",
                 o->targets[i]->name);
    write_model_rows(p->w, p->g, o, recipe_hash, targets, &text);
    write_plan_rows(p->w, p->sched);
done:
    ir_buf_free(&text);
    free(src);
    return s;
}

static IrStatus stage_package(Pl *p)
{
    char err[512];
    double t0 = ir_now_ms();
    KilnStatus s = rt_pkgw_commit(p->w, err, sizeof err);
    p->w = NULL;
    p->st->ms_package = ir_now_ms() - t0;
    return s == KILN_OK ? IR_OK : ir_diag_set(p->d, IR_ERR_INPUT, "%s", err);
}

IrStatus pl_compile(const PlOptions *o, PlStats *st, IrDiag *d)
{
    PlStats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    if (!o->output) return ir_diag_set(d, IR_ERR_INPUT, "compile: no output package");
    char err[512]; /* before any work: an output that is a directory, FIFO, device or link is refused */
    if (rt_file_out_check(o->output, 0, "package", err, sizeof err) != KILN_OK ||
        rt_file_out_distinct(o->output, o->recipe, "recipe", err, sizeof err) != KILN_OK)
        return ir_diag_set(d, IR_ERR_IO, "%s", err);
    double t0 = ir_now_ms();
    Pl p = {.o = o, .st = st, .d = d, .arena = ir_arena_create()};
    IrStatus s = p.arena ? IR_OK : oom(&p);
    if (!s) s = graph(o, 0, &p.g, st, d); /* recipe, passes */
    if (!s) s = stage_schedule(&p);
    if (!s) s = stage_kernels(&p);
    if (!s) s = stage_binaries(&p);
    if (!s) s = stage_package(&p);
    if (!s) {
        st->nodes = p.g->n_nodes, st->launches = p.sched->n_launches, st->kernels = p.sched->n_kernels;
        snprintf(st->model, sizeof st->model, "%s", p.g->model ? p.g->model : "-");
    }
    st->ms_total = ir_now_ms() - t0;
    rt_pkgw_abort(p.w);
    cg_kernel_jobs_free(p.jobs, p.n_jobs);
    free(p.jobs), free(p.optional), free(p.kk);
    ir_arena_destroy(p.arena);
    gir_graph_destroy(p.g);
    return s;
}
