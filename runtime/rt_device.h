/* rt_device.h — the device layer: the CUDA driver API through dlopen("libcuda.so.1"). Prefix rt_dev_.
 * No link to libcuda and no cuda.h at build or run time, so libkiln loads on machines without a GPU.
 *
 *     RtDevice *dev;
 *     if (rt_dev_open(0, &dev) != KILN_OK) { puts(rt_dev_errmsg()); ... }   // KILN_ERR_UNSUPPORTED: no GPU
 *     RtModule *mod; RtFunction *fn;
 *     rt_dev_module_load(dev, cubin, size, &mod);  rt_dev_function(mod, "rmsnorm_4096", &fn);
 *     rt_dev_function_set_smem(fn, smem_bytes);                 // before launching with any
 *     uint64_t x; rt_dev_alloc(dev, bytes, &x); rt_dev_copy_htod(dev, x, host, bytes);
 *     void *args[] = {&x, &n};  unsigned grid[3] = {n, 1, 1}, block[3] = {256, 1, 1};
 *     rt_dev_launch(fn, grid, block, smem_bytes, NULL, args);   // NULL stream: the device's default
 *     rt_dev_synchronize(dev);  rt_dev_copy_dtoh(dev, host, x, bytes);
 *     rt_dev_free(dev, x); rt_dev_module_unload(mod); rt_dev_close(dev);
 *
 * Errors: every call returns a KilnStatus and, on failure, leaves one line for rt_dev_errmsg() of the
 * calling thread: driver failures read "cuXxx: CUDA_ERROR_NAME" (plus the JIT log for module loads) and
 * are KILN_ERR_DEVICE; KILN_ERR_UNSUPPORTED from rt_dev_open means no usable GPU here ("no libcuda.so.1",
 * CUDA_ERROR_STUB_LIBRARY (34) or CUDA_ERROR_NO_DEVICE (100)), which GPU tests turn into a skip.
 *
 * Thread safety: calls on one device may come from any threads at once (each call makes the device's
 * primary context current on the calling thread; the driver serializes what it must). Handles are
 * owned by their creator: destroy each once, after its last use, and modules before their device.
 * Device memory is named by its device address (uint64_t).
 */
#ifndef KILN_RT_DEVICE_H
#define KILN_RT_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

typedef struct RtDevice RtDevice;
typedef struct RtModule RtModule;
typedef struct RtFunction RtFunction; /* owned by its module */
typedef struct RtStream RtStream;
typedef struct RtEvent RtEvent;

typedef struct RtDevInfo {
    char name[256]; /* "NVIDIA H200" */
    int ordinal;
    int sm;         /* compute capability x10: 90 for 9.0 */
    int sm_count;   /* multiprocessors */
    int smem_optin; /* max dynamic shared memory per block after opting in, bytes */
    int l2_bytes;
    int clock_khz, mem_clock_khz, mem_bus_bits;
    size_t mem_total;   /* bytes */
    int driver_version; /* e.g. 13000 */
} RtDevInfo;

/* The calling thread's message for its last failed rt_dev_* call ("" when none). */
const char *rt_dev_errmsg(void);

/* Loads the driver, initializes it and retains device `ordinal`'s primary context. */
KilnStatus rt_dev_open(int ordinal, RtDevice **out);
/* Releases the context and the driver (NULL is fine). Outstanding modules, streams, events and memory
 * must be gone. */
void rt_dev_close(RtDevice *dev);
const RtDevInfo *rt_dev_info(const RtDevice *dev);
/* The cg target name this device runs best ("sm_80", "sm_90a", "sm_100a"), or NULL when kiln has none. */
const char *rt_dev_target(const RtDevice *dev);

/* Loads a cubin or a PTX text (NUL-terminated; size may count the NUL or not). On failure the message
 * carries the first line of the JIT error log. */
KilnStatus rt_dev_module_load(RtDevice *dev, const void *image, size_t size, RtModule **out);
void rt_dev_module_unload(RtModule *m);
KilnStatus rt_dev_function(RtModule *m, const char *name, RtFunction **out);
/* Allows `bytes` of dynamic shared memory per launch (needed above 48 KiB less the kernel's static shared
 * memory: kiln sets it for every kernel that uses dynamic shared memory). */
KilnStatus rt_dev_function_set_smem(RtFunction *f, int bytes);
/* Registers per thread and local (spill) bytes per thread of a loaded function. */
KilnStatus rt_dev_function_regs(RtFunction *f, int *regs, int *local_bytes);
/* Launches f; args[i] points to argument i's value (kernel ABI: cg_cuda.h). stream NULL: the default.
 * A launch-resource failure (too many registers or too much shared memory for the device) is
 * KILN_ERR_UNSUPPORTED (the config is INVALID here), other failures KILN_ERR_DEVICE. */
KilnStatus rt_dev_launch(RtFunction *f, const unsigned grid[3], const unsigned block[3], unsigned smem_bytes,
                         RtStream *stream, void **args);

KilnStatus rt_dev_alloc(RtDevice *dev, size_t bytes, uint64_t *out); /* 256-byte aligned */
void rt_dev_free(RtDevice *dev, uint64_t ptr);                       /* 0 is fine */
KilnStatus rt_dev_copy_htod(RtDevice *dev, uint64_t dst, const void *src, size_t bytes);
KilnStatus rt_dev_copy_dtoh(RtDevice *dev, void *dst, uint64_t src, size_t bytes);
KilnStatus rt_dev_copy_dtod(RtDevice *dev, uint64_t dst, uint64_t src, size_t bytes);
KilnStatus rt_dev_memset8(RtDevice *dev, uint64_t dst, unsigned char value, size_t bytes);
/* Free and total device memory, bytes. */
KilnStatus rt_dev_mem_info(RtDevice *dev, size_t *free_bytes, size_t *total_bytes);
/* Waits for all work on the device. */
KilnStatus rt_dev_synchronize(RtDevice *dev);

KilnStatus rt_dev_stream_create(RtDevice *dev, RtStream **out); /* non-blocking w.r.t. the default stream */
void rt_dev_stream_destroy(RtStream *s);
KilnStatus rt_dev_stream_synchronize(RtStream *s);

KilnStatus rt_dev_event_create(RtDevice *dev, RtEvent **out);
void rt_dev_event_destroy(RtEvent *e);
KilnStatus rt_dev_event_record(RtEvent *e, RtStream *stream);
KilnStatus rt_dev_event_synchronize(RtEvent *e);
/* Milliseconds between two recorded, completed events. */
KilnStatus rt_dev_event_elapsed_ms(RtEvent *start, RtEvent *end, float *ms);

/* Stream-ordered copies (host memory pageable: the call returns once src may be reused). */
KilnStatus rt_dev_copy_htod_async(RtStream *s, uint64_t dst, const void *src, size_t bytes);
KilnStatus rt_dev_copy_dtoh_async(RtStream *s, void *dst, uint64_t src, size_t bytes);

/* CUDA graphs: launches on stream s between begin and end are recorded, not run (thread-local capture);
 * end instantiates them as one graph that rt_dev_graph_launch replays on a stream with the same
 * arguments (pointers and scalars are baked in). */
typedef struct RtGraph RtGraph;
KilnStatus rt_dev_capture_begin(RtStream *s);
KilnStatus rt_dev_capture_end(RtStream *s, RtGraph **out);
KilnStatus rt_dev_graph_launch(RtGraph *g, RtStream *s);
void rt_dev_graph_destroy(RtGraph *g); /* NULL is fine */

#endif
