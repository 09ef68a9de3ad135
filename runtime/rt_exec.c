/* rt_exec.c — the host and CUDA executors behind one interface (rt_exec.h).
 *
 * Host kernels are "host-so" binaries: each kernel's code linked into a shared object of its own by
 * `kiln compile --target host`. The runtime links no compiler: it writes the bytes to an anonymous
 * memory file (memfd_create; else an unlinked temporary file) and dlopens it through /proc/self/fd.
 * The entry is `void entry(void *const *args, const int32_t *grid)` (codegen/llvm/cg_host.h) and runs
 * every program itself.
 */
#define _GNU_SOURCE
#include "rt_exec.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt_device.h"
#include "rt_file.h"

typedef void (*RtHostEntry)(void *const *args, const int32_t *grid);
typedef void (*RtHostRange)(void *const *args, const int32_t *grid, int32_t lo, int32_t hi);

/* Host threads: a launch's programs split into contiguous parts, part 0 run by the caller, part i by
 * worker i-1 (programs are independent by the kernel contract, as on a GPU; atomics are real atomics). */
typedef struct HostPool {
    int n; /* workers */
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int pending, stop;
    RtHostRange fn; /* the job of generation gen */
    void *const *args;
    const int32_t *grid;
    int64_t total;
    int parts;
} HostPool;

typedef struct Worker {
    HostPool *p;
    int id;
} Worker;

struct RtExec {
    HostPool pool; /* host, with more than one thread */
    Worker *workers;
    RtDevice *dev;    /* NULL: the host */
    RtStream *stream; /* GPU: every copy and launch of the engine, in order (capturable) */
    RtEvent **marks;  /* profiling (GPU), created on first use */
    double *mark_s;   /* profiling (host) */
    char desc[320];
};

struct RtExecGraph {
    RtGraph *g;
};

struct RtExecKernel {
    void *so; /* host: the library and the descriptor of its memory file */
    int fd;
    RtHostEntry entry;
    RtHostRange range; /* NULL: a library from before ranged entries; runs on one thread */
    RtModule *mod;     /* GPU */
    RtFunction *fn;
    unsigned block, smem;
    char name[128];
};

static void part_bounds(const HostPool *p, int i, int32_t *lo, int32_t *hi)
{
    *lo = (int32_t)(p->total * i / p->parts), *hi = (int32_t)(p->total * (i + 1) / p->parts);
}

static void *worker_main(void *arg)
{
    Worker *w = arg;
    HostPool *p = w->p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        int part = w->id + 1;
        if (part >= p->parts) continue;
        int32_t lo, hi;
        part_bounds(p, part, &lo, &hi);
        RtHostRange fn = p->fn;
        void *const *args = p->args;
        const int32_t *grid = p->grid;
        pthread_mutex_unlock(&p->mu);
        fn(args, grid, lo, hi);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pool_stop(RtExec *x)
{
    HostPool *p = &x->pool;
    if (!p->th) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n; i++)
        pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu), pthread_cond_destroy(&p->go), pthread_cond_destroy(&p->done);
    free(p->th), free(x->workers);
    p->th = NULL;
}

/* Starts threads - 1 workers (fewer when a thread cannot start: the pool is an optimization). */
static void pool_start(RtExec *x, int threads)
{
    HostPool *p = &x->pool;
    if (threads < 2 || !(p->th = calloc((size_t)threads, sizeof *p->th)) ||
        !(x->workers = calloc((size_t)threads, sizeof *x->workers))) {
        free(p->th), p->th = NULL;
        return;
    }
    pthread_mutex_init(&p->mu, NULL), pthread_cond_init(&p->go, NULL), pthread_cond_init(&p->done, NULL);
    for (int i = 0; i < threads - 1; i++) {
        x->workers[i] = (Worker){p, i};
        if (pthread_create(&p->th[i], NULL, worker_main, &x->workers[i])) break;
        p->n++;
    }
}

/* Runs every program of grid with the range entry, spread over the pool. */
static void pool_run(HostPool *p, RtHostRange fn, void *const *args, const int32_t *grid, int64_t total)
{
    pthread_mutex_lock(&p->mu);
    p->fn = fn, p->args = args, p->grid = grid, p->total = total;
    p->parts = (int)(total < p->n + 1 ? total : p->n + 1);
    p->pending = p->parts - 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    int32_t lo, hi;
    part_bounds(p, 0, &lo, &hi);
    fn(args, grid, lo, hi);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

KilnStatus rt_exec_open(int device, int host_threads, RtExec **out, char *err, int errlen)
{
    *out = NULL;
    RtExec *x = calloc(1, sizeof *x);
    if (!x) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    if (device != -2) {
        KilnStatus s = rt_dev_open(device < 0 ? 0 : device, &x->dev);
        if (s != KILN_OK && (device >= 0 || s != KILN_ERR_UNSUPPORTED)) {
            free(x);
            return rt_file_errf(err, errlen, s, "GPU %d: %s", device < 0 ? 0 : device, rt_dev_errmsg());
        }
    }
    if (x->dev && rt_dev_stream_create(x->dev, &x->stream) != KILN_OK) {
        KilnStatus s = rt_file_errf(err, errlen, KILN_ERR_DEVICE, "GPU: %s", rt_dev_errmsg());
        rt_dev_close(x->dev);
        free(x);
        return s;
    }
    if (x->dev) {
        const RtDevInfo *i = rt_dev_info(x->dev);
        snprintf(x->desc, sizeof x->desc, "%s (%s, %d SMs, %.1f GB)", i->name,
                 rt_dev_target(x->dev) ? rt_dev_target(x->dev) : "no kiln target", i->sm_count,
                 (double)i->mem_total / 1e9);
    } else {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        int threads = host_threads > 0 ? host_threads : online > 0 ? (int)(online < 64 ? online : 64) : 1;
        pool_start(x, threads);
        snprintf(x->desc, sizeof x->desc, "host CPU (%d of %ld threads)", x->pool.n + 1, online);
    }
    *out = x;
    return KILN_OK;
}

void rt_exec_close(RtExec *x)
{
    if (!x) return;
    pool_stop(x);
    for (int i = 0; x->marks && i < RT_EXEC_MAX_MARKS; i++)
        rt_dev_event_destroy(x->marks[i]);
    free(x->marks), free(x->mark_s);
    rt_dev_stream_destroy(x->stream);
    rt_dev_close(x->dev);
    free(x);
}

int rt_exec_is_host(const RtExec *x)
{
    return !x->dev;
}

const char *rt_exec_target(const RtExec *x)
{
    return x->dev ? rt_dev_target(x->dev) : "host";
}

const char *rt_exec_describe(const RtExec *x)
{
    return x->desc;
}

int rt_exec_sm_count(const RtExec *x)
{
    return x->dev ? rt_dev_info(x->dev)->sm_count : 1;
}

void rt_exec_tune_device(const RtExec *x, RtTdbDevice *d)
{
    if (!x->dev) {
        rt_tdb_device_host(d);
        return;
    }
    const RtDevInfo *i = rt_dev_info(x->dev);
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", i->name);
    snprintf(d->arch, sizeof d->arch, "%s", rt_dev_target(x->dev) ? rt_dev_target(x->dev) : "none");
    d->sm_count = i->sm_count;
    d->mem_bytes = (int64_t)i->mem_total;
    snprintf(d->driver, sizeof d->driver, "%d", i->driver_version);
    snprintf(d->cuda, sizeof d->cuda, "%d.%d", i->driver_version / 1000, i->driver_version % 1000 / 10);
}

int rt_exec_binary_fits(const RtExec *x, const char *format, int block, int smem, char *why, int n)
{
    const char *where = x->dev ? "GPU" : "host";
    int ok = x->dev ? !strcmp(format, "cubin") || !strcmp(format, "ptx") : !strcmp(format, "host-so");
    if (!ok) {
        snprintf(why, (size_t)n, "a %s binary cannot run on the %s", format, where);
        return 0;
    }
    int limit = x->dev ? rt_dev_info(x->dev)->smem_optin : 0;
    if (x->dev && (block < 1 || block > 1024 || smem < 0 || (smem > 48 * 1024 && smem > limit))) {
        snprintf(why, (size_t)n, "block %d, smem %d bytes: over the GPU's limits (1024 threads, %d bytes)",
                 block, smem, limit);
        return 0;
    }
    return 1;
}

size_t rt_exec_mem_free(RtExec *x)
{
    size_t f = 0, t = 0;
    if (x->dev) return rt_dev_mem_info(x->dev, &f, &t) == KILN_OK ? f : 0;
    long pages = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    return pages > 0 && psize > 0 ? (size_t)pages * (size_t)psize : 0;
}

size_t rt_exec_mem_total(const RtExec *x)
{
    if (x->dev) return rt_dev_info(x->dev)->mem_total;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    return pages > 0 && psize > 0 ? (size_t)pages * (size_t)psize : SIZE_MAX;
}

/* ---- kernels ---- */

/* 1 when data[0..n) is an ELF64 shared object whose header tables and loadable segments lie inside it:
 * dlopen maps what the headers say, and a truncated file would fault (SIGBUS) on first touch. */
static int elf_whole(const unsigned char *d, size_t n)
{
    Elf64_Ehdr h;
    if (n < sizeof h || memcmp(d, ELFMAG, SELFMAG) || d[EI_CLASS] != ELFCLASS64) return 0;
    memcpy(&h, d, sizeof h);
    if (h.e_type != ET_DYN || h.e_phentsize != sizeof(Elf64_Phdr) || h.e_phoff > n ||
        (uint64_t)h.e_phnum * sizeof(Elf64_Phdr) > n - h.e_phoff ||
        (h.e_shnum && (h.e_shoff > n || (uint64_t)h.e_shnum * h.e_shentsize > n - h.e_shoff)))
        return 0;
    for (int i = 0; i < h.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, d + h.e_phoff + (size_t)i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_LOAD && (ph.p_offset > n || ph.p_filesz > n - ph.p_offset)) return 0;
    }
    return 1;
}

static KilnStatus host_load(const RtPlanBinary *pk, RtExecKernel *k, char *err, int errlen)
{
    if (!elf_whole(pk->data, pk->size))
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "kernel %s: host code is not a whole ELF64 shared object (%zu bytes)", k->name,
                            pk->size);
    int fd = -1;
#ifdef MFD_CLOEXEC
    fd = memfd_create(k->name, MFD_CLOEXEC);
#endif
    if (fd < 0) {
        char tmpl[] = "/tmp/kiln-kernel-XXXXXX";
        if ((fd = mkstemp(tmpl)) >= 0) unlink(tmpl);
    }
    if (fd < 0)
        return rt_file_errf(err, errlen, KILN_ERR_IO, "kernel %s: no temporary file: %s", k->name,
                            strerror(errno));
    const unsigned char *p = pk->data;
    for (size_t off = 0; off < pk->size;) {
        ssize_t w = write(fd, p + off, pk->size - off);
        if (w <= 0) {
            k->fd = fd;
            return rt_file_errf(err, errlen, KILN_ERR_IO, "kernel %s: cannot write its code: %s", k->name,
                                strerror(errno));
        }
        off += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    /* the descriptor stays open while the code is loaded: dlopen knows libraries by name, and a closed
     * descriptor's number (so its /proc path) would come back for the next kernel */
    k->fd = fd;
    k->so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!k->so)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "kernel %s: cannot load host code: %s", k->name,
                            dlerror());
    *(void **)&k->entry = dlsym(k->so, pk->entry);
    char range[300];
    snprintf(range, sizeof range, "%s_range", pk->entry);
    *(void **)&k->range = dlsym(k->so, range);
    /* dlsym also searches the object's dependencies (libc): a symbol must be the kernel code's own */
    Dl_info in_entry, in_range;
    if (!k->entry || !dladdr(*(void **)&k->entry, &in_entry) || !in_entry.dli_fname ||
        strcmp(in_entry.dli_fname, path) ||
        (k->range && (!dladdr(*(void **)&k->range, &in_range) || !in_range.dli_fname ||
                      strcmp(in_range.dli_fname, path))))
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "kernel %s: host code has no symbol %s of its own",
                            k->name, pk->entry);
    return KILN_OK;
}

static KilnStatus dev_load(RtExec *x, const RtPlanBinary *pk, RtExecKernel *k, char *err, int errlen)
{
    KilnStatus s = rt_dev_module_load(x->dev, pk->data, pk->size, &k->mod);
    if (s == KILN_OK) s = rt_dev_function(k->mod, pk->entry, &k->fn);
    /* always: the static shared memory (a split-K ticket) counts against the 48 KiB default too */
    if (s == KILN_OK && pk->smem > 0) s = rt_dev_function_set_smem(k->fn, pk->smem);
    if (s != KILN_OK) return rt_file_errf(err, errlen, s, "kernel %s: %s", k->name, rt_dev_errmsg());
    return KILN_OK;
}

KilnStatus rt_exec_load(RtExec *x, const char *name, const RtPlanBinary *pk, RtExecKernel **out, char *err,
                        int errlen)
{
    *out = NULL;
    RtExecKernel *k = calloc(1, sizeof *k);
    if (!k) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    snprintf(k->name, sizeof k->name, "%s", name);
    k->block = pk->block > 0 ? (unsigned)pk->block : 1, k->smem = pk->smem > 0 ? (unsigned)pk->smem : 0;
    int host_fmt = !strcmp(pk->format, "host-so"),
        dev_fmt = !strcmp(pk->format, "cubin") || !strcmp(pk->format, "ptx");
    KilnStatus s;
    if (x->dev ? !dev_fmt : !host_fmt)
        s = rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED, "kernel %s: a %s binary cannot run on the %s",
                         name, pk->format, x->dev ? "GPU" : "host");
    else
        s = x->dev ? dev_load(x, pk, k, err, errlen) : host_load(pk, k, err, errlen);
    if (s != KILN_OK) {
        rt_exec_unload(x, k);
        return s;
    }
    *out = k;
    return KILN_OK;
}

void rt_exec_unload(RtExec *x, RtExecKernel *k)
{
    (void)x;
    if (!k) return;
    if (k->so) dlclose(k->so);
    if (k->fd > 0) close(k->fd);
    rt_dev_module_unload(k->mod);
    free(k);
}

KilnStatus rt_exec_launch(RtExec *x, RtExecKernel *k, void **args, const unsigned grid[3], char *err,
                          int errlen)
{
    if (!grid[0] || !grid[1] || !grid[2]) return KILN_OK;
    if (!x->dev) {
        int32_t g[3] = {(int32_t)grid[0], (int32_t)grid[1], (int32_t)grid[2]};
        int64_t total = (int64_t)grid[0] * grid[1] * grid[2];
        if (x->pool.n && k->range && total > 1 && total <= INT32_MAX)
            pool_run(&x->pool, k->range, (void *const *)args, g, total);
        else
            k->entry((void *const *)args, g);
        return KILN_OK;
    }
    unsigned block[3] = {k->block, 1, 1};
    KilnStatus s = rt_dev_launch(k->fn, grid, block, k->smem, x->stream, args);
    if (s != KILN_OK) return rt_file_errf(err, errlen, s, "kernel %s: %s", k->name, rt_dev_errmsg());
    return KILN_OK;
}

/* ---- memory ---- */

KilnStatus rt_exec_alloc(RtExec *x, size_t bytes, uint64_t *addr, char *err, int errlen)
{
    *addr = 0;
    if (!bytes) bytes = 1;
    if (bytes > SIZE_MAX - 256)
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "allocation of %zu bytes refused", bytes);
    if (x->dev) {
        KilnStatus s = rt_dev_alloc(x->dev, bytes, addr);
        if (s != KILN_OK)
            return rt_file_errf(err, errlen, s, "out of GPU memory (%.1f MB): %s", (double)bytes / 1e6,
                                rt_dev_errmsg());
        return KILN_OK;
    }
    void *p = NULL;
    if (posix_memalign(&p, 256, (bytes + 255) & ~(size_t)255))
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of host memory (%.1f MB)", (double)bytes / 1e6);
    *addr = (uint64_t)(uintptr_t)p;
    return KILN_OK;
}

void rt_exec_free(RtExec *x, uint64_t addr)
{
    if (x->dev)
        rt_dev_free(x->dev, addr);
    else
        free((void *)(uintptr_t)addr);
}

static KilnStatus dev_status(KilnStatus s, const char *what, char *err, int errlen)
{
    return s == KILN_OK ? s : rt_file_errf(err, errlen, s, "%s: %s", what, rt_dev_errmsg());
}

KilnStatus rt_exec_put(RtExec *x, uint64_t dst, const void *src, size_t bytes, char *err, int errlen)
{
    if (!bytes) return KILN_OK;
    if (x->dev) /* pageable source: the call returns once src may be reused */
        return dev_status(rt_dev_copy_htod_async(x->stream, dst, src, bytes), "copy to the GPU", err, errlen);
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return KILN_OK;
}

KilnStatus rt_exec_get(RtExec *x, void *dst, uint64_t src, size_t bytes, char *err, int errlen)
{
    if (!bytes) return KILN_OK;
    if (x->dev) {
        KilnStatus s = rt_dev_copy_dtoh_async(x->stream, dst, src, bytes);
        if (s == KILN_OK) s = rt_dev_stream_synchronize(x->stream);
        return dev_status(s, "copy from the GPU", err, errlen);
    }
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return KILN_OK;
}

/* Device-wide operations (rare: a KV page copy-on-write, clearing the pool) are ordered with the
 * engine's stream by synchronizing around them. */
static KilnStatus dev_ordered(RtExec *x, KilnStatus (*op)(RtDevice *, uint64_t, uint64_t, size_t), uint64_t a,
                              uint64_t b, size_t n, const char *what, char *err, int errlen)
{
    KilnStatus s = rt_dev_stream_synchronize(x->stream);
    if (s == KILN_OK) s = op(x->dev, a, b, n);
    if (s == KILN_OK) s = rt_dev_synchronize(x->dev);
    return dev_status(s, what, err, errlen);
}

static KilnStatus dev_memset(RtDevice *d, uint64_t dst, uint64_t byte, size_t n)
{
    return rt_dev_memset8(d, dst, (unsigned char)byte, n);
}

KilnStatus rt_exec_copy(RtExec *x, uint64_t dst, uint64_t src, size_t bytes, char *err, int errlen)
{
    if (!bytes) return KILN_OK;
    if (x->dev) return dev_ordered(x, rt_dev_copy_dtod, dst, src, bytes, "copy on the GPU", err, errlen);
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    return KILN_OK;
}

KilnStatus rt_exec_fill(RtExec *x, uint64_t dst, unsigned char byte, size_t bytes, char *err, int errlen)
{
    if (!bytes) return KILN_OK;
    if (x->dev) return dev_ordered(x, dev_memset, dst, byte, bytes, "memset on the GPU", err, errlen);
    memset((void *)(uintptr_t)dst, byte, bytes);
    return KILN_OK;
}

KilnStatus rt_exec_sync(RtExec *x, char *err, int errlen)
{
    if (!x->dev) return KILN_OK;
    return dev_status(rt_dev_stream_synchronize(x->stream), "GPU", err, errlen);
}

KilnStatus rt_exec_mark(RtExec *x, int i, char *err, int errlen)
{
    if (i < 0 || i >= RT_EXEC_MAX_MARKS)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "mark %d out of range", i);
    if (!x->dev) {
        if (!x->mark_s && !(x->mark_s = calloc(RT_EXEC_MAX_MARKS, sizeof *x->mark_s)))
            return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
        x->mark_s[i] = rt_now_s();
        return KILN_OK;
    }
    if (!x->marks && !(x->marks = calloc(RT_EXEC_MAX_MARKS, sizeof *x->marks)))
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    KilnStatus s = x->marks[i] ? KILN_OK : rt_dev_event_create(x->dev, &x->marks[i]);
    if (s == KILN_OK) s = rt_dev_event_record(x->marks[i], x->stream);
    return dev_status(s, "profiling event", err, errlen);
}

double rt_exec_marks_ms(RtExec *x, int a, int b)
{
    if (a < 0 || b < 0 || a >= RT_EXEC_MAX_MARKS || b >= RT_EXEC_MAX_MARKS) return 0;
    if (!x->dev) return x->mark_s ? 1e3 * (x->mark_s[b] - x->mark_s[a]) : 0;
    float ms = 0;
    if (!x->marks || !x->marks[a] || !x->marks[b] || rt_dev_event_elapsed_ms(x->marks[a], x->marks[b], &ms))
        return 0;
    return ms;
}

KilnStatus rt_exec_capture_begin(RtExec *x, char *err, int errlen)
{
    if (!x->dev) return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED, "graphs need a GPU");
    return dev_status(rt_dev_capture_begin(x->stream), "graph capture", err, errlen);
}

KilnStatus rt_exec_capture_end(RtExec *x, RtExecGraph **out, char *err, int errlen)
{
    *out = NULL;
    RtGraph *graph = NULL;
    KilnStatus s = rt_dev_capture_end(x->stream, &graph);
    if (s != KILN_OK) return dev_status(s, "graph capture", err, errlen);
    RtExecGraph *g = calloc(1, sizeof *g);
    if (!g) {
        rt_dev_graph_destroy(graph);
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    }
    g->g = graph;
    *out = g;
    return KILN_OK;
}

KilnStatus rt_exec_graph_launch(RtExec *x, RtExecGraph *g, char *err, int errlen)
{
    return dev_status(rt_dev_graph_launch(g->g, x->stream), "graph launch", err, errlen);
}

void rt_exec_graph_free(RtExecGraph *g)
{
    if (!g) return;
    rt_dev_graph_destroy(g->g);
    free(g);
}
