/* at_compile.h — one candidate config of a package kernel compiled for one target, as the tuner stores it
 * (at_store_put_binary) and the runtime loads it (rt_tune / rt_engine_binary_add). Prefix at_.
 *
 *     IrArena *a = ir_arena_create();
 *     KfamSpec spec;
 *     at_spec_parse(a, "matmul N=64 K=64 dtype=bf16 epilogue=none", &spec, err, sizeof err);
 *     char h[17];  at_ir_hash(kfam_find("matmul"), &spec, h, err, sizeof err);  // == kernels.ir_hash?
 *     AtCompiled c;
 *     KilnStatus s = at_compile(kfam_find("matmul"), &spec, &cfg, cg_target_find("host"), NULL, &c, err, n);
 *     ... c.config, c.params, c.grid, c.bin.format / entry / data / size, c.block, c.smem ...
 *     at_compiled_free(&c);
 *
 * The kernel is built at cfg (the family's defaults for keys cfg leaves out), verified under the
 * target's limits (kir_verify) and compiled by the target's backend (cg_kernel_jobs, so NVRTC for a
 * CUDA target and LLVM for the host): the same path `kiln compile` takes, one config at a time.
 */
#ifndef KILN_AT_COMPILE_H
#define KILN_AT_COMPILE_H

#include "cg_driver.h"
#include "ir/kfam.h"
#include "kiln.h"

typedef struct AtCompiled {
    char *config;    /* the full config, kir_config_print ("BM=16 BN=64 ..."); malloc'd */
    char *params;    /* "x:ptr<bf16> M:i32 ..." (kir_params_print); malloc'd */
    char *grid;      /* "cdiv(M*1,16) 4 1" (kir_grid_print); malloc'd */
    int block, smem; /* launch geometry: the CUDA backend's threads and dynamic shared memory; 1, 0 else */
    CgBinary bin;    /* format ("host-so", "cubin", ...), entry, data, size, compile_ms */
} AtCompiled;

/* Parses a package's kernels.spec text ("rmsnorm C=64 eps=1e-05 dtype=bf16 residual=0", kfam_spec_print's
 * form) into *out: integers as ints, other numbers as floats, the rest as strings, keys and strings in
 * arena a. KILN_ERR_CORRUPT with one line for text that is not of that form or names no family. */
KilnStatus at_spec_parse(IrArena *a, const char *text, KfamSpec *out, char *err, int errlen);
/* A printed config ("BM=16 BN=32 WARPS=4") back into *out; its keys live in a. KILN_ERR_CORRUPT for a bad
 * item. */
KilnStatus at_config_parse(IrArena *a, const char *text, KirConfig *out, char *err, int errlen);

/* The IR hash of family f's kernel for spec s at its default config (shaped by cg_target_defaults()'s
 * facts, as every package's rows), as `kiln compile` writes it to kernels.ir_hash (the tuning store's
 * key), into hash[17]. KILN_ERR_ARG when the spec does not build. */
KilnStatus at_ir_hash(const KfamFamily *f, const KfamSpec *s, char hash[17], char *err, int errlen);

/* Builds, verifies and compiles f's kernel for spec s at cfg for target t (o: the compile driver's
 * options, NULL: one thread, no cache). Fills *out (free with at_compiled_free, whatever the status).
 * KILN_ERR_UNSUPPORTED with one line when the config cannot serve the spec or does not fit the target
 * (the build or the verifier refuses it, or the backend reports a limit): the candidate is INVALID;
 * KILN_ERR_ARG for a bad spec or target; KILN_ERR_NOMEM. */
KilnStatus at_compile(const KfamFamily *f, const KfamSpec *s, const KirConfig *cfg, const CgTarget *t,
                      const CgDriverOptions *o, AtCompiled *out, char *err, int errlen);
void at_compiled_free(AtCompiled *c);

#endif
