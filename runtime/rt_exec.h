/* rt_exec.h — where the engine's kernels run: the host (kernels are shared objects from the package,
 * loaded with dlopen; memory is host memory) or a CUDA GPU (cubins through rt_device). One interface,
 * so the engine has a single code path. Prefix rt_exec_.
 *
 *     RtExec *x;
 *     if (rt_exec_open(-1, &x, err, sizeof err)) fail(err);   // -1: GPU 0 if there is one, else the host
 *     RtExecKernel *k;
 *     rt_exec_load(x, "rmsnorm_4096", &plan_kernel->bins[0], &k, err, sizeof err);
 *     uint64_t buf;  rt_exec_alloc(x, bytes, &buf, ...);      // a device address (host: a pointer)
 *     void *args[] = {&buf, &n};  rt_exec_launch(x, k, args, grid, ...);
 *     rt_exec_sync(x, ...);
 *
 * Memory is named by a 64-bit address on both sides (a host pointer cast to uint64_t on the host), so
 * kernel arguments look the same. Errors: a status and one line in err.
 */
#ifndef KILN_RT_EXEC_H
#define KILN_RT_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "kiln.h"
#include "rt_plan.h"
#include "rt_tunedb.h"

typedef struct RtExec RtExec;
typedef struct RtExecKernel RtExecKernel;

/* device: -1 the first GPU when one is usable, else the host; -2 the host; >= 0 that GPU (an error when
 * it is not usable). host_threads: threads that run a host launch's programs (0: the online CPUs). */
KilnStatus rt_exec_open(int device, int host_threads, RtExec **out, char *err, int errlen);
void rt_exec_close(RtExec *x);
int rt_exec_is_host(const RtExec *x);
/* The package target this executor runs ("host", "sm_90a", ...); NULL for a GPU kiln has no target for. */
const char *rt_exec_target(const RtExec *x);
/* A one-line description: "host (x86_64, 16 threads)" / "NVIDIA H200 (sm_90a, 132 SMs, 139.8 GB)". */
const char *rt_exec_describe(const RtExec *x);
int rt_exec_sm_count(const RtExec *x); /* multiprocessors; 1 on the host */
/* The executor's device as the tuning store names it (rt_tunedb.h): a GPU's name, kiln target, SMs,
 * memory and driver version ("13000", and as CUDA "13.0"); the host's from rt_tdb_device_host. */
void rt_exec_tune_device(const RtExec *x, RtTdbDevice *d);
/* 1 when a binary of this format and launch geometry can run here (host: "host-so"; GPU: "cubin" or
 * "ptx", block 1..1024, smem within the device's opt-in limit); else 0 with the reason in why. */
int rt_exec_binary_fits(const RtExec *x, const char *format, int block, int smem, char *why, int n);
/* Free device memory in bytes (host: available physical memory). */
size_t rt_exec_mem_free(RtExec *x);
/* All of the device's memory in bytes (host: physical memory; SIZE_MAX when the host cannot say). */
size_t rt_exec_mem_total(const RtExec *x);

/* Loads binary b of kernel `name` (its format must suit the executor). */
KilnStatus rt_exec_load(RtExec *x, const char *name, const RtPlanBinary *b, RtExecKernel **out, char *err,
                        int errlen);
void rt_exec_unload(RtExec *x, RtExecKernel *k);
/* args[i] points to argument i's value (uint64_t addresses for pointers, int32_t scalars). A grid with a
 * zero axis launches nothing. */
KilnStatus rt_exec_launch(RtExec *x, RtExecKernel *k, void **args, const unsigned grid[3], char *err,
                          int errlen);

KilnStatus rt_exec_alloc(RtExec *x, size_t bytes, uint64_t *addr, char *err, int errlen); /* 256-aligned */
void rt_exec_free(RtExec *x, uint64_t addr);
KilnStatus rt_exec_put(RtExec *x, uint64_t dst, const void *src, size_t bytes, char *err, int errlen);
KilnStatus rt_exec_get(RtExec *x, void *dst, uint64_t src, size_t bytes, char *err, int errlen);
KilnStatus rt_exec_copy(RtExec *x, uint64_t dst, uint64_t src, size_t bytes, char *err, int errlen);
KilnStatus rt_exec_fill(RtExec *x, uint64_t dst, unsigned char byte, size_t bytes, char *err, int errlen);
KilnStatus rt_exec_sync(RtExec *x, char *err, int errlen);

/* Profiling marks: mark i records "now" in stream order (a GPU event; the host clock on the host, where
 * launches run synchronously); after rt_exec_sync, marks_ms gives the time from mark a to mark b. Marks
 * are numbered 0 .. RT_EXEC_MAX_MARKS-1 and reused. */
enum { RT_EXEC_MAX_MARKS = 4096 };
KilnStatus rt_exec_mark(RtExec *x, int i, char *err, int errlen);
double rt_exec_marks_ms(RtExec *x, int a, int b);

/* GPU only: launches between capture_begin and capture_end are recorded into a graph (not run), which
 * graph_launch replays in one call, with the same arguments. */
typedef struct RtExecGraph RtExecGraph;
KilnStatus rt_exec_capture_begin(RtExec *x, char *err, int errlen);
KilnStatus rt_exec_capture_end(RtExec *x, RtExecGraph **out, char *err, int errlen);
KilnStatus rt_exec_graph_launch(RtExec *x, RtExecGraph *g, char *err, int errlen);
void rt_exec_graph_free(RtExecGraph *g); /* NULL is fine */

#endif
