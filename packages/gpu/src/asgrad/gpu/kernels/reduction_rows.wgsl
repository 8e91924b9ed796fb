// Reduction along one axis, one workgroup per output element.
//
// The input is seen as (outer, R, inner) contiguous; output element `row` =
// o * inner + j reduces input[o, :, j]. 256 threads stride over R accumulating
// ACC(acc, MAP(x)), then a tree reduction in workgroup memory; FINISH(acc) is written.
// Best when inner == 1 (reads coalesced along R). chunk_len/chunks cut a long axis
// into pieces reduced by separate workgroups, as in reduction_cols.wgsl.

${PRELUDE}

struct Meta { outer: u32, R: u32, inner: u32, chunk_len: u32, scale: f32, chunks: u32, }

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<${T_IN}>;
@group(0) @binding(2) var<storage, read_write> dst: array<${T_OUT}>;
${CHECKS}

var<workgroup> shared_acc: array<${T_ACC}, 256>;

fn combine(a: ${T_ACC}, b: ${T_ACC}) -> ${T_ACC} {
    return ${COMBINE};
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    let rows = params.outer * params.chunks * params.inner;
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
    if (row < rows) {
        for (var r = r0 + li; r < r1; r += 256u) {
            let x = src[base + r * params.inner];
            acc = combine(acc, ${MAP});
        }
    }
    shared_acc[li] = acc;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (li < s) {
            shared_acc[li] = combine(shared_acc[li], shared_acc[li + s]);
        }
        workgroupBarrier();
    }
    if (li == 0u && row < rows) {
        let acc_final = shared_acc[0];
        dst[row] = ${FINISH};
    }
}
