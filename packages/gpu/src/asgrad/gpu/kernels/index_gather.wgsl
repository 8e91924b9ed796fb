// out[o, p, j] = src[o, idx[p], j]: numpy.take along one axis (embedding lookup).
// src is (outer, axis_len, inner), idx has n_idx entries (negative ones count from the
// end, like numpy), out is (outer, n_idx, inner). One thread per output element.

struct Params { n: u32, axis_len: u32, n_idx: u32, inner: u32, }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<${T}>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<${T}>;

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
    var k = idx[p];
    if (k < 0) {
        k += i32(params.axis_len);
    }
    out[i] = src[(o * params.axis_len + u32(k)) * params.inner + j];
}
