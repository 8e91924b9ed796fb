// 2-D convolution (NCHW, weights OIHW) as an implicit GEMM: the im2col matrix is never
// stored; each 64x16 operand tile is gathered from the input straight into workgroup
// memory. One kernel, three GEMMs (MODE), each batched over `nb` independent problems:
//
//   MODE 0  conv2d                  y[n, g*og+m, s]  = sum_k w[g*og+m, k] * cols(x)[k, s]
//           z = n*G+g               M = og, N = OH*OW, K = cg*kh*kw
//   MODE 1  conv2d_backward_input   dx[n, g*cg+m, p] = sum_k w^T[m, k] * taps(gy)[k, p]
//           z = n*G+g               M = cg, N = H*W,   K = og*kh*kw   (also conv_transpose2d)
//   MODE 2  conv2d_backward_weight  dw[g*og+m, q]    = sum_k gy[m, k] * cols(x)^T[k, q]
//           z = g                   M = og, N = cg*kh*kw, K = Nb*OH*OW
//
// x is (Nb, C, H, W), w is (O, cg, kh, kw), gy is (Nb, O, OH, OW); cg = C/G, og = O/G.
// A 64x64 output tile per workgroup of 16x16 threads, each thread a 4x4 block in four
// named vec4 accumulators (no dynamically indexed private arrays). The tile id is
// folded over a 2-D grid: t = wid.x + wid.y * nwg.x, then (n-tile, m-tile, z, split).
// Split-K (weight gradients, whose K = Nb*OH*OW is long and whose M x N is small): split
// s sums k in [s * kchunk, (s + 1) * kchunk) into its own slice of `out`, at
// s * split_stride; the host sums the slices.

const MODE: u32 = ${MODE}u;
const HAS_BIAS: bool = ${HAS_BIAS};
const TM: u32 = 64u;
const TN: u32 = 64u;
const TK: u32 = 16u;

struct Meta {
    nb: u32, G: u32, M: u32, N: u32,
    K: u32, mtiles: u32, ntiles: u32, total: u32,
    Nb: u32, C: u32, H: u32, W: u32,
    O: u32, OH: u32, OW: u32, cg: u32,
    og: u32, kh: u32, kw: u32, kchunk: u32,
    sh: i32, sw: i32, ph: i32, pw: i32,
    dh: i32, dw: i32, _pad1: i32, _pad2: i32,
    split_stride: u32, _pad3: u32, _pad4: u32, _pad5: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> A: array<f32>;   // MODE 0, 1: w; MODE 2: gy
@group(0) @binding(2) var<storage, read> B: array<f32>;   // MODE 0, 2: x; MODE 1: gy
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

var<workgroup> As: array<f32, 1024>;  // [k][m], TK x TM
var<workgroup> Bs: array<f32, 1024>;  // [k][n], TK x TN

// x[n, c, oy*sh + i*dh - ph, ox*sw + j*dw - pw], zero in the padding.
fn load_x(n: u32, c: u32, oy: u32, ox: u32, i: u32, j: u32) -> f32 {
    let y = i32(oy) * params.sh + i32(i) * params.dh - params.ph;
    let x = i32(ox) * params.sw + i32(j) * params.dw - params.pw;
    if (y < 0 || x < 0 || y >= i32(params.H) || x >= i32(params.W)) {
        return 0.0;
    }
    return B[((n * params.C + c) * params.H + u32(y)) * params.W + u32(x)];
}

fn load_a(z: u32, m: u32, k: u32) -> f32 {
    if (m >= params.M || k >= params.K) {
        return 0.0;
    }
    if (MODE == 0u) {
        let g = z % params.G;
        return A[(g * params.og + m) * params.K + k];
    }
    if (MODE == 1u) {
        let g = z % params.G;
        let taps = params.kh * params.kw;
        let o = k / taps;
        let r = k % taps;
        return A[((g * params.og + o) * params.cg + m) * taps + r];
    }
    // MODE 2: gy[n, g*og+m, s] with k = n * OH*OW + s
    let g = z;
    let hw = params.OH * params.OW;
    let n = k / hw;
    let s = k % hw;
    return A[(n * params.O + g * params.og + m) * hw + s];
}

fn load_b(z: u32, k: u32, col: u32) -> f32 {
    if (k >= params.K || col >= params.N) {
        return 0.0;
    }
    let taps = params.kh * params.kw;
    if (MODE == 0u) {
        let n = z / params.G;
        let g = z % params.G;
        let c = k / taps;
        let r = k % taps;
        return load_x(n, g * params.cg + c, col / params.OW, col % params.OW,
                      r / params.kw, r % params.kw);
    }
    if (MODE == 1u) {
        // the taps of gy that output pixel p = (y, x) receives through offset (i, j)
        let n = z / params.G;
        let g = z % params.G;
        let o = k / taps;
        let r = k % taps;
        let i = r / params.kw;
        let j = r % params.kw;
        let ty = i32(col / params.W) + params.ph - i32(i) * params.dh;
        let tx = i32(col % params.W) + params.pw - i32(j) * params.dw;
        if (ty < 0 || tx < 0 || ty % params.sh != 0 || tx % params.sw != 0) {
            return 0.0;
        }
        let oy = u32(ty / params.sh);
        let ox = u32(tx / params.sw);
        if (oy >= params.OH || ox >= params.OW) {
            return 0.0;
        }
        return B[((n * params.O + g * params.og + o) * params.OH + oy) * params.OW + ox];
    }
    // MODE 2: k = n * OH*OW + s over the batch and output pixels, col = (c, i, j)
    let g = z;
    let hw = params.OH * params.OW;
    let n = k / hw;
    let s = k % hw;
    let c = col / taps;
    let r = col % taps;
    return load_x(n, g * params.cg + c, s / params.OW, s % params.OW,
                  r / params.kw, r % params.kw);
}

fn out_index(z: u32, m: u32, col: u32) -> u32 {
    if (MODE == 0u) {
        let n = z / params.G;
        let g = z % params.G;
        return (n * params.O + g * params.og + m) * params.N + col;
    }
    if (MODE == 1u) {
        let n = z / params.G;
        let g = z % params.G;
        return (n * params.C + g * params.cg + m) * params.N + col;
    }
    return (z * params.og + m) * params.N + col;
}

fn bias_index(z: u32, m: u32) -> u32 {
    let g = z % params.G;
    if (MODE == 1u) {
        return g * params.cg + m;
    }
    return g * params.og + m;
}

fn store(z: u32, split: u32, m: u32, n0: u32, v: vec4<f32>) {
    if (m >= params.M) {
        return;
    }
    var b = 0.0;
    if (HAS_BIAS) {
        b = bias[bias_index(z, m)];
    }
    let base = out_index(z, m, n0) + split * params.split_stride;
    for (var q = 0u; q < 4u; q++) {
        if (n0 + q < params.N) {
            out[base + q] = v[q] + b;
        }
    }
}

@compute @workgroup_size(16, 16, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= params.total) {
        return;  // uniform across the workgroup
    }
    let nt = t % params.ntiles;
    let rest = t / params.ntiles;
    let mt = rest % params.mtiles;
    let zs = rest / params.mtiles;
    let z = zs % params.nb;
    let split = zs / params.nb;
    let k_begin = split * params.kchunk;
    let k_end = min(k_begin + params.kchunk, params.K);
    let row0 = mt * TM;
    let col0 = nt * TN;
    let tm = lid.y * 4u;
    let tn = lid.x * 4u;

    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);

    for (var k0 = k_begin; k0 < k_end; k0 += TK) {
        for (var r = 0u; r < 4u; r++) {
            let e = li + r * 256u;
            let k = k0 + e / 64u;
            let q = e % 64u;
            var a = 0.0;
            var b = 0.0;
            if (k < k_end) {
                a = load_a(z, row0 + q, k);
                b = load_b(z, k, col0 + q);
            }
            As[e] = a;
            Bs[e] = b;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk++) {
            let a = vec4<f32>(As[kk * TM + tm], As[kk * TM + tm + 1u],
                              As[kk * TM + tm + 2u], As[kk * TM + tm + 3u]);
            let b = vec4<f32>(Bs[kk * TN + tn], Bs[kk * TN + tn + 1u],
                              Bs[kk * TN + tn + 2u], Bs[kk * TN + tn + 3u]);
            acc0 += a.x * b;
            acc1 += a.y * b;
            acc2 += a.z * b;
            acc3 += a.w * b;
        }
        workgroupBarrier();
    }
    let m = row0 + tm;
    let n0 = col0 + tn;
    store(z, split, m, n0, acc0);
    store(z, split, m + 1u, n0, acc1);
    store(z, split, m + 2u, n0, acc2);
    store(z, split, m + 3u, n0, acc3);
}
