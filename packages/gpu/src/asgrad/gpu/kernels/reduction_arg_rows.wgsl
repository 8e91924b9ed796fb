// Index of the maximum (or minimum) along one axis of an (outer, R, inner) input, one
// workgroup per output; ties resolve to the first index like numpy.argmax.
// BETTER(a, b) is true when value a beats b strictly (a > b for argmax). For floats,
// NAN_FIRST puts a NaN ahead of every number, as numpy returns the first NaN's index
// (from the bits: WGSL leaves comparisons with NaN undefined).

struct Meta { outer: u32, R: u32, inner: u32, _pad: u32, }

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<${T_IN}>;
@group(0) @binding(2) var<storage, read_write> dst: array<i32>;

var<workgroup> best_val: array<${T_IN}, 256>;
var<workgroup> best_idx: array<u32, 256>;

fn better(a: ${T_IN}, ia: u32, b: ${T_IN}, ib: u32) -> bool {
${NAN_FIRST}
    return ${BETTER} || (a == b && ia < ib);
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    let rows = params.outer * params.inner;
    let o = row / params.inner;
    let j = row % params.inner;
    let base = o * params.R * params.inner + j;
    var v = src[base];
    var vi = 0u;
    if (row < rows) {
        for (var r = li; r < params.R; r += 256u) {
            let x = src[base + r * params.inner];
            if (r == li || better(x, r, v, vi)) {
                v = x;
                vi = r;
            }
        }
    }
    if (li >= params.R) {
        vi = 0xffffffffu;
    }
    best_val[li] = v;
    best_idx[li] = vi;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (li < s && best_idx[li + s] != 0xffffffffu) {
            let ov = best_val[li + s];
            let oi = best_idx[li + s];
            if (best_idx[li] == 0xffffffffu || better(ov, oi, best_val[li], best_idx[li])) {
                best_val[li] = ov;
                best_idx[li] = oi;
            }
        }
        workgroupBarrier();
    }
    if (li == 0u && row < rows) {
        dst[row] = i32(best_idx[0]);
    }
}
