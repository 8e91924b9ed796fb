// Reduction along one axis for (outer, R, inner) inputs with a wide inner axis (bias
// gradients: the column sums of an [R, C] matrix): a workgroup per block of 32
// neighbouring outputs j, 8 lanes of rows each. A warp reads 32 consecutive floats of
// a row (coalesced); each thread keeps four independent accumulators so four loads are
// in flight at once (a single chain would wait on memory at every row); the 8 lanes
// are combined in workgroup memory. Same placeholders and partial results (chunk_len,
// chunks: outer, chunks, inner) as reduction_cols.wgsl.

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

fn mapped(x: ${T_IN}) -> ${T_ACC} {
    return ${MAP};
}

@compute @workgroup_size(32, 8, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let blocks = (params.inner + 31u) / 32u;
    let g = wid.x + wid.y * nwg.x;
    let live = g < params.outer * params.chunks * blocks;
    let c = (g / blocks) % params.chunks;
    let o = g / (blocks * params.chunks);
    let j = (g % blocks) * 32u + lid.x;
    var r0 = 0u;
    var r1 = params.R;
    if (params.chunk_len > 0u) {
        r0 = c * params.chunk_len;
        r1 = min(params.R, r0 + params.chunk_len);
    }
    let base = o * params.R * params.inner + j;
    let step = params.inner;
    var acc0: ${T_ACC} = ${INIT};
    var acc1: ${T_ACC} = ${INIT};
    var acc2: ${T_ACC} = ${INIT};
    var acc3: ${T_ACC} = ${INIT};
    if (live && j < params.inner) {
        var r = r0 + lid.y;
        for (; r + 24u < r1; r += 32u) {
            let p = base + r * step;
            let x0 = src[p];
            let x1 = src[p + 8u * step];
            let x2 = src[p + 16u * step];
            let x3 = src[p + 24u * step];
            acc0 = combine(acc0, mapped(x0));
            acc1 = combine(acc1, mapped(x1));
            acc2 = combine(acc2, mapped(x2));
            acc3 = combine(acc3, mapped(x3));
        }
        for (; r < r1; r += 8u) {
            acc0 = combine(acc0, mapped(src[base + r * step]));
        }
    }
    shared_acc[li] = combine(combine(acc0, acc1), combine(acc2, acc3));
    workgroupBarrier();
    for (var s = 4u; s > 0u; s = s >> 1u) {
        if (lid.y < s) {
            shared_acc[li] = combine(shared_acc[li], shared_acc[li + s * 32u]);
        }
        workgroupBarrier();
    }
    if (lid.y == 0u && live && j < params.inner) {
        let acc_final = shared_acc[lid.x];
        dst[(o * params.chunks + c) * params.inner + j] = ${FINISH};
    }
}
