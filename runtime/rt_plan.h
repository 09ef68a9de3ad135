/* rt_plan.h — a package's launch plan, loaded for one target: the kernels with their binaries, the
 * ordered launches with their arguments, the buffers, and the maxima the activation arena was planned
 * for. Prefix rt_plan_. The engine (rt_engine.c) runs it; docs/RUNTIME.md has the data flow.
 *
 *     RtPlan *p;
 *     if (rt_plan_load(pkg, "host", &p, err, sizeof err)) fail(err);   // "model.kiln: no binaries for ..."
 *     for (int i = 0; i < p->n_launches; i++) ... p->kernels[p->launches[i].kernel] ...
 *     rt_plan_free(p);
 *
 * Everything the package says is checked here, once, so the engine can trust the plan: every launch
 * names a kernel that has a binary for the target (hash verified), every argument matches its param
 * (a pointer param gets a buffer or weight, an i32 param a symbol or a runtime value), every grid
 * formula names an i32 param, activation buffers lie inside the arena. rt_plan_check (rt_plan_check.c)
 * then treats the plan as untrusted data: each argument's dtype and shape against what the kernel's
 * family reads for its spec, weight planes inside their tensor, steps 0..n-1 each once and in dataflow
 * order, each binary's grid and block re-derived from its config. The binaries' hashes check
 * integrity, not origin: a package runs native code (host-so kernels are dlopened), so load only packages
 * you trust, as you would a shared library. Errors: one line naming the
 * package path, KILN_ERR_CORRUPT for an inconsistent package, KILN_ERR_UNSUPPORTED for a target the
 * package has no binaries for.
 */
#ifndef KILN_RT_PLAN_H
#define KILN_RT_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

enum { RT_PLAN_MAX_ARGS = 16 };
enum { RT_PLAN_LOADS = 1, RT_PLAN_STORES = 2 }; /* RtPlanKernel.param_mem */

/* Step sizes a launch argument can name ("sym:T"): tokens, sequences, max pages per sequence, logit
 * rows, pages in the KV pool. */
typedef enum RtSym { RT_SYM_T, RT_SYM_B, RT_SYM_MP, RT_SYM_R, RT_SYM_P, RT_SYM_COUNT } RtSym;
/* Per-step values the runtime computes ("rt:max_q"; ir/sched.h defines them). */
typedef enum RtRtv { RT_RTV_MAX_Q, RT_RTV_N_SPLITS, RT_RTV_SPLIT_TOKENS, RT_RTV_COUNT } RtRtv;

typedef enum RtArgKind { RT_ARG_INPUT, RT_ARG_WEIGHT, RT_ARG_ACT, RT_ARG_SYM, RT_ARG_RTV } RtArgKind;

typedef struct RtPlanArg {
    RtArgKind kind;
    int index;      /* INPUT/ACT: into bufs; WEIGHT: into weights; SYM: RtSym; RTV: RtRtv */
    int64_t offset; /* WEIGHT: bytes into it ("weight:NAME@OFFSET": a w4a16 weight's planes), else 0 */
} RtPlanArg;

/* A grid axis: c, or cdiv(params[param] * mul, div). */
typedef struct RtGridAxis {
    int param; /* -1: the constant c */
    int64_t c, mul, div;
} RtGridAxis;

enum {
    RT_PLAN_MAX_VARIANTS = 4, /* a package's binaries of one kernel for one target */
    RT_PLAN_MAX_BUCKETS = 21, /* tuning buckets of a kernel: T=1, 2, 4, ..., 2^20 (rt_plan_bucket) */
    RT_PLAN_MAX_BINS = RT_PLAN_MAX_VARIANTS + RT_PLAN_MAX_BUCKETS /* with the tuned ones */
};

/* One compiled binary of a kernel for the plan's target, at one config. */
typedef struct RtPlanBinary {
    int tuned;            /* 0: the package's; 1: from the tuning store (rt_tune.h) */
    char *config;         /* "BM=16 BN=32 ..." */
    char *format, *entry; /* "cubin", "ptx", "host-so"; the symbol */
    RtGridAxis grid[3];
    int block, smem;
    int64_t bm;    /* the config's BM (0: none) */
    int64_t split; /* the config's SPLIT_K (1: none): > 1 serves at most bm rows (matmul ws=1) */
    void *data;    /* the binary, hash verified */
    size_t size;
} RtPlanBinary;

typedef struct RtPlanKernel {
    char *name, *family, *spec;
    char *ir_hash; /* the kernel IR's hash: the tuning store's key */
    char *params;  /* the params text, "x:ptr<bf16> n_rows:i32" */
    int n_params;
    char *param_names[RT_PLAN_MAX_ARGS];
    int param_is_ptr[RT_PLAN_MAX_ARGS];     /* else an i32 scalar (the only scalar type a plan passes) */
    char param_dtype[RT_PLAN_MAX_ARGS][12]; /* pointers: the element dtype ("bf16" of ptr<bf16>) */
    unsigned char param_rdonly[RT_PLAN_MAX_ARGS]; /* the kernel IR marks it rdonly (never written) */
    unsigned char param_mem[RT_PLAN_MAX_ARGS];    /* RT_PLAN_LOADS | RT_PLAN_STORES: the kernel IR's */
    int m_param;                                  /* the i32 param "M" (rows of a linear layer), or -1 */
    /* the target's binaries, by config: first the package's (n_pkg; several when the compiler added
     * small-M variants of a linear layer), then tuned ones (rt_plan_binary_add); rt_plan_pick chooses
     * per launch */
    int n_bins, n_pkg;
    RtPlanBinary bins[RT_PLAN_MAX_BINS];
    int n_sms; /* the device's SMs, for rt_plan_pick's choice past every BM (0: unknown, first largest) */
    /* tuning, per bucket (rt_plan_bucket; n_buckets 0 until rt_tune_apply): the tuned binary a launch
     * runs (-1: pick among the package's), how it matched (an RtTdbMatch: 0 default, 1 nearest, 2
     * exact) and the T of the bucket it was tuned for (0: the bucket "") */
    int n_buckets;
    signed char route[RT_PLAN_MAX_BUCKETS];
    unsigned char match[RT_PLAN_MAX_BUCKETS];
    int64_t from[RT_PLAN_MAX_BUCKETS];
} RtPlanKernel;

typedef struct RtPlanLaunch {
    int kernel;
    int n_args;
    RtPlanArg args[RT_PLAN_MAX_ARGS];
} RtPlanLaunch;

typedef enum RtBufKind { RT_BUF_INPUT, RT_BUF_ACT } RtBufKind;

typedef struct RtPlanBuf {
    char *name; /* inputs: "tokens", "k_cache.3"; activations "%12" */
    RtBufKind kind;
    char *dtype, *shape;   /* "bf16", "[T,576]" */
    int64_t offset, bytes; /* activations: in the arena */
    char *output;          /* graph output name or NULL */
} RtPlanBuf;

typedef struct RtPlanWeight {
    char *name, *dtype, *shape;
    int64_t nbytes;
} RtPlanWeight;

typedef struct RtPlan {
    char *target;
    int n_kernels, n_launches, n_bufs, n_weights;
    RtPlanKernel *kernels;
    RtPlanLaunch *launches;
    RtPlanBuf *bufs;
    RtPlanWeight *weights;
    int64_t max_tokens, max_seqs, max_rows, max_split_rows, act_bytes;
} RtPlan;

/* Loads the plan of an open package for target ("host", "sm_90a", ...). */
KilnStatus rt_plan_load(KilnPackage *pkg, const char *target, RtPlan **out, char *err, int errlen);
void rt_plan_free(RtPlan *p); /* NULL is fine */

/* The buffer named name (an input or activation), or -1. */
int rt_plan_buf(const RtPlan *p, const char *name);
/* The buffer that holds graph output `output`, or -1. */
int rt_plan_output(const RtPlan *p, const char *output);
/* The binary of kernel k a launch with i32 param values vals[n_params] runs: the tuned binary routed for
 * the launch's bucket when there is one; else among the package's: with one binary, it; else, by M (the
 * "M" param), the smallest BM >= M, else the largest BM (ties: the first). */
int rt_plan_pick(const RtPlanKernel *k, const int64_t *vals); /* never a SPLIT_K > 1 binary for M > BM */
/* The package binary (index < n_pkg) rt_plan_pick gives a launch of m rows when no store routes it. */
int rt_plan_pick_rows(const RtPlanKernel *k, int64_t m);
/* The tuning bucket of a launch (docs/AUTOTUNE.md): for a kernel with the i32 param M, index
 * ceil(log2 M) (the bucket "T=2^index"), clamped to 0 .. n_buckets - 1; for any other kernel 0 (the
 * bucket ""). */
int rt_plan_bucket(const RtPlanKernel *k, const int64_t *vals);
/* Appends a tuned binary to kernel k: config, format, entry and data (size bytes) are copied; grid is
 * checked against k's params as the package's grids are. Returns its index in k->bins, or -1 with one
 * line in err (no room, a bad grid, out of memory). */
int rt_plan_binary_add(RtPlanKernel *k, const char *config, const char *format, const char *entry,
                       const char *grid, int block, int smem, const void *data, size_t size, char *err,
                       int errlen);
/* Evaluates a binary's grid for i32 param values vals[n_params] (pointer params ignored; negative values
 * count as 0). Returns 0, or -1 when an axis exceeds INT32_MAX (y and z: 65535, CUDA's limit) or all
 * three together INT32_MAX programs. */
int rt_plan_grid(const RtPlanBinary *b, const int64_t *vals, unsigned grid[3]);
/* rt_plan_check.c. Checks a loaded plan as untrusted data (rt_plan_load calls it): every kernel's family
 * has a contract here (an unknown family is refused); every pointer argument's dtype is its param's, and
 * a quantized weight goes only to a qmatmul of its format; its shape is what the kernel's family reads for
 * the kernel's spec (a table of the families' param contracts, ir/kfam_*.c's headers; a param without a
 * rule is checked for dtype only); a quantized plane ("weight:NAME@OFFSET") or block weight holds the bytes
 * the kernel reads; each i32 param is bound to a step size, or to the one runtime value it takes (rt:);
 * every activation a launch only reads was written by an earlier launch and every graph output by some
 * launch (deleted, swapped or reordered steps); each binary passes rt_plan_binary_check. Returns KILN_OK
 * or KILN_ERR_CORRUPT with one line "<path>: step N (kernel K): ..." in err. */
KilnStatus rt_plan_check(const RtPlan *p, const char *path, char *err, int errlen);
/* Re-derives binary b's grid and threads per block from its config and kernel k's spec and compares
 * them with the row's (a family without a contract: refused). Returns 0, or -1 with one line in why
 * ("grid cdiv(M*1,64) 4 1, its config BM=16 BN=32 ... gives cdiv(M,16) 2 1"). */
int rt_plan_binary_check(const RtPlanKernel *k, const RtPlanBinary *b, char *why, int whylen);

/* A config value ("BLOCK_M") of a config text, or dflt. */
int64_t rt_plan_config_i(const char *config, const char *key, int64_t dflt);

#endif
