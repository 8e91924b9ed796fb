// out[..., k] = (idx[...] == k) for k < depth, as ${T} (1 or 0).

struct Params { n: u32, depth: u32, _pad0: u32, _pad1: u32, }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> idx: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<${T}>;

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
    let k = i32(i % params.depth);
    out[i] = select(${ZERO}, ${ONE}, idx[i / params.depth] == k);
}
