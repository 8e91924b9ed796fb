// col2im, the adjoint of im2col: dx[n, c, y, x] = sum over kernel offsets (i, j) and
// output positions (oy, ox) that read (y, x) of cols[n, c, i, j, oy, ox]. One thread
// per input element gathers its kh*kw contributions (no atomics, deterministic);
// positions past the last window (stride remainders, output_padding) get zero.

struct Params {
    total: u32, C: u32, H: u32, W: u32,
    kh: u32, kw: u32, OH: u32, OW: u32,
    sh: i32, sw: i32, ph: i32, pw: i32,
    dh: i32, dw: i32, _pad0: u32, _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> cols: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;

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
    let xx = i32(e % params.W);
    var r = e / params.W;
    let y = i32(r % params.H);
    let nc = r / params.H;
    var acc = 0.0;
    for (var i = 0; i < i32(params.kh); i++) {
        let ty = y + params.ph - i * params.dh;
        if (ty < 0 || ty % params.sh != 0) {
            continue;
        }
        let oy = ty / params.sh;
        if (oy >= i32(params.OH)) {
            continue;
        }
        for (var j = 0; j < i32(params.kw); j++) {
            let tx = xx + params.pw - j * params.dw;
            if (tx < 0 || tx % params.sw != 0) {
                continue;
            }
            let ox = tx / params.sw;
            if (ox >= i32(params.OW)) {
                continue;
            }
            let k = (nc * params.kh + u32(i)) * params.kw + u32(j);
            acc += cols[(k * params.OH + u32(oy)) * params.OW + u32(ox)];
        }
    }
    dx[e] = acc;
}
