/* test_kfam.c — the kernel-family layer without running kernels: spec helpers, the registry, defaults
 * that build and verify for real model shapes (no budgets, host and sm_90a budgets), every config of
 * every declared search space building as OK or INVALID (never a builder error), bad specs rejected as
 * input errors, deterministic printing, and the matmul K loop in its canonical shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "ir/kfam.h"
#include "kfacts.h"
#include "kt.h"

static KfamSpec spec_of(const char *family, const char *text)
{
    /* "KEY=VALUE ..." with integer, float (has a '.' or 'e') or string values; keys/strings interned */
    static char store[1024][48];
    static int used;
    KfamSpec s = kfam_spec(family);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        KILN_ASSERT(eq && used + 2 <= 1024);
        *eq = 0;
        char *key = store[used++], *val = eq + 1, *end;
        snprintf(key, 48, "%s", tok);
        long long i = strtoll(val, &end, 10);
        if (!*end) {
            kfam_spec_int(&s, key, i);
        } else if (strtod(val, &end), !*end) {
            kfam_spec_float(&s, key, strtod(val, NULL));
        } else {
            char *v = store[used++];
            snprintf(v, 48, "%s", val);
            kfam_spec_str(&s, key, v);
        }
    }
    return s;
}

static void test_spec(void)
{
    KfamSpec s = kfam_spec("rmsnorm");
    kfam_spec_int(&s, "C", 4096);
    kfam_spec_str(&s, "dtype", "bf16");
    kfam_spec_float(&s, "eps", 1e-5);
    kfam_spec_int(&s, "C", 2048); /* replaces */
    KT_CHECK(s.n == 3 && kfam_spec_i(&s, "C", 0) == 2048, "n=%d C=%lld", s.n,
             (long long)kfam_spec_i(&s, "C", 0));
    KT_CHECK(kfam_spec_f(&s, "eps", 0) == 1e-5 && kfam_spec_f(&s, "C", 0) == 2048, "float views");
    KT_CHECK(!strcmp(kfam_spec_s(&s, "dtype", "?"), "bf16") && !strcmp(kfam_spec_s(&s, "C", "?"), "?"),
             "str");
    KT_CHECK(kfam_spec_i(&s, "missing", -7) == -7, "default");
    IrBuf b = {0};
    kfam_spec_print(&s, &b);
    KT_CHECK(b.s && !strcmp(b.s, "rmsnorm C=2048 dtype=bf16 eps=1e-05"), "print: %s", b.s ? b.s : "");
    ir_buf_free(&b);
    IrArena *a = ir_arena_create();
    const char *name = kfam_spec_name(a, &s);
    KT_CHECK(name && !strcmp(name, "rmsnorm_2048_bf16_1e_05"), "name: %s", name ? name : "");
    ir_arena_destroy(a);
}

static void test_registry(void)
{
    int n;
    const KfamFamily *const *all = kfam_all(&n);
    KT_CHECK(n == 12, "%d families", n);
    for (int i = 0; i < n; i++) {
        KT_CHECK(kfam_find(all[i]->name) == all[i], "find %s", all[i]->name);
        KT_CHECK(all[i]->n_space >= 1 && all[i]->n_space <= KFAM_MAX_SPACE, "%s space", all[i]->name);
    }
    KT_CHECK(!kfam_find("nope"), "unknown family");
}

/* Builds s with cfg (NULL: defaults); returns the status, the kernel in *k. */
static IrStatus build(IrArena *a, const KfamSpec *s, const KirConfig *cfg, KirKernel **k, IrDiag *d)
{
    KirConfig none = {0};
    const KfamFamily *f = kfam_find(s->family);
    *k = NULL;
    return f ? f->build(a, s, kfacts_sm90(), cfg ? cfg : &none, k, d) : IR_ERR_INPUT;
}

static const struct {
    const char *family, *spec;
} model_specs[] = {
    {"embedding", "C=4096 V=128256 dtype=bf16"},
    {"embedding", "C=576 V=49152 dtype=f32"},
    {"rmsnorm", "C=4096 eps=1e-5 dtype=bf16 residual=0"},
    {"rmsnorm", "C=4096 eps=1e-5 dtype=bf16 residual=1"},
    {"rmsnorm", "C=16384 eps=1e-5 dtype=f16 residual=1"},
    {"rmsnorm", "C=7 eps=1e-6 dtype=f32"},
    {"rope", "H=32 D=128 theta=500000.0 scaling=llama3 factor=8.0 low_freq_factor=1.0 high_freq_factor=4.0 "
             "original_max_pos=8192 dtype=bf16"},
    {"rope", "H=8 D=128 theta=10000.0 scaling=none dtype=bf16"},
    {"rope", "H=9 D=64 theta=10000.0 scaling=linear factor=2.0 dtype=f16"},
    {"matmul", "N=4096 K=4096 dtype=bf16 epilogue=none"},
    {"matmul", "N=14336 K=4096 dtype=bf16 epilogue=silu_mul"},
    {"matmul", "N=4096 K=14336 dtype=bf16 epilogue=residual m_hint=1"},
    {"matmul", "N=3584 K=3584 dtype=f16 epilogue=bias m_hint=512"},
    {"matmul", "N=128256 K=4096 dtype=bf16 epilogue=none m_hint=8"},
    {"matmul", "N=33 K=17 dtype=f32 epilogue=silu_mul"},
    {"matmul", "N=1024 K=4096 dtype=bf16 epilogue=pair"},
    {"matmul", "N=1024 K=4096 dtype=bf16 epilogue=pair m_hint=1"},
    {"matmul", "N=192 K=576 dtype=f16 epilogue=pair m_hint=16"},
    {"matmul_splitk_epilogue", "N=4096 dtype=bf16 epilogue=residual"},
    {"sample", "V=128256 mode=sample"},
    {"sample", "V=49152 mode=greedy"},
    {"sample", "V=7 mode=sample"},
    {"kv_write", "Hkv=8 D=128 page_size=16 dtype=bf16"},
    {"kv_write", "Hkv=1 D=64 page_size=32 dtype=f32"},
    {"kv_write", "Hkv=8 D=128 page_size=16 dtype=bf16 rope=1 theta=500000.0 scaling=llama3 factor=8.0"},
    {"kv_write", "Hkv=5 D=80 page_size=8 dtype=f16"},
    {"attention", "mode=decode H=32 Hkv=8 D=128 page_size=16 dtype=bf16 split=1"},
    {"attention_merge", "H=32 D=128 dtype=bf16"},
    {"attention_merge", "H=7 D=80 dtype=f32"},
    {"spec_verify", "V=128256 k=4 mode=sample"},
    {"spec_verify", "V=32000 k=8 mode=greedy"},
    {"spec_verify", "V=7 k=1 mode=sample"},
    {"qmatmul", "N=4096 K=4096 dtype=bf16 wfmt=w4a16 group=128 epilogue=none m_hint=1"},
    {"qmatmul", "N=28672 K=4096 dtype=bf16 wfmt=w4a16 group=128 zeros=1 sdtype=f16 epilogue=none m_hint=1"},
    {"qmatmul", "N=28672 K=4096 dtype=bf16 wfmt=q4_1 epilogue=none m_hint=16"},
    {"qmatmul", "N=4096 K=4096 dtype=bf16 wfmt=fp8 epilogue=none m_hint=1"},
    {"quant_rows", "C=4096 dtype=bf16 fmt=fp8"},
    {"quant_rows", "C=14336 dtype=bf16 fmt=int8"},
    {"qmatmul", "N=14336 K=4096 dtype=bf16 wfmt=w4a16 group=128 zeros=1 epilogue=silu_mul"},
    {"qmatmul", "N=4096 K=14336 dtype=f16 wfmt=w4a16 group=32 epilogue=residual m_hint=8"},
    {"qmatmul", "N=4096 K=4096 dtype=bf16 wfmt=w8a16 epilogue=bias m_hint=512"},
    {"qmatmul", "N=576 K=1536 dtype=bf16 wfmt=q4_1 epilogue=residual m_hint=1"},
    {"qmatmul", "N=1536 K=576 dtype=bf16 wfmt=q4_0 epilogue=silu_mul m_hint=1"},
    {"qmatmul", "N=49152 K=576 dtype=f16 wfmt=q8_0 epilogue=none"},
    {"qmatmul", "N=192 K=576 dtype=bf16 wfmt=q4_1 epilogue=pair m_hint=1"},
    {"qmatmul", "N=1024 K=4096 dtype=bf16 wfmt=w4a16 group=128 zeros=1 epilogue=pair"},
};

static void test_defaults(void)
{
    const KirLimits *sm90 = cg_target_limits(cg_target_find("sm_90a"));
    const KirLimits *host = cg_target_limits(cg_target_find("host"));
    KT_CHECK(sm90 && host, "target limits");
    for (unsigned i = 0; i < sizeof model_specs / sizeof model_specs[0]; i++) {
        IrArena *a = ir_arena_create();
        KfamSpec s = spec_of(model_specs[i].family, model_specs[i].spec);
        KirKernel *k;
        IrDiag d = {0};
        IrStatus st = build(a, &s, NULL, &k, &d);
        KT_CHECK(st == IR_OK, "%s %s: %s", s.family, model_specs[i].spec, d.msg);
        if (st == IR_OK) {
            IrDiag d0 = {0}, d1 = {0}, d2 = {0};
            KT_CHECK(kir_verify(k, NULL, &d0) == IR_OK, "%s", d0.msg);
            KT_CHECK(kir_verify(k, sm90, &d1) == IR_OK, "%s: %s", model_specs[i].spec, d1.msg);
            KT_CHECK(kir_verify(k, host, &d2) == IR_OK, "%s: %s", model_specs[i].spec, d2.msg);
            KirKernel *k2;
            IrDiag d3 = {0};
            KT_CHECK(build(a, &s, NULL, &k2, &d3) == IR_OK && kir_hash(k) == kir_hash(k2),
                     "%s: deterministic", model_specs[i].spec);
        }
        ir_arena_destroy(a);
    }
}

/* The target table's facts: one row per target, its shared memory the limit's, only the host's a CPU;
 * packages' defaults come from sm_90a's; and a default rule reads them (decode N tiles narrow to fill
 * sm_90a's 132 SMs; the host's tiles as tall as the launch's rows: one for a decode step). */
static void test_target_facts(void)
{
    int n = 0;
    const CgTarget *ts = cg_targets(&n);
    for (int i = 0; i < n; i++) {
        const KfamFacts *t = cg_target_facts(&ts[i]);
        KT_CHECK(t->sms > 0 && t->smem_block == cg_target_limits(&ts[i])->smem_bytes,
                 "%s: facts %d SMs, %d B", ts[i].name, t->sms, t->smem_block);
        KT_CHECK(t->cpu == (ts[i].backend == CG_BACKEND_HOST), "%s: cpu %d", ts[i].name, t->cpu);
    }
    KT_CHECK(cg_target_defaults() == cg_target_find("sm_90a") && kfacts_sm90()->sms == 132,
             "the packages' reference is sm_90a");
    KfamSpec s = spec_of("matmul", "N=4096 K=4096 dtype=bf16 epilogue=none m_hint=16");
    KirConfig dev = {0}, host = {0};
    kfam_find("matmul")->defaults(&s, kfacts_sm90(), &dev);
    kfam_find("matmul")->defaults(&s, cg_target_facts(cg_target_find("host")), &host);
    KT_CHECK(kir_config_get(&dev, "BN", 0) == 32 && kir_config_get(&dev, "BM", 0) == 64 &&
                 kir_config_get(&host, "BM", 0) == 16,
             "m_hint 16: BN %lld BM %lld at sm_90a's facts, BM %lld at the host's",
             (long long)kir_config_get(&dev, "BN", 0), (long long)kir_config_get(&dev, "BM", 0),
             (long long)kir_config_get(&host, "BM", 0));
    static const char *const decode[2][2] = {{"matmul", "N=576 K=576 dtype=f32 epilogue=none m_hint=1"},
                                             {"qmatmul", "N=576 K=576 dtype=f32 wfmt=q4_1 m_hint=1"}};
    for (int i = 0; i < 2; i++) {
        KfamSpec q = spec_of(decode[i][0], decode[i][1]);
        KirConfig c = {0};
        kfam_find(decode[i][0])->defaults(&q, cg_target_facts(cg_target_find("host")), &c);
        KT_CHECK(kir_config_get(&c, "BM", 0) == 1 && kir_config_get(&c, "SPLIT_K", 0) == 1,
                 "%s decode on the host: BM %lld", decode[i][0], (long long)kir_config_get(&c, "BM", 0));
    }
}

/* Every config of the family's space: OK or INVALID (LIMIT / UNSUPPORTED), never another error; an OK
 * kernel verifies without budgets and with sm_90a's as OK or LIMIT. */
static void walk_space(const char *family, const char *text)
{
    const KirLimits *sm90 = cg_target_limits(cg_target_find("sm_90a"));
    const KfamFamily *f = kfam_find(family);
    KfamSpec s = spec_of(family, text);
    int idx[KFAM_MAX_SPACE] = {0}, total = 0, ok = 0, fits = 0, errors = 0;
    for (;;) {
        KirConfig cfg = {0};
        for (int i = 0; i < f->n_space; i++)
            kir_config_set(&cfg, f->space[i].key, f->space[i].vals[idx[i]]);
        IrArena *a = ir_arena_create();
        KirKernel *k;
        IrDiag d = {0};
        IrStatus st = build(a, &s, &cfg, &k, &d);
        total++;
        if (st == IR_OK) {
            IrDiag d0 = {0}, d1 = {0};
            IrStatus v = kir_verify(k, sm90, &d1);
            ok++;
            fits += v == IR_OK;
            if (kir_verify(k, NULL, &d0) != IR_OK || (v != IR_OK && v != IR_ERR_LIMIT)) {
                if (errors++ < 3) KT_CHECK(0, "%s %s: verify: %s%s", family, text, d0.msg, d1.msg);
            }
        } else if (st != IR_ERR_LIMIT && st != IR_ERR_UNSUPPORTED) {
            if (errors++ < 3) KT_CHECK(0, "%s %s: build: %s", family, text, d.msg);
        }
        ir_arena_destroy(a);
        int i = 0;
        while (i < f->n_space && ++idx[i] == f->space[i].n)
            idx[i++] = 0;
        if (i == f->n_space) break;
    }
    KT_CHECK(errors == 0 && fits > 0, "%s %s: %d errors", family, text, errors);
    printf("space %s %s: %d configs, %d build, %d fit sm_90a\n", family, text, total, ok, fits);
}

static void test_bad_specs(void)
{
    static const struct {
        const char *family, *spec;
    } bad[] = {
        {"embedding", "V=10 dtype=bf16"},
        {"embedding", "C=0 V=10 dtype=bf16"},
        {"embedding", "C=8 V=10 dtype=f64"},
        {"rmsnorm", "C=64 dtype=bf16"},
        {"rmsnorm", "C=64 eps=1e-5 dtype=bf16 residual=2"},
        {"rope", "H=4 D=63 theta=10000.0 dtype=bf16"},
        {"rope", "H=4 D=64 theta=10000.0 scaling=yarn dtype=bf16"},
        {"rope", "H=4 D=64 theta=10000.0 scaling=llama3 factor=8.0 low_freq_factor=4.0 high_freq_factor=1.0 "
                 "dtype=bf16"},
        {"matmul", "N=64 K=64 dtype=bf16 epilogue=gelu"},
        {"matmul", "N=64 dtype=bf16"},
        {"matmul_splitk_epilogue", "N=64 dtype=bf16 epilogue=silu_mul"},
        {"matmul_splitk_epilogue", "N=64 dtype=bf16 epilogue=pair"},
        {"matmul", "N=64 K=64 dtype=bf16 epilogue=pair gather=1"},
        {"sample", "V=100 mode=beam"},
        {"sample", "mode=greedy"},
        {"kv_write", "Hkv=8 D=128 dtype=bf16"},
        {"kv_write", "Hkv=8 D=127 page_size=16 dtype=bf16 rope=1"},
        {"kv_write", "Hkv=8 D=128 page_size=16 dtype=bf16 rope=2"},
        {"attention", "mode=decode H=32 Hkv=8 D=128 page_size=16 dtype=bf16 split=2"},
        {"attention_merge", "H=32 D=300 dtype=bf16"},
        {"spec_verify", "V=100 k=0 mode=greedy"},
        {"spec_verify", "V=100 k=65 mode=sample"},
        {"spec_verify", "V=100 k=4 mode=beam"},
        {"spec_verify", "k=4 mode=greedy"},
        {"qmatmul", "N=64 K=64 dtype=bf16 epilogue=none"},
        {"qmatmul", "N=64 K=64 dtype=i32 wfmt=q4_0"},
        {"qmatmul", "N=64 K=64 dtype=bf16 wfmt=q5_0"},
        {"qmatmul", "N=64 K=96 dtype=bf16 wfmt=w4a16 group=64"},
        {"qmatmul", "N=64 K=128 dtype=bf16 wfmt=w4a16 group=16"},
        {"qmatmul", "N=64 K=128 dtype=bf16 wfmt=q8_0 group=64"},
        {"qmatmul", "N=64 K=128 dtype=bf16 wfmt=q4_1 zeros=1"},
        {"qmatmul", "N=64 K=80 dtype=bf16 wfmt=q4_0"},
        {"qmatmul", "N=64 K=64 dtype=bf16 wfmt=w8a16 epilogue=gelu"},
    };
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        IrArena *a = ir_arena_create();
        KfamSpec s = spec_of(bad[i].family, bad[i].spec);
        KirKernel *k;
        IrDiag d = {0};
        IrStatus st = build(a, &s, NULL, &k, &d);
        KT_CHECK(st == IR_ERR_INPUT && d.msg[0], "%s %s: %s", bad[i].family, bad[i].spec, ir_status_name(st));
        ir_arena_destroy(a);
    }
    /* a config that cannot serve the spec is INVALID, not an input error */
    IrArena *a = ir_arena_create();
    KfamSpec s = spec_of("matmul", "N=64 K=64 dtype=bf16 epilogue=silu_mul");
    KirConfig cfg = {0};
    kir_config_set(&cfg, "SPLIT_K", 2);
    KirKernel *k;
    IrDiag d = {0};
    KT_CHECK(build(a, &s, &cfg, &k, &d) == IR_ERR_UNSUPPORTED, "silu_mul split-K: %s", d.msg);
    s = spec_of("qmatmul", "N=64 K=64 dtype=bf16 wfmt=q4_0 epilogue=pair");
    ir_diag_clear(&d);
    KT_CHECK(build(a, &s, &cfg, &k, &d) == IR_ERR_UNSUPPORTED && strstr(d.msg, "pair"), "pair split-K: %s",
             d.msg);
    s = spec_of("matmul", "N=64 K=64 dtype=bf16 epilogue=silu_mul");
    kir_config_set(&cfg, "SPLIT_K", 1);
    kir_config_set(&cfg, "BM", 48);
    ir_diag_clear(&d);
    KT_CHECK(build(a, &s, &cfg, &k, &d) == IR_ERR_UNSUPPORTED, "BM=48: %s", d.msg);
    s = spec_of("spec_verify", "V=100000000 k=64 mode=sample"); /* rand counters past i32 */
    ir_diag_clear(&d);
    KT_CHECK(build(a, &s, NULL, &k, &d) == IR_ERR_UNSUPPORTED, "spec_verify (k+2)*V: %s", d.msg);
    ir_arena_destroy(a);
}

/* The K loop: `for [0, K) step BK pipeline=STAGES` carrying acc, whose body loads A [BM,BK] and B [BK,BN]
 * and dots them into the carried accumulator. */
static void test_matmul_shape(void)
{
    IrArena *a = ir_arena_create();
    KfamSpec s = spec_of("matmul", "N=4096 K=4096 dtype=bf16 epilogue=none");
    KirConfig cfg = {0};
    kir_config_set(&cfg, "BM", 64);
    kir_config_set(&cfg, "BN", 128);
    kir_config_set(&cfg, "BK", 32);
    kir_config_set(&cfg, "STAGES", 3);
    KirKernel *k;
    IrDiag d = {0};
    KT_CHECK(build(a, &s, &cfg, &k, &d) == IR_OK, "%s", d.msg);
    const KirInst *loop = NULL;
    for (int i = 0; i < k->body->n_insts; i++)
        if (k->body->insts[i]->op == KIR_OP_FOR) loop = k->body->insts[i];
    KT_CHECK(loop && loop->pipeline == 3 && loop->n_ops == 4, "one for with pipeline=3 and one accumulator");
    if (loop) {
        int loads = 0, dots = 0;
        const KirBlock *body = loop->body;
        for (int i = 0; i < body->n_insts; i++) {
            const KirInst *in = body->insts[i];
            if (in->op == KIR_OP_LOAD) {
                const KirType *t = &in->res[0]->type;
                loads += (loads == 0 && t->shape[0] == 64 && t->shape[1] == 32) ||
                         (loads == 1 && t->shape[0] == 32 && t->shape[1] == 128);
            }
            if (in->op == KIR_OP_DOT) dots += in->ops[2] == body->args[1];
        }
        KT_CHECK(loads == 2 && dots == 1, "body: A load, B load, dot into the carried acc (%d, %d)", loads,
                 dots);
    }
    ir_arena_destroy(a);
}

int main(void)
{
    test_spec();
    test_registry();
    test_defaults();
    test_target_facts();
    walk_space("embedding", "C=4099 V=1000 dtype=bf16");
    walk_space("rmsnorm", "C=4096 eps=1e-5 dtype=bf16 residual=1");
    walk_space("rope", "H=32 D=128 theta=500000.0 scaling=llama3 factor=8.0 dtype=bf16");
    walk_space("matmul", "N=4096 K=4096 dtype=bf16 epilogue=none");
    walk_space("matmul", "N=14336 K=4096 dtype=bf16 epilogue=silu_mul");
    walk_space("matmul", "N=1024 K=4096 dtype=bf16 epilogue=pair");
    walk_space("matmul_splitk_epilogue", "N=4096 dtype=bf16 epilogue=bias");
    walk_space("sample", "V=128256 mode=sample");
    walk_space("kv_write", "Hkv=8 D=128 page_size=16 dtype=bf16");
    walk_space("kv_write", "Hkv=8 D=256 page_size=16 dtype=bf16 rope=1 theta=10000.0");
    walk_space("attention_merge", "H=32 D=128 dtype=bf16");
    walk_space("spec_verify", "V=128256 k=4 mode=sample");
    walk_space("qmatmul", "N=4096 K=4096 dtype=bf16 wfmt=w4a16 group=128 zeros=1 epilogue=residual");
    walk_space("qmatmul", "N=1536 K=576 dtype=bf16 wfmt=q4_1 epilogue=silu_mul");
    test_bad_specs();
    test_matmul_shape();
    return kt_done("test_kfam");
}
