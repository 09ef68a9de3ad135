/* cg_driver.c — parallel compilation with a content-addressed disk cache.
 *
 * Workers take jobs from a shared counter. A job's cache key is FNV-1a 64 over the kernel's printed IR,
 * the target, the backend and the salt; an entry is one file "<key>.kbin": a header line
 * "kiln-bin 1 <format> <entry> <size> <fnv of payload>\n" then the payload. Entries are written to a temp
 * file and renamed, so a reader sees a whole entry or none; any entry that does not parse or whose
 * payload hash differs is ignored (and overwritten by the recompile).
 */
#define _POSIX_C_SOURCE 200809L
#include "cg_driver.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct Pool {
    CgJob *jobs;
    int n;
    const CgDriverOptions *o;
    pthread_mutex_t mu;
    int next;
} Pool;

static uint64_t job_key(const CgJob *j, const char *backend, const char *salt)
{
    IrBuf b = {0};
    kir_print(j->k, &b);
    ir_buf_printf(&b, "\ntarget %s\nbackend %s\nsalt %s\nkiln %s\n", j->target->name, backend,
                  salt ? salt : "", KILN_VERSION_STRING);
    uint64_t h = b.oom ? 0 : ir_hash64(b.s, b.len, IR_HASH_SEED);
    ir_buf_free(&b);
    return h;
}

static void entry_path(const char *dir, uint64_t key, char *out, size_t n)
{
    char hex[17];
    ir_hash64_hex(key, hex);
    snprintf(out, n, "%s/%s.kbin", dir, hex);
}

static int cache_load(const char *path, CgBinary *bin)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char fmt[32], entry[256];
    unsigned long long size, hash;
    int ok = fscanf(f, "kiln-bin 1 %31s %255s %llu %llx", fmt, entry, &size, &hash) == 4 &&
             fgetc(f) == '\n' && size > 0 && size < (1ull << 31);
    void *data = ok ? malloc(size) : NULL;
    ok = data && fread(data, 1, size, f) == size && fgetc(f) == EOF &&
         ir_hash64(data, size, IR_HASH_SEED) == hash;
    fclose(f);
    static const char *const formats[] = {"cuda-c", "ptx",      "cubin",  "amdgpu-elf",
                                          "hsaco",  "host-obj", "llvm-ir"};
    const char *format = NULL;
    for (unsigned i = 0; ok && i < sizeof formats / sizeof formats[0]; i++)
        if (!strcmp(fmt, formats[i])) format = formats[i];
    if (ok && format && !strcmp(entry, "-")) { /* stored without an entry symbol */
        bin->entry = NULL;
    } else if (!ok || !format || !(bin->entry = strdup(entry))) {
        free(data);
        return 0;
    }
    bin->format = format;
    bin->data = data;
    bin->size = size;
    bin->compile_ms = 0;
    return 1;
}

/* mkdir -p; failures show up later as an unwritable cache (which only costs recompiles). */
static void make_dirs(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1; *c; c++)
        if (*c == '/') {
            *c = 0;
            mkdir(p, 0755);
            *c = '/';
        }
    mkdir(p, 0755);
}

static void cache_store(const char *dir, const char *path, const CgBinary *bin)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lx", path, (long)getpid(), (unsigned long)pthread_self());
    make_dirs(dir);
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    int ok = fprintf(f, "kiln-bin 1 %s %s %llu %llx\n", bin->format, bin->entry ? bin->entry : "-",
                     (unsigned long long)bin->size,
                     (unsigned long long)ir_hash64(bin->data, bin->size, IR_HASH_SEED)) > 0 &&
             fwrite(bin->data, 1, bin->size, f) == bin->size;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

static void run_job(CgJob *j, const CgDriverOptions *o)
{
    IrDiag d = {0};
    const CgBackend *be = cg_backend_for(j->target, j->prefer);
    memset(&j->bin, 0, sizeof j->bin);
    j->cached = 0;
    if (!be) {
        j->status =
            ir_diag_set(&d, IR_ERR_UNSUPPORTED, "kernel %s: no backend in this build serves %s%s%s",
                        j->k->name, j->target->name, j->prefer ? " with " : "", j->prefer ? j->prefer : "");
        goto done;
    }
    snprintf(j->backend, sizeof j->backend, "%s", be->name);
    j->status = kir_verify(j->k, cg_target_limits(j->target), &d);
    if (j->status != IR_OK) goto done;
    char path[4096] = "";
    uint64_t key = o->cache_dir ? job_key(j, be->name, o->salt) : 0; /* 0: could not hash (no memory) */
    if (key) {
        entry_path(o->cache_dir, key, path, sizeof path);
        if (cache_load(path, &j->bin)) {
            j->cached = 1;
            goto done;
        }
    }
    double t0 = ir_now_ms();
    j->status = be->compile(j->k, j->target, &j->bin, &d);
    if (j->status == IR_OK) {
        j->bin.compile_ms = ir_now_ms() - t0;
        if (key) cache_store(o->cache_dir, path, &j->bin);
    }
done:
    snprintf(j->msg, sizeof j->msg, "%s", d.msg);
}

static void *worker(void *arg)
{
    Pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n) return NULL;
        run_job(&p->jobs[i], p->o);
    }
}

void cg_compile_jobs(CgJob *jobs, int n, const CgDriverOptions *o)
{
    CgDriverOptions dflt = {0};
    if (!o) o = &dflt;
    int threads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    if (threads > n) threads = n;
    Pool p;
    p.jobs = jobs;
    p.n = n;
    p.o = o;
    p.next = 0;
    if (pthread_mutex_init(&p.mu, NULL) != 0) {
        for (int i = 0; i < n; i++)
            run_job(&jobs[i], o);
        return;
    }
    pthread_t tid[64];
    int started = 0;
    for (; started < threads && started < 64; started++)
        if (pthread_create(&tid[started], NULL, worker, &p) != 0) break;
    if (started == 0) worker(&p); /* no threads to be had: do it here */
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&p.mu);
}
