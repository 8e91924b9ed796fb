// The gradient of gather: out = zeros (outer, axis_len, inner); out[o, idx[p], j] += g[o, p, j].
// One thread per output element sums the matching entries of g in index order, so the
// result is deterministic (no float atomics) and equal to numpy's sequential np.add.at.
// Cost is out_size * n_idx; fine for embedding tables of modest vocabulary. An index
// outside [0, axis_len) matches no row, so it adds nothing; thread i checks the
// indices i, i + n, i + 2n, ... and records a bad one in the check slot `slot`.

struct Params { n: u32, axis_len: u32, n_idx: u32, inner: u32, slot: u32, _p0: u32, _p1: u32, _p2: u32, }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
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
    for (var q = i; q < params.n_idx; q += params.n) {
        if (u32(idx[q]) >= params.axis_len) {
            asg_flag(params.slot, idx[q]);
        }
    }
    let j = i % params.inner;
    let r = i / params.inner;
    let k = i32(r % params.axis_len);
    let o = r / params.axis_len;
    var acc = 0.0;
    let base = o * params.n_idx * params.inner + j;
    for (var p = 0u; p < params.n_idx; p++) {
        if (idx[p] == k) {
            acc += g[base + p * params.inner];
        }
    }
    out[i] = acc;
}
