/* kbench.c — a tiny C ABI for the GPU bench scripts (bench/bench_kernels.py, through ctypes): build one
 * kernel of a family for a spec and config, compile it with the CUDA backend for the GPU in front of us, and
 * launch it on raw device pointers (torch tensors' data_ptr()) on the default stream, which is torch's too.
 * For benchmarks and GPU checks only; not part of libkiln. Not thread-safe (one device, one caller).
 *
 *   kb_init(err, n)                            -> 0 | -1
 *   h = kb_build("rmsnorm", "C=4096 eps=1e-05 dtype=bf16 residual=0", "BLOCK=4096 WARPS=8", err, n)
 *   kb_launch(h, argv, n_args, 0, err, n)      argv[i]: a device pointer or a scalar's bits (f32 as bits)
 *   kb_source(h), kb_ir(h), kb_config(h)       generated CUDA C, kernel IR, the config used
 *   KB_SOURCE=file: kb_build compiles that CUDA C instead of the generated source (a hand-edited kgen.py
 *   output for the same spec and config: prototyping a lowering before the backend emits it); a folder:
 *   its <kernel name>.cu where there is one (several kernels edited in one process), else the generated
 *   source
 *   KB_LAUNCH="GY GZ THREADS SMEM": with KB_SOURCE, launch on that grid's y and z (x stays the kernel's),
 *   block size and dynamic shared memory instead (0 keeps the kernel's): a prototype's own launch shape
 *   kb_gen(family, spec, config, target, what)  no device needed: the kernel IR (what 0) or CUDA C (1; 2: and
 *                                               compile it) for
 *                                               a target such as "sm_90a" (caller frees; error text on
 * failure)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/cuda/cg_cuda.h"
#include "ir/kfam.h"
#include "ir/kir_interp.h"
#include "rt_device.h"

typedef struct KbKernel {
    IrArena *arena;
    KirKernel *k;
    RtModule *mod;
    RtFunction *fn;
    CgCudaLaunch launch;
    int grid_yz[2]; /* KB_LAUNCH's grid y and z; 0: the kernel's */
    IrBuf source, ir, config;
} KbKernel;

static RtDevice *dev;
static const CgTarget *target;

static int fail(char *err, int n, const char *fmt, const char *a, const char *b)
{
    if (err && n > 0) snprintf(err, (size_t)n, fmt, a, b);
    return -1;
}

int kb_init(char *err, int n)
{
    if (dev) return 0;
    if (rt_dev_open(0, &dev) != KILN_OK) return fail(err, n, "%s%s", rt_dev_errmsg(), "");
    const char *t = rt_dev_target(dev);
    if (!t || !(target = cg_target_find(t)))
        return fail(err, n, "no kiln target for %s%s", rt_dev_info(dev)->name, "");
    return 0;
}

/* "k=v k=v": integers, numbers, else strings; keys and strings copied into a. */
static int parse_pairs(IrArena *a, const char *text, KfamSpec *spec, KirConfig *cfg)
{
    char *copy = ir_arena_strdup(a, text ? text : "");
    if (!copy) return 0;
    for (char *tok = strtok(copy, " \t"); tok; tok = strtok(NULL, " \t")) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok) return 0;
        *eq = 0;
        const char *key = tok, *val = eq + 1;
        char *end;
        long long iv = strtoll(val, &end, 10);
        int is_int = *val && !*end;
        double fv = strtod(val, &end);
        int is_num = *val && !*end;
        if (cfg) {
            if (!is_int) return 0;
            kir_config_set(cfg, key, iv);
        } else if (is_int) {
            kfam_spec_int(spec, key, iv);
        } else if (is_num) {
            kfam_spec_float(spec, key, fv);
        } else {
            kfam_spec_str(spec, key, val);
        }
    }
    return 1;
}

void kb_free(void *h)
{
    KbKernel *kb = h;
    if (!kb) return;
    rt_dev_module_unload(kb->mod);
    ir_buf_free(&kb->source);
    ir_buf_free(&kb->ir);
    ir_buf_free(&kb->config);
    ir_arena_destroy(kb->arena);
    free(kb);
}

/* Builds family's kernel for "k=v" spec text with the config text's keys over the defaults, into a, and
 * verifies it against target t's budgets. Returns the kernel, or NULL with the reason in msg (n bytes). */
static KirKernel *make_kernel(IrArena *a, const KfamFamily *f, const char *spec_text, const char *config_text,
                              const CgTarget *t, char *msg, int n)
{
    KfamSpec spec = kfam_spec(ir_arena_strdup(a, f->name));
    KirConfig cfg = {0}, over = {0};
    IrDiag d = {0};
    KirKernel *k = NULL;
    if (!parse_pairs(a, spec_text, &spec, NULL) || !parse_pairs(a, config_text, NULL, &over)) {
        fail(msg, n, "cannot parse spec '%s' or config '%s'", spec_text, config_text);
        return NULL;
    }
    const KfamFacts *facts = cg_target_facts(cg_target_defaults()); /* the defaults a package holds */
    f->defaults(&spec, facts, &cfg);
    for (int i = 0; i < over.n; i++)
        kir_config_set(&cfg, over.key[i], over.val[i]);
    if (f->build(a, &spec, facts, &cfg, &k, &d) != IR_OK || kir_verify(k, cg_target_limits(t), &d) != IR_OK) {
        fail(msg, n, "%s%s", d.msg, "");
        return NULL;
    }
    return k;
}

void *kb_build(const char *family, const char *spec_text, const char *config_text, char *err, int n)
{
    const KfamFamily *f = kfam_find(family);
    if (!dev || !f) {
        fail(err, n, dev ? "unknown family '%s'%s" : "kb_init first%s%s", dev ? family : "", "");
        return NULL;
    }
    KbKernel *kb = calloc(1, sizeof *kb);
    if (!kb || !(kb->arena = ir_arena_create())) {
        free(kb);
        fail(err, n, "out of memory%s%s", "", "");
        return NULL;
    }
    IrDiag d = {0};
    CgBinary cubin = {0};
    if (!(kb->k = make_kernel(kb->arena, f, spec_text, config_text, target, err, n))) goto bad;
    const char *given = getenv("KB_SOURCE");
    char path[4096];
    struct stat st;
    if (given && stat(given, &st) == 0 &&
        S_ISDIR(st.st_mode)) { /* a folder: <kernel name>.cu where present */
        snprintf(path, sizeof path, "%s/%s.cu", given, kb->k->name);
        given = access(path, R_OK) == 0 ? path : NULL;
    }
    if (given) {
        FILE *fp = fopen(given, "rb");
        char buf[1 << 16];
        size_t got = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
        if (fp) fclose(fp);
        if (!got || got == sizeof buf - 1) {
            fail(err, n, "KB_SOURCE %s: unreadable or over 64 KiB%s", given, "");
            goto bad;
        }
        buf[got] = 0;
        ir_buf_printf(&kb->source, "%s", buf);
    }
    if ((!given && cg_cuda_source(kb->k, target, &kb->source, &d) != IR_OK) ||
        cg_cuda_launch_info(kb->k, target, &kb->launch, &d) != IR_OK ||
        (given ? cg_cuda_compile_source(kb->k, target, kb->source.s, &cubin, &d)
               : cg_cuda_compile(kb->k, target, &cubin, NULL, &d)) != IR_OK) {
        fail(err, n, "%s%s", d.msg, "");
        goto bad;
    }
    const char *shape = given ? getenv("KB_LAUNCH") : NULL;
    int gy = 0, gz = 0, threads = 0, smem = 0;
    if (shape && sscanf(shape, "%d %d %d %d", &gy, &gz, &threads, &smem) == 4) {
        kb->grid_yz[0] = gy > 0 ? gy : 0, kb->grid_yz[1] = gz > 0 ? gz : 0;
        if (threads > 0) kb->launch.threads = threads;
        if (smem > 0) kb->launch.smem_bytes = smem;
    }
    kir_print(kb->k, &kb->ir);
    kir_config_print(&kb->k->cfg, &kb->config);
    if (rt_dev_module_load(dev, cubin.data, cubin.size, &kb->mod) != KILN_OK ||
        rt_dev_function(kb->mod, cubin.entry, &kb->fn) != KILN_OK ||
        (kb->launch.smem_bytes > 0 && rt_dev_function_set_smem(kb->fn, kb->launch.smem_bytes) != KILN_OK)) {
        fail(err, n, "%s%s", rt_dev_errmsg(), "");
        goto bad;
    }
    cg_binary_free(&cubin);
    return kb;
bad:
    cg_binary_free(&cubin);
    kb_free(kb);
    return NULL;
}

int kb_launch(void *h, const uint64_t *argv, int n_args, uint64_t stream, char *err, int n)
{
    KbKernel *kb = h;
    (void)stream; /* the default stream, which torch uses unless told otherwise */
    if (!kb || n_args != kb->k->n_params)
        return fail(err, n, "kb_launch: wrong number of arguments%s%s", "", "");
    uint64_t storage[KIR_MAX_PARAMS];
    void *args[KIR_MAX_PARAMS];
    for (int i = 0; i < n_args; i++) {
        const KirType *t = &kb->k->params[i].type;
        storage[i] = 0;
        if (t->is_ptr || t->dtype == KIR_I64) {
            storage[i] = argv[i];
        } else if (t->dtype == KIR_F32 || t->dtype == KIR_I32) {
            uint32_t v = (uint32_t)argv[i];
            memcpy(&storage[i], &v, 4);
        } else {
            return fail(err, n, "kb_launch: param %s has an unsupported scalar type%s", kb->k->params[i].name,
                        "");
        }
        args[i] = &storage[i];
    }
    int32_t grid[3];
    kir_grid_eval(kb->k, args, grid);
    unsigned g[3] = {(unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2]};
    if (kb->grid_yz[0]) g[1] = (unsigned)kb->grid_yz[0];
    if (kb->grid_yz[1]) g[2] = (unsigned)kb->grid_yz[1];
    unsigned block[3] = {(unsigned)kb->launch.threads, 1, 1};
    if (!g[0] || !g[1] || !g[2]) return 0;
    if (rt_dev_launch(kb->fn, g, block, (unsigned)kb->launch.smem_bytes, NULL, args) != KILN_OK)
        return fail(err, n, "%s%s", rt_dev_errmsg(), "");
    return 0;
}

const char *kb_source(void *h)
{
    return h ? ((KbKernel *)h)->source.s : NULL;
}

const char *kb_ir(void *h)
{
    return h ? ((KbKernel *)h)->ir.s : NULL;
}

const char *kb_config(void *h)
{
    return h ? ((KbKernel *)h)->config.s : NULL;
}

char *kb_gen(const char *family, const char *spec_text, const char *config_text, const char *target_name,
             int what)
{
    const KfamFamily *f = kfam_find(family);
    const CgTarget *t = cg_target_find(target_name);
    IrArena *a = ir_arena_create();
    IrBuf out = {0};
    IrDiag d = {0};
    char msg[1024];
    KirKernel *k;
    if (!f || !t || !a) {
        ir_buf_printf(&out, "unknown family '%s' or target '%s'", family, target_name);
    } else if (!(k = make_kernel(a, f, spec_text, config_text, t, msg, sizeof msg))) {
        ir_buf_printf(&out, "%s", msg);
    } else if (!what) {
        kir_print(k, &out);
    } else if (cg_cuda_source(k, t, &out, &d) != IR_OK) {
        ir_buf_printf(&out, "%s", d.msg);
    } else if (what == 2) { /* compile too: ptxas's register / spill report after the source */
        IrBuf rep = {0};
        if (cg_cuda_ptxas_report(k, t, &rep, &d) != IR_OK)
            ir_buf_printf(&out, "\n/* %s */\n", d.msg);
        else
            ir_buf_printf(&out, "\n/* ptxas:\n%s*/\n", rep.s ? rep.s : "");
        ir_buf_free(&rep);
    }
    ir_arena_destroy(a);
    return out.s;
}
