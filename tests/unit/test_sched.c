/* test_sched.c — lowering graph -> schedule on the real recipe: kernels deduplicated, every compute node
 * launched with the family's argument count, the fused launches (kv_write rotating K, the k/v matmul
 * pair) with their arguments in the family's order, and an activation plan in which no two buffers that
 * are live at the same time overlap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/fe.h"
#include "ir/sched.h"
#include "kfacts.h"
#include "kt.h"

static GirGraph *load(const char *model, const char *set)
{
    char path[1024];
    const char *src = getenv("KILN_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/recipes/llama.lua", src ? src : ".");
    FeOptions o = fe_options_default();
    o.model = model;
    /* set: one or two space-separated key=value */
    char buf[128];
    const char *sets[2] = {NULL, NULL};
    o.n_sets = 0;
    if (set) {
        snprintf(buf, sizeof buf, "%s", set);
        char *sp = strchr(buf, ' ');
        if (sp) *sp = 0;
        sets[o.n_sets++] = buf;
        if (sp) sets[o.n_sets++] = sp + 1;
    }
    o.sets = sets;
    GirGraph *g = NULL;
    IrDiag d = {0};
    KT_CHECK(fe_recipe_build(path, &o, &g, &d) == IR_OK, "%s", d.msg);
    if (g) KT_CHECK(gir_run_passes(g, NULL, &d) == IR_OK, "%s", d.msg);
    return g;
}

static void check_plan(const Schedule *s)
{
    int overlaps = 0;
    for (int i = 0; i < s->n_bufs; i++) {
        const SchedBuf *a = &s->bufs[i];
        if (a->kind != SCHED_BUF_ACT) continue;
        KT_CHECK(a->offset >= 0 && a->offset % 256 == 0 && a->offset + a->bytes <= s->act_bytes,
                 "%s placed at %lld", a->name, (long long)a->offset);
        KT_CHECK(a->first >= 0 && a->first <= a->last, "%s live range %d..%d", a->name, a->first, a->last);
        for (int j = i + 1; j < s->n_bufs; j++) {
            const SchedBuf *b = &s->bufs[j];
            if (b->kind != SCHED_BUF_ACT) continue;
            int live = !(a->last < b->first || b->last < a->first);
            int mem = a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
            overlaps += live && mem;
        }
    }
    KT_CHECK(overlaps == 0, "%d pairs of live activations share memory", overlaps);
}

/* kv_write launches rotate K and Q (rope=1, H query heads, the scaling's keys present: fuse-rope-kv-write
 * and fuse-rope-q-kv-write) with positions, q and q_out after slots, and no rope launch is left. fused 1:
 * the k and v projections are one matmul launch (x, w, w2, out, out2, M), no other matmul paired; fused
 * 2: q, k and v are one group launch (x, wq, wk, wv, out, out2, out3, M); fused 0: neither (a bias). */
static void check_fused(const Schedule *s, const char *model, int layers, int fused)
{
    static const char *const llama3_keys[] = {"factor", "low_freq_factor", "high_freq_factor",
                                              "original_max_pos"};
    int kv = 0, pairs = 0, groups = 0, ropes = 0;
    for (int i = 0; i < s->n_launches; i++) {
        const SchedKernel *k = &s->kernels[s->launches[i].kernel];
        IrBuf args = {0};
        sched_launch_args(s, &s->launches[i], &args);
        const char *a = args.s ? args.s : "";
        ropes += !strcmp(k->spec.family, "rope");
        if (!strcmp(k->spec.family, "kv_write")) {
            int keys = kfam_spec_f(&k->spec, "theta", 0) > 0;
            if (!strcmp(kfam_spec_s(&k->spec, "scaling", "none"), "llama3"))
                for (int j = 0; j < 4; j++)
                    keys &= kfam_spec_f(&k->spec, llama3_keys[j], -1) > 0;
            kv++;
            KT_CHECK(kfam_spec_i(&k->spec, "rope", 0) == 1 && kfam_spec_i(&k->spec, "H", 0) > 0 && keys &&
                         s->launches[i].n_args == 9 && strstr(a, " input:slots input:positions act:%") &&
                         strstr(a, " sym:T") && strstr(a, "k_cache."),
                     "%s: kv_write launch %d (%s): %s", model, i, k->name, a);
        }
        if (strcmp(k->spec.family, "matmul") && strcmp(k->spec.family, "qmatmul")) {
            ir_buf_free(&args);
            continue;
        }
        if (!strcmp(kfam_spec_s(&k->spec, "epilogue", ""), "pair")) {
            /* w4a16 (zeros=1): each weight as its words, scales at N*K/2 bytes, zeros after (Hkv*D = 32,
             * K = 64, G = 32 in tiny: @1024, @1152) */
            int w4 = !strcmp(kfam_spec_s(&k->spec, "wfmt", ""), "w4a16");
            int f8 = !strcmp(kfam_spec_s(&k->spec, "wfmt", ""), "fp8"); /* codes, then scales at N*K: @2048 */
            pairs++;
            KT_CHECK((w4 ? s->launches[i].n_args == 10 &&
                               strstr(a, ".self_attn.k_proj.weight@1024 weight:model.layers.") &&
                               strstr(a, ".self_attn.k_proj.weight@1152 weight:model.layers.") &&
                               strstr(a, ".self_attn.v_proj.weight@1152 act:%")
                      : f8 ? s->launches[i].n_args == 8 &&
                                 strstr(a, ".self_attn.k_proj.weight@2048 weight:model.layers.") &&
                                 strstr(a, ".self_attn.v_proj.weight@2048 act:%")
                           : s->launches[i].n_args == 6 &&
                                 strstr(a, ".self_attn.k_proj.weight weight:model.layers.") &&
                                 strstr(a, ".self_attn.v_proj.weight act:%")) &&
                         strstr(a, " sym:T"),
                     "%s: pair launch %d: %s", model, i, a);
        }
        if (!strcmp(kfam_spec_s(&k->spec, "epilogue", ""), "group")) {
            groups++;
            KT_CHECK(s->launches[i].n_args == 8 &&
                         strstr(a, ".self_attn.q_proj.weight weight:model.layers.") &&
                         strstr(a, ".self_attn.k_proj.weight weight:model.layers.") &&
                         strstr(a, ".self_attn.v_proj.weight act:%") && strstr(a, " sym:T") &&
                         kfam_spec_i(&k->spec, "N2", 0) > 0 && kfam_spec_i(&k->spec, "N3", 0) > 0,
                     "%s: group launch %d: %s", model, i, a);
        }
        ir_buf_free(&args);
    }
    KT_CHECK(kv == layers && !ropes && pairs == (fused == 1 ? layers : 0) &&
                 groups == (fused == 2 ? layers : 0),
             "%s: %d kv_write (rope), %d rope, %d pair, %d group launches", model, kv, ropes, pairs, groups);
}

/* Split-K pair (kfam_matmul.c and kfam_qmatmul.c, ws=1): exactly the single-product matmuls (quantized or
 * not; not a dense one of another weight dtype) and the quantized silu_mul and pair with K >= 4096 carry
 * ws=1 and end their arguments with the shared %splitk_ws and %splitk_sem (live for the whole step, as
 * large as the widest such N needs); returns how many launches carry it. */
static int check_splitk(const Schedule *s, const char *model)
{
    int n = 0, ws = -1, sem = -1;
    int64_t need_ws = 0, need_sem = 0;
    for (int i = 0; i < s->n_bufs; i++) {
        if (s->bufs[i].name && !strcmp(s->bufs[i].name, "%splitk_ws")) ws = i;
        if (s->bufs[i].name && !strcmp(s->bufs[i].name, "%splitk_sem")) sem = i;
    }
    for (int i = 0; i < s->n_launches; i++) {
        const SchedKernel *k = &s->kernels[s->launches[i].kernel];
        if (strcmp(k->spec.family, "matmul") && strcmp(k->spec.family, "qmatmul")) continue;
        const char *epi = kfam_spec_s(&k->spec, "epilogue", "none");
        int64_t N = kfam_spec_i(&k->spec, "N", 0), K = kfam_spec_i(&k->spec, "K", 0);
        int quant = !strcmp(k->spec.family, "qmatmul");
        int want = K >= 4096 && !kfam_spec_s(&k->spec, "wdtype", NULL) &&
                   !kfam_spec_i(&k->spec, "gather", 0) &&
                   (!strcmp(epi, "none") || !strcmp(epi, "bias") || !strcmp(epi, "residual") ||
                    (quant && (!strcmp(epi, "silu_mul") || !strcmp(epi, "pair"))));
        const SchedLaunch *l = &s->launches[i];
        int has = l->n_args >= 3 && l->args[l->n_args - 3].kind == SCHED_ARG_BUF &&
                  l->args[l->n_args - 3].buf == ws && l->args[l->n_args - 2].buf == sem;
        KT_CHECK(want == (kfam_spec_i(&k->spec, "ws", 0) == 1) && want == has,
                 "%s: matmul launch %d (%s, K=%lld, %s) ws=%lld, pair %s", model, i, k->name, (long long)K,
                 epi, (long long)kfam_spec_i(&k->spec, "ws", 0), has ? "passed" : "absent");
        if (want) {
            n++;
            if (KFAM_SPLITK_WS(N) > need_ws) need_ws = KFAM_SPLITK_WS(N), need_sem = KFAM_SPLITK_SEMS(N);
        }
    }
    KT_CHECK(!n || (ws >= 0 && sem >= 0 && s->bufs[ws].bytes == need_ws * 4 &&
                    s->bufs[sem].bytes == need_sem * 4 && s->bufs[ws].first == 0 && s->bufs[sem].first == 0 &&
                    s->bufs[ws].last == 1 << 30 && s->bufs[sem].last == 1 << 30),
             "%s: the split-K pair is sized for the widest N and lives the whole step", model);
    return n;
}

/* fp8 weights: qmatmul wfmt=fp8 group=32 gets each weight's codes at byte 0 and its f32 scales at N*K. */
static void test_f8_planes(void)
{
    GirGraph *g = load("tiny", "weight_dtype=f8g32");
    if (!g) return;
    IrArena *a = ir_arena_create();
    Schedule *s = NULL;
    IrDiag d = {0};
    KT_CHECK(sched_build(g, NULL, a, &s, &d) == IR_OK, "tiny f8g32: %s", d.msg);
    int seen = 0;
    for (int i = 0; s && i < s->n_launches; i++) {
        const SchedKernel *k = &s->kernels[s->launches[i].kernel];
        if (strcmp(k->spec.family, "qmatmul")) continue;
        int64_t N = kfam_spec_i(&k->spec, "N", 0), K = kfam_spec_i(&k->spec, "K", 0);
        KT_CHECK(!strcmp(kfam_spec_s(&k->spec, "wfmt", ""), "fp8") && kfam_spec_i(&k->spec, "group", 0) == 32,
                 "%s: wfmt fp8 group 32", k->name);
        IrBuf args = {0};
        sched_launch_args(s, &s->launches[i], &args);
        char want[64];
        snprintf(want, sizeof want, ".weight@%lld ", (long long)(N * K));
        KT_CHECK(args.s && strstr(args.s, want), "%s: scales plane %s in %s", k->name, want,
                 args.s ? args.s : "");
        ir_buf_free(&args);
        seen++;
    }
    KT_CHECK(seen >= 2 * 4, "tiny f8g32: %d qmatmul launches", seen);
    ir_arena_destroy(a);
    gir_graph_destroy(g);
}

/* Quantized (w4a16), K >= 4096: the down projection (K 8192) of each layer takes qmatmul's split-K in the
 * launch; o, q, k + v and gate/up (K 2048) do not. */
static void test_quant_splitk(void)
{
    /* llama-3.2-1b: down only; llama-3-8b (K 4096): q, k + v (pair), o, gate/up (silu_mul), down */
    static const struct {
        const char *model;
        int per_layer;
    } m[2] = {{"llama-3.2-1b", 1}, {"llama-3-8b", 5}};
    for (int i = 0; i < 2; i++) {
        GirGraph *g = load(m[i].model, "n_layers=2 weight_dtype=w4g128");
        if (!g) return;
        IrArena *a = ir_arena_create();
        Schedule *s = NULL;
        IrDiag d = {0};
        KT_CHECK(sched_build(g, NULL, a, &s, &d) == IR_OK, "%s w4g128: %s", m[i].model, d.msg);
        if (s) {
            int n = check_splitk(s, m[i].model);
            KT_CHECK(n == 2 * m[i].per_layer, "%s w4g128: %d split-K launches", m[i].model, n);
        }
        ir_arena_destroy(a);
        gir_graph_destroy(g);
    }
}

static void test_model(const char *model, const char *set, int layers, int fused)
{
    GirGraph *g = load(model, set);
    if (!g) return;
    IrArena *a = ir_arena_create();
    Schedule *s = NULL;
    IrDiag d = {0};
    KT_CHECK(sched_build(g, NULL, a, &s, &d) == IR_OK, "%s: %s", model, d.msg);
    if (s) {
        /* per layer: norm, q + k + v (one group; quantized: q, k + v paired; with a bias: all apart),
         * kv_write rotating k and q, attention + its split-KV merge, o, add+norm, gate/up, down = 9 (10, 11)
         * plus embedding, final norm, logits, sample */
        KT_CHECK(s->n_launches == (11 - fused) * layers + 4, "%s: %d launches", model, s->n_launches);
        check_fused(s, model, layers, fused);
        int splitk = check_splitk(s, model);
        /* Llama-3-8B: o (K 4096) and down (K 14336) of every layer; SmolLM2 and tiny: none (K < 4096) */
        if (!strcmp(model, "llama-3-8b"))
            KT_CHECK(splitk == 2 * layers, "%s: %d split-K launches", model, splitk);
        if (!strcmp(model, "llama-3.2-1b")) /* down (K 8192) only: o has K 2048 */
            KT_CHECK(splitk == layers, "%s: %d split-K launches", model, splitk);
        if (!strcmp(model, "smollm2-135m") || !strcmp(model, "tiny"))
            KT_CHECK(splitk == 0, "%s: %d split-K launches", model, splitk);
        KT_CHECK(s->n_kernels <= 15, "%s: %d distinct kernels (specs shared across layers)", model,
                 s->n_kernels);
        for (int i = 0; i < s->n_launches; i++) {
            const SchedKernel *k = &s->kernels[s->launches[i].kernel];
            KT_CHECK(s->launches[i].n_args >= 3, "launch %d of %s has %d args", i, k->name,
                     s->launches[i].n_args);
        }
        /* attention: the split-KV kernel's 14 params, ending with the step's max_q, the workspace and
         * the run-time split count; then the merge of that workspace into the attention's output */
        for (int i = 0; i < s->n_launches; i++) {
            const SchedKernel *k = &s->kernels[s->launches[i].kernel];
            if (strcmp(k->spec.family, "attention") && strcmp(k->spec.family, "attention_merge")) continue;
            int merge = !strcmp(k->spec.family, "attention_merge");
            IrBuf args = {0};
            sched_launch_args(s, &s->launches[i], &args);
            const char *tail = merge ? "rt:split_tokens rt:n_splits" : "sym:B sym:MP rt:max_q";
            const char *mid = merge ? "act:%ws_o." : " act:%ws_o.";
            size_t n = args.s ? strlen(args.s) : 0;
            KT_CHECK(
                s->launches[i].n_args == (merge ? 5 : 14) && args.s && strstr(args.s, tail) &&
                    strstr(args.s, mid) &&
                    !strcmp(args.s + n - strlen(merge ? tail : "rt:n_splits"), merge ? tail : "rt:n_splits"),
                "%s: attention args %s", model, args.s ? args.s : "");
            KT_CHECK(merge || (i + 1 < s->n_launches &&
                               !strcmp(s->kernels[s->launches[i + 1].kernel].spec.family, "attention_merge")),
                     "%s: attention launch %d is followed by its merge", model, i);
            IrArena *ka = ir_arena_create();
            KirKernel *kk = NULL;
            IrDiag kd = {0};
            KT_CHECK(k->fam && k->fam->build(ka, &k->spec, kfacts_sm90(), NULL, &kk, &kd) == IR_OK &&
                         kk->n_params == s->launches[i].n_args,
                     "%s: attention kernel %s builds with one param per launch argument: %s", model, k->name,
                     kd.msg);
            ir_arena_destroy(ka);
            ir_buf_free(&args);
        }
        /* every launch: its kernel builds at the default config with one param per argument */
        for (int i = 0; i < s->n_kernels; i++) {
            const SchedKernel *k = &s->kernels[i];
            if (!k->fam) continue;
            int li = 0;
            while (li < s->n_launches && s->launches[li].kernel != i)
                li++;
            IrArena *ka = ir_arena_create();
            KirKernel *kk = NULL;
            IrDiag kd = {0};
            KT_CHECK(li < s->n_launches &&
                         k->fam->build(ka, &k->spec, kfacts_sm90(), NULL, &kk, &kd) == IR_OK &&
                         kk->n_params == s->launches[li].n_args,
                     "%s: kernel %s builds with one param per launch argument: %s", model, k->name, kd.msg);
            ir_arena_destroy(ka);
        }
        int outputs = 0;
        for (int i = 0; i < s->n_bufs; i++)
            outputs += s->bufs[i].output != NULL;
        KT_CHECK(outputs == 2, "logits and next_tokens are outputs (%d)", outputs);
        check_plan(s);
        /* reuse: the arena is far smaller than all activations together */
        int64_t all = 0;
        for (int i = 0; i < s->n_bufs; i++)
            if (s->bufs[i].kind == SCHED_BUF_ACT) all += s->bufs[i].bytes;
        KT_CHECK(s->act_bytes * 4 < all, "%s: arena %lld of %lld bytes", model, (long long)s->act_bytes,
                 (long long)all);
        IrBuf p1 = {0}, p2 = {0};
        sched_print(s, &p1);
        Schedule *s2 = NULL;
        KT_CHECK(sched_build(g, NULL, a, &s2, &d) == IR_OK, "%s", d.msg);
        if (s2) sched_print(s2, &p2);
        KT_CHECK(p1.s && p2.s && !strcmp(p1.s, p2.s), "schedule is deterministic");
        ir_buf_free(&p1);
        ir_buf_free(&p2);
    }
    ir_arena_destroy(a);
    gir_graph_destroy(g);
}

int main(void)
{
    test_model("tiny", NULL, 2, 2);
    test_model("llama-3-8b", NULL, 32, 2);
    test_model("llama-3.2-1b", "n_layers=2", 2, 2); /* llama3 rope scaling: all keys on kv_write */
    test_quant_splitk();
    test_model("qwen2-7b", "n_layers=3", 3, 0); /* qkv bias: nothing fused */
    test_model("smollm2-135m", NULL, 30, 2);
    test_model("smollm2-135m", "weight_dtype=q4_1", 30, 1); /* GGUF Q4_1 linear layers: qmatmul kernels */
    test_model("tiny", "weight_dtype=q8_0", 2, 1);
    test_model("llama-3.2-1b", "n_layers=2 weight_dtype=q4_k", 2, 1); /* GGUF K-quants: K % 256 == 0 */
    test_model("tiny", "weight_dtype=w4g32z", 2, 1); /* w4a16: each weight as words, scales, zeros planes */
    test_model("tiny", "weight_dtype=f8g32", 2, 1);  /* fp8: each weight as codes and scales planes */
    test_f8_planes();
    return kt_done("test_sched");
}
