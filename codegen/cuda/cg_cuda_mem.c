/* cg_cuda_mem.c — global-memory ops of the CUDA backend: load, store, atomic_add.
 *
 * An access runs over the slots of a layout (the result's for a load; the value's, offsets' or mask's
 * for a store), a chunk of W elements at a time: W is the widest power of two (<= 16 bytes) over which
 * the offsets are contiguous and W-aligned (axis info), so a BLOCKED chunk of bf16 is one 16-byte
 * access. A mask not provably constant over W elements is evaluated per element and the access is taken
 * whole only when all lanes are on (else element by element: a tail). Masked-off lanes touch no memory
 * (a load gives `other`). A scalar store or atomic is done by thread 0. Invariant: a load that may read
 * what an earlier store of this program wrote (other threads' stores) is preceded by a barrier.
 */
#include "cg_cuda_impl.h"

#include <string.h>

static CgCudaVal *val(CgCudaGen *g, const KirValue *v)
{
    return &g->v[v->id];
}

const char *cg_cuda_zero_of(KirDtype t)
{
    return kir_dtype_is_float(t) ? "0.0f" : t == KIR_I1 ? "false" : "0";
}

static const KirParam *param_of(const CgCudaGen *g, const KirValue *p)
{
    const CgCudaVal *V = &g->v[p->id];
    if (!V->def || V->def->op != KIR_OP_PARAM) return NULL;
    return &g->k->params[V->def->i];
}

/* Loads through p may use the read-only (non-coherent) path: nothing this kernel writes aliases it. */
static int load_nc(const CgCudaGen *g, const KirValue *p, int all_stores_noalias)
{
    const KirParam *pa = param_of(g, p);
    return pa && (pa->flags & KIR_PARAM_RDONLY) && ((pa->flags & KIR_PARAM_NOALIAS) || all_stores_noalias);
}

int cg_cuda_stores_noalias(const CgCudaGen *g, const KirBlock *blk)
{
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        if (in->op == KIR_OP_FOR && !cg_cuda_stores_noalias(g, in->body)) return 0;
        if (in->op == KIR_OP_STORE || in->op == KIR_OP_ATOMIC_ADD || in->op == KIR_OP_ARRIVE) {
            const KirParam *pa = param_of(g, in->ops[0]);
            if (!pa || !(pa->flags & KIR_PARAM_NOALIAS)) return 0;
        }
    }
    return 1;
}

int cg_cuda_has_store(const KirBlock *blk)
{
    for (int i = 0; i < blk->n_insts; i++) {
        const KirInst *in = blk->insts[i];
        if (in->op == KIR_OP_STORE || in->op == KIR_OP_ATOMIC_ADD || in->op == KIR_OP_ARRIVE) return 1;
        if (in->op == KIR_OP_FOR && cg_cuda_has_store(in->body)) return 1;
    }
    return 0;
}

/* Before a load: a barrier when a store may have written what it reads (other threads' stores). */
static void load_barrier(CgCudaGen *g, const KirValue *p)
{
    const KirParam *pa = param_of(g, p);
    if (!g->pending_store || (pa && (pa->flags & KIR_PARAM_RDONLY) && (pa->flags & KIR_PARAM_NOALIAS)))
        return;
    cg_cuda_line(g, "__syncthreads(); /* earlier stores are visible to this load */");
    g->pending_store = 0;
}

/* Elements per access for a memory op over layout lay: a power of two within a chunk, over offsets that
 * are contiguous and aligned for it, at most 16 bytes. *dyn = 1 when the mask is not provably constant
 * across such an access: the access then checks at run time that all its lanes are on, and falls back
 * to one element at a time when not (a tail). */
static int access_width(CgCudaGen *g, int lay, KirDtype t, const KirValue *offs, const KirValue *mask,
                        int *dyn)
{
    const CgCudaLayout *L = &g->lay[lay];
    int cd = L->order, w = L->vec, esize = kir_dtype_bytes(t);
    if (L->kind == CG_CUDA_MMA && L->n % 2) w = 1;
    const CgCudaAxis *ao = &g->v[offs->id].ax, *am = mask ? &g->v[mask->id].ax : NULL;
    while (w > 1 && (ao->contig[cd] < w || ao->div[cd] < w || w * esize > 16))
        w /= 2;
    *dyn = w > 1 && am && am->cnst[cd] < w;
    return w;
}

/* Inside a slot loop stepping by w: `bool mv[w]`, the mask at each element of the access (VIRT masks
 * are evaluated at the element's own coordinates), and `mall`, all of them and ok. */
static void mask_lanes(CgCudaGen *g, const KirValue *mask, int lay, int w)
{
    const CgCudaVal *M = val(g, mask);
    const char *coord = g->lay[lay].order ? "c" : "r";
    cg_cuda_line(g, "bool mv[%d], mall = ok;", w);
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_open(g, "for (int i = 0; i < %d; i++)", w);
    if (M->form == CG_CUDA_REG) {
        cg_cuda_line(g, "mv[i] = %s[s + i];", M->lay == lay ? M->name : cg_cuda_conv_find(g, mask->id, lay));
    } else {
        cg_cuda_line(g, "const int %s_i = %s + i;", coord, coord);
        cg_cuda_begin(g);
        cg_cuda_line(g, "const int %s = %s_i; /* the element's own coordinate */", coord, coord);
        int floor = g->memo_floor;
        g->memo_floor = g->n_memo; /* values evaluated at the access's first element do not apply */
        cg_cuda_line(g, "mv[i] = %s;", cg_cuda_at(g, mask, lay));
        g->memo_floor = floor;
        cg_cuda_close(g);
    }
    cg_cuda_line(g, "mall = mall && mv[i];");
    cg_cuda_close(g);
}

/* The condition guarding a vector access of w lanes: "ok" (the slot exists), and with a mask either its
 * value at the access (a mask constant over the w lanes) or `mall` from mask_lanes (one that varies). */
static const char *vector_mask(CgCudaGen *g, const KirValue *mask, int lay, int w, int dyn)
{
    if (dyn) {
        mask_lanes(g, mask, lay, w);
        return "mall";
    }
    return mask ? cg_cuda_fmt(g, "ok && %s", cg_cuda_at(g, mask, lay)) : "ok";
}

/* Offsets (and mask) constant over a whole BLOCKED chunk (packed words, group scales): one load, copied to
 * the chunk's slots; returns the run length, or 1. */
static int load_run(CgCudaGen *g, const KirInst *in)
{
    const CgCudaLayout *L = &g->lay[val(g, in->res[0])->lay];
    const KirValue *offs = in->ops[1], *mask = in->n_ops > 2 ? in->ops[2] : NULL;
    const CgCudaAxis *ao = &val(g, offs)->ax, *am = mask ? &val(g, mask)->ax : NULL;
    return L->kind == CG_CUDA_BLOCKED && L->vec > 1 && ao->cnst[L->order] % L->vec == 0 &&
                   (!am || am->cnst[L->order] % L->vec == 0)
               ? L->vec
               : 1;
}

/* (cg_cuda_impl.h) A thread's fragments f..f + R/8 - 1 of a row half read the same element. */
int cg_cuda_mma_run(CgCudaGen *g, const KirInst *in)
{
    const CgCudaLayout *L = &g->lay[val(g, in->res[0])->lay];
    const KirValue *offs = in->ops[1], *mask = in->n_ops > 2 ? in->ops[2] : NULL;
    if (L->kind != CG_CUDA_MMA || L->n % 8) return 0;
    int c = val(g, offs)->ax.cnst[1];
    if (mask && val(g, mask)->ax.cnst[1] < c) c = val(g, mask)->ax.cnst[1];
    int R = 8;
    while (R * 2 <= c && c % (R * 2) == 0 && (L->fn * 8) % (R * 2) == 0)
        R *= 2;
    return c >= 8 && c % 8 == 0 ? R : 0;
}

int cg_cuda_mma_run_loop(CgCudaGen *g, int lay, int R)
{
    const CgCudaLayout *L = &g->lay[lay];
    int G = L->fn * 8 / R, n = L->fm * 2 * G; /* runs per row fragment's row half; accesses */
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_open(g, "for (int u = 0; u < %d; u++)", n);
    cg_cuda_line(g, "const int s = ((u / %d) * %d + (u %% %d) * %d) * 4 + ((u / %d) %% 2) * 2;", 2 * G, L->fn,
                 G, R / 8, G);
    cg_cuda_line(g, "int r, c;");
    cg_cuda_line(g, "const bool ok = L%d_at(s, r, c);", lay);
    return n;
}

void cg_cuda_mma_run_fill(CgCudaGen *g, const char *name, int R)
{
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_line(g, "for (int j = 0; j < %d; j++) %s[s + j * 4] = %s[s + j * 4 + 1] = x;", R / 8, name, name);
}

/* cg_cuda_mma_run's load: one access per row half and run of each row fragment, copied to the run's
 * slots. */
static void emit_mma_run_load(CgCudaGen *g, const KirInst *in, int R, int nc)
{
    const KirValue *p = in->ops[0], *offs = in->ops[1], *mask = in->n_ops > 2 ? in->ops[2] : NULL;
    const CgCudaVal *V = val(g, in->res[0]);
    KirDtype t = p->type.dtype;
    const char *other = in->n_ops > 3 ? cg_cuda_scalar(g, in->ops[3]) : cg_cuda_zero_of(t);
    const char *pn = cg_cuda_scalar(g, p);
    cg_cuda_mma_run_loop(g, V->lay, R);
    const char *o = cg_cuda_at(g, offs, V->lay);
    const char *m = mask ? cg_cuda_fmt(g, "ok && %s", cg_cuda_at(g, mask, V->lay)) : "ok";
    const char *x = cg_cuda_from_mem(g, t, cg_cuda_fmt(g, nc ? "__ldg(%s + %s)" : "%s[%s]", pn, o));
    cg_cuda_line(g, "const %s x = %s ? %s : %s;", cg_cuda_reg_type(t), m, x, other);
    cg_cuda_mma_run_fill(g, V->name, R);
    cg_cuda_close(g);
}

int cg_cuda_load_access(CgCudaGen *g, const KirInst *in, int *step, int *dyn)
{
    const KirValue *mask = in->n_ops > 2 ? in->ops[2] : NULL;
    int rep = load_run(g, in);
    int w = access_width(g, val(g, in->res[0])->lay, in->ops[0]->type.dtype, in->ops[1], mask, dyn);
    if (rep > 1) {
        *step = rep, *dyn = 0;
        return 1;
    }
    *step = w;
    return w;
}

void cg_cuda_emit_load(CgCudaGen *g, const KirInst *in, int nc_ok)
{
    const KirValue *p = in->ops[0], *offs = in->ops[1], *mask = in->n_ops > 2 ? in->ops[2] : NULL;
    const KirValue *res = in->res[0];
    const CgCudaVal *R = val(g, res);
    KirDtype t = p->type.dtype;
    const char *other = in->n_ops > 3 ? cg_cuda_scalar(g, in->ops[3]) : cg_cuda_zero_of(t);
    const char *pn = cg_cuda_scalar(g, p);
    load_barrier(g, p);
    if (R->form == CG_CUDA_SCALAR) {
        const char *m = mask ? cg_cuda_scalar(g, mask) : NULL;
        const char *x = cg_cuda_from_mem(g, t, cg_cuda_fmt(g, "%s[%s]", pn, cg_cuda_scalar(g, offs)));
        if (m)
            cg_cuda_line(g, "const %s %s = %s ? %s : %s;", cg_cuda_reg_type(t), R->name, m, x, other);
        else
            cg_cuda_line(g, "const %s %s = %s;", cg_cuda_reg_type(t), R->name, x);
        return;
    }
    if (cg_cuda_emit_leaf_load(g, in)) return;
    int dyn, lay = R->lay, w = access_width(g, lay, t, offs, mask, &dyn);
    int nc = load_nc(g, p, nc_ok);
    cg_cuda_prepare(g, offs, lay);
    if (mask) cg_cuda_prepare(g, mask, lay);
    cg_cuda_declare(g, res);
    int run = cg_cuda_mma_run(g, in);
    if (run) {
        emit_mma_run_load(g, in, run, nc);
        return;
    }
    int rep = load_run(g, in); /* one load per run of equal offsets, copied to its slots */
    cg_cuda_slot_loop(g, lay, rep > 1 ? rep : w);
    const char *o = cg_cuda_at(g, offs, lay);
    if (w == 1 || rep > 1) {
        const char *m = mask ? cg_cuda_fmt(g, "ok && %s", cg_cuda_at(g, mask, lay)) : "ok";
        const char *x = cg_cuda_from_mem(g, t, cg_cuda_fmt(g, nc ? "__ldg(%s + %s)" : "%s[%s]", pn, o));
        if (rep == 1) {
            cg_cuda_line(g, "%s[s] = %s ? %s : %s;", R->name, m, x, other);
        } else {
            cg_cuda_line(g, "const %s x = %s ? %s : %s;", cg_cuda_reg_type(t), m, x, other);
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_line(g, "for (int i = 0; i < %d; i++) %s[s + i] = x;", rep, R->name);
        }
        cg_cuda_close(g);
        return;
    }
    const char *m = vector_mask(g, mask, lay, w, dyn);
    cg_cuda_open(g, "if (%s)", m);
    cg_cuda_line(g, "%s t[%d];", cg_cuda_mem_type(t), w);
    cg_cuda_line(g, "kd_vload<%d, %s>(t, %s + %s);", w, nc ? "true" : "false", pn, o);
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_line(g, "for (int i = 0; i < %d; i++) %s[s + i] = %s;", w, R->name,
                 cg_cuda_from_mem(g, t, "t[i]"));
    g->ind--;
    cg_cuda_line(g, "} else {");
    g->ind++;
    cg_cuda_line(g, "#pragma unroll");
    if (dyn)
        cg_cuda_line(g, "for (int i = 0; i < %d; i++) %s[s + i] = ok && mv[i] ? %s : %s;", w, R->name,
                     cg_cuda_from_mem(g, t, cg_cuda_fmt(g, nc ? "__ldg(%s + %s + i)" : "%s[%s + i]", pn, o)),
                     other);
    else
        cg_cuda_line(g, "for (int i = 0; i < %d; i++) %s[s + i] = %s;", w, R->name, other);
    cg_cuda_close(g);
    cg_cuda_close(g);
}

/* The layout a store runs in: its value's, else its offsets' or mask's, else the offsets' natural one. */
static int store_layout(CgCudaGen *g, const KirInst *in)
{
    /* ROWS layouts hold each element in several threads: fine for a store (same value, same address),
     * not for an atomic add, which takes a layout without replicas */
    int atomic = in->op == KIR_OP_ATOMIC_ADD;
    for (int k = 2; k >= 1; k--)
        if (val(g, in->ops[k])->form == CG_CUDA_REG &&
            !(atomic && g->lay[val(g, in->ops[k])->lay].kind == CG_CUDA_ROWS))
            return val(g, in->ops[k])->lay;
    if (in->n_ops > 3 && val(g, in->ops[3])->form == CG_CUDA_REG &&
        !(atomic && g->lay[val(g, in->ops[3])->lay].kind == CG_CUDA_ROWS))
        return val(g, in->ops[3])->lay;
    int m, n;
    cg_cuda_shape(&in->ops[1]->type, &m, &n);
    return cg_cuda_layout_blocked(g, m, n, &val(g, in->ops[1])->ax);
}

void cg_cuda_emit_store(CgCudaGen *g, const KirInst *in)
{
    const KirValue *p = in->ops[0], *offs = in->ops[1], *v = in->ops[2],
                   *mask = in->n_ops > 3 ? in->ops[3] : NULL;
    KirDtype t = p->type.dtype;
    const char *pn = cg_cuda_scalar(g, p);
    int atomic = in->op == KIR_OP_ATOMIC_ADD;
    g->pending_store = 1;
    if (offs->type.rank == 0) { /* one element: thread 0 writes it */
        const char *m = mask ? cg_cuda_fmt(g, " && %s", cg_cuda_scalar(g, mask)) : "";
        const char *o = cg_cuda_scalar(g, offs), *x = cg_cuda_scalar(g, v);
        if (atomic)
            cg_cuda_line(g, "if (threadIdx.x == 0%s) atomicAdd(%s + %s, %s);", m, pn, o, x);
        else
            cg_cuda_line(g, "if (threadIdx.x == 0%s) %s[%s] = %s;", m, pn, o, cg_cuda_to_mem(g, t, x));
        return;
    }
    int dyn = 0, lay = store_layout(g, in), w = atomic ? 1 : access_width(g, lay, t, offs, mask, &dyn);
    const CgCudaVal *V = val(g, v);
    cg_cuda_prepare(g, offs, lay);
    cg_cuda_prepare(g, v, lay);
    if (mask) cg_cuda_prepare(g, mask, lay);
    /* a vector store reads the value at slots s..s+w-1: a register array (VIRT values evaluated first) */
    const char *arr = V->form != CG_CUDA_REG ? NULL
                      : V->lay == lay        ? V->name
                                             : cg_cuda_conv_find(g, v->id, lay);
    if (w > 1 && V->form == CG_CUDA_VIRT) arr = cg_cuda_materialize(g, v, lay);
    if (w > 1 && !arr) w = 1, dyn = 0;
    cg_cuda_slot_loop(g, lay, w);
    const char *o = cg_cuda_at(g, offs, lay);
    if (w == 1) {
        const char *m = mask ? cg_cuda_fmt(g, "ok && %s", cg_cuda_at(g, mask, lay)) : "ok";
        const char *x = cg_cuda_at(g, v, lay);
        if (atomic)
            cg_cuda_line(g, "if (%s) atomicAdd(%s + %s, %s);", m, pn, o, x);
        else
            cg_cuda_line(g, "if (%s) %s[%s] = %s;", m, pn, o, cg_cuda_to_mem(g, t, x));
        cg_cuda_close(g);
        return;
    }
    const char *m = vector_mask(g, mask, lay, w, dyn);
    cg_cuda_open(g, "if (%s)", m);
    cg_cuda_line(g, "%s t[%d];", cg_cuda_mem_type(t), w);
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_line(g, "for (int i = 0; i < %d; i++) t[i] = %s;", w,
                 cg_cuda_to_mem(g, t, cg_cuda_fmt(g, "%s[s + i]", arr)));
    cg_cuda_line(g, "kd_vstore<%d>(%s + %s, t);", w, pn, o);
    if (dyn) {
        g->ind--;
        cg_cuda_line(g, "} else {");
        g->ind++;
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_line(g, "for (int i = 0; i < %d; i++) if (ok && mv[i]) %s[%s + i] = %s;", w, pn, o,
                     cg_cuda_to_mem(g, t, cg_cuda_fmt(g, "%s[s + i]", arr)));
    }
    cg_cuda_close(g);
    cg_cuda_close(g);
}
