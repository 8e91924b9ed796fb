// Batched matmul C[b] = A[b] @ B[b], float32, for matrices too small to fill a GPU with
// 128x128 tiles: a TILE x TILE tile per workgroup (TILE = 4 * T), T x T threads each
// computing a 4x4 block held in four named vec4 accumulators, BK = 8.
// Same params and strided/broadcast operand reads as linalg_matmul_128.wgsl.

struct Meta {
    M: u32, N: u32, K: u32, _pad0: u32,
    a_off: u32, a_sm: u32, a_sk: u32, _pad1: u32,
    b_off: u32, b_sk: u32, b_sn: u32, _pad2: u32,
    batch_shape: vec4<u32>,
    a_bstride: vec4<u32>,
    b_bstride: vec4<u32>,
}

const T: u32 = ${T}u;
const TILE: u32 = ${TILE}u;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<f32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;

var<workgroup> As: array<vec4<f32>, ${TILE_VEC4}>;  // [k][m/4], 8 x T
var<workgroup> Bs: array<vec4<f32>, ${TILE_VEC4}>;  // [k][n/4], 8 x T

fn load_a(base: u32, m: u32, k: u32) -> f32 {
    if (m < params.M && k < params.K) {
        return A[base + m * params.a_sm + k * params.a_sk];
    }
    return 0.0;
}

fn load_b(base: u32, k: u32, n: u32) -> f32 {
    if (k < params.K && n < params.N) {
        return B[base + k * params.b_sk + n * params.b_sn];
    }
    return 0.0;
}

// Tile loaders: element e of a TILE x 8 tile, for each operand layout.
fn load_a_k(e: u32, a_base: u32, row0: u32, k0: u32) {
    let m = e / 8u;
    let k = e % 8u;
    As[k * T + m / 4u][m % 4u] = load_a(a_base, row0 + m, k0 + k);
}

fn load_a_m(e: u32, a_base: u32, row0: u32, k0: u32) {
    let k = e / TILE;
    let m = e % TILE;
    As[k * T + m / 4u][m % 4u] = load_a(a_base, row0 + m, k0 + k);
}

fn load_b_n(e: u32, b_base: u32, col0: u32, k0: u32) {
    let k = e / TILE;
    let n = e % TILE;
    Bs[k * T + n / 4u][n % 4u] = load_b(b_base, k0 + k, col0 + n);
}

fn load_b_k(e: u32, b_base: u32, col0: u32, k0: u32) {
    let n = e / 8u;
    let k = e % 8u;
    Bs[k * T + n / 4u][n % 4u] = load_b(b_base, k0 + k, col0 + n);
}

fn store_row(c_base: u32, m: u32, n: u32, v: vec4<f32>) {
    if (m >= params.M) {
        return;
    }
    let base = c_base + m * params.N;
    if (n < params.N) { C[base + n] = v.x; }
    if (n + 1u < params.N) { C[base + n + 1u] = v.y; }
    if (n + 2u < params.N) { C[base + n + 2u] = v.z; }
    if (n + 3u < params.N) { C[base + n + 3u] = v.w; }
}

@compute @workgroup_size(${T}, ${T}, 1)
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let tx = lid.x;
    let ty = lid.y;
    let row0 = wid.y * TILE;
    let col0 = wid.x * TILE;

    var rem = wid.z;
    var a_base = params.a_off;
    var b_base = params.b_off;
    for (var d = 3i; d >= 0; d--) {
        let size = params.batch_shape[d];
        let idx = rem % size;
        rem = rem / size;
        a_base += idx * params.a_bstride[d];
        b_base += idx * params.b_bstride[d];
    }
    let c_base = wid.z * params.M * params.N;

    var c0 = vec4<f32>(0.0);
    var c1 = vec4<f32>(0.0);
    var c2 = vec4<f32>(0.0);
    var c3 = vec4<f32>(0.0);

    for (var k0 = 0u; k0 < params.K; k0 += 8u) {
        for (var e = li; e < 8u * TILE; e += T * T) {
            load_a_${A_LAYOUT}(e, a_base, row0, k0);
            load_b_${B_LAYOUT}(e, b_base, col0, k0);
        }
        workgroupBarrier();
        for (var k = 0u; k < 8u; k++) {
            let a = As[k * T + ty];
            let b = Bs[k * T + tx];
            c0 = fma(vec4<f32>(a.x), b, c0);
            c1 = fma(vec4<f32>(a.y), b, c1);
            c2 = fma(vec4<f32>(a.z), b, c2);
            c3 = fma(vec4<f32>(a.w), b, c3);
        }
        workgroupBarrier();
    }

    store_row(c_base, row0 + ty * 4u, col0 + tx * 4u, c0);
    store_row(c_base, row0 + ty * 4u + 1u, col0 + tx * 4u, c1);
    store_row(c_base, row0 + ty * 4u + 2u, col0 + tx * 4u, c2);
    store_row(c_base, row0 + ty * 4u + 3u, col0 + tx * 4u, c3);
}
