/* krun_host.c — the host executor for sweep tests: the LLVM backend's host code, JIT-compiled into this
 * process (codegen/llvm/cg_host.h). Buffers are used in place (the executor's memory is host memory).
 * A run compiles the kernel (~10 ms to 2 s) unless one of the last 256 kernels compiled was the same (its
 * printed IR, params and config): sweeps launch a kernel twice (a determinism check, the epilogue-none
 * twins of a pair, one rope kernel beside every page size) and the JIT is most of their time. A build
 * without LLVM reports the executor unavailable.
 * With KILN_LLVM_GPU_CASES=<dir> each run is also written as a GPU replay case (kcase.h).
 * With KILN_TEST_JIT_CACHE=<dir> (ctest sets it: <source>/build-jit-cache, shared by the Release and the
 * sanitized build and by every shard), compiled objects are also kept on disk, keyed by the kernel's text,
 * the host CPU, the LLVM version and a hash of the sources that turn kernel IR into host code
 * (kiln_jit_src.h, made at build time): the LLVM compile is ~90% of a host sweep, and the sanitized
 * half needs no compile the Release half did not already make. An entry holds its whole key, so a hash
 * collision is a miss, never a wrong kernel.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/llvm/cg_host.h"
#include "ir/kir_interp.h"
#include "kcase.h"
#include "kiln_jit_src.h" /* KILN_JIT_SRC_HASH, KILN_JIT_LLVM_VERSION */
#include "krun.h"

static int host_available(char *why, size_t n)
{
    if (cg_host_jit_available()) return 1;
    snprintf(why, n, "this build has no LLVM (KILN_WITH_LLVM=OFF or LLVM 22.1 not found)");
    return 0;
}

/* The last JIT_KEEP kernels compiled, most recent first (well under 1 MB each); key: kernel_key's text
 * (malloc'd). Kept until the process ends. */
enum { JIT_KEEP = 256 };
static struct {
    char *key;
    CgHostKernel *hk;
} jit[JIT_KEEP];

static char *kernel_key(const KirKernel *k, int opt)
{
    IrBuf b = {0};
    kir_print(k, &b);
    ir_buf_printf(&b, "\nparams ");
    kir_params_print(k, &b);
    ir_buf_printf(&b, "\nmin_blocks %d\noptimize %d\n", k->min_blocks, opt);
    if (b.oom || !b.s) {
        ir_buf_free(&b);
        return NULL;
    }
    return b.s; /* the buffer's text, owned by the caller */
}

/* ---- unoptimized kernels (krun_host_optimize): the last MARKS kernels marked ---- */

enum { MARKS = 4096 };
static struct {
    const KirKernel *k;
    int optimize;
} marks[MARKS];
static int n_marks;

void krun_host_optimize(const KirKernel *k, int optimize)
{
    for (int i = 0; i < MARKS; i++)
        if (marks[i].k == k) {
            marks[i].optimize = optimize;
            return;
        }
    marks[n_marks % MARKS].k = k, marks[n_marks % MARKS].optimize = optimize;
    n_marks++;
}

static int optimized(const KirKernel *k)
{
    for (int i = 0; i < MARKS; i++)
        if (marks[i].k == k) return marks[i].optimize;
    return 1;
}

const char *krun_compile_cache_flag(char *buf, size_t n)
{
    const char *dir = getenv("KILN_TEST_JIT_CACHE");
    if (dir && *dir && !strchr(dir, '\''))
        snprintf(buf, n, "--cache-dir '%s/compile-%.16s'", dir, KILN_JIT_SRC_HASH);
    else
        snprintf(buf, n, "--no-cache");
    return buf;
}

/* ---- the disk cache (KILN_TEST_JIT_CACHE) ---- */

static int n_compiled, n_unoptimized, n_disk;

static void report(void)
{
    if (n_compiled + n_disk)
        printf("krun host: %d kernels compiled (%d without the optimizer), %d from the JIT cache\n", n_compiled,
               n_unoptimized, n_disk);
}

static uint64_t fnv(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* The entry's path for key (the kernel's text and what built it), in buf; NULL when the cache is off. */
static const char *disk_path(const char *key, char *buf, size_t n)
{
    const char *dir = getenv("KILN_TEST_JIT_CACHE");
    if (!dir || !*dir) return NULL;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return NULL;
    snprintf(buf, n, "%s/%016llx%016llx.jit", dir, (unsigned long long)fnv(key, 0xcbf29ce484222325ull),
             (unsigned long long)fnv(key, 0x84222325cbf29ce4ull));
    return buf;
}

/* The object kept for key: 1 and *obj (caller frees), or 0 (absent, damaged, another key). */
static int disk_get(const char *path, const char *key, CgBinary *obj)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t klen = strlen(key), elen = 0, olen = 0;
    char *k = NULL, *e = NULL;
    void *o = NULL;
    int ok = fscanf(f, "kiln-jit 1 %zu %zu %zu", &klen, &elen, &olen) == 3 && fgetc(f) == '\n' &&
             klen == strlen(key) && elen > 0 && elen < 4096 && olen > 0 && olen < (1u << 30) &&
             (k = malloc(klen + 1)) && (e = malloc(elen + 1)) && (o = malloc(olen)) &&
             fread(k, 1, klen, f) == klen && fread(e, 1, elen, f) == elen && fread(o, 1, olen, f) == olen &&
             fgetc(f) == EOF && !memcmp(k, key, klen);
    fclose(f);
    free(k);
    if (!ok) {
        free(e);
        free(o);
        return 0;
    }
    e[elen] = 0;
    *obj = (CgBinary){.data = o, .size = olen, .entry = e, .format = "host-obj"};
    return 1;
}

/* Keeps obj for key: written to a temporary beside the entry, then renamed (a reader sees all or none). */
static void disk_put(const char *path, const char *key, const CgBinary *obj)
{
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    int ok = fprintf(f, "kiln-jit 1 %zu %zu %zu\n", strlen(key), strlen(obj->entry), obj->size) > 0 &&
             fwrite(key, 1, strlen(key), f) == strlen(key) &&
             fwrite(obj->entry, 1, strlen(obj->entry), f) == strlen(obj->entry) &&
             fwrite(obj->data, 1, obj->size, f) == obj->size;
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) unlink(tmp);
}

/* k's object from the disk cache, or compiled (and kept there), loaded into this process. */
static IrStatus compile_load(const KirKernel *k, const char *kernel_text, int opt, CgHostKernel **out,
                             IrDiag *d)
{
    static int once;
    if (!once++) atexit(report);
    char path[1024];
    const char *cpu = cg_host_cpu();
    IrBuf key = {0};
    ir_buf_printf(&key, "%s\ncpu %s\nllvm %s\nsrc %s\n", kernel_text, cpu ? cpu : "?", KILN_JIT_LLVM_VERSION,
                  KILN_JIT_SRC_HASH);
    const char *disk = key.oom || !key.s ? NULL : disk_path(key.s, path, sizeof path);
    CgBinary obj;
    IrStatus s;
    if (disk && disk_get(disk, key.s, &obj)) {
        n_disk++;
    } else {
        if ((s = kir_verify(k, NULL, d)) != IR_OK ||
            (s = opt ? cg_host_object(k, &obj, d) : cg_host_object_unoptimized(k, &obj, d)) != IR_OK) {
            ir_buf_free(&key);
            return s;
        }
        n_compiled++, n_unoptimized += !opt;
        if (disk) disk_put(disk, key.s, &obj);
    }
    ir_buf_free(&key);
    s = cg_host_load(&obj, out, d);
    cg_binary_free(&obj);
    return s;
}

/* k's JIT code from the in-process cache, else loaded (compile_load; then the oldest entry is freed). */
static IrStatus host_jit(const KirKernel *k, CgHostKernel **out, IrDiag *d)
{
    int opt = optimized(k);
    char *key = kernel_key(k, opt);
    for (int i = 0; key && i < JIT_KEEP; i++)
        if (jit[i].key && !strcmp(jit[i].key, key)) {
            free(key);
            *out = jit[i].hk;
            return IR_OK;
        }
    IrStatus s = key ? compile_load(k, key, opt, out, d) : cg_host_jit(k, out, d);
    if (s != IR_OK || !key) {
        free(key);
        return s;
    }
    free(jit[JIT_KEEP - 1].key);
    cg_host_free(jit[JIT_KEEP - 1].hk);
    memmove(&jit[1], &jit[0], sizeof jit[0] * (JIT_KEEP - 1));
    jit[0].key = key;
    jit[0].hk = *out;
    return IR_OK;
}

static IrStatus host_run(const KirKernel *k, KRunArg *a, IrDiag *d)
{
    void *ptrs[KIR_MAX_PARAMS], *args[KIR_MAX_PARAMS];
    int64_t storage[KIR_MAX_PARAMS];
    int32_t grid[3];
    for (int i = 0; i < k->n_params; i++)
        ptrs[i] = a[i].data;
    krun_pack_args(k, a, ptrs, args, storage);
    kir_grid_eval(k, args, grid);
    CgHostKernel *hk;
    IrStatus s = host_jit(k, &hk, d);
    if (s != IR_OK) return s;
    void *inputs[KIR_MAX_PARAMS] = {0};
    int record = kcase_dir() != NULL;
    for (int i = 0; record && i < k->n_params; i++)
        if (k->params[i].type.is_ptr && (inputs[i] = malloc(a[i].bytes + 1)) != NULL)
            memcpy(inputs[i], a[i].data, a[i].bytes);
    cg_host_call(hk, args, grid);
    if (record) kcase_write(k, a, inputs, storage, grid, 1e-2); /* sweeps: the GPU's libm-free math */
    for (int i = 0; i < k->n_params; i++)
        free(inputs[i]);
    return IR_OK;
}

const KRunner krun_host = {"host", host_available, host_run};
