// Reduction along one axis, one thread per output element: for (outer, R, inner)
// inputs with inner > 1, neighbouring threads read neighbouring j (coalesced) and
// each loops over R. Same placeholders as reduce_rows.wgsl.

${PRELUDE}

struct Meta { outer: u32, R: u32, inner: u32, _pad: u32, scale: f32, }

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<${T_IN}>;
@group(0) @binding(2) var<storage, read_write> dst: array<${T_OUT}>;

fn combine(a: ${T_ACC}, b: ${T_ACC}) -> ${T_ACC} {
    return ${COMBINE};
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let row = (wid.x + wid.y * nwg.x) * 256u + li;
    if (row >= params.outer * params.inner) {
        return;
    }
    let o = row / params.inner;
    let j = row % params.inner;
    let base = o * params.R * params.inner + j;
    var acc: ${T_ACC} = ${INIT};
    for (var r = 0u; r < params.R; r++) {
        let x = src[base + r * params.inner];
        acc = combine(acc, ${MAP});
    }
    let acc_final = acc;
    dst[row] = ${FINISH};
}
