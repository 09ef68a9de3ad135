/* cg_cuda.c — the CUDA backend's entry points (cg_cuda.h) and its NVRTC driver.
 *
 * cg_cuda_source runs the pipeline analyze -> emit (no NVRTC needed, so every build can show the code);
 * cg_cuda_compile adds one NVRTC run with the device library as the in-memory header "kiln_device.cuh".
 * NVRTC options: --gpu-architecture=<target> (sm_90a gives PTX and a cubin), -I<toolkit include> for
 * cuda_bf16.h / cuda_fp8.h, --std=c++17, -default-device, --fmad=false (kir_ops.def rounds after every
 * op, so a*b+c must not become one fma), warnings off. Invariant: no global state; each call owns its
 * arena and NVRTC program, so calls may run in parallel threads.
 */
#include "cg_cuda_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KILN_HAVE_NVRTC
#include <nvrtc.h>
#endif

extern const char cg_cuda_devlib[]; /* kiln_device.cuh, embedded by the build (embed.cmake) */

const char *cg_cuda_device_library(void)
{
    return cg_cuda_devlib;
}

static IrStatus generate(const KirKernel *k, const CgTarget *t, IrBuf *out, CgCudaLaunch *launch, IrDiag *d)
{
    if (!t || t->backend != CG_BACKEND_CUDA || !t->sm)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: %s is not a CUDA target", k->name,
                           t ? t->name : "?");
    IrStatus s = kir_verify(k, NULL, d);
    if (s != IR_OK) return s;
    if (k->warps > 32)
        return ir_diag_set(d, IR_ERR_LIMIT, "kernel %s: %d warps exceed a block's 32", k->name, k->warps);
    CgCudaGen g;
    memset(&g, 0, sizeof g);
    g.k = k;
    g.t = t;
    g.d = d;
    g.threads = 32 * k->warps;
    g.warps = k->warps;
    if (!(g.a = ir_arena_create())) return ir_diag_set(d, IR_ERR_NOMEM, "kernel %s: out of memory", k->name);
    s = cg_cuda_analyze(&g);
    if (s == IR_OK) s = cg_cuda_emit_kernel(&g, out, launch);
    ir_buf_free(&g.body);
    ir_arena_destroy(g.a);
    return s;
}

IrStatus cg_cuda_source(const KirKernel *k, const CgTarget *t, IrBuf *out, IrDiag *d)
{
    CgCudaLaunch l;
    return generate(k, t, out, &l, d);
}

IrStatus cg_cuda_launch_info(const KirKernel *k, const CgTarget *t, CgCudaLaunch *out, IrDiag *d)
{
    IrBuf b = {0};
    IrStatus s = generate(k, t, &b, out, d);
    ir_buf_free(&b);
    return s;
}

#ifdef KILN_HAVE_NVRTC

/* The first two non-empty lines of an NVRTC log, joined, in `out`. */
static void log_head(const char *log, char *out, size_t n)
{
    size_t j = 0;
    int lines = 0;
    out[0] = 0;
    for (const char *p = log; *p && lines < 2 && j + 4 < n;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len) {
            if (lines++) j += (size_t)snprintf(out + j, n - j, " | ");
            if (j + len >= n) len = n - j - 1;
            memcpy(out + j, p, len);
            j += len;
            out[j] = 0;
        }
        p = e ? e + 1 : p + len;
    }
}

static IrStatus nvrtc_err(IrDiag *d, const KirKernel *k, const char *call, nvrtcResult r)
{
    return ir_diag_set(d, IR_ERR_INTERNAL, "kernel %s: %s: %s", k->name, call, nvrtcGetErrorString(r));
}

static IrStatus copy_out(CgBinary *b, const char *format, const char *data, size_t size, int nul,
                         const char *entry, double ms)
{
    b->format = format;
    b->data = malloc(size + (size_t)nul);
    b->entry = malloc(strlen(entry) + 1);
    if (!b->data || !b->entry) {
        cg_binary_free(b);
        return IR_ERR_NOMEM;
    }
    memcpy(b->data, data, size);
    if (nul) ((char *)b->data)[size] = 0;
    b->size = size;
    strcpy(b->entry, entry);
    b->compile_ms = ms;
    return IR_OK;
}

static IrStatus run_nvrtc(const KirKernel *k, const CgTarget *t, const char *src, CgBinary *cubin,
                          CgBinary *ptx, IrBuf *report, IrDiag *d)
{
    char entry[256], file[300], arch[64], incs[8][512];
    const char *opts[16];
    int n = 0;
    cg_cuda_entry_name(k, entry, sizeof entry);
    snprintf(file, sizeof file, "%s.cu", entry);
    snprintf(arch, sizeof arch, "--gpu-architecture=%s", t->name);
    opts[n++] = arch;
    const char *inc = KILN_CUDA_INCLUDE; /* CMake's list: dirs separated by ';' */
    for (int i = 0; *inc && i < 8; i++) {
        const char *e = strchr(inc, ';');
        size_t len = e ? (size_t)(e - inc) : strlen(inc);
        snprintf(incs[i], sizeof incs[i], "-I%.*s", (int)len, inc);
        opts[n++] = incs[i];
        inc = e ? e + 1 : inc + len;
    }
    opts[n++] = "--std=c++17";
    opts[n++] = "-default-device";
    opts[n++] = "--fmad=false";
    opts[n++] = "--disable-warnings";
    if (report) opts[n++] = "--ptxas-options=-v";

    double t0 = ir_now_ms();
    const char *hdr = cg_cuda_devlib, *hdr_name = "kiln_device.cuh";
    nvrtcProgram prog = NULL;
    char *log = NULL, *text = NULL, *bin = NULL;
    IrStatus s = IR_OK;
    nvrtcResult r = nvrtcCreateProgram(&prog, src, file, 1, &hdr, &hdr_name);
    if (r != NVRTC_SUCCESS) {
        s = nvrtc_err(d, k, "nvrtcCreateProgram", r);
        goto fail;
    }
    r = nvrtcCompileProgram(prog, n, opts);
    if (r != NVRTC_SUCCESS) {
        size_t ls = 0;
        char head[400] = "";
        if (nvrtcGetProgramLogSize(prog, &ls) == NVRTC_SUCCESS && (log = malloc(ls + 1)) &&
            nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS) {
            log[ls] = 0;
            log_head(log, head, sizeof head);
        }
        int limit = log && (strstr(log, "too much shared") || strstr(log, "uses too much") ||
                            strstr(log, "too many resources") || strstr(log, "exceeds"));
        s = ir_diag_set(d, limit ? IR_ERR_LIMIT : IR_ERR_INTERNAL, "kernel %s: nvrtc (%s): %s: %s", k->name,
                        t->name, nvrtcGetErrorString(r), head[0] ? head : "no log");
        goto fail;
    }
    if (report) {
        size_t ls = 0;
        char *il = NULL;
        if (nvrtcGetProgramLogSize(prog, &ls) == NVRTC_SUCCESS && (il = malloc(ls + 1)) &&
            nvrtcGetProgramLog(prog, il) == NVRTC_SUCCESS) {
            il[ls] = 0;
            ir_buf_printf(report, "%s", il);
        }
        free(il);
    }
    double ms = ir_now_ms() - t0;
    if (ptx) {
        size_t size = 0;
        if ((r = nvrtcGetPTXSize(prog, &size)) != NVRTC_SUCCESS) {
            s = nvrtc_err(d, k, "nvrtcGetPTXSize", r);
            goto fail;
        }
        if (!(text = malloc(size + 1))) goto nomem;
        if ((r = nvrtcGetPTX(prog, text)) != NVRTC_SUCCESS) {
            s = nvrtc_err(d, k, "nvrtcGetPTX", r);
            goto fail;
        }
        text[size] = 0;
        if (copy_out(ptx, "ptx", text, strlen(text), 1, entry, ms) != IR_OK) goto nomem;
    }
    if (cubin) {
        size_t size = 0;
        if ((r = nvrtcGetCUBINSize(prog, &size)) != NVRTC_SUCCESS) {
            s = nvrtc_err(d, k, "nvrtcGetCUBINSize", r);
            goto fail;
        }
        if (!size) {
            s = ir_diag_set(d, IR_ERR_INTERNAL, "kernel %s: nvrtc gave no cubin for %s", k->name, t->name);
            goto fail;
        }
        if (!(bin = malloc(size))) goto nomem;
        if ((r = nvrtcGetCUBIN(prog, bin)) != NVRTC_SUCCESS) {
            s = nvrtc_err(d, k, "nvrtcGetCUBIN", r);
            goto fail;
        }
        if (copy_out(cubin, "cubin", bin, size, 0, entry, ms) != IR_OK) goto nomem;
    }
    free(text);
    free(bin);
    nvrtcDestroyProgram(&prog);
    return IR_OK;
nomem:
    s = ir_diag_set(d, IR_ERR_NOMEM, "kernel %s: out of memory", k->name);
fail:
    if (ptx) cg_binary_free(ptx);
    if (cubin) cg_binary_free(cubin);
    free(log);
    free(text);
    free(bin);
    if (prog) nvrtcDestroyProgram(&prog);
    return s;
}

#endif /* KILN_HAVE_NVRTC */

/* Source, then one NVRTC run: cubin and/or ptx (each may be NULL), and ptxas's report when asked. */
static IrStatus compile(const KirKernel *k, const CgTarget *t, CgBinary *cubin, CgBinary *ptx, IrBuf *report,
                        IrDiag *d)
{
    if (cubin) memset(cubin, 0, sizeof *cubin);
    if (ptx) memset(ptx, 0, sizeof *ptx);
#ifdef KILN_HAVE_NVRTC
    IrBuf src = {0};
    CgCudaLaunch l;
    IrStatus s = generate(k, t, &src, &l, d);
    if (s == IR_OK) s = run_nvrtc(k, t, src.s, cubin, ptx, report, d);
    ir_buf_free(&src);
    if (s == IR_OK && cubin) cubin->threads = l.threads, cubin->smem = l.smem_bytes;
    if (s == IR_OK && ptx) ptx->threads = l.threads, ptx->smem = l.smem_bytes;
    return s;
#else
    (void)t;
    (void)report;
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: this build has no NVRTC (CUDA backend)", k->name);
#endif
}

IrStatus cg_cuda_compile(const KirKernel *k, const CgTarget *t, CgBinary *cubin, CgBinary *ptx, IrDiag *d)
{
    return compile(k, t, cubin, ptx, NULL, d);
}

IrStatus cg_cuda_compile_source(const KirKernel *k, const CgTarget *t, const char *src, CgBinary *cubin,
                                IrDiag *d)
{
    memset(cubin, 0, sizeof *cubin);
#ifdef KILN_HAVE_NVRTC
    return run_nvrtc(k, t, src, cubin, NULL, NULL, d);
#else
    (void)t;
    (void)src;
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: this build has no NVRTC (CUDA backend)", k->name);
#endif
}

IrStatus cg_cuda_ptxas_report(const KirKernel *k, const CgTarget *t, IrBuf *report, IrDiag *d)
{
    CgBinary cubin;
    IrStatus s = compile(k, t, &cubin, NULL, report, d);
    cg_binary_free(&cubin);
    return s;
}

static int cuda_supports(const CgTarget *t)
{
#ifdef KILN_HAVE_NVRTC
    return t && t->backend == CG_BACKEND_CUDA && t->sm > 0;
#else
    (void)t;
    return 0;
#endif
}

static IrStatus cuda_compile(const KirKernel *k, const CgTarget *t, CgBinary *out, IrDiag *d)
{
    return cg_cuda_compile(k, t, out, NULL, d);
}

static IrStatus cuda_source(const KirKernel *k, const CgTarget *t, CgBinary *out, IrDiag *d)
{
    memset(out, 0, sizeof *out);
    IrBuf src = {0};
    char entry[256];
    CgCudaLaunch l;
    IrStatus s = generate(k, t, &src, &l, d);
    if (s == IR_OK && src.oom) s = ir_diag_set(d, IR_ERR_NOMEM, "kernel %s: out of memory", k->name);
    cg_cuda_entry_name(k, entry, sizeof entry);
    if (s == IR_OK && !(out->entry = cg_strdup(entry))) s = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    if (s != IR_OK) {
        ir_buf_free(&src);
        cg_binary_free(out);
        return s;
    }
    out->format = "cuda-c";
    out->threads = l.threads, out->smem = l.smem_bytes;
    out->data = src.s ? src.s : calloc(1, 1);
    out->size = src.len;
    return out->data ? IR_OK : ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
}

const CgBackend cg_cuda_backend = {"cuda", cuda_supports, cuda_compile, cuda_source};
