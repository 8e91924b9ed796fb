// Generated elementwise kernel: out[i] = EXPR(x0, x1, ...), one thread per element.
//
// Inputs are read through per-input element strides over the output's index space
// (stride 0 on a broadcast dimension), so broadcasting, transposes and slices need no
// copy. Each input is specialised as contiguous (read at i), scalar (read at its
// offset) or strided (coordinates decomposed from i, unrolled for the output's rank).
// EXPR is composed from the functions of prelude.wgsl; a chain of elementwise ops fuses
// into one kernel as one scalar expression, its shared subexpressions computed once
// (LETS: ``let t0 = ...;``).
//
// The output is written at i, or through strides too (slot 7) when it is a view of a
// larger buffer (a slice of a concatenation, say).
//
// params (uniform, 24 x vec4<u32>): [0] n, [1] rank; [4..12) output shape;
// [12 + 8k .. 20 + 8k) strides of operand k (k = 7: the output); [76 + k] its offset.
// Strides are u32 modulo 2^32, so a negative stride wraps to the right index.

${PRELUDE}

@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 24>;
${BINDINGS}

fn mu(i: u32) -> u32 {
    return params[i / 4u][i % 4u];
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let i = (wid.x + wid.y * nwg.x) * 256u + li;
    if (i >= mu(0u)) {
        return;
    }
${INDEX}
${LOADS}
${LETS}
    out[${OUT_INDEX}] = ${EXPR};
}
