// asgrad's per-primitive WGSL helpers, pasted in front of elementwise and row kernels.
// An op's WGSL is its scalar expression rendered (asgrad.gpu.lowering.scalar.render_wgsl),
// which spells each float primitive through the helper of its name here.
//
// Special values follow numpy (IEEE 754). WGSL lets a compiler assume that floats are
// finite: `x != x` may fold to false, min/max/clamp/sign of NaN and comparisons with
// NaN are not defined (lavapipe's max(NaN, 0.0) is 0.0, NaN != 0.0 is false). So NaN
// and infinity are recognised from the bits, and every function below that numpy
// defines at NaN or +-inf selects that result explicitly. WGSL has no inf/NaN
// literals either: asg_nan()/asg_inf() make them from bits. exp/tanh may overflow to
// NaN on some drivers, so their inputs are clamped where float32 saturates anyway.

const ASG_F32_MAX: f32 = 3.4028234663852886e38;

fn asg_isnan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn asg_isfinite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

fn asg_nan() -> f32 {
    return bitcast<f32>(0x7fc00000u);
}

fn asg_inf() -> f32 {
    return bitcast<f32>(0x7f800000u);
}

fn asg_ninf() -> f32 {
    return bitcast<f32>(0xff800000u);
}

// NaN in, NaN out: r where x is a number
fn asg_keepnan(x: f32, r: f32) -> f32 {
    return select(r, x, asg_isnan(x));
}

// numpy.maximum/minimum: a NaN operand wins (the first one when both are NaN)
fn asg_max(a: f32, b: f32) -> f32 {
    return select(select(max(a, b), b, asg_isnan(b)), a, asg_isnan(a));
}

fn asg_min(a: f32, b: f32) -> f32 {
    return select(select(min(a, b), b, asg_isnan(b)), a, asg_isnan(a));
}

// Ordered comparisons are false and != is true when either operand is NaN.
fn asg_unordered(a: f32, b: f32) -> bool {
    return asg_isnan(a) || asg_isnan(b);
}

fn asg_eq(a: f32, b: f32) -> bool {
    return !asg_unordered(a, b) && a == b;
}

fn asg_ne(a: f32, b: f32) -> bool {
    return asg_unordered(a, b) || a != b;
}

fn asg_lt(a: f32, b: f32) -> bool {
    return !asg_unordered(a, b) && a < b;
}

fn asg_le(a: f32, b: f32) -> bool {
    return !asg_unordered(a, b) && a <= b;
}

fn asg_gt(a: f32, b: f32) -> bool {
    return !asg_unordered(a, b) && a > b;
}

fn asg_ge(a: f32, b: f32) -> bool {
    return !asg_unordered(a, b) && a >= b;
}

// bool(x) as numpy: true for NaN and infinities, false for +-0
fn asg_truthy(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) != 0u;
}

// float32 -> int32 as numpy on x86-64: NaN, +-inf and values outside the int32 range
// give -2**31 (WGSL's conversion saturates instead)
fn asg_f2i(x: f32) -> i32 {
    let outside = (bitcast<u32>(x) & 0x7fffffffu) >= 0x4f000000u;  // |x| >= 2**31
    return select(i32(x), bitcast<i32>(0x80000000u), outside);
}

fn asg_sign(x: f32) -> f32 {
    return asg_keepnan(x, sign(x));
}

fn asg_exp(x: f32) -> f32 {
    // float32 exp overflows above 88.72283 (numpy: inf) and is 0 below -103.98
    let r = exp(clamp(x, -103.0, 88.72283));
    return asg_keepnan(x, select(r, asg_inf(), x > 88.72283));
}

fn asg_log(x: f32) -> f32 {
    // numpy: log(+-0) = -inf, log(x < 0) = nan, log(inf) = inf
    let b = bitcast<u32>(x);
    var r = select(log(x), x, b == 0x7f800000u);
    r = select(r, asg_ninf(), (b & 0x7fffffffu) == 0u);
    return select(r, asg_nan(), b > 0x80000000u || asg_isnan(x));
}

fn asg_sqrt(x: f32) -> f32 {
    // numpy: sqrt(-0) = -0, sqrt(x < 0) = nan, sqrt(inf) = inf
    let b = bitcast<u32>(x);
    let r = select(sqrt(x), x, b == 0x7f800000u || b == 0x80000000u);
    return select(r, asg_nan(), b > 0x80000000u || asg_isnan(x));
}

fn asg_sin(x: f32) -> f32 {
    return select(sin(x), asg_nan(), !asg_isfinite(x));
}

fn asg_cos(x: f32) -> f32 {
    return select(cos(x), asg_nan(), !asg_isfinite(x));
}

fn asg_tanh(x: f32) -> f32 {
    let c = clamp(x, -15.0, 15.0);
    let e = exp(2.0 * c);
    return asg_keepnan(x, (e - 1.0) / (e + 1.0));
}

fn asg_log1p(x: f32) -> f32 {
    // Below 1e-3 the series x - x^2/2 + x^3/3 - x^4/4 (error < x^5/5): a device's log
    // near 1 may be off by an ulp of 1, which is large next to log1p(x). Above it,
    // log1p(x) = x * log(u) / (u - 1) with u = 1 + x. numpy: log1p(-1) = -inf,
    // log1p(x < -1) = nan, log1p(inf) = inf.
    if (asg_isnan(x) || bitcast<u32>(x) == 0x7f800000u) {
        return x;
    }
    if (abs(x) < 1e-3) {
        return x * (1.0 - x * (0.5 - x * (0.33333334 - x * 0.25)));
    }
    let u = 1.0 + x;
    return select(x * asg_log(u) / (u - 1.0), x, u == 1.0);
}

fn asg_expm1(x: f32) -> f32 {
    let u = asg_exp(x);
    if (u == 1.0 || !asg_isfinite(u)) {
        return select(x, u, u > 1.0);  // x itself when tiny or NaN, inf on overflow
    }
    let um1 = u - 1.0;
    if (um1 == -1.0) {
        return -1.0;
    }
    return um1 * x / log(u);
}

fn asg_erf(x: f32) -> f32 {
    // Abramowitz & Stegun 7.1.26 is only 1e-7 absolute; use the W. J. Cody-style
    // rational approximation through erfc for |x| > 0.5 and a series below.
    let ax = abs(x);
    if (asg_isnan(x)) {
        return x;
    }
    if (ax < 0.5) {
        let t = x * x;
        // Taylor series to x^11 (error < 1e-9 for |x| < 0.5)
        let p = 1.0 + t * (-1.0 / 3.0 + t * (1.0 / 10.0 + t * (-1.0 / 42.0
            + t * (1.0 / 216.0 + t * (-1.0 / 1320.0)))));
        return 1.1283791670955126 * x * p;
    }
    // Numerical Recipes erfcc (fractional error < 1.2e-7)
    let z = ax;
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196
        + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398
        + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
    return sign(x) * (1.0 - r);
}

// 1 + erf(x) given e = exp(-x * x), computed by the caller for another use (a GELU's
// gradient: its density exp(-t * t / 2)): erfc(|x|) = u * e * Q(u), u = 1 / (1 + |x| / 2),
// Q a degree-9 polynomial least-squares fit of erfc(z) exp(z * z) / u over z in [0, 10]
// (relative error 2e-8 in float64, 2e-7 evaluated in float32; erfc's relative error, so
// the tail x << 0 keeps its digits). No branch and no exp of its own, where asg_erf
// runs a series or an exp by the sign of |x| - 0.5.
fn asg_one_plus_erf(x: f32, e: f32) -> f32 {
    let u = 1.0 / (1.0 + 0.5 * abs(x));
    let q = 0.2820644916550558 + u * (0.2828571616214968 + u * (0.23864400172458128
        + u * (0.2255444995957763 + u * (-0.09832103365625894 + u * (0.4212716450706127
        + u * (-0.6700075298967519 + u * (0.42890776304978345 + u * (-0.12324170112256393
        + u * 0.012280682131552109))))))));
    let r = u * e * q;
    return asg_keepnan(x, select(2.0 - r, r, x < 0.0));
}

// 1 + erf(x) with its own exp (a GELU's forward): still no branch
fn asg_one_plus_erf_exp(x: f32) -> f32 {
    return asg_one_plus_erf(x, asg_exp(-(x * x)));
}

// floor/ceil/trunc/round of NaN and +-inf are themselves (WGSL leaves them undefined)
fn asg_floor(x: f32) -> f32 {
    return select(floor(x), x, !asg_isfinite(x));
}

fn asg_ceil(x: f32) -> f32 {
    return select(ceil(x), x, !asg_isfinite(x));
}

fn asg_trunc(x: f32) -> f32 {
    return select(trunc(x), x, !asg_isfinite(x));
}

// numpy.rint: halves to even, as WGSL's round
fn asg_rint(x: f32) -> f32 {
    return select(round(x), x, !asg_isfinite(x));
}

fn asg_rsqrt(x: f32) -> f32 {
    return 1.0 / asg_sqrt(x);
}

fn asg_isinf(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

fn asg_pow(x: f32, y: f32) -> f32 {
    // numpy (C99) pow; WGSL's pow is exp2(y * log2(x)), undefined for x <= 0.
    let ax = abs(x);
    let ay = abs(y);
    let x_neg = bitcast<u32>(x) >= 0x80000000u;  // -0 included
    let y_int = round(y) == y || asg_isinf(y);
    // an odd integer y (every float32 of magnitude >= 2**24 is even)
    let y_odd = !asg_isinf(y) && ay < 16777216.0 && y_int && (i32(y) & 1) == 1;
    var r = pow(ax, y);
    // x = +-0 or +-inf, and y = +-inf, by their limits
    r = select(r, select(0.0, asg_inf(), y < 0.0), ax == 0.0);
    r = select(r, select(asg_inf(), 0.0, y < 0.0), asg_isinf(x));
    let big = ax > 1.0;
    let y_limit = select(select(asg_inf(), 0.0, big), select(0.0, asg_inf(), big), y > 0.0);
    r = select(r, y_limit, asg_isinf(y) && ax != 1.0);
    // a negative base: negated for an odd integer y, NaN for a non-integer y
    r = select(r, -r, x_neg && y_odd);
    r = select(r, asg_nan(), x_neg && ax != 0.0 && !asg_isinf(x) && !y_int);
    r = select(r, asg_nan(), asg_isnan(x) || asg_isnan(y));
    // pow(x, +-0) = 1 for every x, pow(1, y) = 1 for every y (NaN included), and
    // pow(-1, +-inf) = 1
    let one = (!asg_isnan(y) && y == 0.0) || (!asg_isnan(x) && x == 1.0)
        || (!asg_isnan(x) && ax == 1.0 && asg_isinf(y));
    return select(r, 1.0, one);
}

// 64-bit integer addition on (lo, hi) pairs: integer sums accumulate exactly
fn asg_add64(a: vec2<i32>, b: vec2<i32>) -> vec2<i32> {
    let lo = bitcast<u32>(a.x) + bitcast<u32>(b.x);
    let carry = select(0i, 1i, lo < bitcast<u32>(a.x));
    return vec2<i32>(bitcast<i32>(lo), a.y + b.y + carry);
}
