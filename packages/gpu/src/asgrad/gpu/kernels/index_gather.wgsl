// out[o, p, j] = src[o, idx[p], j]: numpy.take along one axis (embedding lookup).
// src is (outer, axis_len, inner), idx has n_idx entries, out is (outer, n_idx, inner).
// One thread per output element. An index outside [0, axis_len) (negative ones
// included: they do not wrap) reads nothing: its row is 0, and the thread of its
// first element records it in the check slot `slot` (checks.wgsl).

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
    let r = i / params.inner;
    let p = r % params.n_idx;
    let o = r / params.n_idx;
    let k = idx[p];
    if (u32(k) >= params.axis_len) {  // negative ones too, as large unsigned
        if (i < params.n_idx * params.inner && j == 0u) {
            asg_flag(params.slot, k);
        }
        out[i] = ${ZERO};
        return;
    }
    out[i] = src[(o * params.axis_len + u32(k)) * params.inner + j];
}
