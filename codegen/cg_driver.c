/* cg_driver.c — parallel compilation with a content-addressed disk cache.
 *
 * Workers take jobs from a shared counter. The cache is a directory DIR holding entries DIR/<key>.kbin
 * and DIR/tmp/ for entries being written. DIR and DIR/tmp are created 0700; a DIR (or tmp/) that is not
 * a directory owned by this user, or that group or others may write, is refused for the whole call (its
 * entries are code that kiln packages and runs).
 *
 * A job's key text names everything its binary depends on, one "name value" line each:
 *     ir <FNV-1a of the printed IR> <FNV of it with a second seed>   (the config is part of the IR text)
 *     target T / backend B / cpu <cg_host_cpu: triple, CPU, features> (host target only) / salt S / kiln V
 * The key is the FNV-1a of that text; the entry file is
 *     "kiln-cache 3\nkey <key>\n" <key text> "format F\nentry E\nlaunch T S\nsize N\nsum <FNV of payload>\n"
 *     <payload>
 * (entry "-": none; launch: the binary's threads and dynamic shared memory). A reader compares every header byte up to the end of the key text with the job's own
 * and then checks format, size (the file ends exactly after the payload) and checksum. Any mismatch is a
 * miss, and the entry is removed (when the path still names the file that was read) and rewritten by the
 * recompile.
 *
 * Writers write DIR/tmp/<key>.<pid>.<counter>.<random> (O_EXCL, 0600) and rename it onto the entry.
 * rename is atomic, so concurrent writers of one key, threads or processes, each put a whole entry in
 * place and a reader sees one whole entry or none. No fsync: a crash may leave a short entry, which the
 * checks turn into a miss. Opening the cache removes temporary files older than an hour (killed writers).
 */
#define _POSIX_C_SOURCE 200809L
#include "cg_driver.h"
#include "llvm/cg_host.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
    PATH_BYTES = 4096,
    STALE_TMP_S = 3600,   /* a temp file this old belongs to a writer that died */
    MAX_ENTRY_NAME = 255, /* the entry symbol in the header */
};
#define ENTRY_MAX_BYTES (1ull << 31)
#define KEY_SEED2       0x9e3779b97f4a7c15ull

static const char *const formats[] = {"cuda-c", "ptx",      "cubin",   "amdgpu-elf",
                                      "hsaco",  "host-obj", "host-so", "llvm-ir"};

typedef struct Pool {
    CgJob *jobs;
    int n;
    const CgDriverOptions *o;
    const char *cache; /* o->cache_dir once opened, else NULL */
    pthread_mutex_t mu;
    int next;
} Pool;

/* ---- the cache directory ---- */

/* mkdir -p with mode 0700. Returns 0 or the errno of the last mkdir that failed other than EEXIST. */
static int make_dirs(const char *dir)
{
    char p[PATH_BYTES];
    int err = 0;
    snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1; *c; c++)
        if (*c == '/' && c[-1] != '/') {
            *c = 0;
            if (mkdir(p, 0700) != 0 && errno != EEXIST) err = errno;
            *c = '/';
        }
    if (mkdir(p, 0700) != 0 && errno != EEXIST) err = errno;
    return err;
}

static IrStatus check_dir(const char *dir, int mkdir_err, IrDiag *d)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return ir_diag_set(d, IR_ERR_IO,
                           "kernel cache %s: cannot create it (%s); compiling without the cache", dir,
                           strerror(mkdir_err ? mkdir_err : errno));
    if (!S_ISDIR(st.st_mode))
        return ir_diag_set(d, IR_ERR_IO, "kernel cache %s: not a directory; compiling without the cache",
                           dir);
    if (st.st_uid != geteuid())
        return ir_diag_set(d, IR_ERR_IO,
                           "kernel cache %s: owned by uid %ld, not by this user (uid %ld); compiling without "
                           "the cache",
                           dir, (long)st.st_uid, (long)geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return ir_diag_set(d, IR_ERR_IO,
                           "kernel cache %s: writable by group or others (mode %04o); compiling without the "
                           "cache (chmod 700 it)",
                           dir, (unsigned)(st.st_mode & 07777));
    return IR_OK;
}

/* Removes regular files and links in tmp/ last modified more than STALE_TMP_S ago (best effort). */
static void sweep_tmp(const char *tmp)
{
    DIR *dp = opendir(tmp);
    if (!dp) return;
    time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(dp));) {
        struct stat st;
        if (e->d_name[0] == '.') continue;
        if (fstatat(dirfd(dp), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
            st.st_mtime < now - STALE_TMP_S)
            unlinkat(dirfd(dp), e->d_name, 0);
    }
    closedir(dp);
}

/* Creates and checks dir and dir/tmp, then sweeps dir/tmp. IR_OK, or IR_ERR_IO with the reason in d. */
static IrStatus cache_open(const char *dir, IrDiag *d)
{
    char tmp[PATH_BYTES];
    if (!*dir || strlen(dir) > PATH_BYTES - 64)
        return ir_diag_set(d, IR_ERR_IO,
                           "kernel cache '%.200s': empty or too long a path; compiling without it", dir);
    IrStatus s = check_dir(dir, make_dirs(dir), d);
    if (s != IR_OK) return s;
    snprintf(tmp, sizeof tmp, "%s/tmp", dir);
    s = check_dir(tmp, mkdir(tmp, 0700) != 0 && errno != EEXIST ? errno : 0, d);
    if (s != IR_OK) return s;
    sweep_tmp(tmp);
    return IR_OK;
}

/* ---- keys and entries ---- */

/* The expected header of j's entry up to the end of its key text, and the key. Returns 0 when j cannot
 * be cached: a host job without a description of the host CPU, or no memory. */
static int cache_head(const CgJob *j, const char *backend, const CgDriverOptions *o, IrBuf *head,
                      uint64_t *key)
{
    const char *cpu = NULL;
    if (j->target->backend == CG_BACKEND_HOST) {
        cpu = o->host_cpu ? o->host_cpu : cg_host_cpu();
        if (!cpu) return 0;
    }
    IrBuf ir = {0}, kt = {0};
    kir_print(j->k, &ir);
    if (!ir.oom) {
        char h1[17], h2[17];
        ir_hash64_hex(ir_hash64(ir.s, ir.len, IR_HASH_SEED), h1);
        ir_hash64_hex(ir_hash64(ir.s, ir.len, KEY_SEED2), h2);
        ir_buf_printf(&kt, "ir %s %s\ntarget %s\nbackend %s\n", h1, h2, j->target->name, backend);
        if (cpu) ir_buf_printf(&kt, "cpu %s\n", cpu);
        ir_buf_printf(&kt, "salt %s\nkiln %s\n", o->salt ? o->salt : "", KILN_VERSION_STRING);
    }
    int ok = !ir.oom && !kt.oom;
    if (ok) {
        char hex[17];
        *key = ir_hash64(kt.s, kt.len, IR_HASH_SEED);
        ir_hash64_hex(*key, hex);
        ir_buf_printf(head, "kiln-cache 3\nkey %s\n%s", hex, kt.s);
        ok = !head->oom;
    }
    ir_buf_free(&ir);
    ir_buf_free(&kt);
    return ok;
}

static void entry_path(const char *dir, uint64_t key, char *out, size_t n)
{
    char hex[17];
    ir_hash64_hex(key, hex);
    snprintf(out, n, "%s/%s.kbin", dir, hex);
}

/* Reads "<name> <value>\n" at *p (before end): value is a non-empty run without spaces or newlines. */
static int header_field(char **p, const char *end, const char *name, char **val, size_t *len)
{
    size_t n = strlen(name);
    if ((size_t)(end - *p) < n + 2 || memcmp(*p, name, n) || (*p)[n] != ' ') return 0;
    char *v = *p + n + 1, *e = v;
    while (e < end && *e != '\n' && *e != ' ')
        e++;
    if (e == v || e == end || *e != '\n') return 0;
    *val = v;
    *len = (size_t)(e - v);
    *p = e + 1;
    return 1;
}

/* Reads "<name> <a> <b>\n" at *p (before end): two values of header_field's form. */
static int header_field2(char **p, const char *end, const char *name, char **a, size_t *a_n, char **b,
                         size_t *b_n)
{
    size_t n = strlen(name);
    if ((size_t)(end - *p) < n + 4 || memcmp(*p, name, n) || (*p)[n] != ' ') return 0;
    char *v = *p + n + 1, *e = v;
    while (e < end && *e != '\n' && *e != ' ')
        e++;
    if (e == v || e == end || *e != ' ') return 0;
    *a = v;
    *a_n = (size_t)(e - v);
    char *w = e + 1, *f = w;
    while (f < end && *f != '\n' && *f != ' ')
        f++;
    if (f == w || f == end || *f != '\n') return 0;
    *b = w;
    *b_n = (size_t)(f - w);
    *p = f + 1;
    return 1;
}

static int parse_u64(const char *s, size_t n, int base, uint64_t *out)
{
    char buf[24];
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    for (size_t i = 0; i < n; i++)
        if (!(base == 16 ? (buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f')
                         : buf[i] >= '0' && buf[i] <= '9'))
            return 0;
    errno = 0;
    *out = strtoull(buf, NULL, base);
    return errno == 0;
}

/* Checks an entry's bytes (buf, n) against the expected head; on success moves the payload to the front
 * of buf and fills bin (bin->data = buf). Returns 0 on any mismatch. */
static int entry_parse(char *buf, size_t n, const IrBuf *head, CgBinary *bin)
{
    char *p = buf, *end = buf + n, *fmt, *entry, *size_s, *sum_s, *threads_s, *smem_s;
    size_t fmt_n, entry_n, size_n, sum_n, threads_n, smem_n;
    uint64_t size, sum, threads, smem;
    if (n < head->len || memcmp(buf, head->s, head->len)) return 0;
    p += head->len;
    if (!header_field(&p, end, "format", &fmt, &fmt_n) || !header_field(&p, end, "entry", &entry, &entry_n) ||
        !header_field2(&p, end, "launch", &threads_s, &threads_n, &smem_s, &smem_n) ||
        !parse_u64(threads_s, threads_n, 10, &threads) || !parse_u64(smem_s, smem_n, 10, &smem) ||
        threads < 1 || threads > 1024 || smem > (1u << 20) ||
        !header_field(&p, end, "size", &size_s, &size_n) || !header_field(&p, end, "sum", &sum_s, &sum_n) ||
        !parse_u64(size_s, size_n, 10, &size) || sum_n != 16 || !parse_u64(sum_s, sum_n, 16, &sum) ||
        size != (uint64_t)(end - p) || ir_hash64(p, size, IR_HASH_SEED) != sum)
        return 0;
    const char *format = NULL;
    for (unsigned i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strlen(formats[i]) == fmt_n && !memcmp(fmt, formats[i], fmt_n)) format = formats[i];
    if (!format) return 0;
    char *sym = NULL;
    if (!(entry_n == 1 && entry[0] == '-')) {
        if (!(sym = malloc(entry_n + 1))) return 0;
        memcpy(sym, entry, entry_n);
        sym[entry_n] = 0;
    }
    memmove(buf, p, size);
    buf[size] = 0; /* buf has n + 1 bytes */
    bin->format = format;
    bin->data = buf;
    bin->size = size;
    bin->entry = sym;
    bin->compile_ms = 0;
    bin->threads = (int)threads;
    bin->smem = (int)smem;
    return 1;
}

static int read_full(int fd, char *p, size_t n)
{
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        p += r;
        n -= (size_t)r;
    }
    return 1;
}

static int write_full(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return 0;
        c += w;
        n -= (size_t)w;
    }
    return 1;
}

/* Removes the entry at path when path still names the file that was read (dev, ino): a writer may have
 * renamed a good entry onto it since. */
static void remove_bad(const char *path, const struct stat *was)
{
    struct stat now;
    if (lstat(path, &now) == 0 && now.st_dev == was->st_dev && now.st_ino == was->st_ino) unlink(path);
}

/* 1 and bin filled when path holds a valid entry for head; 0 (miss) otherwise, removing a bad entry. */
static int cache_load(const char *path, const IrBuf *head, CgBinary *bin)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ELOOP && lstat(path, &st) == 0) remove_bad(path, &st); /* a symlink is no entry */
        return 0;
    }
    if (fstat(fd, &st) != 0) {
        close(fd);
        return 0;
    }
    char *buf = NULL;
    int ok = 0;
    if (S_ISREG(st.st_mode) && st.st_size >= 0 && (unsigned long long)st.st_size < ENTRY_MAX_BYTES) {
        size_t n = (size_t)st.st_size;
        if (!(buf = malloc(n + 1))) { /* no memory is no reason to drop the entry */
            close(fd);
            return 0;
        }
        ok = read_full(fd, buf, n) && entry_parse(buf, n, head, bin);
    }
    close(fd);
    if (ok) return 1;
    free(buf);
    if (!S_ISDIR(st.st_mode)) remove_bad(path, &st);
    return 0;
}

static atomic_ulong tmp_counter;

static void cache_store(const char *dir, const char *path, uint64_t key, const IrBuf *head,
                        const CgBinary *bin)
{
    int known = 0;
    for (unsigned i = 0; i < sizeof formats / sizeof formats[0]; i++)
        known |= bin->format && !strcmp(bin->format, formats[i]);
    const char *sym = bin->entry ? bin->entry : "-";
    if (!known || !bin->data || !*sym || strlen(sym) > MAX_ENTRY_NAME || strpbrk(sym, " \n") ||
        bin->threads < 1 || bin->threads > 1024 || bin->smem < 0 || bin->smem > (1 << 20))
        return;
    IrBuf h = {0};
    ir_buf_put(&h, head->s, head->len);
    ir_buf_printf(&h, "format %s\nentry %s\nlaunch %d %d\nsize %llu\nsum %016llx\n", bin->format, sym,
                  bin->threads, bin->smem,
                  (unsigned long long)bin->size,
                  (unsigned long long)ir_hash64(bin->data, bin->size, IR_HASH_SEED));
    char tmp[PATH_BYTES], hex[17];
    int fd = -1;
    ir_hash64_hex(key, hex);
    for (int attempt = 0; attempt < 8 && fd < 0 && !h.oom; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long n = atomic_fetch_add(&tmp_counter, 1);
        uint64_t mix[4] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)(uintptr_t)&ts, n};
        unsigned rnd = (unsigned)(ir_hash64(mix, sizeof mix, KEY_SEED2) & 0xffffffffu);
        snprintf(tmp, sizeof tmp, "%s/tmp/%s.%ld.%lu.%08x", dir, hex, (long)getpid(), n, rnd);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd >= 0) {
        int ok = write_full(fd, h.s, h.len) && write_full(fd, bin->data, bin->size);
        ok = (close(fd) == 0) && ok;
        if (!ok || rename(tmp, path) != 0) unlink(tmp);
    }
    ir_buf_free(&h);
}

/* ---- jobs ---- */

static void run_job(CgJob *j, const Pool *p)
{
    IrDiag d = {0};
    IrBuf head = {0};
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
    char path[PATH_BYTES] = "";
    uint64_t key = 0;
    int cache = p->cache && !p->o->source && cache_head(j, be->name, p->o, &head, &key);
    if (cache) {
        entry_path(p->cache, key, path, sizeof path);
        if (cache_load(path, &head, &j->bin)) {
            j->cached = 1;
            goto done;
        }
    }
    double t0 = ir_now_ms();
    j->status = (p->o->source ? be->source : be->compile)(j->k, j->target, &j->bin, &d);
    if (j->status == IR_OK) {
        j->bin.compile_ms = ir_now_ms() - t0;
        if (cache) cache_store(p->cache, path, key, &head, &j->bin);
    }
done:
    ir_buf_free(&head);
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
        run_job(&p->jobs[i], p);
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
    p.cache = NULL;
    p.next = 0;
    if (o->cache_dir && n > 0) {
        IrDiag d = {0};
        if (cache_open(o->cache_dir, &d) == IR_OK)
            p.cache = o->cache_dir;
        else if (o->warn)
            ir_diag_set(o->warn, d.status, "%s", d.msg);
    }
    if (pthread_mutex_init(&p.mu, NULL) != 0) {
        for (int i = 0; i < n; i++)
            run_job(&jobs[i], &p);
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
