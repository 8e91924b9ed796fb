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
const D4: u32 = ${D4}u;  // DM / 4: vec4s of a head
const RS: u32 = ${D4P}u;  // a row's length in vec4s (one more than D4: no bank conflicts)

// nested [row][vec4] and [row][key], so that the inner loops' constant indices need no
// run-time bounds clamp (see attention_forward.wgsl)
var<workgroup> qs: array<array<vec4<f32>, RS>, BM>;
var<workgroup> dos: array<array<vec4<f32>, RS>, BM>;
var<workgroup> ks: array<array<vec4<f32>, RS>, BN>;
var<workgroup> vs: array<array<vec4<f32>, RS>, BN>;
var<workgroup> dss: array<array<f32, BN>, BM>;
var<workgroup> lse: array<f32, BM>;
var<workgroup> dd: array<f32, BM>;

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
    workgroupBarrier();
    if (t < BM) {
        var d = 0.0;
        var l = 0.0;
        if (i0 + t < L) {
            for (var c = 0u; c < Ev; c++) {
                d += dos[t][c / 4u][c % 4u] * o[at(3u, i0 + t, c)];
            }
            l = stats[bh * L + i0 + t];
            stats[(mu(4u) + bh) * L + i0 + t] = d;
        }
        dd[t] = d;
        lse[t] = l;
    }
    let ti = t / 16u;
    let tj = t % 16u;  // dQ's vec4 column
    let e4 = (max(E, Ev) + 3u) / 4u;
    var acc = vec4<f32>(0.0);
    for (var j0 = 0u; j0 < S; j0 += BN) {
        workgroupBarrier();
        load_kv(t, j0);
        workgroupBarrier();
        if (t < BM * BN) {
            let r = t / BN;
            let c = t % BN;
            let i = i0 + r;
            let j = j0 + c;
            var ds = 0.0;
            if (i < L && j < S) {
                var dot4 = vec4<f32>(0.0);
                var dp4 = vec4<f32>(0.0);
                for (var e = 0u; e < D4; e++) {
                    if (e < e4) {
                        dot4 += qs[r][e] * ks[c][e];
                        dp4 += dos[r][e] * vs[c][e];
                    }
                }
                let dot = dot4.x + dot4.y + dot4.z + dot4.w;
                let dp = dp4.x + dp4.y + dp4.z + dp4.w;
                let p = asg_exp(score(dot, i, j) - lse[r]);
                ds = grad(p * (dp - dd[r]), i, j);
            }
            dss[r][c] = ds;
        }
        workgroupBarrier();
        if (tj < D4) {
            var a = acc;
            for (var r = 0u; r < BN; r++) {
                a += dss[ti][r] * ks[r][tj];
            }
            acc = a;
        }
    }
    let i = i0 + ti;
    if (i < L && tj < D4) {
        for (var c = 0u; c < 4u; c++) {
            let e = 4u * tj + c;
            if (e < E) {
                dq[at(5u, i, e)] = acc[c];
            }
        }
    }
}
