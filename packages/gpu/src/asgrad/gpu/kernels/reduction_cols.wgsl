// Reduction along one axis, one thread per output element: for (outer, R, inner)
// inputs with inner > 1, neighbouring threads read neighbouring j (coalesced) and
// each loops over R. Same placeholders as reduction_rows.wgsl.
//
// With chunk_len > 0 the axis is cut into `chunks` pieces of chunk_len and each thread
// reduces one piece, writing a partial result (outer, chunks, inner) that a second
// launch reduces: a long axis with few outputs still occupies the whole GPU.

${PRELUDE}

struct Meta { outer: u32, R: u32, inner: u32, chunk_len: u32, scale: f32, chunks: u32, }

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<${T_IN}>;
@group(0) @binding(2) var<storage, read_write> dst: array<${T_OUT}>;
${CHECKS}

fn combine(a: ${T_ACC}, b: ${T_ACC}) -> ${T_ACC} {
    return ${COMBINE};
}

fn mapped(x: ${T_IN}) -> ${T_ACC} {
    return ${MAP};
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let row = (wid.x + wid.y * nwg.x) * 256u + li;
    if (row >= params.outer * params.chunks * params.inner) {
        return;
    }
    let j = row % params.inner;
    let c = (row / params.inner) % params.chunks;
    let o = row / (params.inner * params.chunks);
    var r0 = 0u;
    var r1 = params.R;
    if (params.chunk_len > 0u) {
        r0 = c * params.chunk_len;
        r1 = min(params.R, r0 + params.chunk_len);
    }
    let base = o * params.R * params.inner + j;
    var acc: ${T_ACC} = ${INIT};
    // four loads in flight before they are combined, in order (the same result as one
    // at a time): one load per iteration leaves most of the memory bandwidth idle
    var r = r0;
    for (; r + 4u <= r1; r += 4u) {
        let at = base + r * params.inner;
        let x0 = src[at];
        let x1 = src[at + params.inner];
        let x2 = src[at + 2u * params.inner];
        let x3 = src[at + 3u * params.inner];
        acc = combine(combine(combine(combine(acc, mapped(x0)), mapped(x1)), mapped(x2)), mapped(x3));
    }
    for (; r < r1; r++) {
        acc = combine(acc, mapped(src[base + r * params.inner]));
    }
    let acc_final = acc;
    dst[row] = ${FINISH};
}
