// The gradient of gather: out = zeros (outer, axis_len, inner); out[o, idx[p], j] += g[o, p, j].
// One thread per output element sums the matching entries of g in index order, so the
// result is deterministic (no float atomics) and equal to numpy's sequential np.add.at.
// Cost is out_size * n_idx; fine for embedding tables of modest vocabulary.

struct Params { n: u32, axis_len: u32, n_idx: u32, inner: u32, }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

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
    let k = i32(r % params.axis_len);
    let o = r / params.axis_len;
    var acc = 0.0;
    let base = o * params.n_idx * params.inner + j;
    for (var p = 0u; p < params.n_idx; p++) {
        var kp = idx[p];
        if (kp < 0) {
            kp += i32(params.axis_len);
        }
        if (kp == k) {
            acc += g[base + p * params.inner];
        }
    }
    out[i] = acc;
}
