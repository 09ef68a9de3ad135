/* rt_device.c — the CUDA driver API through dlopen, with the few driver types and constants declared
 * here (values as in CUDA 13's cuda.h; the driver ABI keeps them stable).
 *
 * Each RtDevice owns its own dlopen handle and function table (no process globals; dlopen and cuInit
 * are reference-counted / idempotent in the loader and driver) and one retained primary context, made
 * current on the calling thread by every call that needs it. Versioned entry points (_v2) are looked up
 * by their real names. Errors: one line per failure in a thread-local buffer (rt_dev_errmsg), written
 * once where the driver call fails: "cuXxx: CUDA_ERROR_NAME".
 */
#define _POSIX_C_SOURCE 200809L
#include "rt_device.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    CU_STREAM_NON_BLOCKING = 1,
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    CU_EVENT_DEFAULT = 0,
};

/* The driver functions kiln uses: X(field, symbol, parameter list). */
#define RT_CU_FUNCS(X)                                                                                       \
    X(Init, "cuInit", (unsigned))                                                                            \
    X(DriverGetVersion, "cuDriverGetVersion", (int *))                                                       \
    X(GetErrorName, "cuGetErrorName", (CUresult, const char **))                                             \
    X(DeviceGetCount, "cuDeviceGetCount", (int *))                                                           \
    X(DeviceGet, "cuDeviceGet", (CUdevice *, int))                                                           \
    X(DeviceGetName, "cuDeviceGetName", (char *, int, CUdevice))                                             \
    X(DeviceGetAttribute, "cuDeviceGetAttribute", (int *, int, CUdevice))                                    \
    X(DeviceTotalMem, "cuDeviceTotalMem_v2", (size_t *, CUdevice))                                           \
    X(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))                                 \
    X(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice))                                         \
    X(CtxSetCurrent, "cuCtxSetCurrent", (CUcontext))                                                         \
    X(CtxSynchronize, "cuCtxSynchronize", (void))                                                            \
    X(ModuleLoadDataEx, "cuModuleLoadDataEx", (CUmodule *, const void *, unsigned, int *, void **))          \
    X(ModuleUnload, "cuModuleUnload", (CUmodule))                                                            \
    X(ModuleGetFunction, "cuModuleGetFunction", (CUfunction *, CUmodule, const char *))                      \
    X(FuncSetAttribute, "cuFuncSetAttribute", (CUfunction, int, int))                                        \
    X(FuncGetAttribute, "cuFuncGetAttribute", (int *, int, CUfunction))                                      \
    X(LaunchKernel, "cuLaunchKernel",                                                                        \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **,  \
       void **))                                                                                             \
    X(MemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t))                                                    \
    X(MemFree, "cuMemFree_v2", (CUdeviceptr))                                                                \
    X(MemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr, const void *, size_t))                                    \
    X(MemcpyDtoH, "cuMemcpyDtoH_v2", (void *, CUdeviceptr, size_t))                                          \
    X(MemcpyDtoD, "cuMemcpyDtoD_v2", (CUdeviceptr, CUdeviceptr, size_t))                                     \
    X(MemsetD8, "cuMemsetD8_v2", (CUdeviceptr, unsigned char, size_t))                                       \
    X(MemGetInfo, "cuMemGetInfo_v2", (size_t *, size_t *))                                                   \
    X(StreamCreate, "cuStreamCreate", (CUstream *, unsigned))                                                \
    X(StreamDestroy, "cuStreamDestroy_v2", (CUstream))                                                       \
    X(StreamSynchronize, "cuStreamSynchronize", (CUstream))                                                  \
    X(EventCreate, "cuEventCreate", (CUevent *, unsigned))                                                   \
    X(EventDestroy, "cuEventDestroy_v2", (CUevent))                                                          \
    X(EventRecord, "cuEventRecord", (CUevent, CUstream))                                                     \
    X(EventSynchronize, "cuEventSynchronize", (CUevent))                                                     \
    X(EventElapsedTime, "cuEventElapsedTime_v2", (float *, CUevent, CUevent))                                \
    X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (CUdeviceptr, const void *, size_t, CUstream))                \
    X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *, CUdeviceptr, size_t, CUstream))                      \
    X(StreamBeginCapture, "cuStreamBeginCapture_v2", (CUstream, int))                                        \
    X(StreamEndCapture, "cuStreamEndCapture", (CUstream, CUgraph *))                                         \
    X(GraphInstantiate, "cuGraphInstantiateWithFlags", (CUgraphExec *, CUgraph, unsigned long long))         \
    X(GraphLaunch, "cuGraphLaunch", (CUgraphExec, CUstream))                                                 \
    X(GraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec))                                                 \
    X(GraphDestroy, "cuGraphDestroy", (CUgraph))

typedef struct RtCu {
#define RT_CU_FIELD(f, sym, params) CUresult(*f) params;
    RT_CU_FUNCS(RT_CU_FIELD)
#undef RT_CU_FIELD
} RtCu;

struct RtDevice {
    void *lib;
    RtCu cu;
    CUdevice dev;
    CUcontext ctx;
    RtDevInfo info;
};

struct RtModule {
    RtDevice *dev;
    CUmodule mod;
    pthread_mutex_t mu; /* guards fns */
    RtFunction *fns;    /* handed out by rt_dev_function, freed with the module */
};

struct RtFunction {
    RtModule *mod;
    CUfunction fn;
    RtFunction *next;
};

struct RtStream {
    RtDevice *dev;
    CUstream s;
};

struct RtGraph {
    RtDevice *dev;
    CUgraph g;
    CUgraphExec exec;
};

struct RtEvent {
    RtDevice *dev;
    CUevent e;
};

static _Thread_local char errbuf[512];

const char *rt_dev_errmsg(void)
{
    return errbuf;
}

static KilnStatus fail(KilnStatus s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    for (char *p = errbuf; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return s;
}

/* Wraps a failed driver call once: "cuXxx: CUDA_ERROR_NAME". */
static KilnStatus cu_fail(const RtDevice *d, const char *call, CUresult r)
{
    const char *name = NULL;
    if (!d->cu.GetErrorName || d->cu.GetErrorName(r, &name) != CUDA_SUCCESS || !name) name = NULL;
    if (name) return fail(KILN_ERR_DEVICE, "%s: %s", call, name);
    return fail(KILN_ERR_DEVICE, "%s: CUDA error %d", call, r);
}

#define CU_CHECK(dev, call, args)                                                                            \
    do {                                                                                                     \
        CUresult r_ = (dev)->cu.call args;                                                                   \
        if (r_ != CUDA_SUCCESS) return cu_fail((dev), "cu" #call, r_);                                       \
    } while (0)

static KilnStatus make_current(RtDevice *d)
{
    CU_CHECK(d, CtxSetCurrent, (d->ctx));
    return KILN_OK;
}

static int attr(RtDevice *d, int a)
{
    int v = 0;
    if (d->cu.DeviceGetAttribute(&v, a, d->dev) != CUDA_SUCCESS) v = 0;
    return v;
}

KilnStatus rt_dev_open(int ordinal, RtDevice **out)
{
    *out = NULL;
    RtDevice *d = calloc(1, sizeof *d);
    if (!d) return fail(KILN_ERR_NOMEM, "rt_dev_open: out of memory");
    KilnStatus s = KILN_OK;
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d->lib) {
        s = fail(KILN_ERR_UNSUPPORTED, "no GPU driver: cannot load libcuda.so.1 (%s)", dlerror());
        goto fail;
    }
#define RT_CU_LOAD(f, sym, params)                                                                           \
    *(void **)&d->cu.f = dlsym(d->lib, sym);                                                                 \
    if (!d->cu.f && !strcmp(sym, "cuEventElapsedTime_v2"))                                                   \
        *(void **)&d->cu.f = dlsym(d->lib, "cuEventElapsedTime");                                            \
    if (!d->cu.f) {                                                                                          \
        s = fail(KILN_ERR_UNSUPPORTED, "libcuda.so.1 has no %s (driver too old)", sym);                      \
        goto fail;                                                                                           \
    }
    RT_CU_FUNCS(RT_CU_LOAD)
#undef RT_CU_LOAD
    CUresult r = d->cu.Init(0);
    if (r == CUDA_ERROR_STUB_LIBRARY || r == CUDA_ERROR_NO_DEVICE) {
        cu_fail(d, "cuInit", r);
        s = KILN_ERR_UNSUPPORTED;
        goto fail;
    }
    if (r != CUDA_SUCCESS) {
        s = cu_fail(d, "cuInit", r);
        goto fail;
    }
    int count = 0;
    if ((r = d->cu.DeviceGetCount(&count)) != CUDA_SUCCESS) {
        s = cu_fail(d, "cuDeviceGetCount", r);
        goto fail;
    }
    if (ordinal < 0 || ordinal >= count) {
        s = fail(count ? KILN_ERR_ARG : KILN_ERR_UNSUPPORTED, "GPU %d: this machine has %d", ordinal, count);
        goto fail;
    }
    if ((r = d->cu.DeviceGet(&d->dev, ordinal)) != CUDA_SUCCESS) {
        s = cu_fail(d, "cuDeviceGet", r);
        goto fail;
    }
    if ((r = d->cu.PrimaryCtxRetain(&d->ctx, d->dev)) != CUDA_SUCCESS) {
        s = cu_fail(d, "cuDevicePrimaryCtxRetain", r);
        goto fail;
    }
    if ((s = make_current(d)) != KILN_OK) {
        d->cu.PrimaryCtxRelease(d->dev);
        d->ctx = NULL;
        goto fail;
    }
    RtDevInfo *in = &d->info;
    if (d->cu.DeviceGetName(in->name, (int)sizeof in->name, d->dev) != CUDA_SUCCESS) strcpy(in->name, "?");
    in->ordinal = ordinal;
    in->sm = 10 * attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) +
             attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    in->sm_count = attr(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    in->smem_optin = attr(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    in->l2_bytes = attr(d, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    in->clock_khz = attr(d, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    in->mem_clock_khz = attr(d, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    in->mem_bus_bits = attr(d, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    if (d->cu.DeviceTotalMem(&in->mem_total, d->dev) != CUDA_SUCCESS) in->mem_total = 0;
    if (d->cu.DriverGetVersion(&in->driver_version) != CUDA_SUCCESS) in->driver_version = 0;
    *out = d;
    return KILN_OK;
fail:
    if (d->lib) dlclose(d->lib);
    free(d);
    return s;
}

void rt_dev_close(RtDevice *dev)
{
    if (!dev) return;
    if (dev->ctx) dev->cu.PrimaryCtxRelease(dev->dev);
    dlclose(dev->lib);
    free(dev);
}

const RtDevInfo *rt_dev_info(const RtDevice *dev)
{
    return &dev->info;
}

const char *rt_dev_target(const RtDevice *dev)
{
    int sm = dev->info.sm;
    if (sm >= 100) return "sm_100a";
    if (sm >= 90) return "sm_90a";
    if (sm >= 80) return "sm_80";
    return NULL;
}

KilnStatus rt_dev_module_load(RtDevice *dev, const void *image, size_t size, RtModule **out)
{
    *out = NULL;
    if (!image || !size) return fail(KILN_ERR_ARG, "rt_dev_module_load: empty image");
    KilnStatus s = make_current(dev);
    if (s != KILN_OK) return s;
    /* a PTX image must end with a NUL: copy one that does not */
    const char *p = image;
    char *copy = NULL;
    int is_elf = size >= 4 && !memcmp(p, "\177ELF", 4);
    if (!is_elf && p[size - 1] != 0) {
        if (!(copy = malloc(size + 1))) return fail(KILN_ERR_NOMEM, "rt_dev_module_load: out of memory");
        memcpy(copy, image, size);
        copy[size] = 0;
        image = copy;
    }
    RtModule *m = calloc(1, sizeof *m);
    char log[1024] = "";
    int opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    CUresult r = m ? dev->cu.ModuleLoadDataEx(&m->mod, image, 2, opts, vals) : CUDA_SUCCESS;
    free(copy);
    if (!m) return fail(KILN_ERR_NOMEM, "rt_dev_module_load: out of memory");
    if (r != CUDA_SUCCESS) {
        free(m);
        cu_fail(dev, "cuModuleLoadDataEx", r);
        if (log[0]) {
            char head[512];
            snprintf(head, sizeof head, "%s", errbuf);
            char *nl = strchr(log, '\n');
            if (nl) *nl = 0;
            fail(KILN_ERR_DEVICE, "%s: %s", head, log);
        }
        return KILN_ERR_DEVICE;
    }
    m->dev = dev;
    pthread_mutex_init(&m->mu, NULL);
    *out = m;
    return KILN_OK;
}

void rt_dev_module_unload(RtModule *m)
{
    if (!m) return;
    if (make_current(m->dev) == KILN_OK) m->dev->cu.ModuleUnload(m->mod);
    for (RtFunction *f = m->fns, *next; f; f = next) {
        next = f->next;
        free(f);
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}

KilnStatus rt_dev_function(RtModule *m, const char *name, RtFunction **out)
{
    *out = NULL;
    CUfunction fn;
    KilnStatus s = make_current(m->dev);
    if (s != KILN_OK) return s;
    CUresult r = m->dev->cu.ModuleGetFunction(&fn, m->mod, name);
    if (r != CUDA_SUCCESS) {
        cu_fail(m->dev, "cuModuleGetFunction", r);
        return fail(KILN_ERR_DEVICE, "%s (function %s)", errbuf, name);
    }
    RtFunction *f = calloc(1, sizeof *f);
    if (!f) return fail(KILN_ERR_NOMEM, "rt_dev_function: out of memory");
    f->mod = m;
    f->fn = fn;
    pthread_mutex_lock(&m->mu);
    f->next = m->fns;
    m->fns = f;
    pthread_mutex_unlock(&m->mu);
    *out = f;
    return KILN_OK;
}

KilnStatus rt_dev_function_set_smem(RtFunction *f, int bytes)
{
    RtDevice *d = f->mod->dev;
    if (bytes > d->info.smem_optin)
        return fail(KILN_ERR_UNSUPPORTED, "%d bytes of shared memory exceed the device's %d", bytes,
                    d->info.smem_optin);
    KilnStatus s = make_current(d);
    if (s != KILN_OK) return s;
    CU_CHECK(d, FuncSetAttribute, (f->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes));
    return KILN_OK;
}

KilnStatus rt_dev_function_regs(RtFunction *f, int *regs, int *local_bytes)
{
    RtDevice *d = f->mod->dev;
    KilnStatus s = make_current(d);
    if (s != KILN_OK) return s;
    CU_CHECK(d, FuncGetAttribute, (regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f->fn));
    CU_CHECK(d, FuncGetAttribute, (local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f->fn));
    return KILN_OK;
}

KilnStatus rt_dev_launch(RtFunction *f, const unsigned grid[3], const unsigned block[3], unsigned smem_bytes,
                         RtStream *stream, void **args)
{
    RtDevice *d = f->mod->dev;
    if (smem_bytes > (unsigned)d->info.smem_optin)
        return fail(KILN_ERR_UNSUPPORTED, "launch: %u bytes of shared memory exceed the device's %d",
                    smem_bytes, d->info.smem_optin);
    KilnStatus s = make_current(d);
    if (s != KILN_OK) return s;
    CUresult r = d->cu.LaunchKernel(f->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                    smem_bytes, stream ? stream->s : NULL, args, NULL);
    if (r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) {
        cu_fail(d, "cuLaunchKernel", r);
        return KILN_ERR_UNSUPPORTED;
    }
    if (r != CUDA_SUCCESS) return cu_fail(d, "cuLaunchKernel", r);
    return KILN_OK;
}

KilnStatus rt_dev_alloc(RtDevice *dev, size_t bytes, uint64_t *out)
{
    *out = 0;
    KilnStatus s = make_current(dev);
    if (s != KILN_OK) return s;
    CUdeviceptr p = 0;
    CU_CHECK(dev, MemAlloc, (&p, bytes ? bytes : 1));
    *out = p;
    return KILN_OK;
}

void rt_dev_free(RtDevice *dev, uint64_t ptr)
{
    if (!ptr || make_current(dev) != KILN_OK) return;
    dev->cu.MemFree(ptr);
}

KilnStatus rt_dev_copy_htod(RtDevice *dev, uint64_t dst, const void *src, size_t bytes)
{
    KilnStatus s = make_current(dev);
    if (s != KILN_OK || !bytes) return s;
    CU_CHECK(dev, MemcpyHtoD, (dst, src, bytes));
    return KILN_OK;
}

KilnStatus rt_dev_copy_dtoh(RtDevice *dev, void *dst, uint64_t src, size_t bytes)
{
    KilnStatus s = make_current(dev);
    if (s != KILN_OK || !bytes) return s;
    CU_CHECK(dev, MemcpyDtoH, (dst, src, bytes));
    return KILN_OK;
}

KilnStatus rt_dev_copy_dtod(RtDevice *dev, uint64_t dst, uint64_t src, size_t bytes)
{
    KilnStatus s = make_current(dev);
    if (s != KILN_OK || !bytes) return s;
    CU_CHECK(dev, MemcpyDtoD, (dst, src, bytes));
    return KILN_OK;
}

KilnStatus rt_dev_memset8(RtDevice *dev, uint64_t dst, unsigned char value, size_t bytes)
{
    KilnStatus s = make_current(dev);
    if (s != KILN_OK || !bytes) return s;
    CU_CHECK(dev, MemsetD8, (dst, value, bytes));
    return KILN_OK;
}

KilnStatus rt_dev_mem_info(RtDevice *dev, size_t *free_bytes, size_t *total_bytes)
{
    KilnStatus s = make_current(dev);
    if (s != KILN_OK) return s;
    CU_CHECK(dev, MemGetInfo, (free_bytes, total_bytes));
    return KILN_OK;
}

KilnStatus rt_dev_synchronize(RtDevice *dev)
{
    KilnStatus s = make_current(dev);
    if (s != KILN_OK) return s;
    CU_CHECK(dev, CtxSynchronize, ());
    return KILN_OK;
}

KilnStatus rt_dev_stream_create(RtDevice *dev, RtStream **out)
{
    *out = NULL;
    KilnStatus s = make_current(dev);
    if (s != KILN_OK) return s;
    RtStream *st = calloc(1, sizeof *st);
    if (!st) return fail(KILN_ERR_NOMEM, "rt_dev_stream_create: out of memory");
    CUresult r = dev->cu.StreamCreate(&st->s, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        free(st);
        return cu_fail(dev, "cuStreamCreate", r);
    }
    st->dev = dev;
    *out = st;
    return KILN_OK;
}

void rt_dev_stream_destroy(RtStream *s)
{
    if (!s) return;
    if (make_current(s->dev) == KILN_OK) s->dev->cu.StreamDestroy(s->s);
    free(s);
}

KilnStatus rt_dev_stream_synchronize(RtStream *s)
{
    KilnStatus st = make_current(s->dev);
    if (st != KILN_OK) return st;
    CU_CHECK(s->dev, StreamSynchronize, (s->s));
    return KILN_OK;
}

KilnStatus rt_dev_event_create(RtDevice *dev, RtEvent **out)
{
    *out = NULL;
    KilnStatus s = make_current(dev);
    if (s != KILN_OK) return s;
    RtEvent *e = calloc(1, sizeof *e);
    if (!e) return fail(KILN_ERR_NOMEM, "rt_dev_event_create: out of memory");
    CUresult r = dev->cu.EventCreate(&e->e, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) {
        free(e);
        return cu_fail(dev, "cuEventCreate", r);
    }
    e->dev = dev;
    *out = e;
    return KILN_OK;
}

void rt_dev_event_destroy(RtEvent *e)
{
    if (!e) return;
    if (make_current(e->dev) == KILN_OK) e->dev->cu.EventDestroy(e->e);
    free(e);
}

KilnStatus rt_dev_event_record(RtEvent *e, RtStream *stream)
{
    KilnStatus s = make_current(e->dev);
    if (s != KILN_OK) return s;
    CU_CHECK(e->dev, EventRecord, (e->e, stream ? stream->s : NULL));
    return KILN_OK;
}

KilnStatus rt_dev_event_synchronize(RtEvent *e)
{
    KilnStatus s = make_current(e->dev);
    if (s != KILN_OK) return s;
    CU_CHECK(e->dev, EventSynchronize, (e->e));
    return KILN_OK;
}

KilnStatus rt_dev_event_elapsed_ms(RtEvent *start, RtEvent *end, float *ms)
{
    KilnStatus s = make_current(start->dev);
    if (s != KILN_OK) return s;
    CU_CHECK(start->dev, EventElapsedTime, (ms, start->e, end->e));
    return KILN_OK;
}

KilnStatus rt_dev_copy_htod_async(RtStream *st, uint64_t dst, const void *src, size_t bytes)
{
    KilnStatus s = make_current(st->dev);
    if (s != KILN_OK || !bytes) return s;
    CU_CHECK(st->dev, MemcpyHtoDAsync, (dst, src, bytes, st->s));
    return KILN_OK;
}

KilnStatus rt_dev_copy_dtoh_async(RtStream *st, void *dst, uint64_t src, size_t bytes)
{
    KilnStatus s = make_current(st->dev);
    if (s != KILN_OK || !bytes) return s;
    CU_CHECK(st->dev, MemcpyDtoHAsync, (dst, src, bytes, st->s));
    return KILN_OK;
}

KilnStatus rt_dev_capture_begin(RtStream *st)
{
    KilnStatus s = make_current(st->dev);
    if (s != KILN_OK) return s;
    CU_CHECK(st->dev, StreamBeginCapture, (st->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    return KILN_OK;
}

KilnStatus rt_dev_capture_end(RtStream *st, RtGraph **out)
{
    *out = NULL;
    RtDevice *d = st->dev;
    KilnStatus s = make_current(d);
    if (s != KILN_OK) return s;
    RtGraph *g = calloc(1, sizeof *g);
    CUgraph graph = NULL;
    CUresult r = d->cu.StreamEndCapture(st->s, &graph); /* ends the capture even when g is NULL */
    if (r != CUDA_SUCCESS) {
        free(g);
        return cu_fail(d, "cuStreamEndCapture", r);
    }
    if (!g) {
        d->cu.GraphDestroy(graph);
        return fail(KILN_ERR_NOMEM, "rt_dev_capture_end: out of memory");
    }
    g->dev = d, g->g = graph;
    if ((r = d->cu.GraphInstantiate(&g->exec, graph, 0)) != CUDA_SUCCESS) {
        d->cu.GraphDestroy(graph);
        free(g);
        return cu_fail(d, "cuGraphInstantiateWithFlags", r);
    }
    *out = g;
    return KILN_OK;
}

KilnStatus rt_dev_graph_launch(RtGraph *g, RtStream *st)
{
    KilnStatus s = make_current(g->dev);
    if (s != KILN_OK) return s;
    CU_CHECK(g->dev, GraphLaunch, (g->exec, st->s));
    return KILN_OK;
}

void rt_dev_graph_destroy(RtGraph *g)
{
    if (!g) return;
    if (make_current(g->dev) == KILN_OK) {
        g->dev->cu.GraphExecDestroy(g->exec);
        g->dev->cu.GraphDestroy(g->g);
    }
    free(g);
}
