/* cg_cuda_reduce.c — the non-local tile ops of the CUDA backend: reduce, broadcast of a REG tile, and
 * layout conversions. All go through the shared scratch region (after the pipelines' buffers) with the
 * protocol "barrier, write, barrier, read", so consecutive uses never race.
 *
 * reduce over a BLOCKED tile, along the dimension its chunks run (a row sum of a row-major tile, any
 * 1-D reduce): each thread first reduces each of its chunks in registers, then
 *   A. when a line (row) has <= 32 chunks, a power of two: the chunks of a line sit on an aligned group of
 *      lanes; butterfly shuffles within the group, one shared-memory word per line;
 *   B. when every thread holds the same number of chunks of every line (1-D, or chunks per line a
 *      multiple of the block): per-thread partials, full-warp shuffles, one word per line and warp;
 *   C. otherwise one word per chunk;
 * and a second pass reduces each line's words in order. Across the chunks (a column sum of a row-major
 * tile): per-thread partials over the thread's chunks when they share columns, else one word per
 * element. Float sums accumulate in f32; the order is fixed for a given kernel and config.
 */
#include "cg_cuda_impl.h"

static CgCudaVal *val(CgCudaGen *g, const KirValue *v)
{
    return &g->v[v->id];
}

static int reg_size(KirDtype t)
{
    return t == KIR_I1 || t == KIR_I8 || t == KIR_U8 ? 1 : t == KIR_I64 ? 8 : 4;
}

void cg_cuda_emit_convert(CgCudaGen *g, const KirValue *v, int lay, const char *name)
{
    const CgCudaVal *V = val(g, v);
    int m, n;
    cg_cuda_shape(&v->type, &m, &n);
    const char *ty = cg_cuda_reg_type(v->type.dtype);
    int pitch = n + (n >= 32 ? 1 : 0);
    cg_cuda_line(g, "%s %s[%d]; /* %s in layout L%d */", ty, name, g->lay[lay].slots, V->name, lay);
    cg_cuda_begin(g);
    cg_cuda_line(g, "%s *const kt = (%s *)kd_scratch; /* [%d][%d] */", ty, ty, m, pitch);
    cg_cuda_scratch(g, (int64_t)m * pitch * reg_size(v->type.dtype));
    cg_cuda_slot_loop(g, V->lay, 1);
    cg_cuda_line(g, "if (ok) kt[r * %d + c] = %s[s];", pitch, V->name);
    cg_cuda_close(g);
    cg_cuda_line(g, "__syncthreads();");
    cg_cuda_slot_loop(g, lay, 1);
    cg_cuda_line(g, "%s[s] = ok ? kt[r * %d + c] : %s;", name, pitch, cg_cuda_zero_of(v->type.dtype));
    cg_cuda_close(g);
    cg_cuda_close(g);
}

/* A ROWS [M,1] tile broadcast over the columns into the MMA layout with the same rows: register moves. */
static void broadcast_rows(CgCudaGen *g, const CgCudaVal *X, const CgCudaVal *R)
{
    const CgCudaLayout *L = &g->lay[R->lay];
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_line(g, "for (int s = 0; s < %d; s++) %s[s] = %s[(s / %d) * 2 + (s %% 4) / 2];", L->slots,
                 R->name, X->name, 4 * L->fn);
}

void cg_cuda_emit_broadcast(CgCudaGen *g, const KirInst *in)
{
    const KirValue *x = in->ops[0], *res = in->res[0];
    const CgCudaVal *X = val(g, x), *R = val(g, res);
    if (g->lay[X->lay].kind == CG_CUDA_ROWS && g->lay[R->lay].kind == CG_CUDA_MMA) {
        cg_cuda_declare(g, res);
        broadcast_rows(g, X, R);
        return;
    }
    int xm, xn;
    cg_cuda_shape(&x->type, &xm, &xn);
    int row = xm == 1, len = row ? xn : xm;
    const char *ty = cg_cuda_reg_type(x->type.dtype);
    cg_cuda_declare(g, res);
    cg_cuda_begin(g);
    cg_cuda_line(g, "%s *const kt = (%s *)kd_scratch; /* [%d] */", ty, ty, len);
    cg_cuda_scratch(g, (int64_t)len * reg_size(x->type.dtype));
    cg_cuda_slot_loop(g, X->lay, 1);
    cg_cuda_line(g, "if (ok) kt[%s] = %s[s];", row ? "c" : "r", X->name);
    cg_cuda_close(g);
    cg_cuda_line(g, "__syncthreads();");
    cg_cuda_slot_loop(g, R->lay, 1);
    cg_cuda_line(g, "%s[s] = ok ? kt[%s] : %s;", R->name, row ? "c" : "r", cg_cuda_zero_of(x->type.dtype));
    cg_cuda_close(g);
    cg_cuda_close(g);
}

/* ---- reduce ---- */

typedef struct Red {
    int kind;       /* KirReduce */
    KirDtype rt;    /* accumulator = result dtype */
    const char *at; /* its C type */
} Red;

static const char *identity(CgCudaGen *g, const Red *r)
{
    if (r->kind == KIR_RED_SUM) return cg_cuda_zero_of(r->rt);
    int mx = r->kind == KIR_RED_MAX;
    switch (r->rt) {
    case KIR_F32: return mx ? "-__int_as_float(0x7f800000)" : "__int_as_float(0x7f800000)";
    case KIR_I1: return mx ? "false" : "true";
    case KIR_I8: return mx ? "(signed char)-128" : "(signed char)127";
    case KIR_U8: return mx ? "(unsigned char)0" : "(unsigned char)255";
    case KIR_I32: return mx ? "(-2147483647 - 1)" : "2147483647";
    default: return mx ? "(-9223372036854775807LL - 1)" : "9223372036854775807LL";
    }
    (void)g;
}

static const char *combine(CgCudaGen *g, const Red *r, const char *a, const char *b)
{
    if (r->kind == KIR_RED_SUM) return cg_cuda_fmt(g, "kd_sum(%s, %s)", a, b);
    return cg_cuda_fmt(g, "kd_%s(%s, %s)", r->kind == KIR_RED_MAX ? "max" : "min", a, b);
}

/* Writes the final pass: output o (a line or a column) reduces kr[o * P .. o * P + P - 1]. */
static void final_pass(CgCudaGen *g, const KirValue *res, const Red *r, int P)
{
    const CgCudaVal *R = val(g, res);
    cg_cuda_line(g, "__syncthreads();");
    if (R->form == CG_CUDA_SCALAR) {
        cg_cuda_line(g, "%s = %s;", R->name, identity(g, r));
        cg_cuda_line(g, "#pragma unroll 8");
        cg_cuda_line(g, "for (int i = 0; i < %d; i++) %s = %s;", P, R->name, combine(g, r, R->name, "kr[i]"));
        return;
    }
    cg_cuda_slot_loop(g, R->lay, 1);
    cg_cuda_line(g, "%s acc = %s;", r->at, identity(g, r));
    cg_cuda_line(g, "#pragma unroll 8");
    cg_cuda_line(g, "for (int i = 0; i < %d && ok; i++) acc = %s;", P,
                 combine(g, r, "acc", cg_cuda_fmt(g, "kr[c * %d + i]", P)));
    cg_cuda_line(g, "%s[s] = acc;", R->name);
    cg_cuda_close(g);
}

/* Row reduction of an MMA tile (wn = 1) into its ROWS layout: each thread folds its two columns of each
 * n8 fragment of a row, then the quad (the 4 lanes sharing the row) exchanges by shuffles. */
static void reduce_rows(CgCudaGen *g, const CgCudaVal *X, const CgCudaVal *R, const Red *r)
{
    const CgCudaLayout *L = &g->lay[X->lay];
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_open(g, "for (int f = 0; f < %d; f++)", 2 * L->fm);
    cg_cuda_line(g, "%s acc = %s;", r->at, identity(g, r));
    cg_cuda_line(g, "#pragma unroll");
    cg_cuda_open(g, "for (int j = 0; j < %d; j++)", 2 * L->fn);
    cg_cuda_line(g, "const int s = ((f / 2) * %d + j / 2) * 4 + (f %% 2) * 2 + j %% 2;", L->fn);
    cg_cuda_line(g, "int r, c;");
    cg_cuda_line(g, "if (L%d_at(s, r, c)) acc = %s;", X->lay,
                 combine(g, r, "acc", cg_cuda_fmt(g, "%s[s]", X->name)));
    cg_cuda_close(g);
    cg_cuda_line(g, "acc = %s;", combine(g, r, "acc", "kd_shfl_xor(acc, 1)"));
    cg_cuda_line(g, "acc = %s;", combine(g, r, "acc", "kd_shfl_xor(acc, 2)"));
    cg_cuda_line(g, "%s[f] = acc;", R->name);
    cg_cuda_close(g);
}

void cg_cuda_emit_reduce(CgCudaGen *g, const KirInst *in)
{
    const KirValue *x = in->ops[0], *res = in->res[0];
    const CgCudaVal *X = val(g, x), *R = val(g, res);
    Red r = {(int)in->i, res->type.dtype, cg_cuda_reg_type(res->type.dtype)};
    if (R->form == CG_CUDA_REG && g->lay[R->lay].kind == CG_CUDA_ROWS) {
        cg_cuda_declare(g, res);
        reduce_rows(g, X, R, &r);
        return;
    }
    int xm, xn, T = g->threads, W = g->warps;
    cg_cuda_shape(&x->type, &xm, &xn);
    int axis = x->type.rank == 1 ? 1 : (int)in->i2;

    /* the input as a REG array in a BLOCKED layout */
    int lx = X->form == CG_CUDA_REG && g->lay[X->lay].kind == CG_CUDA_BLOCKED
                 ? X->lay
                 : cg_cuda_layout_blocked(g, xm, xn, NULL);
    if (R->form == CG_CUDA_SCALAR)
        cg_cuda_line(g, "%s %s;", r.at, R->name);
    else
        cg_cuda_declare(g, res);
    cg_cuda_begin(g);
    const char *xa = X->name;
    if (X->form == CG_CUDA_VIRT) {
        xa = cg_cuda_materialize(g, x, lx);
    } else if (X->lay != lx) {
        cg_cuda_prepare(g, x, lx);
        xa = cg_cuda_fmt(g, "%s_L%d", X->name, lx);
    }
    const CgCudaLayout *L = &g->lay[lx];
    int o = L->order, V = L->vec, nch = L->slots / V;
    int along = o == axis, llen = o ? xn : xm, lines = o ? xm : xn, cpr = llen / V;
    const char *line_of = o ? "r" : "c";

    cg_cuda_line(g, "%s *const kr = (%s *)kd_scratch;", r.at, r.at);
    if (along) {
        /* per-chunk partials */
        cg_cuda_line(g, "%s pc[%d];", r.at, nch);
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_open(g, "for (int j = 0; j < %d; j++)", nch);
        cg_cuda_line(g, "int r, c;");
        cg_cuda_line(g, "const bool ok = L%d_at(j * %d, r, c);", lx, V);
        cg_cuda_line(g, "pc[j] = %s;", identity(g, &r));
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_line(g, "for (int i = 0; i < %d && ok; i++) pc[j] = %s;", V,
                     combine(g, &r, "pc[j]", cg_cuda_fmt(g, "(%s)%s[j * %d + i]", r.at, xa, V)));
        cg_cuda_close(g);
        if (cpr <= 32 && !(cpr & (cpr - 1))) { /* A: lane groups */
            if (cpr > 1) {
                cg_cuda_line(g, "#pragma unroll");
                cg_cuda_open(g, "for (int j = 0; j < %d; j++)", nch);
                cg_cuda_line(g, "#pragma unroll");
                cg_cuda_line(g, "for (int sh = %d; sh > 0; sh >>= 1) pc[j] = %s;", cpr / 2,
                             combine(g, &r, "pc[j]", "kd_shfl_xor(pc[j], sh)"));
                cg_cuda_close(g);
            }
            cg_cuda_scratch(g, (int64_t)lines * reg_size(r.rt));
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_open(g, "for (int j = 0; j < %d; j++)", nch);
            cg_cuda_line(g, "int r, c;");
            cg_cuda_line(g, "if (L%d_at(j * %d, r, c) && threadIdx.x %% %d == 0) kr[%s] = pc[j];", lx, V, cpr,
                         line_of);
            cg_cuda_close(g);
            final_pass(g, res, &r, 1);
        } else if (lines == 1 || cpr % T == 0) { /* B: per-thread, per-warp partials */
            int per = lines == 1 ? nch : cpr / T, nl = nch / per;
            cg_cuda_line(g, "%s tp[%d];", r.at, nl);
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_open(g, "for (int l = 0; l < %d; l++)", nl);
            cg_cuda_line(g, "tp[l] = %s;", identity(g, &r));
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_line(g, "for (int j = 0; j < %d; j++) tp[l] = %s;", per,
                         combine(g, &r, "tp[l]", cg_cuda_fmt(g, "pc[l * %d + j]", per)));
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_line(g, "for (int sh = 16; sh > 0; sh >>= 1) tp[l] = %s;",
                         combine(g, &r, "tp[l]", "kd_shfl_xor(tp[l], sh)"));
            cg_cuda_close(g);
            cg_cuda_scratch(g, (int64_t)lines * W * reg_size(r.rt));
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_line(g,
                         "for (int l = 0; l < %d; l++) if (threadIdx.x %% 32 == 0) kr[l * %d + threadIdx.x / "
                         "32] = tp[l];",
                         nl, W);
            final_pass(g, res, &r, W);
        } else { /* C: one word per chunk */
            cg_cuda_scratch(g, (int64_t)L->chunks * reg_size(r.rt));
            cg_cuda_line(g, "#pragma unroll");
            cg_cuda_open(g, "for (int j = 0; j < %d; j++)", nch);
            cg_cuda_line(g, "const int q = (int)threadIdx.x + j * %d;", T);
            cg_cuda_line(g, "if (q < %d) kr[q] = pc[j];", L->chunks);
            cg_cuda_close(g);
            final_pass(g, res, &r, cpr);
        }
    } else if (T % cpr == 0) { /* D: a thread's chunks share their columns */
        int P = T / cpr;
        cg_cuda_line(g, "%s tw[%d];", r.at, V);
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_line(g, "for (int i = 0; i < %d; i++) tw[i] = %s;", V, identity(g, &r));
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_open(g, "for (int j = 0; j < %d; j++)", nch);
        cg_cuda_line(g, "int r, c;");
        cg_cuda_line(g, "const bool ok = L%d_at(j * %d, r, c);", lx, V);
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_line(g, "for (int i = 0; i < %d && ok; i++) tw[i] = %s;", V,
                     combine(g, &r, "tw[i]", cg_cuda_fmt(g, "(%s)%s[j * %d + i]", r.at, xa, V)));
        cg_cuda_close(g);
        cg_cuda_scratch(g, (int64_t)llen * P * reg_size(r.rt));
        cg_cuda_line(g, "#pragma unroll");
        cg_cuda_line(g,
                     "for (int i = 0; i < %d; i++) kr[((threadIdx.x %% %d) * %d + i) * %d + threadIdx.x / "
                     "%d] = tw[i];",
                     V, cpr, V, P, cpr);
        final_pass(g, res, &r, P);
    } else { /* E: one word per element */
        cg_cuda_scratch(g, (int64_t)llen * lines * reg_size(r.rt));
        cg_cuda_slot_loop(g, lx, 1);
        cg_cuda_line(g, "if (ok) kr[%s * %d + %s] = (%s)%s[s];", o ? "c" : "r", lines, line_of, r.at, xa);
        cg_cuda_close(g);
        final_pass(g, res, &r, lines);
    }
    cg_cuda_close(g);
}
