// out[o, m, j] = src[o, idx[o, m, j], j]: numpy.take_along_axis / torch.gather.
// src is (outer, axis_len, inner); idx and out are (outer, n_idx, inner).
// One thread per output element. An index outside [0, axis_len) (negative ones
// included) reads nothing: its element is 0, and it is recorded in the check slot.

struct Params { n: u32, axis_len: u32, n_idx: u32, inner: u32, slot: u32, _p0: u32, _p1: u32, _p2: u32, }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<${T}>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<${T}>;
${CHECKS}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let i = (wid.x + wid.y * nwg.x) * 256u + li;
    if (i >= params.n) {
        return;
    }
    let j = i % params.inner;
    let o = i / (params.inner * params.n_idx);
    let k = idx[i];
    if (u32(k) >= params.axis_len) {  // negative ones too, as large unsigned
        asg_flag(params.slot, k);
        out[i] = ${ZERO};
        return;
    }
    out[i] = src[(o * params.axis_len + u32(k)) * params.inner + j];
}
