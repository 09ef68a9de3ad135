/* at_ahead.c — the compile-ahead pool (at_ahead.h).
 *
 * One mutex guards everything below it; workers take the next job in candidate order while it is within
 * the window past the last one taken, compile without the lock, and publish the result. `gen` counts
 * starts: a worker whose job belongs to an older start drops its result.
 */
#define _POSIX_C_SOURCE 200809L
#include "at_ahead.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JOB_WAIT, JOB_BUSY, JOB_DONE, JOB_TAKEN };

typedef struct Job {
    KirConfig cfg;
    char key[RT_TDB_MAX_CONFIG]; /* kir_config_print of cfg */
    int state;
    KilnStatus st;
    AtCompiled c;
    char msg[300];
} Job;

struct AtAhead {
    const CgTarget *target;
    const CgDriverOptions *cg;
    pthread_t *th;
    int n_th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int quit;
    unsigned gen;
    const AtKernel *k;
    Job *jobs;
    int n_jobs, next, taken; /* next: the first job not started; taken: one past the last taken */
    int busy;                /* compiles in flight */
};

static void jobs_drop(AtAhead *ah)
{
    for (int i = 0; i < ah->n_jobs; i++)
        at_compiled_free(&ah->jobs[i].c);
    free(ah->jobs);
    ah->jobs = NULL, ah->n_jobs = ah->next = ah->taken = 0;
}

static void *worker(void *arg)
{
    AtAhead *ah = arg;
    pthread_mutex_lock(&ah->mu);
    for (;;) {
        while (!ah->quit && (ah->next >= ah->n_jobs || ah->next >= ah->taken + 2 * ah->n_th))
            pthread_cond_wait(&ah->cv, &ah->mu);
        if (ah->quit) break;
        int j = ah->next++;
        unsigned gen = ah->gen;
        Job *job = &ah->jobs[j];
        if (job->state != JOB_WAIT) continue;
        job->state = JOB_BUSY;
        KirConfig cfg = job->cfg;
        const AtKernel *k = ah->k;
        ah->busy++;
        pthread_mutex_unlock(&ah->mu);
        AtCompiled c;
        char msg[300];
        KilnStatus st = at_compile(k->family, &k->spec, &cfg, ah->target, ah->cg, &c, msg, sizeof msg);
        pthread_mutex_lock(&ah->mu);
        ah->busy--;
        if (gen == ah->gen) {
            job->st = st, job->c = c, job->state = JOB_DONE;
            snprintf(job->msg, sizeof job->msg, "%s", st ? msg : "");
        } else {
            at_compiled_free(&c);
        }
        pthread_cond_broadcast(&ah->cv);
    }
    pthread_mutex_unlock(&ah->mu);
    return NULL;
}

AtAhead *at_ahead_create(int threads, const CgTarget *t, const CgDriverOptions *o)
{
    if (threads <= 0 || !t) return NULL;
    AtAhead *ah = calloc(1, sizeof *ah);
    if (!ah || !(ah->th = calloc((size_t)threads, sizeof *ah->th))) {
        free(ah);
        return NULL;
    }
    ah->target = t, ah->cg = o;
    pthread_mutex_init(&ah->mu, NULL);
    pthread_cond_init(&ah->cv, NULL);
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&ah->th[i], NULL, worker, ah) != 0) break;
        ah->n_th++;
    }
    if (!ah->n_th) {
        at_ahead_destroy(ah);
        return NULL;
    }
    return ah;
}

void at_ahead_destroy(AtAhead *ah)
{
    if (!ah) return;
    pthread_mutex_lock(&ah->mu);
    ah->quit = 1;
    pthread_cond_broadcast(&ah->cv);
    pthread_mutex_unlock(&ah->mu);
    for (int i = 0; i < ah->n_th; i++)
        pthread_join(ah->th[i], NULL);
    jobs_drop(ah);
    pthread_cond_destroy(&ah->cv);
    pthread_mutex_destroy(&ah->mu);
    free(ah->th);
    free(ah);
}

void at_ahead_start(AtAhead *ah, const AtKernel *k, const AtCand *cands, int n)
{
    if (!ah) return;
    Job *jobs = n > 0 ? calloc((size_t)n, sizeof *jobs) : NULL;
    for (int i = 0; jobs && i < n; i++) {
        jobs[i].cfg = cands[i].cfg;
        snprintf(jobs[i].key, sizeof jobs[i].key, "%s", cands[i].config);
    }
    pthread_mutex_lock(&ah->mu);
    ah->gen++;            /* compiles in flight for the previous kernel drop their results */
    ah->next = ah->n_jobs; /* and no new one starts */
    while (ah->busy)
        pthread_cond_wait(&ah->cv, &ah->mu); /* they may still read the previous kernel's spec */
    jobs_drop(ah);
    ah->k = k;
    ah->jobs = jobs; /* NULL (no candidates, or out of memory): every take compiles inline */
    ah->n_jobs = jobs ? n : 0;
    pthread_cond_broadcast(&ah->cv);
    pthread_mutex_unlock(&ah->mu);
}

int at_ahead_take(AtAhead *ah, const KirConfig *cfg, AtCompiled *out, KilnStatus *st, char *msg, int msglen)
{
    if (!ah) return -1;
    IrBuf key = {0};
    kir_config_print(cfg, &key);
    if (!key.s || key.oom) {
        ir_buf_free(&key);
        return -1;
    }
    pthread_mutex_lock(&ah->mu);
    int j = -1;
    for (int i = 0; i < ah->n_jobs && j < 0; i++)
        if (ah->jobs[i].state != JOB_TAKEN && !strcmp(ah->jobs[i].key, key.s)) j = i;
    ir_buf_free(&key);
    if (j < 0) {
        pthread_mutex_unlock(&ah->mu);
        return -1;
    }
    if (j + 1 > ah->taken) ah->taken = j + 1;
    pthread_cond_broadcast(&ah->cv); /* the window moved: the workers reach j (in order) */
    Job *job = &ah->jobs[j];
    while (job->state != JOB_DONE)
        pthread_cond_wait(&ah->cv, &ah->mu);
    *out = job->c, *st = job->st;
    memset(&job->c, 0, sizeof job->c);
    job->state = JOB_TAKEN;
    snprintf(msg, (size_t)msglen, "%s", job->msg);
    pthread_mutex_unlock(&ah->mu);
    return 0;
}
