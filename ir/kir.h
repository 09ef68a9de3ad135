/* kir.h — the kernel IR: a small, typed, block-level tile IR (Triton-like semantics).
 *
 * A kernel is run by a grid of programs; each program works on tiles (1-D [N] or 2-D [M,N], sizes known
 * at compile time) and scalars. There are no threads in the IR: backends map tiles to threads, choose
 * layouts and instructions. Values are SSA; control flow is structured (`for` with loop-carried values).
 * Schedule parameters (tile sizes, warps, stages, split-k) are compile-time constants taken from a
 * KirConfig, which a kernel family's builder reads while building. Op semantics: kir_ops.def.
 *
 * Building (what a family builder does):
 *     KirBuilder b;
 *     kir_builder_init(&b, k, &diag);                 // k from kir_kernel_create(arena, "rmsnorm_...")
 *     KirValue *x = kir_param(&b, "x", kir_ptr(KIR_BF16), KIR_PARAM_RDONLY);
 *     KirValue *cols = kir_arange(&b, 4096);
 *     KirValue *v = kir_load(&b, x, kir_add(&b, base, cols), NULL, NULL);
 *     ...  kir_ret(&b);
 *     if (kir_builder_done(&b) != IR_OK) ...          // the first builder error, else IR_OK
 *
 * Errors: the builder records the first misuse in the IrDiag and returns a typed "poison" value so
 * builders need not check each call; kir_verify re-checks every rule and budgets (tile registers, shared
 * memory) for a target, answering IR_ERR_LIMIT for a config that cannot fit (INVALID, not FAILED).
 */
#ifndef KILN_IR_KIR_H
#define KILN_IR_KIR_H

#include "base.h"

enum { KIR_MAX_RANK = 2, KIR_MAX_PARAMS = 32, KIR_MAX_CFG = 16, KIR_MAX_DEPTH = 8 };

typedef enum KirDtype {
    KIR_I1,
    KIR_I8,
    KIR_U8,
    KIR_I32,
    KIR_I64,
    KIR_F16,
    KIR_BF16,
    KIR_F32,
    KIR_F8E4M3,
    KIR_DTYPE_COUNT
} KirDtype;

typedef enum KirOp {
#define X(e, name, n_ops, flags) KIR_OP_##e,
#include "kir_ops.def"
#undef X
    KIR_OP_COUNT
} KirOp;

enum {
    KIR_F_ELEM = 1 << 0,
    KIR_F_MEM = 1 << 1,
    KIR_F_SIDE = 1 << 2,
    KIR_F_REGION = 1 << 3,
    KIR_F_TERM = 1 << 4,
    KIR_F_BINARY = 1 << 5, /* add ... ne: two operands, element-wise */
    KIR_F_CMP = 1 << 6,    /* lt ... ne: result i1 */
    KIR_F_INTOP = 1 << 7,  /* rem, and, or, xor, shl, shr: integer operands only */
    KIR_F_UNARY = 1 << 8,  /* neg ... floor: one operand, element-wise (not cast) */
    KIR_F_F32 = 1 << 9,    /* exp ... floor: f32 operands only */
};

typedef enum KirReduce { KIR_RED_SUM, KIR_RED_MAX, KIR_RED_MIN } KirReduce;

/* A value's type: a scalar (rank 0), a tile (rank 1 or 2), or a pointer (scalar, is_ptr) to dtype. */
typedef struct KirType {
    KirDtype dtype;
    unsigned char is_ptr;
    unsigned char rank;
    int shape[KIR_MAX_RANK];
} KirType;

typedef struct KirInst KirInst;
typedef struct KirBlock KirBlock;

typedef struct KirValue {
    int id; /* creation order; printing renumbers by definition order */
    KirType type;
    KirInst *def; /* defining instruction, or NULL for a block argument */
    KirBlock *arg_of;
    int index; /* result index in def, or argument index in arg_of */
} KirValue;

struct KirBlock {
    int n_args;
    KirValue **args;
    int n_insts, cap;
    KirInst **insts;
    KirInst *parent; /* the `for` owning this block; NULL for the kernel body */
};

struct KirInst {
    KirOp op;
    int n_ops, n_res;
    KirValue **ops;
    KirValue **res;
    int64_t i, i2;  /* op attributes: param index, const value, axis, arange length, reduce kind/axis */
    double f;       /* float constant */
    KirBlock *body; /* `for` only */
    int pipeline;   /* `for` only: software-pipelining hint (stages; 0 = none) */
};

enum { KIR_PARAM_RDONLY = 1 << 0, KIR_PARAM_NOALIAS = 1 << 1 };

typedef struct KirParam {
    const char *name;
    KirType type;
    unsigned flags;
    KirValue *value;
} KirParam;

/* Compile-time schedule parameters, in insertion order ("BLOCK_N" = 1024). */
typedef struct KirConfig {
    int n;
    const char *key[KIR_MAX_CFG];
    int64_t val[KIR_MAX_CFG];
} KirConfig;

/* Grid size along one axis: constant c when param < 0, else cdiv(value of scalar param `param` * mul,
 * div) — computed by the runtime from the launch's arguments. */
typedef struct KirGridDim {
    int param;
    int64_t mul, div, c;
} KirGridDim;

typedef struct KirKernel {
    IrArena *arena;     /* not owned: the kernel lives in its creator's arena */
    const char *name;   /* unique per specialization, e.g. "rmsnorm_bf16_c4096" */
    const char *family; /* "rmsnorm" */
    KirConfig cfg;
    int warps;      /* threads per program = 32 * warps (backends may ignore: host) */
    int min_blocks; /* config MIN_BLOCKS: programs an SM should hold at once (0: no hint); the GPU backends
                     * cap registers at what that many programs leave each thread */
    int n_params;
    KirParam params[KIR_MAX_PARAMS];
    KirGridDim grid[3];
    KirBlock *body;
    int n_values;
} KirKernel;

/* Target limits for kir_verify's budgets (NULL: skip them). */
typedef struct KirLimits {
    const char *name;
    int max_threads;       /* per program */
    int smem_bytes;        /* shared memory per program */
    int regs_per_thread;   /* 32-bit registers */
    int64_t program_bytes; /* live tile bytes one program may hold (0: no limit); for lowerings that keep
                              a program's tiles in one thread's stack (the LLVM GPU path) */
} KirLimits;

/* ---- tables and types ---- */
const char *kir_op_name(KirOp op);
int kir_op_parse(const char *name, KirOp *out);
unsigned kir_op_flags(KirOp op);
const char *kir_dtype_name(KirDtype t);
int kir_dtype_bytes(KirDtype t); /* i1 counts 1 */
int kir_dtype_is_float(KirDtype t);
int kir_dtype_is_int(KirDtype t); /* i1, i8, u8, i32, i64 */
KirType kir_scalar(KirDtype t);
KirType kir_ptr(KirDtype t);
KirType kir_tile1(KirDtype t, int n);
KirType kir_tile2(KirDtype t, int m, int n);
int kir_type_eq(const KirType *a, const KirType *b);
int kir_type_numel(const KirType *t);            /* 1 for scalars and pointers */
void kir_type_print(const KirType *t, IrBuf *b); /* "bf16[64,128]", "ptr<bf16>", "i32" */

/* ---- config ---- */
void kir_config_set(KirConfig *c, const char *key, int64_t v); /* key must be static or outlive c */
int64_t kir_config_get(const KirConfig *c, const char *key, int64_t dflt);
void kir_config_print(const KirConfig *c, IrBuf *b); /* "BLOCK=1024 WARPS=4" */

/* ---- kernels and the builder ---- */
/* The params and grid as packages and the tuning store keep them: "x:ptr<bf16> n_rows:i32" and three
 * axes, each a constant or "cdiv(param*mul,div)": "cdiv(M*1,64) 4 1". */
void kir_params_print(const KirKernel *k, IrBuf *b);
void kir_grid_print(const KirKernel *k, IrBuf *b);
/* Creates an empty kernel in `a` (NULL on allocation failure). */
KirKernel *kir_kernel_create(IrArena *a, const char *name, const char *family, const KirConfig *cfg);

typedef struct KirBuilder {
    KirKernel *k;
    KirBlock *cur;
    int depth;
    KirBlock *stack[KIR_MAX_DEPTH];
    KirInst *loops[KIR_MAX_DEPTH];
    IrDiag *d;
} KirBuilder;

void kir_builder_init(KirBuilder *b, KirKernel *k, IrDiag *d);
/* Returns the first recorded error, or IR_ERR_INTERNAL when a for was left open or the body does not
 * end with ret. */
IrStatus kir_builder_done(KirBuilder *b);

KirValue *kir_param(KirBuilder *b, const char *name, KirType t, unsigned flags);
void kir_grid(KirBuilder *b, int axis, const KirValue *param, int64_t mul, int64_t div); /* param NULL: 1 */
void kir_grid_const(KirBuilder *b, int axis, int64_t c);

KirValue *kir_const_i32(KirBuilder *b, int64_t v);
KirValue *kir_const_i64(KirBuilder *b, int64_t v);
KirValue *kir_const_f(KirBuilder *b, KirDtype t, double v);
KirValue *kir_pid(KirBuilder *b, int axis);
KirValue *kir_nprog(KirBuilder *b, int axis);
KirValue *kir_arange(KirBuilder *b, int n);
KirValue *kir_splat(KirBuilder *b, KirValue *x, int rank, const int *shape);
/* Binary and unary element-wise ops (KIR_F_ELEM): operands of one dtype; scalar x tile allowed. */
KirValue *kir_binary(KirBuilder *b, KirOp op, KirValue *x, KirValue *y);
KirValue *kir_unary(KirBuilder *b, KirOp op, KirValue *x);
KirValue *kir_select(KirBuilder *b, KirValue *c, KirValue *x, KirValue *y);
KirValue *kir_cast(KirBuilder *b, KirValue *x, KirDtype t);
KirValue *kir_expand(KirBuilder *b, KirValue *x, int axis);
KirValue *kir_broadcast(KirBuilder *b, KirValue *x, int m, int n);
KirValue *kir_reduce(KirBuilder *b, KirValue *x, KirReduce kind, int axis);
KirValue *kir_load(KirBuilder *b, KirValue *ptr, KirValue *offs, KirValue *mask, KirValue *other);
void kir_store(KirBuilder *b, KirValue *ptr, KirValue *offs, KirValue *val, KirValue *mask);
void kir_atomic_add(KirBuilder *b, KirValue *ptr, KirValue *offs, KirValue *val, KirValue *mask);
/* The program's arrival at counter ptr[offs] (kir_ops.def, "arrive"): the count before it, scalar i32. */
KirValue *kir_arrive(KirBuilder *b, KirValue *ptr, KirValue *offs);
KirValue *kir_dot(KirBuilder *b, KirValue *a, KirValue *bm, KirValue *acc);
KirValue *kir_rand(KirBuilder *b, KirValue *seed, KirValue *offs);

/* Structured loop. kir_for_begin opens the body and returns its block: args[0] is the induction
 * variable (i32), args[1..n] the loop-carried values (typed as inits). kir_for_end closes it with the
 * yields (n values) and returns the loop instruction, whose res[0..n) are the final values. */
KirBlock *kir_for_begin(KirBuilder *b, KirValue *lo, KirValue *hi, KirValue *step, KirValue *const *inits,
                        int n, int pipeline);
KirInst *kir_for_end(KirBuilder *b, KirValue *const *yields, int n);
void kir_ret(KirBuilder *b);

/* Convenience (all through kir_binary / kir_unary). */
#define kir_add(b, x, y) kir_binary(b, KIR_OP_ADD, x, y)
#define kir_sub(b, x, y) kir_binary(b, KIR_OP_SUB, x, y)
#define kir_mul(b, x, y) kir_binary(b, KIR_OP_MUL, x, y)
#define kir_div(b, x, y) kir_binary(b, KIR_OP_DIV, x, y)
#define kir_lt(b, x, y)  kir_binary(b, KIR_OP_LT, x, y)

/* ---- checking and printing ---- */
/* Re-checks every typing and scoping rule; with lim, also the budgets (threads, an estimate of shared
 * memory and of tile registers per thread). Returns IR_OK, IR_ERR_INTERNAL (a broken rule: a builder
 * bug) or IR_ERR_LIMIT (does not fit the target: the config is INVALID). */
IrStatus kir_verify(const KirKernel *k, const KirLimits *lim, IrDiag *d);
/* Estimates, as used by kir_verify: peak live tile bytes per program, and shared memory bytes. */
int64_t kir_estimate_tile_bytes(const KirKernel *k);
int64_t kir_estimate_smem_bytes(const KirKernel *k);

/* Deterministic text form; identical kernels print identically. */
void kir_print(const KirKernel *k, IrBuf *b);
/* Hash of the printed form (the cache key's IR part; the config is part of the text). */
uint64_t kir_hash(const KirKernel *k);

/* The counter hash behind `rand` (every backend computes exactly this): for seed s (i64) and counter c
 * (i32): h = kir_mix32((uint32)c ^ kir_mix32((uint32)s ^ 0x9e3779b9) ^ (uint32)(s >> 32)), result
 * (h >> 8) * 2^-24. kir_mix32 is murmur3's fmix32. */
uint32_t kir_mix32(uint32_t x);
float kir_rand_ref(int64_t seed, int32_t counter);

#endif
