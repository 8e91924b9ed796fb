// Attention forward of a float16 graph (asgrad.gpu.lowering.attention,
// `attention_forward_half`): ``cast16(softmax(cast32(score(q k^T)))) v`` as the mixed
// precision pass writes it, in two passes over the keys, one workgroup per block of BM
// query rows of one batch-head.
//
// The scores are q k^T accumulated in f32 and rounded to f16 as the float16 product
// stores them, then score() (the graph's float16 chain: scale, mask, bias; each op
// rounds to f16 as its node does) and widened to f32. Pass 1 streams the key blocks
// and keeps each row's max and sum of exp(s - max) in f32 (the sum rescaled as the max
// grows). Pass 2 recomputes the scores, forms each probability exp(s - max) / sum in
// f32 and rounds it to f16 as the softmax's cast does, and accumulates the products
// with the f16 values in f32; the output is rounded to f16 once, as the float16
// product stores it. A row whose max is not finite (every key masked, a NaN or +inf
// score) is NaN, as the unfused softmax makes it.

${PRELUDE}
${COMMON}
@group(0) @binding(1) var<storage, read> q: array<${QT}>;
@group(0) @binding(2) var<storage, read> kt: array<${KT}>;
@group(0) @binding(3) var<storage, read> v: array<${VT}>;
@group(0) @binding(4) var<storage, read_write> o: array<${OT}>;  // OT: f16
${SIDES}
${CHAINS}

const BM: u32 = 16u;
const BN: u32 = 16u;
const DM: u32 = ${DM}u;
const D4: u32 = ${D4}u;  // DM / 4: vec4s of a head
const RS: u32 = ${D4P}u;  // a row's length in vec4s (one more than D4: no bank conflicts)

// nested [row][vec4] and [row][key], so that the inner loops' constant indices need no
// run-time bounds clamp (see attention_forward.wgsl)
var<workgroup> qs: array<array<vec4<f32>, RS>, BM>;
var<workgroup> ks: array<array<vec4<f32>, RS>, BN>;
var<workgroup> vs: array<array<vec4<f32>, RS>, BN>;
var<workgroup> ps: array<array<f32, BN>, BM>;  // scores, then probabilities
var<workgroup> rowm: array<f32, BM>;
var<workgroup> rowl: array<f32, BM>;

// load_q(t, i0) and load_kv(t, j0, values): the query block, the key block (its values
// too when `values`), widened to f32
${LOADS}

// the widened float16 score of row ti (clamped to ii) and key j (-inf past the end)
fn score_at(ti: u32, tj: u32, ii: u32, j: u32) -> f32 {
    if (j >= mu(1u)) {
        return asg_ninf();
    }
    let e4 = (mu(2u) + 3u) / 4u;
    var dot4 = vec4<f32>(0.0);
    for (var e = 0u; e < D4; e++) {
        if (e < e4) {
            dot4 += qs[ti][e] * ks[tj][e];
        }
    }
    return score(asg_f2h(dot4.x + dot4.y + dot4.z + dot4.w), ii, j);
}

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
    // pass 1: each row's max and sum of exp(s - max)
    for (var j0 = 0u; j0 < S; j0 += BN) {
        workgroupBarrier();
        load_kv(t, j0, false);
        workgroupBarrier();
        ps[ti][tj] = score_at(ti, tj, ii, j0 + tj);
        workgroupBarrier();
        if (t < BM) {
            let old = rowm[t];
            var mx = old;
            for (var c = 0u; c < BN; c++) {
                mx = asg_max(mx, ps[t][c]);
            }
            // exponents relative to 0 while every score so far is -inf (no NaN from -inf - -inf)
            let safe = select(mx, 0.0, bitcast<u32>(mx) == 0xff800000u);
            var l = rowl[t] * asg_exp(old - safe);
            for (var c = 0u; c < BN; c++) {
                l += asg_exp(ps[t][c] - safe);
            }
            rowm[t] = mx;
            rowl[t] = l;
        }
    }
    workgroupBarrier();
    let m = rowm[ti];
    let l = rowl[ti];
    let bad = !asg_isfinite(m);
    let safe = select(m, 0.0, bad);
    // pass 2: the probabilities rounded to f16, times the values
    var acc = vec4<f32>(0.0);
    for (var j0 = 0u; j0 < S; j0 += BN) {
        workgroupBarrier();
        load_kv(t, j0, true);
        workgroupBarrier();
        let s = score_at(ti, tj, ii, j0 + tj);
        ps[ti][tj] = f32(asg_f2h(asg_exp(s - safe) / l));
        workgroupBarrier();
        if (tj < D4) {
            var a = acc;
            for (var r = 0u; r < BN; r++) {
                a += ps[ti][r] * vs[r][tj];
            }
            acc = a;
        }
    }
    if (i < L && tj < D4) {
        for (var c = 0u; c < 4u; c++) {
            let d = 4u * tj + c;
            if (d < Ev) {
                o[at(3u, i, d)] = select(asg_f2h(acc[c]), asg_hnan(), bad);
            }
        }
    }
}
