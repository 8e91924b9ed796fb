// Layer normalisation over the last axis, one workgroup per row:
// y = (x - mean) / sqrt(var + eps) * gamma + beta (population variance, like PyTorch).
// Mean and variance by two passes over the row (numerically safer than E[x^2]-E[x]^2).
// AFFINE = false binds dummy gamma/beta and skips them.

const AFFINE: bool = ${AFFINE};

struct Meta { rows: u32, R: u32, _pad0: u32, _pad1: u32, eps: f32, }

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> gamma: array<f32>;
@group(0) @binding(3) var<storage, read> beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> dst: array<f32>;

var<workgroup> partial: array<f32, 256>;

fn block_sum(li: u32, v: f32) -> f32 {
    partial[li] = v;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (li < s) {
            partial[li] += partial[li + s];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    let valid = row < params.rows;
    let base = row * params.R;
    var s = 0.0;
    if (valid) {
        for (var r = li; r < params.R; r += 256u) {
            s += src[base + r];
        }
    }
    let mean = block_sum(li, s) / f32(params.R);
    var q = 0.0;
    if (valid) {
        for (var r = li; r < params.R; r += 256u) {
            let d = src[base + r] - mean;
            q += d * d;
        }
    }
    let variance = block_sum(li, q) / f32(params.R);
    if (!valid) {
        return;
    }
    let inv_std = inverseSqrt(variance + params.eps);
    for (var r = li; r < params.R; r += 256u) {
        var y = (src[base + r] - mean) * inv_std;
        if (AFFINE) {
            y = y * gamma[r] + beta[r];
        }
        dst[base + r] = y;
    }
}
