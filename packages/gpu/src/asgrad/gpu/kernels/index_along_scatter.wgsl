// scatter_reduce / scatter_add_along: out (outer, axis_len, inner) starts from base
// (the value x, or 0 when has_base is 0) and combines src[o, m, j] at
// [o, idx[o, m, j], j] by ${COMBINE}; mean divides by the count (+1 with the value's
// own entry). A position no index names keeps base. One thread per output element
// walks the n_idx entries of its (o, j) column in order: deterministic, no atomics.
// An index outside [0, axis_len) matches no position; thread i checks the index
// entries i, i + n, i + 2n, ... and records a bad one in the check slot `slot`.

struct Params {
    n: u32, axis_len: u32, n_idx: u32, inner: u32,
    slot: u32, has_base: u32, include_self: u32, mean: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> base: array<f32>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read> src: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
${CHECKS}
${PRELUDE}

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
    let total = params.n_idx * params.inner * (params.n / (params.axis_len * params.inner));
    for (var q = i; q < total; q += params.n) {
        if (u32(idx[q]) >= params.axis_len) {
            asg_flag(params.slot, idx[q]);
        }
    }
    let j = i % params.inner;
    let r = i / params.inner;
    let k = i32(r % params.axis_len);
    let o = r / params.axis_len;
    var own = 0.0;
    if (params.has_base != 0u) {
        own = base[i];
    }
    var acc = own;
    var started = params.include_self != 0u;
    var count = 0u;
    let first = o * params.n_idx * params.inner + j;
    for (var p = 0u; p < params.n_idx; p++) {
        let at = first + p * params.inner;
        if (idx[at] == k) {
            let v = src[at];
            if (started) {
                acc = ${COMBINE};
            } else {
                acc = v;
                started = true;
            }
            count += 1u;
        }
    }
    if (count == 0u) {
        acc = own;
    } else if (params.mean != 0u) {
        acc = acc / f32(count + params.include_self);
    }
    out[i] = acc;
}
