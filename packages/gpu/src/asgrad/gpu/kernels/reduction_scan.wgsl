// Scans along one axis (cumsum, cumprod, cummax/cummin and their indices,
// logcumsumexp): one thread per line of an (outer, R, inner) input, walking the R
// elements in order (from the end with `reverse`). STEP updates the running value
// `acc` (and `at`, the position it came from) with the element `x` at step `k` and
// position `r` (float16 elements widened to the f32 accumulator); OUT is what each
// element of the line receives.

${PRELUDE}

struct Meta { outer: u32, R: u32, inner: u32, reverse: u32, }

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<${T_IN}>;
@group(0) @binding(2) var<storage, read_write> dst: array<${T_OUT}>;
${CHECKS}

// numpy.logaddexp: -inf is its identity, equal values (two infinities) add log 2
fn asg_logaddexp(a: f32, b: f32) -> f32 {
    if (asg_isnan(a) || asg_isnan(b)) {
        return asg_nan();
    }
    if (a == asg_ninf()) {
        return b;
    }
    if (b == asg_ninf() || a == b) {
        return select(a, a + 0.6931471805599453, a == b);
    }
    return max(a, b) + asg_log1p(asg_exp(-abs(a - b)));
}

@compute @workgroup_size(64, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let line = (wid.x + wid.y * nwg.x) * 64u + li;
    if (line >= params.outer * params.inner) {
        return;
    }
    let base = (line / params.inner) * params.R * params.inner + line % params.inner;
    var acc: ${T_ACC} = ${INIT};
    var at = 0i;
    for (var k = 0u; k < params.R; k += 1u) {
        let r = select(k, params.R - 1u - k, params.reverse == 1u);
        let x = ${T_ACC}(src[base + r * params.inner]);
        ${STEP}
        dst[base + r * params.inner] = ${OUT};
    }
}
