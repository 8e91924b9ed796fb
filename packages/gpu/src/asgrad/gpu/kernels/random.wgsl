// Dropout with the counter-based mask of asgrad.tensor.ops.random, bit for bit:
//   key  = pcg(lo ^ pcg(hi))          lo, hi: the two's-complement halves of the seed
//   keep = pcg(pcg(i) ^ key) >= threshold          i: the row-major element index
//   out  = keep ? x * scale : 0       in T (f32, or f16 with scale a float16 value)
// pcg is the PCG-RXS-M-XS 32-bit hash; all of it is u32 arithmetic (wrapping, like
// numpy's uint32). The seed is stored as an i32, so hi is its sign extension.

struct Meta { n: u32, threshold: u32, _pad0: u32, _pad1: u32, scale: f32, }

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<${T}>;
@group(0) @binding(2) var<storage, read> seed: array<i32>;
@group(0) @binding(3) var<storage, read_write> dst: array<${T}>;

fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

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
    let s = seed[0];
    let hi = select(0u, 0xFFFFFFFFu, s < 0);
    let key = pcg(bitcast<u32>(s) ^ pcg(hi));
    let keep = pcg(pcg(i) ^ key) >= params.threshold;
    dst[i] = select(${T}(0.0), src[i] * ${T}(params.scale), keep);
}
