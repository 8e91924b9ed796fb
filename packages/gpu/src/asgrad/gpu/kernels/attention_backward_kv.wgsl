// Attention backward, key side (asgrad.gpu.lowering.attention; FlashAttention-2's
// backward): one workgroup per block of BN keys of one batch-head, launched after
// attention_backward_q (which stored each query row's D = dO . O after the
// log-sum-exps). Query blocks of BM rows stream through workgroup memory; the
// probabilities are recomputed from the saved log-sum-exp, dV += P^T dO and
// dK += dS^T q with dS = grad(P * (dO v^T - D)). dK is written transposed (the
// graph's node is the gradient of k^T).

${PRELUDE}
${COMMON}
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kt: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> dout: array<f32>;
@group(0) @binding(5) var<storage, read> stats: array<f32>;
@group(0) @binding(6) var<storage, read_write> dkt: array<f32>;
@group(0) @binding(7) var<storage, read_write> dv: array<f32>;
${SIDES}
${CHAINS}

const BM: u32 = ${BLOCK}u;  // 16 for heads up to 32, else 8 (workgroup memory)
const BN: u32 = 16u;
const DM: u32 = ${DM}u;
const D4: u32 = ${D4}u;  // DM / 4: vec4s of a head
const RS: u32 = ${D4P}u;  // a row's length in vec4s (one more than D4: no bank conflicts)

// nested [row][vec4] and [query row][key], so that the inner loops' constant indices
// need no run-time bounds clamp (see attention_forward.wgsl)
var<workgroup> ks: array<array<vec4<f32>, RS>, BN>;
var<workgroup> vs: array<array<vec4<f32>, RS>, BN>;
var<workgroup> qs: array<array<vec4<f32>, RS>, BM>;
var<workgroup> dos: array<array<vec4<f32>, RS>, BM>;
var<workgroup> ps: array<array<f32, BN>, BM>;
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
    let nkb = mu(6u);
    if (g >= nkb * mu(4u)) {
        return;  // uniform across the workgroup
    }
    let bh = g / nkb;
    let j0 = (g % nkb) * BN;
    let L = mu(0u);
    let S = mu(1u);
    let E = mu(2u);
    let Ev = mu(3u);
    let nbh = mu(4u);
    set_bases(bh);
    load_kv(t, j0);
    let tj = t / 16u;  // the key row this thread accumulates
    let tc = t % 16u;  // its vec4 column
    let e4 = (max(E, Ev) + 3u) / 4u;
    var dk = vec4<f32>(0.0);
    var dvv = vec4<f32>(0.0);
    for (var i0 = 0u; i0 < L; i0 += BM) {
        workgroupBarrier();
        load_q(t, i0);
        if (t < BM) {
            var l = 0.0;
            var d = 0.0;
            if (i0 + t < L) {
                l = stats[bh * L + i0 + t];
                d = stats[(nbh + bh) * L + i0 + t];
            }
            lse[t] = l;
            dd[t] = d;
        }
        workgroupBarrier();
        if (t < BM * BN) {
            let r = t / BN;
            let c = t % BN;
            let i = i0 + r;
            let j = j0 + c;
            var p = 0.0;
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
                p = asg_exp(score(dot, i, j) - lse[r]);
                ds = grad(p * (dp - dd[r]), i, j);
            }
            ps[r][c] = p;
            dss[r][c] = ds;
        }
        workgroupBarrier();
        if (tc < D4) {
            var a = dk;
            var b = dvv;
            for (var r = 0u; r < BM; r++) {
                a += dss[r][tj] * qs[r][tc];
                b += ps[r][tj] * dos[r][tc];
            }
            dk = a;
            dvv = b;
        }
    }
    let j = j0 + tj;
    if (j < S && tc < D4) {
        for (var c = 0u; c < 4u; c++) {
            let e = 4u * tc + c;
            if (e < E) {
                dkt[at(6u, e, j)] = dk[c];
            }
            if (e < Ev) {
                dv[at(7u, j, e)] = dvv[c];
            }
        }
    }
}
