// Attention backward, query side (asgrad.gpu.lowering.attention; FlashAttention-2's
// backward): one workgroup per block of BM query rows of one batch-head, launched
// before attention_backward_kv. Each row's D = dO . O (the softmax backward's row sum
// of dP * P) is computed once and stored after the log-sum-exps for the key side;
// key and value blocks of BN rows stream through workgroup memory, the probabilities
// are recomputed from the saved log-sum-exp (P = exp(score - lse)), and
// dS = grad(P * (dO v^T - D)) is multiplied by k into dQ. grad() is the graph's
// gradient chain of score() (the scale, the mask's where), rendered from its ops.

${PRELUDE}
${COMMON}
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kt: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> o: array<f32>;
@group(0) @binding(5) var<storage, read> dout: array<f32>;
@group(0) @binding(6) var<storage, read_write> stats: array<f32>;
@group(0) @binding(7) var<storage, read_write> dq: array<f32>;
${SIDES}
${CHAINS}

const BM: u32 = 16u;
const BN: u32 = ${BLOCK}u;  // 16 for heads up to 32, else 8 (workgroup memory)
const DM: u32 = ${DM}u;
const NC: u32 = ${NC}u;  // DM / 16: dQ columns per thread

var<workgroup> qs: array<f32, ${QS}>;  // BM x DM
var<workgroup> dos: array<f32, ${QS}>;  // BM x DM
var<workgroup> ks: array<f32, ${KS}>;  // BN x DM
var<workgroup> vs: array<f32, ${KS}>;  // BN x DM
var<workgroup> dss: array<f32, ${SCORES}>;  // BM x BN
var<workgroup> lse: array<f32, 16>;
var<workgroup> dd: array<f32, 16>;

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
    for (var x = t; x < BM * DM; x += 256u) {
        let r = x / DM;
        let e = x % DM;
        var a = 0.0;
        var b = 0.0;
        if (i0 + r < L && e < E) {
            a = q[at(0u, i0 + r, e)];
        }
        if (i0 + r < L && e < Ev) {
            b = dout[at(4u, i0 + r, e)];
        }
        qs[x] = a;
        dos[x] = b;
    }
    workgroupBarrier();
    if (t < BM) {
        var d = 0.0;
        var l = 0.0;
        if (i0 + t < L) {
            for (var c = 0u; c < Ev; c++) {
                d += dos[t * DM + c] * o[at(3u, i0 + t, c)];
            }
            l = stats[bh * L + i0 + t];
            stats[(mu(4u) + bh) * L + i0 + t] = d;
        }
        dd[t] = d;
        lse[t] = l;
    }
    let ti = t / 16u;
    let tj = t % 16u;
    var acc: array<f32, NC>;
    for (var c = 0u; c < NC; c++) {
        acc[c] = 0.0;
    }
    for (var j0 = 0u; j0 < S; j0 += BN) {
        workgroupBarrier();
        for (var x = t; x < BN * DM; x += 256u) {
            let r = x / DM;
            let e = x % DM;
            var a = 0.0;
            var b = 0.0;
            if (j0 + r < S && e < E) {
                a = kt[at(1u, e, j0 + r)];
            }
            if (j0 + r < S && e < Ev) {
                b = v[at(2u, j0 + r, e)];
            }
            ks[x] = a;
            vs[x] = b;
        }
        workgroupBarrier();
        if (t < BM * BN) {
            let r = t / BN;
            let c = t % BN;
            let i = i0 + r;
            let j = j0 + c;
            var ds = 0.0;
            if (i < L && j < S) {
                var dot = 0.0;
                for (var e = 0u; e < E; e++) {
                    dot += qs[r * DM + e] * ks[c * DM + e];
                }
                let p = asg_exp(score(dot, i, j) - lse[r]);
                var dp = 0.0;
                for (var e = 0u; e < Ev; e++) {
                    dp += dos[r * DM + e] * vs[c * DM + e];
                }
                ds = grad(p * (dp - dd[r]), i, j);
            }
            dss[t] = ds;
        }
        workgroupBarrier();
        for (var c = 0u; c < NC; c++) {
            let e = tj + 16u * c;
            var a = acc[c];
            for (var r = 0u; r < BN; r++) {
                a += dss[ti * BN + r] * ks[r * DM + e];
            }
            acc[c] = a;
        }
    }
    let i = i0 + ti;
    if (i < L) {
        for (var c = 0u; c < NC; c++) {
            let e = tj + 16u * c;
            if (e < E) {
                dq[at(5u, i, e)] = acc[c];
            }
        }
    }
}
