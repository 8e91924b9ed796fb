// im2col for 2-D convolution: cols[n, c, i, j, oy, ox] = x[n, c, oy*sh - ph + i*dh,
// ox*sw - pw + j*dw] (0 outside the input), so the convolution becomes one batched
// matmul with cols viewed as (N, G, C/G*kh*kw, OH*OW). One thread per cols element.

struct Params {
    total: u32, C: u32, H: u32, W: u32,
    kh: u32, kw: u32, OH: u32, OW: u32,
    sh: i32, sw: i32, ph: i32, pw: i32,
    dh: i32, dw: i32, _pad0: u32, _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> cols: array<f32>;

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
    let ox = e % params.OW;
    var r = e / params.OW;
    let oy = r % params.OH;
    r = r / params.OH;
    let j = r % params.kw;
    r = r / params.kw;
    let i = r % params.kh;
    let nc = r / params.kh;  // n * C + c
    let y = i32(oy) * params.sh - params.ph + i32(i) * params.dh;
    let xx = i32(ox) * params.sw - params.pw + i32(j) * params.dw;
    var v = 0.0;
    if (y >= 0 && y < i32(params.H) && xx >= 0 && xx < i32(params.W)) {
        v = x[(nc * params.H + u32(y)) * params.W + u32(xx)];
    }
    cols[e] = v;
}
