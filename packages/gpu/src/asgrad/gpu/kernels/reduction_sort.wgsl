// Sort along one axis by counting: one thread per element of an (outer, R, inner)
// input counts the elements of its line that go before it (BEFORE(y, j, x, i): y at j
// sorts ahead of x at i; ties by position, so the order is stable) and writes itself
// (OUT: the value, or its position) at that rank. R * R comparisons a line, all in
// parallel: the lowering bounds R.

${PRELUDE}

struct Meta { outer: u32, R: u32, inner: u32, _pad: u32, }

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<${T_IN}>;
@group(0) @binding(2) var<storage, read_write> dst: array<${T_OUT}>;

fn before(y: ${T_IN}, j: u32, x: ${T_IN}, i: u32) -> bool {
${BEFORE}
}

@compute @workgroup_size(64, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let e = (wid.x + wid.y * nwg.x) * 64u + li;
    if (e >= params.outer * params.R * params.inner) {
        return;
    }
    let jj = e % params.inner;
    let i = (e / params.inner) % params.R;
    let base = (e / (params.inner * params.R)) * params.R * params.inner + jj;
    let x = src[e];
    var rank = 0u;
    for (var j = 0u; j < params.R; j += 1u) {
        if (before(src[base + j * params.inner], j, x, i)) {
            rank += 1u;
        }
    }
    dst[base + rank * params.inner] = ${OUT};
}
