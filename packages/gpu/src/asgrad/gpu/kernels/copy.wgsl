// Contiguous copy of n vec4<u32> words (dtype-agnostic: moves bits). Used where a
// buffer must be duplicated inside a compute pass; a strided copy is an elementwise
// kernel with the identity expression.

@group(0) @binding(0) var<uniform> params: vec4<u32>;  // n (vec4 words)
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let i = (wid.x + wid.y * nwg.x) * 256u + li;
    if (i < params.x) {
        dst[i] = src[i];
    }
}
