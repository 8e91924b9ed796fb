// Attention forward, FlashAttention-style (asgrad.gpu.lowering.attention): one
// workgroup per block of BM query rows of one batch-head. Key and value blocks of BN
// rows stream through workgroup memory; each row keeps its running max and sum (f32),
// so the probabilities are never stored. score() is the graph's chain from q k^T to
// the softmax's input (scale, mask, bias), rendered from the ops' expressions.
//
// Writes the output and, per row, the log-sum-exp that the backward recomputes the
// probabilities from. A row whose max is not finite (every key masked, a NaN or +inf
// score) is NaN, as the unfused softmax makes it; its log-sum-exp is NaN too.

${PRELUDE}
${COMMON}
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kt: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;
${SIDES}
${CHAINS}

const BM: u32 = 16u;
const BN: u32 = 16u;
const DM: u32 = ${DM}u;
const D4: u32 = ${D4}u;  // DM / 4: vec4s of a head
const RS: u32 = ${D4P}u;  // a row's length in vec4s (one more than D4: no bank conflicts)

// [row][vec4 of the head] and [row][key]: nested, so that the inner loops' indices (of
// constant bounds, unrolled by the driver) need no run-time bounds clamp (wgpu clamps
// a dynamic index into each array level; a flat index is clamped as a whole at every
// read), only the thread's own row or column, once
var<workgroup> qs: array<array<vec4<f32>, RS>, BM>;
var<workgroup> ks: array<array<vec4<f32>, RS>, BN>;
var<workgroup> vs: array<array<vec4<f32>, RS>, BN>;
var<workgroup> ps: array<array<f32, BN>, BM>;  // scores, then probabilities
var<workgroup> corr: array<f32, BM>;
var<workgroup> rowm: array<f32, BM>;
var<workgroup> rowl: array<f32, BM>;

${LOADS}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let g = wid.x + wid.y * nwg.x;
    let nqb = mu(5u);
    if (g >= nqb * mu(4u)) {
        return;  // uniform across the workgroup
    }
    let bh = g / nqb;
    let i0 = (g % nqb) * BM;
    let L = mu(0u);
    let S = mu(1u);
    let E = mu(2u);
    let Ev = mu(3u);
    set_bases(bh);
    load_q(t, i0);
    if (t < BM) {
        rowm[t] = asg_ninf();
        rowl[t] = 0.0;
    }
    let ti = t / 16u;
    let tj = t % 16u;  // the score's key; in the product, the output's vec4 column
    let i = i0 + ti;
    let ii = min(i, L - 1u);  // rows past the end compute row L - 1's values, unwritten
    let e4 = (E + 3u) / 4u;
    var acc = vec4<f32>(0.0);
    for (var j0 = 0u; j0 < S; j0 += BN) {
        workgroupBarrier();
        load_kv(t, j0);
        workgroupBarrier();
        let j = j0 + tj;
        var s = asg_ninf();
        if (j < S) {
            var dot4 = vec4<f32>(0.0);
            for (var e = 0u; e < D4; e++) {
                if (e < e4) {
                    dot4 += qs[ti][e] * ks[tj][e];
                }
            }
            s = score(dot4.x + dot4.y + dot4.z + dot4.w, ii, j);
        }
        ps[ti][tj] = s;
        workgroupBarrier();
        if (t < BM) {
            let old = rowm[t];
            var mx = old;
            for (var c = 0u; c < BN; c++) {
                mx = asg_max(mx, ps[t][c]);
            }
            // exponents relative to 0 while every score so far is -inf (no NaN from -inf - -inf)
            let safe = select(mx, 0.0, bitcast<u32>(mx) == 0xff800000u);
            let cr = asg_exp(old - safe);
            var l = rowl[t] * cr;
            for (var c = 0u; c < BN; c++) {
                let p = asg_exp(ps[t][c] - safe);
                ps[t][c] = p;
                l += p;
            }
            rowm[t] = mx;
            rowl[t] = l;
            corr[t] = cr;
        }
        workgroupBarrier();
        if (tj < D4) {
            var a = acc * corr[ti];
            for (var r = 0u; r < BN; r++) {
                a += ps[ti][r] * vs[r][tj];
            }
            acc = a;
        }
    }
    workgroupBarrier();
    if (i < L && tj < D4) {
        let m = rowm[ti];
        let l = rowl[ti];
        let bad = !asg_isfinite(m);
        for (var c = 0u; c < 4u; c++) {
            let d = 4u * tj + c;
            if (d < Ev) {
                o[at(3u, i, d)] = select(acc[c] / l, asg_nan(), bad);
            }
        }
        if (tj == 0u) {
            stats[bh * L + i] = select(m + log(l), asg_nan(), bad);
        }
    }
}
