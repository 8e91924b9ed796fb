// asgrad scalar function library, pasted in front of elementwise and row kernels.
// WGSL has no inf/NaN literals, and exp/tanh may overflow to NaN on some drivers, so
// inputs are clamped where the result is already saturated in float32.

const ASG_F32_MAX: f32 = 3.4028234663852886e38;

fn asg_exp(x: f32) -> f32 {
    return exp(clamp(x, -103.0, 88.7));
}

fn asg_log(x: f32) -> f32 {
    // log(0) = -inf in numpy; the most negative finite float stands in for it.
    return select(log(x), -ASG_F32_MAX, x <= 0.0);
}

fn asg_tanh(x: f32) -> f32 {
    let c = clamp(x, -15.0, 15.0);
    let e = exp(2.0 * c);
    return (e - 1.0) / (e + 1.0);
}

fn asg_sigmoid(x: f32) -> f32 {
    // two branches so neither exp overflows
    let e = exp(-abs(x));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= 0.0);
}

fn asg_softplus(x: f32) -> f32 {
    // log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))
    let e = exp(-abs(x));
    return max(x, 0.0) + asg_log1p(e);
}

fn asg_log1p(x: f32) -> f32 {
    // accurate for small x: log1p(x) = x * log(u) / (u - 1) with u = 1 + x
    let u = 1.0 + x;
    return select(x * log(u) / (u - 1.0), x, u == 1.0);
}

fn asg_expm1(x: f32) -> f32 {
    let u = asg_exp(x);
    if (u == 1.0) {
        return x;
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

fn asg_gelu_tanh(x: f32) -> f32 {
    let k = 0.7978845608028654;
    return 0.5 * x * (1.0 + asg_tanh(k * (x + 0.044715 * x * x * x)));
}

fn asg_gelu_erf(x: f32) -> f32 {
    return 0.5 * x * (1.0 + asg_erf(x * 0.7071067811865476));
}

fn asg_pow(x: f32, y: f32) -> f32 {
    // WGSL pow is undefined for x < 0; numpy gives a real result for integer y.
    let ay = abs(x);
    let r = pow(ay, y);
    let yi = round(y);
    if (x >= 0.0) {
        return select(r, 1.0, y == 0.0);
    }
    if (yi != y) {
        return ASG_F32_MAX;  // numpy: nan; no NaN literal in WGSL
    }
    let odd = (i32(yi) & 1) == 1;
    return select(r, -r, odd);
}

fn asg_fmod(x: f32, y: f32) -> f32 {
    // numpy.mod / Python %: the result takes the sign of the divisor
    let r = x - y * floor(x / y);
    return r;
}

fn asg_imod(x: i32, y: i32) -> i32 {
    let r = x % y;
    return select(r, r + y, r != 0 && ((r < 0) != (y < 0)));
}

fn asg_idiv(x: i32, y: i32) -> i32 {
    // floor division like numpy's //
    let q = x / y;
    return select(q, q - 1, (x % y != 0) && ((x < 0) != (y < 0)));
}
