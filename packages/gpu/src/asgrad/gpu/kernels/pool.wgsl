// 2-D pooling over NCHW planes, one thread per element written (no atomics):
//
//   MODE 0  max select    out[p, oy, ox] = src2[p, argmax of window (oy, ox) of src]
//                         (max_pool2d with src2 = src; max_pool2d_select with src2 = h)
//   MODE 1  max backward  out[p, y, x] = sum of g over the windows whose argmax is (y, x)
//   MODE 2  avg           out[p, oy, ox] = window sum of src / divisor
//   MODE 3  avg backward  out[p, y, x] = sum of g / divisor over the windows holding (y, x)
//   MODE 4  adaptive avg  out[p, oy, ox] = mean of src over PyTorch's adaptive window
//   MODE 5  adaptive bwd  out[p, y, x] = sum of g / count over the windows holding (y, x)
//   MODE 6  max           out[p, oy, ox] = max of window (oy, ox) of src; a NaN wins
//
// The argmax of a window is its first maximum in row-major order, padding counting as
// -inf (it wins only when every real pixel is -inf or NaN, and then selects 0), as the
// CPU kernels: a later pixel wins when it is strictly greater, so a NaN wins only as
// the first pixel (comparisons with NaN are false; from the bits, since WGSL leaves
// them undefined). Backward modes gather from the windows that hold a pixel, so every
// output is written by exactly one thread.

const MODE: u32 = ${MODE}u;

struct Meta {
    n: u32, H: u32, W: u32, OH: u32,
    OW: u32, kh: u32, kw: u32, include_pad: u32,
    sh: i32, sw: i32, ph: i32, pw: i32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<f32>;    // x
@group(0) @binding(2) var<storage, read> src2: array<f32>;   // h (MODE 0) or g
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

const NO_PIXEL: u32 = 0xffffffffu;

// The offset i * kw + j of the argmax of window (oy, ox) of plane p, and its pixel
// (NO_PIXEL when the padding wins).
fn argmax(p: u32, oy: u32, ox: u32) -> vec2<u32> {
    let y0 = i32(oy) * params.sh - params.ph;
    let x0 = i32(ox) * params.sw - params.pw;
    var best = bitcast<f32>(0xff800000u);  // -inf
    var index = 0u;
    var pixel = NO_PIXEL;
    for (var i = 0u; i < params.kh; i++) {
        let y = y0 + i32(i);
        for (var j = 0u; j < params.kw; j++) {
            let x = x0 + i32(j);
            let at = (p * params.H + u32(y)) * params.W + u32(x);
            var v = bitcast<f32>(0xff800000u);
            let real = y >= 0 && y < i32(params.H) && x >= 0 && x < i32(params.W);
            if (real) {
                v = src[at];
            }
            let first = i == 0u && j == 0u;
            if (first || (!is_nan(v) && !is_nan(best) && v > best)) {
                best = v;
                index = i * params.kw + j;
                pixel = select(NO_PIXEL, at, real);
            }
        }
    }
    return vec2<u32>(index, pixel);
}

// The maximum of window (oy, ox) of plane p (padding is -inf; a NaN wins, as numpy's).
fn window_max(p: u32, oy: u32, ox: u32) -> f32 {
    let y0 = i32(oy) * params.sh - params.ph;
    let x0 = i32(ox) * params.sw - params.pw;
    var m = bitcast<f32>(0xff800000u);
    for (var y = max(y0, 0); y < min(y0 + i32(params.kh), i32(params.H)); y++) {
        for (var x = max(x0, 0); x < min(x0 + i32(params.kw), i32(params.W)); x++) {
            let v = src[(p * params.H + u32(y)) * params.W + u32(x)];
            m = select(select(max(m, v), v, is_nan(v)), m, is_nan(m));
        }
    }
    return m;
}

// What the sum of window (oy, ox) is divided by: kh*kw, or its count of real pixels.
fn divisor(oy: u32, ox: u32) -> f32 {
    if (params.include_pad != 0u) {
        return f32(params.kh * params.kw);
    }
    let y0 = i32(oy) * params.sh - params.ph;
    let x0 = i32(ox) * params.sw - params.pw;
    let ch = min(y0 + i32(params.kh), i32(params.H)) - max(y0, 0);
    let cw = min(x0 + i32(params.kw), i32(params.W)) - max(x0, 0);
    return f32(ch * cw);
}

fn adaptive_start(i: u32, size: u32, out_size: u32) -> u32 {
    return (i * size) / out_size;
}

fn adaptive_stop(i: u32, size: u32, out_size: u32) -> u32 {
    return ((i + 1u) * size + out_size - 1u) / out_size;
}

// The range [lo, hi) of window indices along one axis whose window holds `pos`.
fn taps(pos: u32, k: u32, s: i32, pad: i32, out_size: u32) -> vec2<u32> {
    // window o holds pos when o*s - pad <= pos < o*s - pad + k
    let top = i32(pos) + pad;              // o*s <= top
    let bottom = top - i32(k) + 1;         // o*s >= bottom
    var lo = 0;
    if (bottom > 0) {
        lo = (bottom + s - 1) / s;
    }
    let hi = min(top / s + 1, i32(out_size));
    return vec2<u32>(u32(lo), u32(max(hi, lo)));
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let e = (wid.x + wid.y * nwg.x) * 256u + li;
    if (e >= params.n) {
        return;
    }
    let H = params.H;
    let W = params.W;
    let OH = params.OH;
    let OW = params.OW;
    if (MODE == 0u || MODE == 2u || MODE == 4u || MODE == 6u) {
        // one thread per output (p, oy, ox)
        let ox = e % OW;
        let oy = (e / OW) % OH;
        let p = e / (OW * OH);
        if (MODE == 0u) {
            let pixel = argmax(p, oy, ox).y;
            var picked = 0.0;  // the padding selects 0
            if (pixel != NO_PIXEL) {
                picked = src2[pixel];
            }
            out[e] = picked;
            return;
        }
        if (MODE == 6u) {
            out[e] = window_max(p, oy, ox);
            return;
        }
        var y0 = i32(oy) * params.sh - params.ph;
        var x0 = i32(ox) * params.sw - params.pw;
        var y1 = y0 + i32(params.kh);
        var x1 = x0 + i32(params.kw);
        if (MODE == 4u) {
            y0 = i32(adaptive_start(oy, H, OH));
            y1 = i32(adaptive_stop(oy, H, OH));
            x0 = i32(adaptive_start(ox, W, OW));
            x1 = i32(adaptive_stop(ox, W, OW));
        }
        var total = 0.0;
        for (var y = max(y0, 0); y < min(y1, i32(H)); y++) {
            for (var x = max(x0, 0); x < min(x1, i32(W)); x++) {
                total += src[(p * H + u32(y)) * W + u32(x)];
            }
        }
        if (MODE == 2u) {
            out[e] = total / divisor(oy, ox);
        } else {
            out[e] = total / f32((y1 - y0) * (x1 - x0));
        }
        return;
    }
    // one thread per input pixel (p, y, x): gather from the windows that hold it
    let x = e % W;
    let y = (e / W) % H;
    let p = e / (W * H);
    var total = 0.0;
    if (MODE == 5u) {
        for (var oy = (y * OH) / H; oy < OH; oy++) {
            let ys = adaptive_start(oy, H, OH);
            if (ys > y) {
                break;
            }
            let hy = adaptive_stop(oy, H, OH) - ys;
            for (var ox = (x * OW) / W; ox < OW; ox++) {
                let xs = adaptive_start(ox, W, OW);
                if (xs > x) {
                    break;
                }
                if (y < adaptive_stop(oy, H, OH) && x < adaptive_stop(ox, W, OW)) {
                    let hx = adaptive_stop(ox, W, OW) - xs;
                    total += src2[(p * OH + oy) * OW + ox] / f32(hy * hx);
                }
            }
        }
        out[e] = total;
        return;
    }
    let ry = taps(y, params.kh, params.sh, params.ph, OH);
    let rx = taps(x, params.kw, params.sw, params.pw, OW);
    for (var oy = ry.x; oy < ry.y; oy++) {
        for (var ox = rx.x; ox < rx.y; ox++) {
            let gv = src2[(p * OH + oy) * OW + ox];
            if (MODE == 1u) {
                let i = u32(i32(y) + params.ph - i32(oy) * params.sh);
                let j = u32(i32(x) + params.pw - i32(ox) * params.sw);
                if (argmax(p, oy, ox).x == i * params.kw + j) {
                    total += gv;
                }
            } else {
                total += gv / divisor(oy, ox);
            }
        }
    }
    out[e] = total;
}
