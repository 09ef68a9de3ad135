/* kfam.h — kernel families: each is ONE kernel-IR builder plus its declared search space. Backends lower
 * whatever a builder makes; the autotuner walks the space; the lowering picks a family per graph op.
 * Prefix kfam_. One file per family (kfam_<name>.c), registered in kfam.c's table.
 *
 * A KfamSpec says what one kernel instance computes: the family and its shape constants, dtypes and
 * options (hidden size, eps, epilogue, ...), as key/value attributes. Symbolic sizes (tokens in a step)
 * are never in the spec: they are runtime kernel parameters.
 *
 *     KfamSpec s = kfam_spec("rmsnorm");
 *     kfam_spec_int(&s, "C", 4096); kfam_spec_str(&s, "dtype", "bf16"); kfam_spec_float(&s, "eps", 1e-5);
 *     const KfamFamily *f = kfam_find("rmsnorm");
 *     const KfamFacts *t = cg_target_facts(cg_target_defaults());  // codegen's row of the target
 *     KirConfig cfg; f->defaults(&s, t, &cfg);
 *     KirKernel *k; if (f->build(arena, &s, t, &cfg, &k, &d) != IR_OK) ...   // IR_ERR_LIMIT: config INVALID
 */
#ifndef KILN_IR_KFAM_H
#define KILN_IR_KFAM_H

#include "gir.h"
#include "kir.h"

enum { KFAM_MAX_SPEC = 16, KFAM_MAX_SPACE = 8, KFAM_MAX_VALUES = 8 };

/* Split-K reduced inside one matmul launch (kfam_matmul.c, spec ws=1): at most KFAM_SPLITK_ROWS rows and
 * KFAM_SPLITK_MAX slices; the f32 partials buffer and the i32 tile counters for N columns. */
enum { KFAM_SPLITK_ROWS = 64, KFAM_SPLITK_MAX = 8 };
#define KFAM_SPLITK_WS(N)   ((int64_t)KFAM_SPLITK_MAX * KFAM_SPLITK_ROWS * (int64_t)(N))
#define KFAM_SPLITK_SEMS(N) ((int64_t)(KFAM_SPLITK_ROWS / 16) * (((int64_t)(N) + 15) / 16))

/* What a family's default rules read of the target a config is shaped for: one row per target in
 * codegen's target table (cg_target_facts), so ir/ holds rules over these, never a device's numbers.
 * Packages shape every default by one reference target's row (cg_target_defaults: sm_90a); the host's
 * binaries are shaped by the host's row (cpu = 1). */
typedef struct KfamFacts {
    int sms;        /* streaming multiprocessors (NVIDIA) or compute units (AMD): programs run at once
                       on each, so a grid "fills the device" at about this many programs */
    int smem_block; /* bytes of shared memory (LDS) one program may use: the opt-in maximum */
    int regs_sm;    /* 32-bit registers of one SM's (CU's) register file, shared by its resident programs */
    int cpu;        /* 1: a CPU (the host backend): programs run one after another on each core, every
                       tile a stack array and every tile op a loop over it, so a tile's cost is its
                       elements, masked rows included, and tiles pay when their trip's working set
                       stays in the L1 cache; 0: a GPU */
} KfamFacts;

typedef struct KfamSpec {
    const char *family;
    int n;
    GirAttr attr[KFAM_MAX_SPEC]; /* keys and strings must outlive the spec (literals or arena) */
} KfamSpec;

KfamSpec kfam_spec(const char *family);
void kfam_spec_int(KfamSpec *s, const char *key, int64_t v);
void kfam_spec_float(KfamSpec *s, const char *key, double v);
void kfam_spec_str(KfamSpec *s, const char *key, const char *v);
int64_t kfam_spec_i(const KfamSpec *s, const char *key, int64_t dflt);
double kfam_spec_f(const KfamSpec *s, const char *key, double dflt);
const char *kfam_spec_s(const KfamSpec *s, const char *key, const char *dflt);
/* Deterministic text "rmsnorm C=4096 dtype=bf16 eps=1e-05" (keys in insertion order). */
void kfam_spec_print(const KfamSpec *s, IrBuf *b);
/* A kernel name from the spec: family + "_" + values, e.g. "rmsnorm_4096_bf16_1e-05" sanitized to
 * [A-Za-z0-9_], written into the arena. */
const char *kfam_spec_name(IrArena *a, const KfamSpec *s);

/* One axis of a family's search space: a config key and its candidate values. */
typedef struct KfamSpace {
    const char *key;
    int n;
    int64_t vals[KFAM_MAX_VALUES];
} KfamSpace;

typedef struct KfamFamily {
    const char *name;
    int n_space;
    KfamSpace space[KFAM_MAX_SPACE];
    /* The heuristic default config for a spec, shaped by the target facts t (always valid for sm_90a
     * and host at sm_90a's facts, the packages' reference). */
    void (*defaults)(const KfamSpec *s, const KfamFacts *t, KirConfig *cfg);
    /* Builds the kernel for spec + config into arena a; keys cfg leaves out (cfg may be NULL) take the
     * defaults at facts t. IR_ERR_LIMIT/IR_ERR_UNSUPPORTED: this config cannot serve this spec
     * (INVALID); IR_ERR_INPUT: a bad spec. The kernel's params, their order and meaning are documented
     * at the top of the family's file. */
    IrStatus (*build)(IrArena *a, const KfamSpec *s, const KfamFacts *t, const KirConfig *cfg,
                      KirKernel **out, IrDiag *d);
} KfamFamily;

const KfamFamily *kfam_find(const char *name);

/* Configs from f's search space for spec s, closest to the default at facts t first (fewest keys changed,
 * then the smallest change): those that build, keep the default's parameter list (so one launch plan
 * serves all of them) and pass kir_verify under lim (NULL: no budgets). Writes up to max into out and
 * returns how many. The first one is the default when it fits. How a target that rejects the default
 * still gets a kernel: the compile driver walks this list. */
int kfam_config_candidates(const KfamFamily *f, const KfamSpec *s, const KfamFacts *t, const KirLimits *lim,
                           KirConfig *out, int max);
const KfamFamily *const *kfam_all(int *n);

#endif
