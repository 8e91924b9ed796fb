// Softmax (or log-softmax when LOG is true) along one axis, one workgroup per row of an
// (outer, R, inner) input: a max reduction, a sum of exp(x - max), then the write.
// Subtracting the row maximum keeps exp in range for any input magnitude. A NaN in a
// row makes the row maximum NaN (recognised from the bits: WGSL's max of NaN is
// undefined), so the whole row is NaN, as numpy's.

const LOG: bool = ${LOG};

struct Meta { outer: u32, R: u32, inner: u32, _pad: u32, }

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

var<workgroup> partial: array<f32, 256>;

fn nan_max(a: f32, b: f32) -> f32 {
    let a_nan = (bitcast<u32>(a) & 0x7fffffffu) > 0x7f800000u;
    let b_nan = (bitcast<u32>(b) & 0x7fffffffu) > 0x7f800000u;
    return select(select(max(a, b), b, b_nan), a, a_nan);
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    let valid = row < params.outer * params.inner;
    let o = row / params.inner;
    let j = row % params.inner;
    let base = o * params.R * params.inner + j;
    let step = params.inner;

    var m = bitcast<f32>(0xff800000u);  // -inf
    if (valid) {
        for (var r = li; r < params.R; r += 256u) {
            m = nan_max(m, src[base + r * step]);
        }
    }
    partial[li] = m;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (li < s) {
            partial[li] = nan_max(partial[li], partial[li + s]);
        }
        workgroupBarrier();
    }
    let row_max = partial[0];
    workgroupBarrier();

    var total = 0.0;
    if (valid) {
        for (var r = li; r < params.R; r += 256u) {
            total += exp(src[base + r * step] - row_max);
        }
    }
    partial[li] = total;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (li < s) {
            partial[li] += partial[li + s];
        }
        workgroupBarrier();
    }
    let row_sum = partial[0];
    if (!valid) {
        return;
    }
    let log_sum = log(row_sum);
    let inv_sum = 1.0 / row_sum;
    for (var r = li; r < params.R; r += 256u) {
        let x = src[base + r * step] - row_max;
        if (LOG) {
            dst[base + r * step] = x - log_sum;
        } else {
            dst[base + r * step] = exp(x) * inv_sum;
        }
    }
}
