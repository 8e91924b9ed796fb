// 2-D pooling over NCHW inputs, one thread per output element (forward ops) or per
// input element (backward ops, which gather from the windows that cover them; no
// atomics). ENTRY picks the op:
//   max_forward     out[n,c,oy,ox] = max of the window (padding never wins)
//   max_select      out = h at the window's first argmax of x
//   max_backward    dx = sum of g over the windows whose first argmax is here
//   avg_forward     out = window sum / divisor (kh*kw, or the count of real pixels)
//   avg_backward    dx = sum of g / divisor over the windows covering here
//   adaptive_forward / adaptive_backward: windows [floor(o*H/OH), ceil((o+1)*H/OH)).

struct Params {
    total: u32, H: u32, W: u32, OH: u32,
    OW: u32, kh: i32, kw: i32, sh: i32,
    sw: i32, ph: i32, pw: i32, include_pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;  // x (forward) or g
@group(0) @binding(2) var<storage, read> b: array<f32>;  // x (backward/select) or unused
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// First argmax (k = i * kw + j) of window (oy, ox) of plane `base` of x = b or a.
fn window_argmax(use_b: bool, base: u32, oy: i32, ox: i32) -> i32 {
    var best = 0.0;
    var best_k = -1;
    for (var i = 0; i < params.kh; i++) {
        let y = oy * params.sh - params.ph + i;
        for (var j = 0; j < params.kw; j++) {
            let x = ox * params.sw - params.pw + j;
            if (y < 0 || y >= i32(params.H) || x < 0 || x >= i32(params.W)) {
                continue;
            }
            let idx = base + u32(y) * params.W + u32(x);
            let v = select(a[idx], b[idx], use_b);
            if (best_k < 0 || v > best) {
                best = v;
                best_k = i * params.kw + j;
            }
        }
    }
    return best_k;
}

fn divisor(oy: i32, ox: i32) -> f32 {
    if (params.include_pad != 0u) {
        return f32(params.kh * params.kw);
    }
    let y0 = oy * params.sh - params.ph;
    let x0 = ox * params.sw - params.pw;
    let hy = min(y0 + params.kh, i32(params.H)) - max(y0, 0);
    let hx = min(x0 + params.kw, i32(params.W)) - max(x0, 0);
    return f32(hy * hx);
}

fn max_forward(e: u32) {
    let ox = i32(e % params.OW);
    let oy = i32((e / params.OW) % params.OH);
    let base = (e / (params.OW * params.OH)) * params.H * params.W;
    let k = window_argmax(false, base, oy, ox);
    let y = oy * params.sh - params.ph + k / params.kw;
    let x = ox * params.sw - params.pw + k % params.kw;
    out[e] = a[base + u32(y) * params.W + u32(x)];
}

fn max_select(e: u32) {
    // a = h, b = x
    let ox = i32(e % params.OW);
    let oy = i32((e / params.OW) % params.OH);
    let base = (e / (params.OW * params.OH)) * params.H * params.W;
    let k = window_argmax(true, base, oy, ox);
    let y = oy * params.sh - params.ph + k / params.kw;
    let x = ox * params.sw - params.pw + k % params.kw;
    out[e] = a[base + u32(y) * params.W + u32(x)];
}

fn avg_forward(e: u32) {
    let ox = i32(e % params.OW);
    let oy = i32((e / params.OW) % params.OH);
    let base = (e / (params.OW * params.OH)) * params.H * params.W;
    var acc = 0.0;
    for (var i = 0; i < params.kh; i++) {
        let y = oy * params.sh - params.ph + i;
        for (var j = 0; j < params.kw; j++) {
            let x = ox * params.sw - params.pw + j;
            if (y >= 0 && y < i32(params.H) && x >= 0 && x < i32(params.W)) {
                acc += a[base + u32(y) * params.W + u32(x)];
            }
        }
    }
    out[e] = acc / divisor(oy, ox);
}

// Backward ops: e indexes the input (n, c, y, x); a = g (N, C, OH, OW), b = x.
fn window_backward(e: u32, is_max: bool) {
    let x = i32(e % params.W);
    let y = i32((e / params.W) % params.H);
    let plane = e / (params.W * params.H);
    let gbase = plane * params.OH * params.OW;
    let xbase = plane * params.H * params.W;
    var acc = 0.0;
    for (var i = 0; i < params.kh; i++) {
        let ty = y + params.ph - i;
        if (ty < 0 || ty % params.sh != 0 || ty / params.sh >= i32(params.OH)) {
            continue;
        }
        let oy = ty / params.sh;
        for (var j = 0; j < params.kw; j++) {
            let tx = x + params.pw - j;
            if (tx < 0 || tx % params.sw != 0 || tx / params.sw >= i32(params.OW)) {
                continue;
            }
            let ox = tx / params.sw;
            let gv = a[gbase + u32(oy) * params.OW + u32(ox)];
            if (is_max) {
                if (window_argmax(true, xbase, oy, ox) == i * params.kw + j) {
                    acc += gv;
                }
            } else {
                acc += gv / divisor(oy, ox);
            }
        }
    }
    out[e] = acc;
}

fn max_backward(e: u32) {
    window_backward(e, true);
}

fn avg_backward(e: u32) {
    window_backward(e, false);
}

fn adaptive_start(o: u32, size: u32, n_out: u32) -> u32 {
    return (o * size) / n_out;
}

fn adaptive_stop(o: u32, size: u32, n_out: u32) -> u32 {
    return ((o + 1u) * size + n_out - 1u) / n_out;
}

fn adaptive_forward(e: u32) {
    let ox = e % params.OW;
    let oy = (e / params.OW) % params.OH;
    let base = (e / (params.OW * params.OH)) * params.H * params.W;
    let y0 = adaptive_start(oy, params.H, params.OH);
    let y1 = adaptive_stop(oy, params.H, params.OH);
    let x0 = adaptive_start(ox, params.W, params.OW);
    let x1 = adaptive_stop(ox, params.W, params.OW);
    var acc = 0.0;
    for (var y = y0; y < y1; y++) {
        for (var x = x0; x < x1; x++) {
            acc += a[base + y * params.W + x];
        }
    }
    out[e] = acc / f32((y1 - y0) * (x1 - x0));
}

fn adaptive_backward(e: u32) {
    let x = e % params.W;
    let y = (e / params.W) % params.H;
    let gbase = (e / (params.W * params.H)) * params.OH * params.OW;
    var acc = 0.0;
    for (var oy = 0u; oy < params.OH; oy++) {
        let y0 = adaptive_start(oy, params.H, params.OH);
        let y1 = adaptive_stop(oy, params.H, params.OH);
        if (y < y0 || y >= y1) {
            continue;
        }
        for (var ox = 0u; ox < params.OW; ox++) {
            let x0 = adaptive_start(ox, params.W, params.OW);
            let x1 = adaptive_stop(ox, params.W, params.OW);
            if (x < x0 || x >= x1) {
                continue;
            }
            acc += a[gbase + oy * params.OW + ox] / f32((y1 - y0) * (x1 - x0));
        }
    }
    out[e] = acc;
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let e = (wid.x + wid.y * nwg.x) * 256u + li;
    if (e >= params.total) {
        return;
    }
    ${ENTRY}(e);
}
