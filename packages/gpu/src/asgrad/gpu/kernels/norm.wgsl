// Layer norm and batch norm, forward and input gradient, one workgroup per normalised
// group ("row": a layer-norm row, or a batch-norm channel) with workgroup-shared sums.
// Element k (0 <= k < R) of row r lives at
//     (k / S) * outer_stride + r * row_stride + k % S
// layer norm: S = R, row_stride = R; batch norm over (N, C, L): R = N*L, S = L,
// outer_stride = C*L, row_stride = L.
//
// forward:   y = x_hat * w + b               x_hat = (x - mean) * rstd
// backward:  dx = rstd * (gw - mean(gw) - x_hat * mean(gw * x_hat)),   gw = g * w
// with the population variance and rstd = 1 / sqrt(var + eps). The weight is indexed
// by k (layer norm) or by the row (batch norm, PER_ROW). Mean and variance take two
// passes over the row (safer than E[x^2] - E[x]^2).

const BACKWARD: bool = ${BACKWARD};
const AFFINE: bool = ${AFFINE};
const PER_ROW: bool = ${PER_ROW};

struct Meta {
    rows: u32, R: u32, S: u32, outer_stride: u32,
    row_stride: u32, _pad0: u32, _pad1: u32, _pad2: u32,
    eps: f32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read> weight: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> dst: array<f32>;

var<workgroup> partial: array<f32, 256>;
var<workgroup> partial2: array<f32, 256>;

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

fn block_sum2(li: u32, v: vec2<f32>) -> vec2<f32> {
    partial[li] = v.x;
    partial2[li] = v.y;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (li < s) {
            partial[li] += partial[li + s];
            partial2[li] += partial2[li + s];
        }
        workgroupBarrier();
    }
    let total = vec2<f32>(partial[0], partial2[0]);
    workgroupBarrier();
    return total;
}

fn addr(row: u32, k: u32) -> u32 {
    return (k / params.S) * params.outer_stride + row * params.row_stride + k % params.S;
}

fn w_at(row: u32, k: u32) -> f32 {
    if (!AFFINE) {
        return 1.0;
    }
    if (PER_ROW) {
        return weight[row];
    }
    return weight[k];
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= params.rows) {
        return;  // uniform across the workgroup
    }
    let R = params.R;
    let inv_r = 1.0 / f32(R);
    var s = 0.0;
    for (var k = li; k < R; k += 256u) {
        s += src[addr(row, k)];
    }
    let mean = block_sum(li, s) * inv_r;
    var q = 0.0;
    for (var k = li; k < R; k += 256u) {
        let d = src[addr(row, k)] - mean;
        q += d * d;
    }
    let variance = block_sum(li, q) * inv_r;
    let rstd = 1.0 / sqrt(variance + params.eps);
    if (!BACKWARD) {
        for (var k = li; k < R; k += 256u) {
            let at = addr(row, k);
            var y = (src[at] - mean) * rstd;
            if (AFFINE) {
                var b = bias[k];
                if (PER_ROW) {
                    b = bias[row];
                }
                y = y * w_at(row, k) + b;
            }
            dst[at] = y;
        }
        return;
    }
    var sums = vec2<f32>(0.0);
    for (var k = li; k < R; k += 256u) {
        let at = addr(row, k);
        let gw = grad[at] * w_at(row, k);
        sums += vec2<f32>(gw, gw * (src[at] - mean) * rstd);
    }
    let means = block_sum2(li, sums) * inv_r;
    for (var k = li; k < R; k += 256u) {
        let at = addr(row, k);
        let gw = grad[at] * w_at(row, k);
        let x_hat = (src[at] - mean) * rstd;
        dst[at] = rstd * (gw - means.x - x_hat * means.y);
    }
}
