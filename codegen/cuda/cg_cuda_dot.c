/* cg_cuda_dot.c — dot: tensor-core (mma.sync) and SIMT lowering, and the pipelined dot loop.
 *
 * A dot's result lives in the mma.sync m16n8 accumulator layout (f16/bf16/f8 operands; f8 is staged as
 * f16, which holds every e4m3 value exactly) or, for f32 and i8 operands, in the canonical BLOCKED layout
 * computed with scalar FMAs (f32: fmaf, i.e. exact products accumulated in f32, in k order).
 *
 * Generic dot: both operands are written into the scratch region as b16 tiles padded to whole
 * fragments (rows of K + 8 elements: conflict-free ldmatrix), then each warp runs its fm x fn fragments
 * over K in steps of 16 (ldmatrix.x4 for A, .x2 for B, .trans when the tile is stored k-major).
 *
 * Pipelined dot loop (the canonical matmul main loop): a `for` whose body dots tiles that are loaded in
 * the same body from offsets computable for any trip (from the induction variable, constants and values
 * defined before the loop), f16/bf16 (or e4m3 when both operands are K-major and wgmma takes the loop:
 * wgmma's k32 on 8-bit codes reads the same 32-byte slices of the same swizzled rows), masked with zero
 * fill. Each such load gets a ring of `stages`
 * shared-memory buffers (stages = the loop's pipeline hint) filled by cp.async, 16 bytes per copy when
 * the offsets allow; trip i computes from buffer i % stages while the copies for trip i + stages - 1
 * are in flight. One barrier per trip. The body's other loads (a dequantized tile's packed words; with a
 * computed dot operand, every load that qualifies, plan_leaves) stream in the same copy groups: into a
 * ring per thread (each thread reads back only its own copies), or, for a load whose elements repeat over
 * runs of an MMA layout (cg_cuda_mma_run), into a shared image holding each element once. The 8-bit wgmma
 * loop (W8A8) leaves each trip's wgmma group in flight while the next trip waits for its tiles and issues
 * its copies (wait_group 1; overlap_fits), so the copies run stages - 2 trips ahead and the slot refilled
 * is the one read two trips back.
 */
#include "cg_cuda_impl.h"

#include <string.h>

static CgCudaVal *val(CgCudaGen *g, const KirValue *v)
{
    return &g->v[v->id];
}

const CgCudaPipe *cg_cuda_pipe_of(const CgCudaGen *g, const KirInst *loop)
{
    for (int i = 0; i < g->n_pipes; i++)
        if (g->pipes[i].loop == loop) return &g->pipes[i];
    return NULL;
}

static int a_in_regs(const CgCudaGen *g, const KirInst *in);

/* Bytes per element of a piped load's image: 2 (bf16, f16) or 1 (e4m3, i8). */
static int pipe_esz(const CgCudaPipeLoad *pl)
{
    return kir_dtype_bytes(pl->ld->ops[0]->type.dtype);
}

/* ---- planning ---- */

/* Can v be computed at any coordinates of any trip of the loop whose body is `body`, at the top of a
 * trip or before the loop? */
static int recomputable(const CgCudaGen *g, const KirValue *v, const KirBlock *body, int depth)
{
    const CgCudaVal *V = &g->v[v->id];
    if (depth > 64) return 0;
    if (v == body->args[0]) return 1;
    if (V->blk != body)
        return V->form != CG_CUDA_REG && V->form != CG_CUDA_PIPE; /* defined before the loop */
    if (!V->def || (V->form != CG_CUDA_SCALAR && V->form != CG_CUDA_VIRT)) return 0;
    switch (V->def->op) {
    case KIR_OP_LOAD:
        if (V->form != CG_CUDA_VIRT) return 0; /* else a gather from read-only memory: recomputable */
        break;
    case KIR_OP_REDUCE:
    case KIR_OP_DOT:
    case KIR_OP_FOR:
    case KIR_OP_PARAM: return 0;
    default: break;
    }
    for (int k = 0; k < V->def->n_ops; k++)
        if (!recomputable(g, V->def->ops[k], body, depth + 1)) return 0;
    return 1;
}

static int is_zero_const(const KirValue *v, const CgCudaGen *g)
{
    const KirInst *d = g->v[v->id].def;
    return d && d->op == KIR_OP_CONST && d->f == 0.0 && d->i == 0;
}

/* Can `ld`, an instruction of loop body `body`, be copied trips ahead by cp.async: a load of a register tile
 * whose offsets (VIRT) and mask can be computed for any trip, with masked-off lanes zero (the copy's zero
 * fill)? */
static int copyable_ahead(const CgCudaGen *g, const KirInst *ld, const KirBlock *body)
{
    if (ld->op != KIR_OP_LOAD) return 0;
    const CgCudaVal *L = &g->v[ld->res[0]->id];
    const KirValue *offs = ld->ops[1], *mask = ld->n_ops > 2 ? ld->ops[2] : NULL;
    if (L->blk != body || L->form != CG_CUDA_REG || g->v[offs->id].form != CG_CUDA_VIRT) return 0;
    if (mask && g->v[mask->id].form != CG_CUDA_VIRT && g->v[mask->id].form != CG_CUDA_SCALAR) return 0;
    if (ld->n_ops > 3 && !is_zero_const(ld->ops[3], g)) return 0;
    return recomputable(g, offs, body, 0) && (!mask || recomputable(g, mask, body, 0));
}

/* Fills pl for load `ld` as operand `role` of a dot in loop body `body`; 0 when it cannot be pipelined. */
static int plan_load(const CgCudaGen *g, const KirInst *ld, int role, const KirBlock *body,
                     CgCudaPipeLoad *pl)
{
    if (!copyable_ahead(g, ld, body)) return 0;
    const KirValue *offs = ld->ops[1], *mask = ld->n_ops > 2 ? ld->ops[2] : NULL;
    KirDtype t = ld->ops[0]->type.dtype;
    if (t != KIR_BF16 && t != KIR_F16 && t != KIR_F8E4M3 && t != KIR_I8) return 0;
    int m, n;
    cg_cuda_shape(&ld->res[0]->type, &m, &n);
    if (role == 0 && (m % 16 || n % 16)) return 0;
    if (role == 1 && (m % 16 || n % 8)) return 0;
    const CgCudaAxis *ao = &g->v[offs->id].ax, *am = mask ? &g->v[mask->id].ax : NULL;
    int pref = role == 0 ? 1 : 0; /* the k dimension: rows of K elements feed ldmatrix without .trans */
    int best_cd = -1, best_vw = 1, esz = kir_dtype_bytes(t);
    for (int pass = 0; pass < 2; pass++) {
        int cd = pass ? 1 - pref : pref, vw = 16 / esz;
        while (vw > 1 && (ao->contig[cd] < vw || ao->div[cd] < vw || (am && am->cnst[cd] < vw)))
            vw /= 2;
        if (vw > best_vw) {
            best_vw = vw;
            best_cd = cd;
        }
    }
    if (best_cd < 0) return 0;
    memset(pl, 0, sizeof *pl);
    pl->ld = ld;
    pl->role = role;
    pl->cdim = best_cd;
    pl->vw = best_vw;
    pl->lines = best_cd ? m : n;
    pl->len = best_cd ? n : m;
    pl->trans = best_cd != pref;
    pl->stage_bytes = (pl->lines * (pl->len + 8) * esz + 127) / 128 * 128;
    return 1;
}

/* The index of the load of p that defines x, or -1. */
static int pipe_load_index(const CgCudaGen *g, const CgCudaPipe *p, const KirValue *x)
{
    for (int j = 0; j < p->n_loads; j++)
        if (p->loads[j].ld == g->v[x->id].def) return j;
    return -1;
}

/* Can this pipeline feed wgmma (sm_90a)? Every dot: [16 * warps, K] x [K, N] with N a multiple of 8 up to
 * 256, so each warpgroup computes 64 rows with one m64nNk16 per k16. A is a piped K-major image (K a
 * multiple of 64: whole 128-byte swizzle rows) or registers in the accumulator layout with 16 rows per
 * warp (FlashAttention's Q and P: wgmma's A fragment is that layout's k16 slice); B is a piped K-major
 * image (K % 64) or N-major image (N % 64: the rows of V). Images are copied in 16-byte pieces. e4m3
 * and i8 dots: both operands piped K-major images, K % 128 (m64nNk32 per 32-byte slice); i8's N is one of
 * the integer shapes (8, 16, 24, or a multiple of 16 up to 224). */
static int wgmma_fits(const CgCudaGen *g, const CgCudaPipe *p)
{
    if (strcmp(g->t->name, "sm_90a") || g->warps % 4) return 0;
    for (int j = 0; j < p->n_loads; j++)
        if ((p->loads[j].trans && p->loads[j].role == 0) || p->loads[j].vw * pipe_esz(&p->loads[j]) != 16)
            return 0;
    const KirBlock *body = p->loop->body;
    for (int i = 0; i < body->n_insts; i++) {
        const KirInst *in = body->insts[i];
        if (in->op != KIR_OP_DOT) continue;
        const KirType *a = &in->ops[0]->type, *b = &in->ops[1]->type;
        if (a->dtype != KIR_BF16 && a->dtype != KIR_F16 && a->dtype != KIR_F8E4M3 && a->dtype != KIR_I8)
            return 0;
        int n = b->shape[1];
        if (a->dtype == KIR_I8 && n > 24 && (n % 16 || n > 224)) return 0;
        if (a->shape[0] != 16 * g->warps || b->shape[1] % 8 || b->shape[1] > 256) return 0;
        int ja = pipe_load_index(g, p, in->ops[0]), jb = pipe_load_index(g, p, in->ops[1]);
        if (a->dtype == KIR_F8E4M3 || a->dtype == KIR_I8) { /* no transposed 8-bit operands; whole
                                                             * 128-element swizzle rows */
            if (ja < 0 || jb < 0 || p->loads[ja].trans || p->loads[jb].trans || a->shape[1] % 128) return 0;
            continue;
        }
        if (jb < 0 || (ja >= 0 && a->shape[1] % 64)) return 0;
        if (ja < 0) {
            if (!a_in_regs(g, in)) return 0;
            const CgCudaLayout *la = &g->lay[g->v[in->ops[0]->id].lay];
            if (la->wm != g->warps || la->fm != 1) return 0;
        }
        if (p->loads[jb].trans ? b->shape[1] % 64 : a->shape[1] % 64) return 0;
    }
    return 1;
}

/* Can trip i's wgmma group stay in flight while trip i + 1 issues? The 8-bit wgmma loop (the W8A8 GEMM,
 * where the tensor cores outrun one group at a time): a single dot of two piped operands whose
 * accumulator is the loop-carried value, used by the dot alone and yielded straight back, so nothing
 * reads or copies the registers the group is still writing; stages >= 4 keep two trips of copies ahead. */
static int overlap_fits(const CgCudaGen *g, const CgCudaPipe *p)
{
    const KirBlock *body = p->loop->body;
    const KirInst *dot = NULL, *y = body->insts[body->n_insts - 1];
    if (!p->wgmma || p->stages < 4 || body->n_args != 2 || y->n_ops != 1) return 0;
    for (int i = 0; i < body->n_insts; i++)
        if (body->insts[i]->op == KIR_OP_DOT) {
            if (dot) return 0;
            dot = body->insts[i];
        }
    if (!dot || kir_dtype_bytes(dot->ops[0]->type.dtype) != 1) return 0;
    if (pipe_load_index(g, p, dot->ops[0]) < 0 || pipe_load_index(g, p, dot->ops[1]) < 0) return 0;
    return dot->ops[2] == body->args[1] && g->v[body->args[1]->id].uses == 1 && y->ops[0] == dot->res[0] &&
           g->v[dot->res[0]->id].uses == 1;
}

/* The dots' operands as piped loads (p->loads); 0 when some operand is not a load this loop can pipe. */
static int plan_dots(const CgCudaGen *g, CgCudaPipe *p)
{
    const KirBlock *body = p->loop->body;
    int dots = 0;
    for (int i = 0; i < body->n_insts; i++) {
        const KirInst *in = body->insts[i];
        if (in->op != KIR_OP_DOT) continue;
        KirDtype t = in->ops[0]->type.dtype;
        if (!cg_cuda_dot_is_mma(t) && t != KIR_I8) continue; /* i8: only on wgmma (below) */
        for (int role = 0; role < 2; role++) {
            if (role == 0 && a_in_regs(g, in))
                continue; /* A from registers (P, or Q loaded before the loop) */
            const KirInst *ld = g->v[in->ops[role]->id].def;
            if (!ld) return 0;
            int have = -1;
            for (int j = 0; j < p->n_loads; j++)
                if (p->loads[j].ld == ld) have = j;
            if (have >= 0) {
                if (p->loads[have].role != role) return 0;
                continue;
            }
            if (p->n_loads == CG_CUDA_PIPE_LOADS || !plan_load(g, ld, role, body, &p->loads[p->n_loads]))
                return 0;
            p->n_loads++;
        }
        dots++;
    }
    if (!dots) return 0;
    /* every use of a piped load must be a dot operand in this body */
    for (int j = 0; j < p->n_loads; j++) {
        const KirValue *r = p->loads[j].ld->res[0];
        int n = 0;
        for (int i = 0; i < body->n_insts; i++) {
            const KirInst *in = body->insts[i];
            for (int k = 0; k < in->n_ops; k++)
                if (in->ops[k] == r) n += in->op == KIR_OP_DOT && k < 2 ? 1 : 1000;
        }
        if (n != g->v[r->id].uses) return 0;
    }
    return 1;
}

/* Distinct elements of a run leaf per copy (4, 2 or 1: at most 16 bytes): consecutive runs whose
 * offsets are consecutive and whose first offset is aligned to the copy (compile-time facts along the
 * columns, the same for every row and trip), under a mask constant over them; `per` runs per row. */
static int run_vec(CgCudaGen *g, const KirInst *ld, int per, int run, int bytes)
{
    const KirValue *offs = ld->ops[1], *mask = ld->n_ops > 2 ? ld->ops[2] : NULL;
    const CgCudaLayout *L = &g->lay[val(g, ld->res[0])->lay];
    for (int V = 16 / bytes; V > 1; V /= 2) {
        /* the read loop (cg_cuda_mma_run_loop at run * V) needs whole groups in a fragment row */
        int ok =
            per % V == 0 && (L->fn * 8) % (run * V) == 0 && (!mask || val(g, mask)->ax.cnst[1] >= V * run);
        for (int j = 0; ok && j < per; j += V) {
            ok = cg_cuda_col_div(g, offs, (int64_t)j * run) % V == 0;
            for (int i = 1; ok && i < V; i++) {
                int64_t d;
                ok = cg_cuda_col_delta(offs, (int64_t)j * run, (int64_t)(j + i) * run, &d) && d == i;
            }
        }
        if (ok) return V;
    }
    return 1;
}

/* A window load (CgCudaPipeLeaf.win): 4-byte elements in an mma layout (one warp across the columns)
 * whose row offsets are the row's first one plus d(c), the same for every row and trip (compile-time
 * facts), d(c) = 4(c / 32) + (c % 8) / 2: w4a16's fragment-ordered words, column 32j + 8i + 2t + h
 * reading word 4j + t, so a thread (t = its lane % 4) reads one word for its 8 slots of a 32-column
 * block. Copied as rows of n / 8 words, 4 per copy (copy j: the words of columns [32j, 32j + 32), under
 * a mask constant over them), and read once per 32 columns at r * pitch + 4j + t. Returns whether ld
 * is one. */
static int mma_window(CgCudaGen *g, const KirInst *ld)
{
    const KirValue *offs = ld->ops[1], *mask = ld->n_ops > 2 ? ld->ops[2] : NULL;
    const CgCudaLayout *L = &g->lay[val(g, ld->res[0])->lay];
    if (L->kind != CG_CUDA_MMA || L->wn != 1 || L->n % 32 || kir_dtype_bytes(ld->ops[0]->type.dtype) != 4 ||
        cg_cuda_col_div(g, offs, 0) % 4)
        return 0;
    for (int c = 0; c < L->n; c++) {
        int64_t d;
        if (!cg_cuda_col_delta(offs, 0, c, &d) || d != 4 * (c / 32) + (c % 8) / 2) return 0;
    }
    return !mask || (val(g, mask)->ax.cnst[1] >= 32 && val(g, mask)->ax.cnst[1] % 32 == 0);
}

/* A dot loop whose operand is computed in the body (a dequantized weight tile): its loads from read-only
 * memory with offsets computable for any trip, 4, 8 or 16 bytes per access and masks constant over an
 * access (zero fill), stream through rings (CgCudaPipeLeaf); the others stay where they are. afeed_only:
 * beside piped dot operands, only the loads that feed a register A operand (count_afeeds). 0 when none
 * qualifies. */
static int plan_leaves(CgCudaGen *g, CgCudaPipe *p, int afeed_only)
{
    const KirBlock *body = p->loop->body;
    int mma = 0;
    for (int i = 0; i < body->n_insts; i++)
        mma |= body->insts[i]->op == KIR_OP_DOT && cg_cuda_dot_is_mma(body->insts[i]->ops[0]->type.dtype);
    if (!mma || p->loop->pipeline < 2 || cg_cuda_has_store(body)) return 0;
    for (int i = 0; i < body->n_insts && p->n_leaves < CG_CUDA_PIPE_LOADS; i++) {
        const KirInst *ld = body->insts[i];
        if (!copyable_ahead(g, ld, body) || pipe_load_index(g, p, ld->res[0]) >= 0) continue;
        const CgCudaVal *L = &g->v[ld->res[0]->id], *P = &g->v[ld->ops[0]->id];
        if ((afeed_only && L->afeed_uses != L->uses) || !P->def || P->def->op != KIR_OP_PARAM ||
            !(g->k->params[P->def->i].flags & KIR_PARAM_RDONLY))
            continue;
        int step, dyn, w = cg_cuda_load_access(g, ld, &step, &dyn), run = cg_cuda_mma_run(g, ld);
        int esz = kir_dtype_bytes(ld->ops[0]->type.dtype);
        if (!run && mma_window(g, ld)) { /* rows of n / 8 words padded by 4 (a warp's reads: distinct
                                          * banks for n >= 64), 4 words per copy */
            CgCudaPipeLeaf *lf = &p->leaves[p->n_leaves++];
            memset(lf, 0, sizeof *lf);
            lf->ld = ld, lf->lay = L->lay, lf->step = step, lf->w = 1, lf->win = 32, lf->vec = 4;
            lf->bytes = 4, lf->lines = g->lay[L->lay].m, lf->pitch = g->lay[L->lay].n / 8 + 4;
            lf->stage_bytes = (lf->lines * lf->pitch * 4 + 127) / 128 * 128;
            continue;
        }
        int bytes = (run ? 1 : w) * esz, sub = 0;
        if (run && bytes < 4) /* 1-2-byte group scales, zero points, GGUF block bytes: a word each */
            sub = bytes, bytes = 4;
        if ((dyn && !run) || (bytes != 4 && bytes != 8 && bytes != 16)) continue;
        CgCudaPipeLeaf *lf = &p->leaves[p->n_leaves++];
        const CgCudaLayout *ll = &g->lay[L->lay];
        lf->ld = ld;
        lf->lay = L->lay;
        lf->step = step;
        lf->w = w;
        lf->run = run;
        lf->bytes = bytes;
        lf->sub = sub;
        lf->vec = 1;
        if (run) { /* one copy per distinct element (vec of them per copy); rows padded by vec elements
                    * (one when vec is 1) against bank conflicts */
            lf->vec = sub ? 1 : run_vec(g, ld, ll->n / run, run, bytes);
            lf->lines = ll->m;
            lf->pitch = ll->n / run + lf->vec;
            lf->stage_bytes = (lf->lines * lf->pitch * bytes + 127) / 128 * 128;
        } else {
            lf->stage_bytes = ((ll->slots + step - 1) / step * g->threads * bytes + 127) / 128 * 128;
        }
    }
    return p->n_leaves > 0;
}

static void plan_loop(CgCudaGen *g, const KirInst *loop)
{
    const KirBlock *body = loop->body;
    CgCudaPipe p;
    memset(&p, 0, sizeof p);
    p.loop = loop;
    for (int i = 0; i < body->n_insts; i++)
        if (body->insts[i]->op == KIR_OP_FOR) return; /* keep the pipelined body flat */
    if (!plan_dots(g, &p)) {
        memset(&p, 0, sizeof p);
        p.loop = loop;
        if (!plan_leaves(g, &p, 0)) return;
    } else {
        plan_leaves(g, &p, 1); /* the loads a register A operand is computed from stream too */
    }
    const KirLimits *lim = cg_target_limits(g->t);
    int budget = (lim ? lim->smem_bytes : 48 * 1024) - 8 * 1024;
    p.stages = loop->pipeline > 1 ? loop->pipeline : 1;
    if (p.stages > 8) p.stages = 8;
    p.wgmma = p.n_loads && wgmma_fits(g, &p);
    int per = 0;
    for (int j = 0; j < p.n_loads; j++) {
        CgCudaPipeLoad *pl = &p.loads[j];
        if (!p.wgmma && pipe_esz(pl) == 1) return; /* e4m3 images are read by wgmma only */
        if (p.wgmma)                               /* unpadded, swizzled images; 1024-byte aligned stages */
            pl->stage_bytes = (pl->lines * pl->len * pipe_esz(pl) + 1023) / 1024 * 1024;
        per += pl->stage_bytes;
    }
    for (int j = 0; j < p.n_leaves; j++)
        per += p.leaves[j].stage_bytes;
    if (p.n_leaves) budget /= 2; /* the generic dot's staging or the epilogue's scratch takes its share */
    while (p.stages > 1 && (int64_t)per * p.stages + 1024 > budget)
        p.stages--;
    if (p.n_leaves && p.stages < 2) return;
    int off = 0;
    for (int j = 0; j < p.n_loads; j++) {
        p.loads[j].offset = off;
        off += p.loads[j].stage_bytes * p.stages;
    }
    for (int j = 0; j < p.n_leaves; j++) {
        p.leaves[j].offset = off;
        off += p.leaves[j].stage_bytes * p.stages;
    }
    p.bytes = off + (p.wgmma ? 1024 : 0); /* wgmma: slack to align the base to 1024 bytes at run time */
    p.overlap = overlap_fits(g, &p);
    if (g->n_pipes == CG_CUDA_MAX_PIPES) return;
    for (int i = 0; p.wgmma && i < body->n_insts; i++) { /* the accumulators take wgmma's layout */
        const KirInst *in = body->insts[i];
        if (in->op != KIR_OP_DOT || g->n_forced == (int)(sizeof g->forced_dot / sizeof g->forced_dot[0]))
            continue;
        CgCudaLayout l;
        memset(&l, 0, sizeof l);
        l.kind = CG_CUDA_MMA;
        l.m = in->res[0]->type.shape[0];
        l.n = in->res[0]->type.shape[1];
        l.order = 1;
        l.vec = 2;
        l.wm = g->warps;
        l.wn = 1;
        l.fm = 1;
        l.fn = l.n / 8;
        l.slots = l.fn * 4;
        g->forced_dot[g->n_forced] = in;
        g->forced_lay[g->n_forced++] = cg_cuda_layout_intern(g, &l);
    }
    g->pipes[g->n_pipes++] = p;
    if (p.bytes > g->pipe_bytes) g->pipe_bytes = (p.bytes + 127) / 128 * 128;
}

void cg_cuda_mark_pipes(CgCudaGen *g)
{
    for (int i = 0; i < g->n_pipes; i++)
        for (int j = 0; j < g->pipes[i].n_loads; j++) {
            CgCudaVal *V = &g->v[g->pipes[i].loads[j].ld->res[0]->id];
            V->form = CG_CUDA_PIPE;
            V->pipe = i + 1;
        }
}

static void plan_block(CgCudaGen *g, const KirBlock *blk)
{
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        if (in->op != KIR_OP_FOR) continue;
        plan_block(g, in->body);
        plan_loop(g, in);
    }
}

void cg_cuda_plan_pipes(CgCudaGen *g)
{
    plan_block(g, g->k->body);
    cg_cuda_mark_pipes(g);
}

/* ---- tensor-core inner product ---- */

/* One operand's shared-memory image for the mma loop: element (row, k) of A or (k, col) of B lives at
 * ptr[line * pitch + pos]; `trans` when lines run along k (ldmatrix .trans). Or, for A, `reg`: the
 * register array of a tile held in an MMA accumulator layout with the result's rows (a_in_regs), whose
 * n8 fragments j, j + 1 are exactly the m16k16 A fragment of k step j / 2 (FlashAttention's P @ V). */
typedef struct Opnd {
    const char *ptr;
    int pitch, trans;
    const char *reg;
    int reg_fn;     /* reg: n8 fragments per row fragment */
    const char *pk; /* reg packed before the loop (a_packed) */
    const char *pr; /* reg's b16 pairs (cg_cuda_nib_pairs) */
} Opnd;

/* Can the dot read its A operand from the registers of an MMA layout (no shared-memory staging)? */
static int a_in_regs(const CgCudaGen *g, const KirInst *in)
{
    const CgCudaVal *A = &g->v[in->ops[0]->id], *R = &g->v[in->res[0]->id];
    KirDtype t = in->ops[0]->type.dtype;
    if (A->form != CG_CUDA_REG || (t != KIR_BF16 && t != KIR_F16)) return 0;
    const CgCudaLayout *la = &g->lay[A->lay], *lr = &g->lay[R->lay];
    return la->kind == CG_CUDA_MMA && lr->kind == CG_CUDA_MMA && la->wn == 1 && lr->wn == 1 &&
           la->wm == lr->wm && la->fm == lr->fm && la->m == lr->m && la->m % 16 == 0 && la->n % 16 == 0;
}

/* The registers to pack an A operand from: x's own, or, when x is a cast of an f32 tile in the same layout
 * to x's b16 dtype (P = dtype(p) in attention), the f32 source's: packing rounds to nearest even like the
 * cast, so the bits are the same and the cast's registers need not exist. */
static const char *a_reg_name(CgCudaGen *g, const KirValue *x)
{
    const KirInst *d = g->v[x->id].def;
    if (d && d->op == KIR_OP_CAST && d->ops[0]->type.dtype == KIR_F32 && d->ops[0]->type.rank == 2) {
        const CgCudaVal *S = &g->v[d->ops[0]->id];
        if (S->form == CG_CUDA_REG && S->lay == g->v[x->id].lay) return S->name;
    }
    return g->v[x->id].name;
}

/* Fills `unsigned arr[K/16][4]` with register A operand x's b16 pairs: k16 slice s is n8 fragments 2s,
 * 2s + 1 of a layout with one row fragment per warp (mma.sync's and wgmma's A fragment). */
static void fill_pack_a(CgCudaGen *g, const KirValue *x, const char *arr)
{
    const char *r = a_reg_name(g, x), *pk = x->type.dtype == KIR_BF16 ? "kd_pack_bf16x2" : "kd_pack_f16x2";
    const char *pr = cg_cuda_nib_pairs(g, x);
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_open(g, "for (int s = 0; s < %d; s++)", x->type.shape[1] / 16);
    for (int i = 0; i < 4; i++)
        if (pr)
            cg_cuda_line(g, "%s[s][%d] = %s[s * 4 + %d];", arr, i, pr, i);
        else
            cg_cuda_line(g, "%s[s][%d] = %s(%s[s * 8 + %d], %s[s * 8 + %d]);", arr, i, pk, r, 2 * i, r,
                         2 * i + 1);
    cg_cuda_close(g);
}

static void emit_pack_a(CgCudaGen *g, const KirValue *x, const char *arr)
{
    cg_cuda_line(g, "unsigned %s[%d][4];", arr, x->type.shape[1] / 16);
    fill_pack_a(g, x, arr);
}

/* The b16 pairs of a register A operand packed before the current loop ("<name>_pk[k16 slice][4]"), or
 * NULL. */
static const char *a_packed(CgCudaGen *g, const KirValue *x)
{
    for (int i = 0; i < g->n_apk; i++)
        if (g->apk[i] == x) return cg_cuda_fmt(g, "%s_pk", g->v[x->id].name);
    return NULL;
}

/* Declares, before a pipelined loop, the b16 pairs of the register A operands its dots read that are
 * defined before it (Q in attention), in the enclosing scope, so later loops there reuse them; they are
 * packed once (fill_pack_a after the loop's first copies are issued: the copies' address loads and the
 * operand's own loads are then in flight together), not every trip (the compiler does not hoist the
 * packing asm), and the f32 registers die. Layouts of one row fragment per warp only (the k16 slice s is
 * then n8 fragments 2s, 2s + 1). Returns the index of the first operand it added to g->apk. */
static int declare_loop_a(CgCudaGen *g, const CgCudaPipe *p)
{
    int first = g->n_apk;
    const KirBlock *body = p->loop->body;
    for (int i = 0; i < body->n_insts; i++) {
        const KirInst *in = body->insts[i];
        if (in->op != KIR_OP_DOT) continue;
        const KirValue *x = in->ops[0];
        if (g->n_apk == 8 || val(g, x)->form != CG_CUDA_REG || val(g, x)->blk == body || a_packed(g, x) ||
            !a_in_regs(g, in) || g->lay[val(g, x)->lay].fm != 1)
            continue;
        cg_cuda_line(g, "unsigned %s_pk[%d][4];", val(g, x)->name, x->type.shape[1] / 16);
        g->apk_scope[g->n_apk] = g->depth ? g->scope_stack[g->depth - 1] : 0;
        g->apk[g->n_apk++] = x;
    }
    return first;
}

static void emit_mma(CgCudaGen *g, int lay, const char *acc, KirDtype dt, const Opnd *A, const Opnd *B, int K)
{
    const CgCudaLayout *L = &g->lay[lay];
    const char *kind = dt == KIR_BF16 ? "bf16" : "f16";
    cg_cuda_begin(g);
    cg_cuda_line(g, "const int lane = (int)threadIdx.x %% 32, warp = (int)threadIdx.x / 32;");
    cg_cuda_open(g, "if (warp < %d)", L->wm * L->wn);
    cg_cuda_line(g, "const int m0 = (warp / %d) * %d, n0 = (warp %% %d) * %d;", L->wn, L->fm * 16, L->wn,
                 L->fn * 8);
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_open(g, "for (int kk = 0; kk < %d; kk += 16)", K);
    cg_cuda_line(g, "unsigned a[%d][4], b[%d][2];", L->fm, L->fn);
    cg_cuda_line(g, "#pragma unroll");
    if (A->pk) {
        cg_cuda_line(g, "for (int i = 0; i < 4; i++) a[0][i] = %s[kk / 16][i];", A->pk);
    } else if (A->pr) { /* b16 pairs built by cg_cuda_nib_pairs: pair i = slots 2i, 2i + 1 */
        cg_cuda_open(g, "for (int i = 0; i < %d; i++)", L->fm);
        cg_cuda_line(g, "const int f0 = (i * %d + kk / 8) * 2, f1 = f0 + 2;", A->reg_fn);
        cg_cuda_line(g, "a[i][0] = %s[f0], a[i][1] = %s[f0 + 1], a[i][2] = %s[f1], a[i][3] = %s[f1 + 1];",
                     A->pr, A->pr, A->pr, A->pr);
        cg_cuda_close(g);
    } else if (A->reg) {
        const char *pk = dt == KIR_BF16 ? "kd_pack_bf16x2" : "kd_pack_f16x2";
        cg_cuda_open(g, "for (int i = 0; i < %d; i++)", L->fm);
        cg_cuda_line(g, "const int f0 = (i * %d + kk / 8) * 4, f1 = f0 + 4;", A->reg_fn);
        cg_cuda_line(g, "a[i][0] = %s(%s[f0], %s[f0 + 1]), a[i][1] = %s(%s[f0 + 2], %s[f0 + 3]);", pk, A->reg,
                     A->reg, pk, A->reg, A->reg);
        cg_cuda_line(g, "a[i][2] = %s(%s[f1], %s[f1 + 1]), a[i][3] = %s(%s[f1 + 2], %s[f1 + 3]);", pk, A->reg,
                     A->reg, pk, A->reg, A->reg);
        cg_cuda_close(g);
    } else if (!A->trans)
        cg_cuda_line(g,
                     "for (int i = 0; i < %d; i++) kd_ldmatrix_x4(a[i], %s + (m0 + i * 16 + lane %% 16) * %d "
                     "+ kk + (lane / 16) * 8);",
                     L->fm, A->ptr, A->pitch);
    else
        cg_cuda_line(g,
                     "for (int i = 0; i < %d; i++) kd_ldmatrix_x4_trans(a[i], %s + (kk + (lane / 16) * 8 + "
                     "lane %% 8) * %d + m0 + i * 16 + ((lane / 8) %% 2) * 8);",
                     L->fm, A->ptr, A->pitch);
    cg_cuda_line(g, "#pragma unroll");
    if (L->fn % 2 == 0) { /* two n8 fragments per ldmatrix.x4 */
        cg_cuda_open(g, "for (int j = 0; j < %d; j += 2)", L->fn);
        cg_cuda_line(g, "unsigned t[4];");
        if (!B->trans)
            cg_cuda_line(g,
                         "kd_ldmatrix_x4(t, %s + (n0 + j * 8 + (lane / 16) * 8 + lane %% 8) * %d + kk + "
                         "((lane / 8) %% 2) * 8);",
                         B->ptr, B->pitch);
        else
            cg_cuda_line(
                g, "kd_ldmatrix_x4_trans(t, %s + (kk + lane %% 16) * %d + n0 + j * 8 + (lane / 16) * 8);",
                B->ptr, B->pitch);
        cg_cuda_line(g, "b[j][0] = t[0], b[j][1] = t[1], b[j + 1][0] = t[2], b[j + 1][1] = t[3];");
        cg_cuda_close(g);
    } else if (!B->trans) {
        cg_cuda_line(g,
                     "for (int j = 0; j < %d; j++) kd_ldmatrix_x2(b[j], %s + (n0 + j * 8 + lane %% 8) * %d + "
                     "kk + ((lane / 8) %% 2) * 8);",
                     L->fn, B->ptr, B->pitch);
    } else {
        cg_cuda_line(g,
                     "for (int j = 0; j < %d; j++) kd_ldmatrix_x2_trans(b[j], %s + (kk + lane %% 16) * %d + "
                     "n0 + j * 8);",
                     L->fn, B->ptr, B->pitch);
    }
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_line(g, "for (int i = 0; i < %d; i++)", L->fm);
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_line(g, "for (int j = 0; j < %d; j++)", L->fn);
    cg_cuda_line(g,
                 "    kd_mma_%s(%s[(i * %d + j) * 4], %s[(i * %d + j) * 4 + 1], %s[(i * %d + j) * 4 + 2], "
                 "%s[(i * %d + j) * 4 + 3], a[i], b[j]);",
                 kind, acc, L->fn, acc, L->fn, acc, L->fn, acc, L->fn);
    cg_cuda_close(g);
    cg_cuda_close(g);
    cg_cuda_close(g);
}

/* Writes tile x (REG or VIRT) into shared memory: element (r, c) to ptr[index], index a C expression
 * of r and c; `conv` turns the register value into the stored one. */
static void stage_tile(CgCudaGen *g, const KirValue *x, const char *ptr, const char *index, const char *conv)
{
    const CgCudaVal *X = val(g, x);
    int m, n;
    cg_cuda_shape(&x->type, &m, &n);
    int lay = X->form == CG_CUDA_REG ? X->lay : cg_cuda_layout_blocked(g, m, n, NULL);
    cg_cuda_slot_loop(g, lay, 1);
    const char *v = cg_cuda_at(g, x, lay);
    cg_cuda_line(g, "if (ok) %s[%s] = %s;", ptr, index, conv ? cg_cuda_fmt(g, conv, v) : v);
    cg_cuda_close(g);
}

/* Is x held with its chunks along dimension 0 (so a k-major shared image is the natural one)? */
static int chunks_along_dim0(const CgCudaGen *g, const KirValue *x)
{
    const CgCudaVal *X = &g->v[x->id];
    return X->form == CG_CUDA_REG && g->lay[X->lay].kind == CG_CUDA_BLOCKED && g->lay[X->lay].order == 0;
}

/* Writes b16 tile x (REG or VIRT) into shared memory with element (r, c) at ptr[line * pitch + pos], pos
 * along the tile's dimension `along`. A BLOCKED register tile whose chunks run along that dimension
 * stores each chunk as one vector of packed pairs (one cvt per pair, one st.shared per chunk: the image
 * of a dequantized weight tile); x = dtype(f32 tile) packs the f32 source, which rounds the same. */
static void stage_b16(CgCudaGen *g, const KirValue *x, KirDtype st, const char *ptr, int pitch, int along)
{
    const CgCudaVal *X = val(g, x);
    const CgCudaLayout *L = X->form == CG_CUDA_REG ? &g->lay[X->lay] : NULL;
    const char *line = along ? "r" : "c", *pos = along ? "c" : "r";
    const char *index = cg_cuda_fmt(g, "%s * %d + %s", line, pitch, pos);
    if (!L || L->kind != CG_CUDA_BLOCKED || L->order != along || L->vec < 2 || L->vec > 8 || L->vec % 2 ||
        L->slots % L->vec) {
        stage_tile(g, x, ptr, index, st == KIR_BF16 ? "kd_f32_to_bf16(%s)" : "kd_f32_to_f16(%s)");
        return;
    }
    const char *src = a_reg_name(g, x), *pk = st == KIR_BF16 ? "kd_pack_bf16x2" : "kd_pack_f16x2";
    cg_cuda_slot_loop(g, X->lay, L->vec);
    cg_cuda_open(g, "if (ok)");
    cg_cuda_line(g, "unsigned t[%d];", L->vec / 2);
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_line(g, "for (int i = 0; i < %d; i++) t[i] = %s(%s[s + 2 * i], %s[s + 2 * i + 1]);", L->vec / 2,
                 pk, src, src);
    cg_cuda_line(g, "kd_vstore<%d>((unsigned *)(%s + %s), t);", L->vec / 2, ptr, index);
    cg_cuda_close(g);
    cg_cuda_close(g);
}

static void emit_dot_mma(CgCudaGen *g, const KirInst *in)
{
    const KirValue *a = in->ops[0], *b = in->ops[1], *res = in->res[0];
    const CgCudaVal *R = val(g, res);
    KirDtype t = a->type.dtype, st = t == KIR_BF16 ? KIR_BF16 : KIR_F16;
    int M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
    int Mp = (M + 15) / 16 * 16, Kp = (K + 15) / 16 * 16, Np = (N + 7) / 8 * 8;
    int at = chunks_along_dim0(g, a), bt = !chunks_along_dim0(g, b), areg = a_in_regs(g, in);
    /* A: [Mp][Kp+8] or (at) [Kp][Mp+8] (none when areg); B: [Np][Kp+8] or (bt) [Kp][Np+8] */
    int pa = at ? Mp + 8 : Kp + 8, pb = bt ? Np + 8 : Kp + 8;
    int na = areg ? 0 : (at ? Kp : Mp) * pa, nb = (bt ? Kp : Np) * pb;
    const char *mt = cg_cuda_mem_type(st);
    cg_cuda_begin(g);
    cg_cuda_line(g, "%s *const sa = (%s *)kd_scratch, *const sb = sa + %d;", mt, mt, (na + 63) / 64 * 64);
    cg_cuda_scratch(g, ((int64_t)(na + 63) / 64 * 64 + nb) * 2);
    if (Mp != M || Kp != K || Np != N) {
        cg_cuda_line(g, "for (int i = (int)threadIdx.x; i < %d; i += %d) sa[i] = 0;",
                     (na + 63) / 64 * 64 + nb, g->threads);
        cg_cuda_line(g, "__syncthreads();");
    }
    if (!areg) stage_b16(g, a, st, "sa", pa, !at);
    stage_b16(g, b, st, "sb", pb, bt);
    cg_cuda_line(g, "__syncthreads();");
    Opnd A = {"sa", pa, at, NULL, 0, NULL, NULL}, B = {"sb", pb, bt, NULL, 0, NULL, NULL};
    if (areg) {
        A.reg = a_reg_name(g, a);
        A.reg_fn = g->lay[val(g, a)->lay].fn;
        A.pr = cg_cuda_nib_pairs(g, a);
    }
    emit_mma(g, R->lay, R->name, st, &A, &B, Kp);
    cg_cuda_close(g);
}

static void emit_dot_simt(CgCudaGen *g, const KirInst *in)
{
    const KirValue *a = in->ops[0], *b = in->ops[1], *res = in->res[0];
    const CgCudaVal *R = val(g, res);
    int M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1], fl = a->type.dtype != KIR_I8;
    const char *ty = fl ? "float" : "int";
    cg_cuda_begin(g);
    cg_cuda_line(g, "%s *const sa = (%s *)kd_scratch, *const sb = sa + %d; /* [%d][%d], [%d][%d] */", ty, ty,
                 M * K, M, K, K, N);
    cg_cuda_scratch(g, ((int64_t)M * K + (int64_t)K * N) * 4);
    stage_tile(g, a, "sa", cg_cuda_fmt(g, "r * %d + c", K), fl ? NULL : "(int)%s");
    stage_tile(g, b, "sb", cg_cuda_fmt(g, "r * %d + c", N), fl ? NULL : "(int)%s");
    cg_cuda_line(g, "__syncthreads();");
    cg_cuda_slot_loop(g, R->lay, 1);
    cg_cuda_line(g, "%s acc = %s[s];", ty, R->name);
    cg_cuda_line(g, "#pragma unroll 4");
    if (fl)
        cg_cuda_line(g, "for (int k = 0; k < %d && ok; k++) acc = fmaf(sa[r * %d + k], sb[k * %d + c], acc);",
                     K, K, N);
    else
        cg_cuda_line(g,
                     "for (int k = 0; k < %d && ok; k++) acc = kd_sum(acc, sa[r * %d + k] * sb[k * %d + c]);",
                     K, K, N);
    cg_cuda_line(g, "%s[s] = acc;", R->name);
    cg_cuda_close(g);
    cg_cuda_close(g);
}

/* The stage ring of a piped operand: "kp<j> + rd * <elements per stage>". */
static Opnd piped(CgCudaGen *g, const KirValue *x)
{
    const CgCudaPipe *p = g->cur_pipe;
    const KirInst *ld = g->v[x->id].def;
    KILN_ASSERT(p);
    for (int j = 0; j < p->n_loads; j++)
        if (p->loads[j].ld == ld) {
            const CgCudaPipeLoad *pl = &p->loads[j];
            Opnd o = {p->stages > 1 ? cg_cuda_fmt(g, "(kp%d + rd * %d)", j, pl->stage_bytes / 2)
                                    : cg_cuda_fmt(g, "kp%d", j),
                      pl->len + 8,
                      pl->trans,
                      NULL,
                      0,
                      NULL,
                      NULL};
            return o;
        }
    UNREACHABLE();
}

/* The piped load feeding operand x of a dot in the current pipelined loop. */
static const CgCudaPipeLoad *piped_load(CgCudaGen *g, const KirValue *x, int *index)
{
    const CgCudaPipe *p = g->cur_pipe;
    for (int j = 0; j < p->n_loads; j++)
        if (p->loads[j].ld == g->v[x->id].def) {
            *index = j;
            return &p->loads[j];
        }
    UNREACHABLE();
}

/* dot on wgmma: warpgroup w multiplies rows [64w, 64w + 64) of A by the whole B image, one m64nNk16 per
 * k16 slice, accumulating in place in the registers of the MMA layout (wm = warps, wn = 1), which is
 * wgmma's accumulator layout. A is a K-major image or (FlashAttention's Q and P) registers of that layout:
 * n8 fragments 2s, 2s + 1 of a thread are its A fragment of k16 slice s. B is a K-major image or, for
 * `trans` (rows of N), an N-major one: 64-column atoms `lines * 128` bytes apart. */
static void emit_wgmma(CgCudaGen *g, const KirInst *in, const char *acc)
{
    const CgCudaPipe *p = g->cur_pipe;
    int ja = -1, jb, N = in->ops[1]->type.shape[1], K = in->ops[0]->type.shape[1], na = N / 2;
    const CgCudaPipeLoad *A =
        val(g, in->ops[0])->form == CG_CUDA_PIPE ? piped_load(g, in->ops[0], &ja) : NULL;
    const CgCudaPipeLoad *B = piped_load(g, in->ops[1], &jb);
    const char *rd = p->stages > 1 ? "rd" : "0";
    KirDtype dt = in->ops[0]->type.dtype;
    const char *kind = dt == KIR_BF16 ? "bf16" : dt == KIR_F16 ? "f16" : dt == KIR_I8 ? "s8" : "e4m3";
    const char *ty = cg_cuda_mem_type(dt), *acc_t = dt == KIR_I8 ? "s32" : "f32",
               *cons = dt == KIR_I8 ? "+r" : "+f";
    /* elements per 128-byte swizzle row (AT) and per instruction's k slice of 32 bytes (KS) */
    int esz = kir_dtype_bytes(dt), AT = 128 / esz, KS = 32 / esz;
    cg_cuda_begin(g);
    if (A) {
        cg_cuda_line(g, "const %s *const ta = kp%d + %s * %d + ((int)threadIdx.x / 128) * 64 * %d;", ty, ja,
                     rd, A->stage_bytes / esz, AT);
    } else if (!a_packed(g, in->ops[0])) { /* packed before the fence: registers written between wgmmas
                                            * make ptxas serialize them */
        emit_pack_a(g, in->ops[0], "af");
    }
    cg_cuda_line(g, "const %s *const tb = kp%d + %s * %d;", ty, jb, rd, B->stage_bytes / esz);
    /* the descriptors of the k slices: the tile's, moved by each slice's constant byte offset */
    if (A) cg_cuda_line(g, "const unsigned long long da0 = kd_wgmma_desc_sw128(ta);");
    if (B->trans)
        cg_cuda_line(g, "const unsigned long long db0 = kd_wgmma_desc_mn_sw128(tb, %d);", B->lines * 128);
    else
        cg_cuda_line(g, "const unsigned long long db0 = kd_wgmma_desc_sw128(tb);");
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_line(g, "for (int i = 0; i < %d; i++) kd_fence_operand(%s[i]);", na, acc);
    cg_cuda_line(g, "kd_wgmma_fence();");
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_open(g, "for (int kk = 0; kk < %d; kk += %d)", K, KS);
    if (A)
        cg_cuda_line(g,
                     "const unsigned long long da = kd_wgmma_desc_at(da0, ((kk / %d) * %d + kk %% %d) * %d);",
                     AT, A->lines * AT, AT, esz);
    if (B->trans)
        cg_cuda_line(g, "const unsigned long long db = kd_wgmma_desc_at(db0, kk * %d);", 64 * esz);
    else
        cg_cuda_line(g,
                     "const unsigned long long db = kd_wgmma_desc_at(db0, ((kk / %d) * %d + kk %% %d) * %d);",
                     AT, B->lines * AT, AT, esz);
    IrBuf b = {0};
    int nin = A ? 2 : 5; /* da, db or a0..a3, db */
    const char *af = a_packed(g, in->ops[0]) ? a_packed(g, in->ops[0]) : "af";
    ir_buf_printf(&b,
                  "asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\nwgmma.mma_async.sync.aligned."
                  "m64n%dk%d.%s.%s.%s {",
                  na + nin, N, KS, acc_t, kind, kind);
    for (int i = 0; i < na; i++)
        ir_buf_printf(&b, "%s%%%d", i ? ", " : "", i);
    if (A && dt == KIR_I8) /* integer operands: no scale or transpose immediates */
        ir_buf_printf(&b, "}, %%%d, %%%d, p;\\n}\\n\"\n             : ", na, na + 1);
    else if (A && esz == 1) /* 8-bit operands take no transpose immediates */
        ir_buf_printf(&b, "}, %%%d, %%%d, p, 1, 1;\\n}\\n\"\n             : ", na, na + 1);
    else if (A)
        ir_buf_printf(&b, "}, %%%d, %%%d, p, 1, 1, 0, %d;\\n}\\n\"\n             : ", na, na + 1, B->trans);
    else
        ir_buf_printf(&b, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1, %d;\\n}\\n\"\n             : ", na,
                      na + 1, na + 2, na + 3, na + 4, B->trans);
    for (int i = 0; i < na; i++)
        ir_buf_printf(&b, "%s\"%s\"(%s[%d])", i ? ", " : "", cons, acc, i);
    if (A)
        ir_buf_printf(&b, "\n             : \"l\"(da), \"l\"(db), \"r\"(1));");
    else
        ir_buf_printf(&b,
                      "\n             : \"r\"(%s[kk / 16][0]), \"r\"(%s[kk / 16][1]), \"r\"(%s[kk / 16][2]), "
                      "\"r\"(%s[kk / 16][3]), \"l\"(db), \"r\"(1));",
                      af, af, af, af);
    cg_cuda_line(g, "%s", b.oom ? "" : b.s);
    if (b.oom) g->oom = 1;
    ir_buf_free(&b);
    cg_cuda_close(g);
    cg_cuda_line(g, "kd_wgmma_commit();");
    if (p->overlap && !strcmp(acc, val(g, in->ops[2])->name)) { /* accumulated in place: left in flight */
        cg_cuda_line(g, "kd_wgmma_wait<1>(); /* the previous trip's group is done, this one runs on */");
        g->inflight = acc;
        g->inflight_n = na;
    } else {
        cg_cuda_line(g, "kd_wgmma_wait<0>();");
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_line(g, "for (int i = 0; i < %d; i++) kd_fence_operand(%s[i]);", na, acc);
    }
    cg_cuda_close(g);
}

void cg_cuda_emit_dot(CgCudaGen *g, const KirInst *in)
{
    const KirValue *acc = in->ops[2], *res = in->res[0];
    const CgCudaVal *R = val(g, res);
    int m, n, K = in->ops[0]->type.shape[1];
    cg_cuda_shape(&res->type, &m, &n);
    cg_cuda_line(
        g, "/* dot %%%d: [%d,%d] x [%d,%d] + %%%d (%s) */", R->num, m, K, K, n, val(g, acc)->num,
        val(g, in->ops[1])->form == CG_CUDA_PIPE
            ? (g->cur_pipe->wgmma
                   ? (val(g, in->ops[0])->form == CG_CUDA_PIPE ? "pipelined tiles, wgmma"
                                                               : "A in registers, pipelined B, wgmma")
               : val(g, in->ops[0])->form == CG_CUDA_PIPE ? "pipelined tiles, mma.sync m16n8k16"
                                                          : "A in registers, pipelined B, mma.sync m16n8k16")
        : cg_cuda_dot_is_mma(in->ops[0]->type.dtype) ? "mma.sync m16n8k16"
                                                     : "scalar fma");
    const CgCudaVal *C = val(g, acc);
    if (C->form == CG_CUDA_REG && C->lay == R->lay && C->uses == 1 && C->blk == R->blk) {
        g->v[res->id].name = C->name; /* the accumulator's only use, in the same block: update it in place */
    } else {
        cg_cuda_declare(g, res);
        cg_cuda_assign(g, R->name, acc, res);
    }
    if (val(g, in->ops[1])->form == CG_CUDA_PIPE && g->cur_pipe->wgmma) {
        emit_wgmma(g, in, R->name);
    } else if (val(g, in->ops[1])->form == CG_CUDA_PIPE) {
        Opnd A, B = piped(g, in->ops[1]);
        if (val(g, in->ops[0])->form == CG_CUDA_PIPE) {
            A = piped(g, in->ops[0]);
        } else { /* plan_loop checked a_in_regs */
            A = (Opnd){NULL,
                       0,
                       0,
                       a_reg_name(g, in->ops[0]),
                       g->lay[val(g, in->ops[0])->lay].fn,
                       a_packed(g, in->ops[0]),
                       NULL};
            if (!A.pk) A.pr = cg_cuda_nib_pairs(g, in->ops[0]);
        }
        emit_mma(g, R->lay, R->name, in->ops[0]->type.dtype, &A, &B, K);
    } else if (cg_cuda_dot_is_mma(in->ops[0]->type.dtype)) {
        emit_dot_mma(g, in);
    } else {
        emit_dot_simt(g, in);
    }
}

/* ---- the pipelined loop ---- */

/* Issues the cp.async copies of every piped load for the trip whose induction variable is `ivn` into
 * ring slot `stage`. */
/* The shared-memory address of stage `stage` of leaf lf's ring or image (wgmma pipes place their rings
 * from the 1024-aligned base kb). */
static const char *leaf_stage(CgCudaGen *g, const CgCudaPipe *p, const CgCudaPipeLeaf *lf, const char *stage)
{
    return cg_cuda_fmt(g, "%s + %d + %s * %d", p->wgmma ? "kb" : "kd_smem", lf->offset, stage,
                       lf->stage_bytes);
}

static void emit_issue(CgCudaGen *g, const CgCudaPipe *p, const char *stage)
{
    for (int j = 0; j < p->n_loads; j++) {
        const CgCudaPipeLoad *pl = &p->loads[j];
        const KirInst *ld = pl->ld;
        const KirValue *offs = ld->ops[1], *mask = ld->n_ops > 2 ? ld->ops[2] : NULL;
        int m, n;
        cg_cuda_shape(&ld->res[0]->type, &m, &n);
        int per_line = pl->len / pl->vw, chunks = pl->lines * per_line, T = g->threads;
        int trips = (chunks + T - 1) / T, lay = cg_cuda_layout_blocked(g, m, n, NULL);
        const char *line = pl->cdim ? "r" : "c", *pos = pl->cdim ? "c" : "r";
        /* A gathered tile (rows found through a table: attention's pages) whose lines are longer than
         * 8 copies: each thread takes per_line / 8 copies of each of its lines (8 threads cover 128
         * contiguous bytes per instruction), and what a line shares (the table read, the row's address)
         * is computed once per line instead of once per copy. */
        int G = 8, P = per_line / G;
        if (P > 1 && per_line % G == 0 && T % G == 0 && chunks % T == 0 && pl->lines % (T / G) == 0 &&
            cg_cuda_has_gather(g, offs, 0)) {
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_open(g, "for (int i = 0; i < %d; i++)", pl->lines / (T / G));
            cg_cuda_line(g, "const int %s = (int)threadIdx.x / %d + i * %d;", line, G, T / G);
            cg_cuda_at_line(g, offs, pl->cdim ? 0 : 1);
            if (mask) cg_cuda_at_line(g, mask, pl->cdim ? 0 : 1);
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_open(g, "for (int h = 0; h < %d; h++)", P);
            cg_cuda_line(g, "const int %s = ((int)threadIdx.x %% %d + h * %d) * %d;", pos, G, G, pl->vw);
        } else {
            P = 1;
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_open(g, "for (int i = 0; i < %d; i++)", trips);
            cg_cuda_line(g, "const int q = (int)threadIdx.x + i * %d;", T);
            if (chunks % T) cg_cuda_line(g, "if (q >= %d) break;", chunks);
            cg_cuda_line(g, "const int %s = q / %d, %s = (q %% %d) * %d;", line, per_line, pos, per_line,
                         pl->vw);
        }
        const char *o = cg_cuda_at(g, offs, lay);
        const char *msk = mask ? cg_cuda_at(g, mask, lay) : "true";
        const char *pn = cg_cuda_scalar(g, ld->ops[0]);
        /* padded rows; or (wgmma) 128-byte atoms along the line (A elements) with the 128-byte swizzle
         * of 16-byte chunks (C elements) */
        int esz = pipe_esz(pl), A = 128 / esz, C = 16 / esz;
        const char *idx =
            p->wgmma ? cg_cuda_fmt(g, "(%s / %d) * %d + %s * %d + (((%s %% %d) / %d) ^ (%s %% 8)) * %d", pos,
                                   A, pl->lines * A, line, A, pos, A, C, line, C)
                     : cg_cuda_fmt(g, "%s * %d + %s", line, pl->len + 8, pos);
        cg_cuda_line(g, "const bool m = %s;", msk);
        cg_cuda_line(g, "kd_cp_async<%d>(kp%d + %s * %d + %s, m ? %s + %s : %s, m);", pl->vw * esz, j, stage,
                     pl->stage_bytes / esz, idx, pn, o, pn);
        cg_cuda_close(g);
        if (P > 1) cg_cuda_close(g);
    }
    for (int j = 0; j < p->n_leaves; j++) { /* each thread copies the accesses it will read */
        const CgCudaPipeLeaf *lf = &p->leaves[j];
        const KirInst *ld = lf->ld;
        const KirValue *mask = ld->n_ops > 2 ? ld->ops[2] : NULL;
        const char *pn = cg_cuda_scalar(g, ld->ops[0]);
        if (lf->run || lf->win) { /* elements (r, c) of vec runs from each, rows of n / run of them over
                                   * the threads; a window's copy j: elements jV.. of its row, as column jS */
            int V = lf->vec, per = (lf->pitch - V) / V, n = lf->lines * per, T = g->threads;
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_open(g, "for (int i = 0; i < %d; i++)", (n + T - 1) / T);
            cg_cuda_line(g, "const int q = (int)threadIdx.x + i * %d;", T);
            if (n % T) cg_cuda_line(g, "if (q >= %d) break;", n);
            cg_cuda_line(g, "const int r = q / %d, c = (q %% %d) * %d;", per, per,
                         lf->win ? lf->win : lf->run * V);
            const char *o = cg_cuda_at(g, ld->ops[1], lf->lay);
            cg_cuda_line(g, "const bool m = %s;", mask ? cg_cuda_at(g, mask, lf->lay) : "true");
            const char *cp = lf->sub ? cg_cuda_fmt(g, "kd_cp_async_sub<%d>", lf->sub)
                                     : cg_cuda_fmt(g, "kd_cp_async<%d>", lf->bytes * V);
            cg_cuda_line(g, "%s(%s + (r * %d + (q %% %d) * %d) * %d, m ? %s + %s : %s, m);", cp,
                         leaf_stage(g, p, lf, stage), lf->pitch, per, V, lf->bytes, pn, o, pn);
            cg_cuda_close(g);
            continue;
        }
        cg_cuda_slot_loop(g, lf->lay, lf->step);
        cg_cuda_open(g, "if (ok)");
        const char *o = cg_cuda_at(g, ld->ops[1], lf->lay);
        cg_cuda_line(g, "const bool m = %s;", mask ? cg_cuda_at(g, mask, lf->lay) : "true");
        cg_cuda_line(g, "kd_cp_async<%d>(%s + ((s / %d) * %d + (int)threadIdx.x) * %d, m ? %s + %s : %s, m);",
                     lf->bytes, leaf_stage(g, p, lf, stage), lf->step, g->threads, lf->bytes, pn, o, pn);
        cg_cuda_close(g);
        cg_cuda_close(g);
    }
}

int cg_cuda_emit_leaf_load(CgCudaGen *g, const KirInst *in)
{
    const CgCudaPipe *p = g->cur_pipe;
    const CgCudaPipeLeaf *lf = NULL;
    for (int j = 0; p && j < p->n_leaves; j++)
        if (p->leaves[j].ld == in) lf = &p->leaves[j];
    if (!lf) return 0;
    const KirValue *res = in->res[0];
    const char *R = val(g, res)->name;
    KirDtype t = in->ops[0]->type.dtype;
    const char *mt = cg_cuda_mem_type(t), *zero = cg_cuda_zero_of(t), *ring = leaf_stage(g, p, lf, "rd");
    cg_cuda_declare(g, res);
    if (lf->win) { /* a thread's slots of one word are a run of 32 columns (the pairs of 4 fragments):
                    * run u % G of the row half (mma_window) */
        int G = g->lay[lf->lay].fn * 8 / 32;
        cg_cuda_mma_run_loop(g, lf->lay, 32);
        const char *x =
            cg_cuda_fmt(g, "((const %s *)(%s))[ok ? r * %d + (u %% %d) * 4 + (int)threadIdx.x %% 4 : 0]", mt,
                        ring, lf->pitch, G);
        cg_cuda_line(g, "const %s x = ok ? %s : %s;", cg_cuda_reg_type(t), cg_cuda_from_mem(g, t, x), zero);
        cg_cuda_mma_run_fill(g, R, 32);
        cg_cuda_close(g);
        return 1;
    }
    if (lf->run) { /* one read per vec consecutive runs of a row */
        int V = lf->vec, q = lf->run / 8;
        cg_cuda_mma_run_loop(g, lf->lay, lf->run * V);
        /* a slot the layout does not use (ok false: r may lie past the image) reads element 0 instead */
        const char *at = cg_cuda_fmt(g, "(ok ? r * %d + c / %d : 0)", lf->pitch, lf->run);
        if (lf->sub) { /* the element's byte of its word: from its address, as the copy took it (V = 1) */
            const char *pn = cg_cuda_scalar(g, in->ops[0]), *o = cg_cuda_at(g, in->ops[1], lf->lay);
            cg_cuda_line(g, "const unsigned w = ((const unsigned *)(%s))[%s];", ring, at);
            cg_cuda_line(g, "const %s v = (%s)(w >> 8 * (((unsigned)(size_t)%s + (unsigned)(%s) * %d) & 3));",
                         mt, mt, pn, o, lf->sub);
        } else {
            cg_cuda_line(g, "const %s *const t = (const %s *)(%s) + %s;", mt, mt, ring, at);
        }
        if (V == 1) {
            cg_cuda_line(g, "const %s x = ok ? %s : %s;", cg_cuda_reg_type(t),
                         cg_cuda_from_mem(g, t, lf->sub ? "v" : "t[0]"), zero);
            cg_cuda_mma_run_fill(g, R, lf->run);
        } else {
            cg_cuda_line(g, "%s vw[%d];", mt, V);
            cg_cuda_line(g, "kd_vload<%d, false>(vw, t);", V);
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_open(g, "for (int i = 0; i < %d; i++)", V);
            cg_cuda_line(g, "const %s x = ok ? %s : %s;", cg_cuda_reg_type(t),
                         cg_cuda_from_mem(g, t, "vw[i]"), zero);
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_line(
                g,
                "for (int j = 0; j < %d; j++) %s[s + (i * %d + j) * 4] = %s[s + (i * %d + j) * 4 + 1] = x;",
                q, R, q, R, q);
            cg_cuda_close(g);
        }
        cg_cuda_close(g);
        return 1;
    }
    cg_cuda_slot_loop(g, lf->lay, lf->step);
    cg_cuda_line(g, "const %s *const t = (const %s *)(%s) + ((s / %d) * %d + (int)threadIdx.x) * %d;", mt, mt,
                 ring, lf->step, g->threads, lf->w);
    if (lf->w == 1) { /* one element for a run of slots */
        cg_cuda_line(g, "const %s x = ok ? %s : %s;", cg_cuda_reg_type(t), cg_cuda_from_mem(g, t, "t[0]"),
                     zero);
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_line(g, "for (int i = 0; i < %d; i++) %s[s + i] = x;", lf->step, R);
    } else {
        cg_cuda_line(g, "%s u[%d];", mt, lf->w);
        cg_cuda_line(g, "kd_vload<%d, false>(u, t);", lf->w);
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_line(g, "for (int i = 0; i < %d; i++) %s[s + i] = ok ? %s : %s;", lf->w, R,
                     cg_cuda_from_mem(g, t, "u[i]"), zero);
    }
    cg_cuda_close(g);
    return 1;
}

void cg_cuda_emit_pipelined_for(CgCudaGen *g, const KirInst *in, const CgCudaPipe *p)
{
    const KirBlock *body = in->body;
    const char *iv = val(g, body->args[0])->name;
    const char *lo = cg_cuda_scalar(g, in->ops[0]), *hi = cg_cuda_scalar(g, in->ops[1]),
               *step = cg_cuda_scalar(g, in->ops[2]);
    int S = p->stages;
    const char *fence = p->wgmma ? "kd_fence_proxy_async(); " : "";
    cg_cuda_line(g, "/* pipelined dot loop: %d stage%s, cp.async into shared memory, %s */", S,
                 S > 1 ? "s" : "",
                 !p->n_loads ? "the loads streamed beside the dot, which stages its own tiles"
                 : !p->wgmma ? "mma.sync m16n8k16"
                 : pipe_esz(&p->loads[0]) == 1 ? "wgmma m64nNk32 (8-bit) from 128-byte-swizzled tiles"
                                               : "wgmma m64nNk16 from 128-byte-swizzled tiles");
    int packs = declare_loop_a(g, p);
    cg_cuda_begin(g);
    if (p->wgmma)
        cg_cuda_line(g,
                     "unsigned char *const kb = kd_smem + ((1024 - (kd_smem_addr(kd_smem) & 1023)) & 1023);");
    for (int j = 0; j < p->n_loads; j++) {
        const CgCudaPipeLoad *pl = &p->loads[j];
        const char *ty = cg_cuda_mem_type(pl->ld->ops[0]->type.dtype);
        if (p->wgmma)
            cg_cuda_line(g, "%s *const kp%d = (%s *)(kb + %d); /* %%%d: %d x [%d][%d] swizzled */", ty, j, ty,
                         pl->offset, val(g, pl->ld->res[0])->num, S, pl->lines, pl->len);
        else
            cg_cuda_line(g, "%s *const kp%d = (%s *)(kd_smem + %d); /* %%%d: %d x [%d][%d + 8] */", ty, j, ty,
                         pl->offset, val(g, pl->ld->res[0])->num, S, pl->lines, pl->len);
    }
    if (g->pending_store) {
        cg_cuda_line(g, "__syncthreads(); /* earlier stores are visible to the copies */");
        g->pending_store = 0;
    }
    g->subst_iv = body->args[0];
    g->subst_body = body;
    g->subst_name = "ivn";
    int ahead = S - 1 - p->overlap; /* trips whose copies are in flight when a trip starts */
    if (S > 1) {
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_open(g, "for (int st = 0; st < %d; st++)", ahead);
        cg_cuda_line(g, "const int ivn = %s + st * %s;", lo, step);
        cg_cuda_open(g, "if (ivn < %s)", hi);
        emit_issue(g, p, "st");
        cg_cuda_close(g);
        cg_cuda_line(g, "kd_cp_async_commit();");
        cg_cuda_close(g);
        cg_cuda_line(g, "int rd = 0, wr = %d;", ahead);
    }
    g->subst_body = NULL;
    for (int i = packs; i < g->n_apk; i++)
        fill_pack_a(g, g->apk[i], cg_cuda_fmt(g, "%s_pk", val(g, g->apk[i])->name));
    cg_cuda_open(g, "for (int %s = %s; %s < %s; %s += %s)", iv, lo, iv, hi, iv, step);
    g->subst_body = body;
    if (S > 1) {
        cg_cuda_line(g, "kd_cp_async_wait<%d>(); %s/* this trip's tiles have landed */", ahead - 1, fence);
        int shared = p->n_loads > 0;
        for (int j = 0; j < p->n_leaves; j++)
            shared |= p->leaves[j].run > 0 || p->leaves[j].win > 0;
        if (shared) /* (per-thread leaf rings alone: a thread reads only its own copies) */
            cg_cuda_line(g, "__syncthreads(); /* ... for every thread; and the slot to refill is free */");
        cg_cuda_begin(g);
        cg_cuda_line(g, "const int ivn = %s + %d * %s;", iv, ahead, step);
        cg_cuda_open(g, "if (ivn < %s)", hi);
        emit_issue(g, p, "wr");
        cg_cuda_close(g);
        cg_cuda_close(g);
        cg_cuda_line(g, "kd_cp_async_commit();");
    } else {
        cg_cuda_line(g, "__syncthreads(); /* the buffer is free */");
        cg_cuda_begin(g);
        cg_cuda_line(g, "const int ivn = %s;", iv);
        emit_issue(g, p, "0");
        cg_cuda_close(g);
        cg_cuda_line(g, "kd_cp_async_commit();");
        cg_cuda_line(g, "kd_cp_async_wait<0>(); %s", fence);
        cg_cuda_line(g, "__syncthreads();");
    }
    g->subst_body = NULL;
    g->subst_iv = NULL;
    int stores = cg_cuda_has_store(body);
    if (stores) g->pending_store = 1;
    const CgCudaPipe *outer = g->cur_pipe;
    g->cur_pipe = p;
    cg_cuda_emit_block(g, body);
    g->cur_pipe = outer;
    cg_cuda_emit_yield(g, in);
    if (S > 1) cg_cuda_line(g, "rd = rd + 1 == %d ? 0 : rd + 1, wr = wr + 1 == %d ? 0 : wr + 1;", S, S);
    cg_cuda_close(g);
    if (g->inflight) { /* the last trip's group */
        cg_cuda_line(g, "kd_wgmma_wait<0>();");
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_line(g, "for (int i = 0; i < %d; i++) kd_fence_operand(%s[i]);", g->inflight_n, g->inflight);
        g->inflight = NULL;
    }
    cg_cuda_line(g, "kd_cp_async_wait<0>();");
    cg_cuda_line(g, "__syncthreads();");
    cg_cuda_close(g);
    if (stores) g->pending_store = 1;
}
