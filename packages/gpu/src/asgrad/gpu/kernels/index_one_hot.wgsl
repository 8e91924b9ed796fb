// out[..., k] = (idx[...] == k) for k < depth, as ${T} (1 or 0). An index outside
// [0, depth) gives an all-zero row, and the thread of its first element records it in
// the check slot `slot` (checks.wgsl).

struct Params { n: u32, depth: u32, slot: u32, _pad1: u32, }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> idx: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<${T}>;
${CHECKS}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let i = (wid.x + wid.y * nwg.x) * 256u + li;
    if (i >= params.n) {
        return;
    }
    let k = i % params.depth;
    let label = idx[i / params.depth];
    if (k == 0u && u32(label) >= params.depth) {
        asg_flag(params.slot, label);
    }
    out[i] = select(${ZERO}, ${ONE}, label == i32(k));
}
