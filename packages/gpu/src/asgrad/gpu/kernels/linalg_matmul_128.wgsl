// Batched matmul C[b] = A[b] @ B[b], float32, 128x128 tile per workgroup.
//
// 256 threads (16x16), each computing an 8x8 block of C held in sixteen named vec4
// accumulators: a dynamically indexed private array would spill to slow memory
// (0.5 vs 25 TFLOP/s on an H200, see GPU_NOTES.md). The K dimension advances in
// steps of BK = 8 through two 128x8 tiles in workgroup memory (8 KiB, the next pair
// fetched into registers while the current one is used), stored
// k-major as vec4 so the inner loop reads four consecutive rows/columns at once.
// A thread owns rows {ty*4..ty*4+3, 64+ty*4..64+ty*4+3} and the same pattern of
// columns, so the 16 threads of a row read 16 different vec4 of a tile (no bank
// conflicts).
//
// Operands are read through strides (row/col of A and B, plus up to four broadcast
// batch dimensions), so transposed and broadcast operands need no copy. A_LAYOUT ("k": contiguous along
// K, "m": along M) and B_LAYOUT ("n" or "k") pick the tile loader whose global reads
// are coalesced for that layout.

struct Meta {
    M: u32, N: u32, K: u32, _pad0: u32,
    a_off: u32, a_sm: u32, a_sk: u32, _pad1: u32,
    b_off: u32, b_sk: u32, b_sn: u32, _pad2: u32,
    batch_shape: vec4<u32>,
    a_bstride: vec4<u32>,
    b_bstride: vec4<u32>,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<f32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;

var<workgroup> As: array<vec4<f32>, 256>;  // [k][m/4], 8 x 32
var<workgroup> Bs: array<vec4<f32>, 256>;  // [k][n/4], 8 x 32

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

// Tile loaders: each of the 256 threads fetches 4 elements of a 128x8 tile from global
// memory into registers (fetch_*), and later stores them into workgroup memory
// (stash_*): the next tile's fetch is issued before the current tile's arithmetic, so
// its latency hides behind it (register double buffering).
fn fetch_a_k(li: u32, a_base: u32, row0: u32, k0: u32) -> vec4<f32> {
    let m = row0 + li / 2u;
    let k = k0 + (li % 2u) * 4u;
    return vec4<f32>(load_a(a_base, m, k), load_a(a_base, m, k + 1u),
                     load_a(a_base, m, k + 2u), load_a(a_base, m, k + 3u));
}

fn stash_a_k(li: u32, v: vec4<f32>) {
    let m = li / 2u;
    let kk = (li % 2u) * 4u;
    As[kk * 32u + m / 4u][m % 4u] = v.x;
    As[(kk + 1u) * 32u + m / 4u][m % 4u] = v.y;
    As[(kk + 2u) * 32u + m / 4u][m % 4u] = v.z;
    As[(kk + 3u) * 32u + m / 4u][m % 4u] = v.w;
}

fn fetch_a_m(li: u32, a_base: u32, row0: u32, k0: u32) -> vec4<f32> {
    let k = k0 + li / 32u;
    let m = row0 + (li % 32u) * 4u;
    return vec4<f32>(load_a(a_base, m, k), load_a(a_base, m + 1u, k),
                     load_a(a_base, m + 2u, k), load_a(a_base, m + 3u, k));
}

fn stash_a_m(li: u32, v: vec4<f32>) {
    As[(li / 32u) * 32u + li % 32u] = v;
}

fn fetch_b_n(li: u32, b_base: u32, col0: u32, k0: u32) -> vec4<f32> {
    let k = k0 + li / 32u;
    let n = col0 + (li % 32u) * 4u;
    return vec4<f32>(load_b(b_base, k, n), load_b(b_base, k, n + 1u),
                     load_b(b_base, k, n + 2u), load_b(b_base, k, n + 3u));
}

fn stash_b_n(li: u32, v: vec4<f32>) {
    Bs[(li / 32u) * 32u + li % 32u] = v;
}

fn fetch_b_k(li: u32, b_base: u32, col0: u32, k0: u32) -> vec4<f32> {
    let n = col0 + li / 2u;
    let k = k0 + (li % 2u) * 4u;
    return vec4<f32>(load_b(b_base, k, n), load_b(b_base, k + 1u, n),
                     load_b(b_base, k + 2u, n), load_b(b_base, k + 3u, n));
}

fn stash_b_k(li: u32, v: vec4<f32>) {
    let n = li / 2u;
    let kk = (li % 2u) * 4u;
    Bs[kk * 32u + n / 4u][n % 4u] = v.x;
    Bs[(kk + 1u) * 32u + n / 4u][n % 4u] = v.y;
    Bs[(kk + 2u) * 32u + n / 4u][n % 4u] = v.z;
    Bs[(kk + 3u) * 32u + n / 4u][n % 4u] = v.w;
}

fn store_row(c_base: u32, m: u32, n: u32, v: vec4<f32>) {
    if (m >= params.M) {
        return;
    }
    let base = c_base + m * params.N;
    if (n + 3u < params.N) {
        C[base + n] = v.x;
        C[base + n + 1u] = v.y;
        C[base + n + 2u] = v.z;
        C[base + n + 3u] = v.w;
        return;
    }
    if (n < params.N) { C[base + n] = v.x; }
    if (n + 1u < params.N) { C[base + n + 1u] = v.y; }
    if (n + 2u < params.N) { C[base + n + 2u] = v.z; }
}

@compute @workgroup_size(16, 16, 1)
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let tx = lid.x;
    let ty = lid.y;
    let row0 = wid.y * 128u;
    let col0 = wid.x * 128u;

    // offsets of this batch element (batch index decomposed, last dimension fastest)
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

    var c0a = vec4<f32>(0.0);
    var c0b = vec4<f32>(0.0);
    var c1a = vec4<f32>(0.0);
    var c1b = vec4<f32>(0.0);
    var c2a = vec4<f32>(0.0);
    var c2b = vec4<f32>(0.0);
    var c3a = vec4<f32>(0.0);
    var c3b = vec4<f32>(0.0);
    var c4a = vec4<f32>(0.0);
    var c4b = vec4<f32>(0.0);
    var c5a = vec4<f32>(0.0);
    var c5b = vec4<f32>(0.0);
    var c6a = vec4<f32>(0.0);
    var c6b = vec4<f32>(0.0);
    var c7a = vec4<f32>(0.0);
    var c7b = vec4<f32>(0.0);

    var next_a = fetch_a_${A_LAYOUT}(li, a_base, row0, 0u);
    var next_b = fetch_b_${B_LAYOUT}(li, b_base, col0, 0u);
    for (var k0 = 0u; k0 < params.K; k0 += 8u) {
        stash_a_${A_LAYOUT}(li, next_a);
        stash_b_${B_LAYOUT}(li, next_b);
        workgroupBarrier();
        if (k0 + 8u < params.K) {
            next_a = fetch_a_${A_LAYOUT}(li, a_base, row0, k0 + 8u);
            next_b = fetch_b_${B_LAYOUT}(li, b_base, col0, k0 + 8u);
        }
        for (var k = 0u; k < 8u; k++) {
            let a0 = As[k * 32u + ty];
            let a1 = As[k * 32u + 16u + ty];
            let b0 = Bs[k * 32u + tx];
            let b1 = Bs[k * 32u + 16u + tx];
            c0a = fma(vec4<f32>(a0.x), b0, c0a);
            c0b = fma(vec4<f32>(a0.x), b1, c0b);
            c1a = fma(vec4<f32>(a0.y), b0, c1a);
            c1b = fma(vec4<f32>(a0.y), b1, c1b);
            c2a = fma(vec4<f32>(a0.z), b0, c2a);
            c2b = fma(vec4<f32>(a0.z), b1, c2b);
            c3a = fma(vec4<f32>(a0.w), b0, c3a);
            c3b = fma(vec4<f32>(a0.w), b1, c3b);
            c4a = fma(vec4<f32>(a1.x), b0, c4a);
            c4b = fma(vec4<f32>(a1.x), b1, c4b);
            c5a = fma(vec4<f32>(a1.y), b0, c5a);
            c5b = fma(vec4<f32>(a1.y), b1, c5b);
            c6a = fma(vec4<f32>(a1.z), b0, c6a);
            c6b = fma(vec4<f32>(a1.z), b1, c6b);
            c7a = fma(vec4<f32>(a1.w), b0, c7a);
            c7b = fma(vec4<f32>(a1.w), b1, c7b);
        }
        workgroupBarrier();
    }

    store_row(c_base, row0 + ty * 4u + 0u, col0 + tx * 4u, c0a);
    store_row(c_base, row0 + ty * 4u + 0u, col0 + 64u + tx * 4u, c0b);
    store_row(c_base, row0 + ty * 4u + 1u, col0 + tx * 4u, c1a);
    store_row(c_base, row0 + ty * 4u + 1u, col0 + 64u + tx * 4u, c1b);
    store_row(c_base, row0 + ty * 4u + 2u, col0 + tx * 4u, c2a);
    store_row(c_base, row0 + ty * 4u + 2u, col0 + 64u + tx * 4u, c2b);
    store_row(c_base, row0 + ty * 4u + 3u, col0 + tx * 4u, c3a);
    store_row(c_base, row0 + ty * 4u + 3u, col0 + 64u + tx * 4u, c3b);
    store_row(c_base, row0 + 64u + ty * 4u + 0u, col0 + tx * 4u, c4a);
    store_row(c_base, row0 + 64u + ty * 4u + 0u, col0 + 64u + tx * 4u, c4b);
    store_row(c_base, row0 + 64u + ty * 4u + 1u, col0 + tx * 4u, c5a);
    store_row(c_base, row0 + 64u + ty * 4u + 1u, col0 + 64u + tx * 4u, c5b);
    store_row(c_base, row0 + 64u + ty * 4u + 2u, col0 + tx * 4u, c6a);
    store_row(c_base, row0 + 64u + ty * 4u + 2u, col0 + 64u + tx * 4u, c6b);
    store_row(c_base, row0 + 64u + ty * 4u + 3u, col0 + tx * 4u, c7a);
    store_row(c_base, row0 + 64u + ty * 4u + 3u, col0 + 64u + tx * 4u, c7b);
}
