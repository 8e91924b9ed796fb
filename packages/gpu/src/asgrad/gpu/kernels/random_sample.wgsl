// rand_like / randn_like with the counter-based draws of asgrad.tensor.ops.random:
//   key  = pcg(lo ^ pcg(hi))      lo, hi: the two's-complement halves of the seed
//   k1   = pcg(key ^ 0x52414E44)  ("RAND"),  k2 = pcg(k1 ^ 0x4E4F524D)  ("NORM")
//   h(k) = pcg(pcg(i) ^ k)        i: the row-major element index
// uniform: (h(k1) >> 8) * 2**-24, bit for bit the CPU's float32 value;
// normal:  sqrt(-2 ln u1) * cos(2 pi u2), u1 = ((h(k1) >> 8) + 1) * 2**-24,
//          u2 = (h(k2) >> 8) * 2**-24, in f32 (the CPU computes it in float64).

struct Meta { n: u32, _pad0: u32, _pad1: u32, _pad2: u32, }

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> seed: array<i32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

const U24: f32 = 5.9604644775390625e-8;  // 2**-24
const TAU: f32 = 6.283185307179586;

fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

fn sample(i: u32, k1: u32, k2: u32) -> f32 {
    let h1 = pcg(pcg(i) ^ k1);
${SAMPLE}
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
    let k1 = pcg(key ^ 0x52414E44u);
    let k2 = pcg(k1 ^ 0x4E4F524Du);
    dst[i] = sample(i, k1, k2);
}
