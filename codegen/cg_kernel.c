/* cg_kernel.c — the kernel stage (cg_kernel.h): build, compile, retry.
 *
 * Invariant: a job's binary is its backend's output for job->k, and job->k is the kernel the family
 * builds for (spec, config) — so the config, grid and geometry a caller records with the binary are
 * those of the code in it. Builds use the caller's arena and happen on this thread; only the backends
 * run in parallel (cg_compile_jobs).
 */
#include "cg_kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CANDIDATES = 12 };

int cg_config_same(const KirConfig *a, const KirConfig *b)
{
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (kir_config_get(b, a->key[i], a->val[i] + 1) != a->val[i]) return 0;
    return 1;
}

static const KfamFacts *job_facts(const CgKernelJob *j)
{
    return j->facts ? j->facts : cg_target_facts(cg_target_defaults());
}

static void fail(CgKernelJob *j, CgKernelStage stage, IrStatus s, const char *msg)
{
    j->status = s;
    j->stage = stage;
    snprintf(j->msg, sizeof j->msg, "%s", msg);
}

/* The kernel does not fit j's target: the family's candidates, closest to it first, until one compiles
 * (compiled alone, with o). j keeps its first failure when none does. */
static void retry(CgKernelJob *j, IrArena *a, const CgDriverOptions *o)
{
    KirConfig cands[MAX_CANDIDATES];
    const KfamFacts *facts = job_facts(j);
    int n =
        kfam_config_candidates(j->fam, j->spec, facts, cg_target_limits(j->target), cands, MAX_CANDIDATES);
    for (int c = 0; c < n; c++) {
        KirKernel *k = NULL;
        IrDiag d = {0};
        if (cg_config_same(&cands[c], &j->k->cfg)) continue; /* the config that just failed */
        if (j->fam->build(a, j->spec, facts, &cands[c], &k, &d) != IR_OK) continue;
        CgJob alt = {.k = k, .target = j->target};
        cg_compile_jobs(&alt, 1, o);
        if (alt.status != IR_OK) {
            cg_binary_free(&alt.bin);
            continue;
        }
        cg_binary_free(&j->bin);
        j->k = k;
        j->bin = alt.bin;
        j->cached = alt.cached;
        j->status = IR_OK;
        j->msg[0] = 0;
        j->retried = 1;
        return;
    }
}

void cg_kernel_jobs(CgKernelJob *jobs, int n, IrArena *a, const CgDriverOptions *o)
{
    CgDriverOptions one = {.threads = 1};
    if (!o) o = &one;
    CgJob *cj = calloc((size_t)n + 1, sizeof *cj);
    for (int i = 0; i < n; i++) {
        CgKernelJob *j = &jobs[i];
        memset(&j->bin, 0, sizeof j->bin);
        j->status = IR_OK, j->stage = 0, j->msg[0] = 0, j->cached = j->retried = 0;
        if (!cj) {
            fail(j, CG_STAGE_COMPILE, IR_ERR_NOMEM, "out of memory");
            continue;
        }
        if (!j->k) {
            KirKernel *k = NULL;
            IrDiag d = {0};
            IrStatus s = j->fam ? j->fam->build(a, j->spec, job_facts(j), &j->cfg, &k, &d) : IR_ERR_INPUT;
            if (s != IR_OK) {
                fail(j, CG_STAGE_BUILD, s, j->fam ? d.msg : "no kernel family");
                continue;
            }
            j->k = k;
        }
        cj[i] = (CgJob){.k = j->k, .target = j->target};
    }
    if (!cj) return;
    /* one batch: the backends run in parallel over every job that built */
    int m = 0;
    int *of = calloc((size_t)n + 1, sizeof *of);
    for (int i = 0; of && i < n; i++)
        if (jobs[i].status == IR_OK) cj[m] = cj[i], of[m++] = i;
    if (of) cg_compile_jobs(cj, m, o);
    for (int c = 0; of && c < m; c++) {
        CgKernelJob *j = &jobs[of[c]];
        j->bin = cj[c].bin;
        j->cached = cj[c].cached;
        if (cj[c].status != IR_OK) fail(j, CG_STAGE_COMPILE, cj[c].status, cj[c].msg);
    }
    for (int i = 0; !of && i < n; i++)
        if (jobs[i].status == IR_OK) fail(&jobs[i], CG_STAGE_COMPILE, IR_ERR_NOMEM, "out of memory");
    /* a cache the batch could not use would only be refused again */
    CgDriverOptions ro = *o;
    if (o->warn && o->warn->status != IR_OK) ro.cache_dir = NULL;
    for (int i = 0; i < n; i++) {
        CgKernelJob *j = &jobs[i];
        if (j->retry && j->stage == CG_STAGE_COMPILE &&
            (j->status == IR_ERR_LIMIT || j->status == IR_ERR_UNSUPPORTED))
            retry(j, a, &ro);
    }
    free(of);
    free(cj);
}

void cg_kernel_jobs_free(CgKernelJob *jobs, int n)
{
    for (int i = 0; jobs && i < n; i++)
        cg_binary_free(&jobs[i].bin);
}
