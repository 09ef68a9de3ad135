/* cg_llvm_math.c — the element semantics of kir_ops.def on LLVM register values, for every target.
 *
 * Representation: f16 and bf16 values are their 16 bits (i16), f8e4m3 its 8 bits (i8); float math runs
 * in f32 and rounds back to the value's dtype after each op. The conversions are integer code written
 * here (no half/bfloat types, no libcalls), so every target computes the same bits:
 *   bf16 <-> f32 and f16 <-> f32: exact widening; narrowing rounds to nearest even (NaN stays NaN,
 *   overflow gives inf); f8e4m3fn: saturating (|x| > 448 and inf give +-448, NaN gives 0x7f|sign), round
 *   to nearest even, subnormals kept.
 * Integer ops wrap; div/rem never trap: x/0 = 0, x%0 = 0, x/-1 = -x (wrapping), x%-1 = 0; shift amounts are
 * taken modulo the bit width. Float -> int casts saturate (NaN -> 0); int -> bf16/f16/f8 goes through f32.
 * Transcendentals: the host calls the llvm.* intrinsics (libm). GPUs have no libm: exp2/sqrt/floor are
 * native, exp = exp2(x*log2 e), log = log2(x)*ln 2 (NVPTX: ex2/lg2.approx, ~2 ulp; AMDGPU: llvm.exp/log),
 * and sin/cos are a Cody-Waite reduction by pi/2 (three-part constant, fma) plus minimax polynomials on
 * [-pi/4, pi/4]: ~2 ulp for |x| < 1e5.
 */
#ifdef KILN_HAVE_LLVM

#include "cg_llvm_impl.h"

#include <string.h>

static LLVMTypeRef i32t(CgLlvmFn *f)
{
    return LLVMInt32TypeInContext(f->u->ctx);
}

static LLVMTypeRef f32t(CgLlvmFn *f)
{
    return LLVMFloatTypeInContext(f->u->ctx);
}

static LLVMValueRef ci32(CgLlvmFn *f, uint32_t v)
{
    return LLVMConstInt(i32t(f), v, 0);
}

static LLVMValueRef cf32(CgLlvmFn *f, double v)
{
    return LLVMConstReal(f32t(f), v);
}

LLVMValueRef cg_llvm_call(CgLlvmFn *f, const char *intrinsic, LLVMTypeRef *over, int n_over,
                          LLVMValueRef *args, int n_args)
{
    unsigned id = LLVMLookupIntrinsicID(intrinsic, strlen(intrinsic));
    KILN_ASSERT(id != 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(f->u->mod, id, over, (size_t)n_over);
    LLVMTypeRef fty = LLVMIntrinsicGetType(f->u->ctx, id, over, (size_t)n_over);
    return LLVMBuildCall2(f->b, fty, fn, args, (unsigned)n_args, "");
}

static LLVMValueRef call1f(CgLlvmFn *f, const char *name, LLVMValueRef x)
{
    LLVMTypeRef t = f32t(f);
    return cg_llvm_call(f, name, &t, 1, &x, 1);
}

static LLVMValueRef call2f(CgLlvmFn *f, const char *name, LLVMValueRef x, LLVMValueRef y)
{
    LLVMTypeRef t = f32t(f);
    LLVMValueRef a[2] = {x, y};
    return cg_llvm_call(f, name, &t, 1, a, 2);
}

static LLVMValueRef fma3(CgLlvmFn *f, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMTypeRef t = f32t(f);
    LLVMValueRef x[3] = {a, b, c};
    return cg_llvm_call(f, "llvm.fma", &t, 1, x, 3);
}

static LLVMValueRef bits(CgLlvmFn *f, LLVMValueRef x)
{
    return LLVMBuildBitCast(f->b, x, i32t(f), "");
}

static LLVMValueRef flt(CgLlvmFn *f, LLVMValueRef u)
{
    return LLVMBuildBitCast(f->b, u, f32t(f), "");
}

static LLVMValueRef sel(CgLlvmFn *f, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(f->b, c, a, b, "");
}

static LLVMValueRef ucmp(CgLlvmFn *f, LLVMIntPredicate p, LLVMValueRef a, uint32_t c)
{
    return LLVMBuildICmp(f->b, p, a, ci32(f, c), "");
}

/* ---- dtype conversions ---- */

static LLVMValueRef half_to_f32(CgLlvmFn *f, LLVMValueRef h16)
{
    LLVMBuilderRef b = f->b;
    LLVMValueRef h = LLVMBuildZExt(b, h16, i32t(f), "");
    LLVMValueRef o = LLVMBuildShl(b, LLVMBuildAnd(b, h, ci32(f, 0x7fff), ""), ci32(f, 13), "");
    LLVMValueRef e = LLVMBuildAnd(b, o, ci32(f, 0x7c00u << 13), "");
    LLVMValueRef o1 = LLVMBuildAdd(b, o, ci32(f, 112u << 23), "");
    LLVMValueRef inf = LLVMBuildAdd(b, o1, ci32(f, 112u << 23), "");
    LLVMValueRef den =
        LLVMBuildFSub(b, flt(f, LLVMBuildAdd(b, o1, ci32(f, 1u << 23), "")), flt(f, ci32(f, 113u << 23)), "");
    LLVMValueRef r =
        sel(f, ucmp(f, LLVMIntEQ, e, 0x7c00u << 13), inf, sel(f, ucmp(f, LLVMIntEQ, e, 0), bits(f, den), o1));
    LLVMValueRef s = LLVMBuildShl(b, LLVMBuildAnd(b, h, ci32(f, 0x8000), ""), ci32(f, 16), "");
    return flt(f, LLVMBuildOr(b, r, s, ""));
}

static LLVMValueRef f8_to_f32(CgLlvmFn *f, LLVMValueRef v8)
{
    LLVMBuilderRef b = f->b;
    LLVMValueRef v = LLVMBuildZExt(b, v8, i32t(f), "");
    LLVMValueRef mag = LLVMBuildAnd(b, v, ci32(f, 0x7f), "");
    LLVMValueRef normal = LLVMBuildAdd(b, LLVMBuildShl(b, mag, ci32(f, 20), ""), ci32(f, 120u << 23), "");
    LLVMValueRef m = LLVMBuildAnd(b, v, ci32(f, 7), "");
    LLVMValueRef sub = bits(f, LLVMBuildFMul(b, LLVMBuildUIToFP(b, m, f32t(f), ""), cf32(f, 1.0 / 512), ""));
    LLVMValueRef r = sel(f, ucmp(f, LLVMIntULT, mag, 8), sub, normal);
    r = sel(f, ucmp(f, LLVMIntEQ, mag, 0x7f), ci32(f, 0x7fc00000), r);
    LLVMValueRef s = LLVMBuildShl(b, LLVMBuildAnd(b, v, ci32(f, 0x80), ""), ci32(f, 24), "");
    return flt(f, LLVMBuildOr(b, r, s, ""));
}

LLVMValueRef cg_llvm_to_f32(CgLlvmFn *f, KirDtype t, LLVMValueRef v)
{
    switch (t) {
    case KIR_F32: return v;
    case KIR_BF16: return flt(f, LLVMBuildShl(f->b, LLVMBuildZExt(f->b, v, i32t(f), ""), ci32(f, 16), ""));
    case KIR_F16: return half_to_f32(f, v);
    case KIR_F8E4M3: return f8_to_f32(f, v);
    default: UNREACHABLE();
    }
}

/* |x| below `small` (a subnormal result): adding the magic constant aligns the result's last mantissa bit
 * with the float's, so the FPU's own round-to-nearest-even does the rounding. Above it: rebias the
 * exponent and round by adding half an ulp minus one plus the kept lsb, then shift. */
static LLVMValueRef narrow(CgLlvmFn *f, LLVMValueRef a, uint32_t small, uint32_t magic, uint32_t rebias,
                           int shift)
{
    LLVMBuilderRef b = f->b;
    LLVMValueRef den =
        LLVMBuildSub(b, bits(f, LLVMBuildFAdd(b, flt(f, a), flt(f, ci32(f, magic)), "")), ci32(f, magic), "");
    LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildLShr(b, a, ci32(f, (uint32_t)shift), ""), ci32(f, 1), "");
    LLVMValueRef nr = LLVMBuildAdd(b, a, ci32(f, rebias + ((1u << (shift - 1)) - 1)), "");
    nr = LLVMBuildLShr(b, LLVMBuildAdd(b, nr, odd, ""), ci32(f, (uint32_t)shift), "");
    return sel(f, ucmp(f, LLVMIntULT, a, small), den, nr);
}

LLVMValueRef cg_llvm_from_f32(CgLlvmFn *f, KirDtype t, LLVMValueRef x)
{
    LLVMBuilderRef b = f->b;
    if (t == KIR_F32) return x;
    LLVMValueRef u = bits(f, x);
    if (t == KIR_BF16) {
        LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildLShr(b, u, ci32(f, 16), ""), ci32(f, 1), "");
        LLVMValueRef r = LLVMBuildLShr(b, LLVMBuildAdd(b, LLVMBuildAdd(b, u, ci32(f, 0x7fff), ""), odd, ""),
                                       ci32(f, 16), "");
        LLVMValueRef nan = LLVMBuildOr(b, LLVMBuildLShr(b, u, ci32(f, 16), ""), ci32(f, 0x40), "");
        r = sel(f, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), nan, r);
        return LLVMBuildTrunc(b, r, LLVMInt16TypeInContext(f->u->ctx), "");
    }
    LLVMValueRef sign = LLVMBuildAnd(b, u, ci32(f, 0x80000000u), "");
    LLVMValueRef a = LLVMBuildXor(b, u, sign, "");
    if (t == KIR_F16) {
        LLVMValueRef r = narrow(f, a, 113u << 23, 126u << 23, (uint32_t)(-(112 << 23)), 13);
        LLVMValueRef big = sel(f, ucmp(f, LLVMIntUGT, a, 0x7f800000u), ci32(f, 0x7e00), ci32(f, 0x7c00));
        r = sel(f, ucmp(f, LLVMIntUGE, a, 143u << 23), big, r);
        r = LLVMBuildOr(b, r, LLVMBuildLShr(b, sign, ci32(f, 16), ""), "");
        return LLVMBuildTrunc(b, r, LLVMInt16TypeInContext(f->u->ctx), "");
    }
    KILN_ASSERT(t == KIR_F8E4M3);
    LLVMValueRef r = narrow(f, a, 121u << 23, 141u << 23, (uint32_t)(-(120 << 23)), 20);
    r = sel(f, ucmp(f, LLVMIntUGT, a, 0x43e00000u), ci32(f, 0x7e), r); /* > 448: saturate */
    r = sel(f, ucmp(f, LLVMIntUGT, a, 0x7f800000u), ci32(f, 0x7f), r); /* NaN */
    r = LLVMBuildOr(b, r, LLVMBuildLShr(b, sign, ci32(f, 24), ""), "");
    return LLVMBuildTrunc(b, r, LLVMInt8TypeInContext(f->u->ctx), "");
}

LLVMValueRef cg_llvm_const_f(CgLlvmFn *f, KirDtype t, double v)
{
    return cg_llvm_from_f32(f, t, cf32(f, v));
}

/* ---- GPU transcendentals ---- */

static LLVMValueRef gpu_exp2(CgLlvmFn *f, LLVMValueRef x)
{
    return call1f(f, "llvm.exp2", x);
}

static LLVMValueRef gpu_log2(CgLlvmFn *f, LLVMValueRef x)
{
    if (f->u->arch == CG_LLVM_AMDGPU) return call1f(f, "llvm.log2", x);
    LLVMValueRef fn = LLVMGetNamedFunction(f->u->mod, "llvm.nvvm.lg2.approx.f");
    LLVMTypeRef ft = LLVMFunctionType(f32t(f), (LLVMTypeRef[]){f32t(f)}, 1, 0);
    if (!fn) fn = LLVMAddFunction(f->u->mod, "llvm.nvvm.lg2.approx.f", ft);
    return LLVMBuildCall2(f->b, ft, fn, &x, 1, "");
}

/* sin (cos_shift 0) or cos (cos_shift 1) of x: quadrant q = round(x * 2/pi), r = x - q*pi/2. */
static LLVMValueRef gpu_sincos(CgLlvmFn *f, LLVMValueRef x, int cos_shift)
{
    LLVMBuilderRef b = f->b;
    LLVMValueRef q = call1f(f, "llvm.roundeven", LLVMBuildFMul(b, x, cf32(f, 0.6366197466850281), ""));
    LLVMValueRef nq = LLVMBuildFNeg(b, q, "");
    LLVMValueRef r = fma3(f, nq, cf32(f, 1.5707963705062866), x);
    r = fma3(f, nq, cf32(f, -4.371138828673793e-08), r);
    r = fma3(f, nq, cf32(f, -1.7151245100058819e-15), r);
    LLVMTypeRef it = i32t(f), ft = f32t(f);
    LLVMTypeRef ov[2] = {it, ft};
    LLVMValueRef iq = cg_llvm_call(f, "llvm.fptosi.sat", ov, 2, &q, 1);
    iq = LLVMBuildAdd(b, iq, ci32(f, (uint32_t)cos_shift), "");
    LLVMValueRef r2 = LLVMBuildFMul(b, r, r, "");
    LLVMValueRef ps = fma3(f, r2, cf32(f, -1.9515295891e-4), cf32(f, 8.3321608736e-3));
    ps = fma3(f, r2, ps, cf32(f, -1.6666654611e-1));
    ps = fma3(f, LLVMBuildFMul(b, r, r2, ""), ps, r);
    LLVMValueRef pc = fma3(f, r2, cf32(f, 2.443315711809948e-5), cf32(f, -1.388731625493765e-3));
    pc = fma3(f, r2, pc, cf32(f, 4.166664568298827e-2));
    pc = fma3(f, LLVMBuildFMul(b, r2, r2, ""), pc, fma3(f, r2, cf32(f, -0.5), cf32(f, 1.0)));
    LLVMValueRef odd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, iq, ci32(f, 1), ""), ci32(f, 0), "");
    LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, iq, ci32(f, 2), ""), ci32(f, 0), "");
    LLVMValueRef v = sel(f, odd, pc, ps);
    return sel(f, neg, LLVMBuildFNeg(b, v, ""), v);
}

static LLVMValueRef transcendental(CgLlvmFn *f, KirOp op, LLVMValueRef x)
{
    LLVMBuilderRef b = f->b;
    int gpu = f->u->arch != CG_LLVM_HOST, amd = f->u->arch == CG_LLVM_AMDGPU;
    switch (op) {
    case KIR_OP_EXP:
        if (!gpu || amd) return call1f(f, "llvm.exp", x);
        return gpu_exp2(f, LLVMBuildFMul(b, x, cf32(f, 1.4426950216293335), ""));
    case KIR_OP_EXP2: return call1f(f, "llvm.exp2", x);
    case KIR_OP_LOG:
        if (!gpu || amd) return call1f(f, "llvm.log", x);
        return LLVMBuildFMul(b, gpu_log2(f, x), cf32(f, 0.6931471824645996), "");
    case KIR_OP_SQRT: return call1f(f, "llvm.sqrt", x);
    case KIR_OP_RSQRT: return LLVMBuildFDiv(b, cf32(f, 1.0), call1f(f, "llvm.sqrt", x), "");
    case KIR_OP_SIN: return gpu ? gpu_sincos(f, x, 0) : call1f(f, "llvm.sin", x);
    case KIR_OP_COS: return gpu ? gpu_sincos(f, x, 1) : call1f(f, "llvm.cos", x);
    case KIR_OP_FLOOR: return call1f(f, "llvm.floor", x);
    default: UNREACHABLE();
    }
}

/* ---- element ops ---- */

static int is_unsigned(KirDtype t)
{
    return t == KIR_U8 || t == KIR_I1;
}

static LLVMValueRef int_divrem(CgLlvmFn *f, int rem, KirDtype t, LLVMValueRef a, LLVMValueRef d)
{
    LLVMBuilderRef b = f->b;
    LLVMTypeRef ty = LLVMTypeOf(a);
    LLVMValueRef zero = LLVMConstInt(ty, 0, 0), one = LLVMConstInt(ty, 1, 0);
    LLVMValueRef dz = LLVMBuildICmp(b, LLVMIntEQ, d, zero, "");
    if (is_unsigned(t)) {
        LLVMValueRef ds = sel(f, dz, one, d);
        LLVMValueRef r = rem ? LLVMBuildURem(b, a, ds, "") : LLVMBuildUDiv(b, a, ds, "");
        return sel(f, dz, zero, r);
    }
    LLVMValueRef dm1 = LLVMBuildICmp(b, LLVMIntEQ, d, LLVMConstAllOnes(ty), "");
    LLVMValueRef bad = LLVMBuildOr(b, dz, dm1, "");
    LLVMValueRef ds = sel(f, bad, one, d);
    if (rem) return sel(f, bad, zero, LLVMBuildSRem(b, a, ds, ""));
    LLVMValueRef q = sel(f, dm1, LLVMBuildSub(b, zero, a, ""), LLVMBuildSDiv(b, a, ds, ""));
    return sel(f, dz, zero, q);
}

static LLVMValueRef float_binary(CgLlvmFn *f, KirOp op, KirDtype t, LLVMValueRef a, LLVMValueRef b)
{
    LLVMBuilderRef B = f->b;
    LLVMValueRef x = cg_llvm_to_f32(f, t, a), y = cg_llvm_to_f32(f, t, b), r;
    switch (op) {
    case KIR_OP_ADD: r = LLVMBuildFAdd(B, x, y, ""); break;
    case KIR_OP_SUB: r = LLVMBuildFSub(B, x, y, ""); break;
    case KIR_OP_MUL: r = LLVMBuildFMul(B, x, y, ""); break;
    case KIR_OP_DIV: r = LLVMBuildFDiv(B, x, y, ""); break;
    case KIR_OP_MIN: r = call2f(f, "llvm.minnum", x, y); break;
    case KIR_OP_MAX: r = call2f(f, "llvm.maxnum", x, y); break;
    case KIR_OP_LT: return LLVMBuildFCmp(B, LLVMRealOLT, x, y, "");
    case KIR_OP_LE: return LLVMBuildFCmp(B, LLVMRealOLE, x, y, "");
    case KIR_OP_GT: return LLVMBuildFCmp(B, LLVMRealOGT, x, y, "");
    case KIR_OP_GE: return LLVMBuildFCmp(B, LLVMRealOGE, x, y, "");
    case KIR_OP_EQ: return LLVMBuildFCmp(B, LLVMRealOEQ, x, y, "");
    case KIR_OP_NE: return LLVMBuildFCmp(B, LLVMRealUNE, x, y, "");
    default: UNREACHABLE();
    }
    return cg_llvm_from_f32(f, t, r);
}

LLVMValueRef cg_llvm_elem_binary(CgLlvmFn *f, KirOp op, KirDtype t, LLVMValueRef a, LLVMValueRef b)
{
    if (kir_dtype_is_float(t)) return float_binary(f, op, t, a, b);
    LLVMBuilderRef B = f->b;
    int u = is_unsigned(t);
    unsigned width = LLVMGetIntTypeWidth(LLVMTypeOf(a));
    switch (op) {
    case KIR_OP_ADD: return LLVMBuildAdd(B, a, b, "");
    case KIR_OP_SUB: return LLVMBuildSub(B, a, b, "");
    case KIR_OP_MUL: return LLVMBuildMul(B, a, b, "");
    case KIR_OP_DIV: return int_divrem(f, 0, t, a, b);
    case KIR_OP_REM: return int_divrem(f, 1, t, a, b);
    case KIR_OP_MIN: return sel(f, LLVMBuildICmp(B, u ? LLVMIntULT : LLVMIntSLT, a, b, ""), a, b);
    case KIR_OP_MAX: return sel(f, LLVMBuildICmp(B, u ? LLVMIntUGT : LLVMIntSGT, a, b, ""), a, b);
    case KIR_OP_AND: return LLVMBuildAnd(B, a, b, "");
    case KIR_OP_OR: return LLVMBuildOr(B, a, b, "");
    case KIR_OP_XOR: return LLVMBuildXor(B, a, b, "");
    case KIR_OP_SHL:
    case KIR_OP_SHR: {
        LLVMValueRef s = LLVMBuildAnd(B, b, LLVMConstInt(LLVMTypeOf(b), width - 1, 0), "");
        if (op == KIR_OP_SHL) return LLVMBuildShl(B, a, s, "");
        return u ? LLVMBuildLShr(B, a, s, "") : LLVMBuildAShr(B, a, s, "");
    }
    case KIR_OP_LT: return LLVMBuildICmp(B, u ? LLVMIntULT : LLVMIntSLT, a, b, "");
    case KIR_OP_LE: return LLVMBuildICmp(B, u ? LLVMIntULE : LLVMIntSLE, a, b, "");
    case KIR_OP_GT: return LLVMBuildICmp(B, u ? LLVMIntUGT : LLVMIntSGT, a, b, "");
    case KIR_OP_GE: return LLVMBuildICmp(B, u ? LLVMIntUGE : LLVMIntSGE, a, b, "");
    case KIR_OP_EQ: return LLVMBuildICmp(B, LLVMIntEQ, a, b, "");
    case KIR_OP_NE: return LLVMBuildICmp(B, LLVMIntNE, a, b, "");
    default: UNREACHABLE();
    }
}

LLVMValueRef cg_llvm_elem_unary(CgLlvmFn *f, KirOp op, KirDtype t, LLVMValueRef a)
{
    LLVMBuilderRef b = f->b;
    if (kir_dtype_is_int(t)) {
        if (op == KIR_OP_NEG) return LLVMBuildSub(b, LLVMConstInt(LLVMTypeOf(a), 0, 0), a, "");
        KILN_ASSERT(op == KIR_OP_ABS);
        LLVMTypeRef ty = LLVMTypeOf(a);
        LLVMValueRef args[2] = {a, LLVMConstInt(LLVMInt1TypeInContext(f->u->ctx), 0, 0)};
        return cg_llvm_call(f, "llvm.abs", &ty, 1, args, 2);
    }
    if (op == KIR_OP_NEG || op == KIR_OP_ABS) {
        if (t == KIR_F32) return op == KIR_OP_NEG ? LLVMBuildFNeg(b, a, "") : call1f(f, "llvm.fabs", a);
        unsigned long long sign = t == KIR_F8E4M3 ? 0x80 : 0x8000; /* exact: flip or clear the sign bit */
        LLVMTypeRef ty = LLVMTypeOf(a);
        if (op == KIR_OP_NEG) return LLVMBuildXor(b, a, LLVMConstInt(ty, sign, 0), "");
        return LLVMBuildAnd(b, a, LLVMConstInt(ty, ~sign, 0), "");
    }
    return cg_llvm_from_f32(f, t, transcendental(f, op, cg_llvm_to_f32(f, t, a)));
}

LLVMValueRef cg_llvm_elem_cast(CgLlvmFn *f, KirDtype from, KirDtype to, LLVMValueRef a)
{
    LLVMBuilderRef b = f->b;
    if (from == to) return a;
    LLVMTypeRef rt = cg_llvm_reg_type(f->u, to);
    if (kir_dtype_is_float(from)) {
        LLVMValueRef x = cg_llvm_to_f32(f, from, a);
        if (kir_dtype_is_float(to)) return cg_llvm_from_f32(f, to, x);
        if (to == KIR_I1) return LLVMBuildFCmp(b, LLVMRealUNE, x, cf32(f, 0), "");
        LLVMTypeRef ov[2] = {rt, f32t(f)};
        return cg_llvm_call(f, to == KIR_U8 ? "llvm.fptoui.sat" : "llvm.fptosi.sat", ov, 2, &x, 1);
    }
    if (kir_dtype_is_float(to)) {
        LLVMValueRef x =
            is_unsigned(from) ? LLVMBuildUIToFP(b, a, f32t(f), "") : LLVMBuildSIToFP(b, a, f32t(f), "");
        return cg_llvm_from_f32(f, to, x);
    }
    if (to == KIR_I1) return LLVMBuildICmp(b, LLVMIntNE, a, LLVMConstInt(LLVMTypeOf(a), 0, 0), "");
    unsigned wf = LLVMGetIntTypeWidth(LLVMTypeOf(a)), wt = LLVMGetIntTypeWidth(rt);
    if (wf == wt) return a;
    if (wf > wt) return LLVMBuildTrunc(b, a, rt, "");
    return is_unsigned(from) ? LLVMBuildZExt(b, a, rt, "") : LLVMBuildSExt(b, a, rt, "");
}

static LLVMValueRef mix32(CgLlvmFn *f, LLVMValueRef x)
{
    LLVMBuilderRef b = f->b;
    x = LLVMBuildXor(b, x, LLVMBuildLShr(b, x, ci32(f, 16), ""), "");
    x = LLVMBuildMul(b, x, ci32(f, 0x85ebca6bu), "");
    x = LLVMBuildXor(b, x, LLVMBuildLShr(b, x, ci32(f, 13), ""), "");
    x = LLVMBuildMul(b, x, ci32(f, 0xc2b2ae35u), "");
    return LLVMBuildXor(b, x, LLVMBuildLShr(b, x, ci32(f, 16), ""), "");
}

LLVMValueRef cg_llvm_elem_rand(CgLlvmFn *f, LLVMValueRef seed, LLVMValueRef counter)
{
    LLVMBuilderRef b = f->b;
    LLVMValueRef lo = LLVMBuildTrunc(b, seed, i32t(f), "");
    LLVMValueRef hi =
        LLVMBuildTrunc(b, LLVMBuildLShr(b, seed, LLVMConstInt(LLVMTypeOf(seed), 32, 0), ""), i32t(f), "");
    LLVMValueRef k = LLVMBuildXor(b, mix32(f, LLVMBuildXor(b, lo, ci32(f, 0x9e3779b9u), "")), hi, "");
    LLVMValueRef h = mix32(f, LLVMBuildXor(b, counter, k, ""));
    LLVMValueRef m = LLVMBuildUIToFP(b, LLVMBuildLShr(b, h, ci32(f, 8), ""), f32t(f), "");
    return LLVMBuildFMul(b, m, cf32(f, 1.0 / 16777216.0), "");
}

#else
typedef int cg_llvm_math_unused;
#endif
