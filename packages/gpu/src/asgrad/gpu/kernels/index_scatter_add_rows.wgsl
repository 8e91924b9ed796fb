// The gradient of gather, one workgroup per output row: out = zeros (outer, axis_len, inner);
// out[o, idx[p], j] += g[o, p, j]. Workgroup w owns row k of block o and the 64 columns
// [64 cb, 64 cb + 64) of it. It reads the indices in chunks of 512 (8 consecutive ones
// per thread), keeps in workgroup memory the positions p of the chunk with idx[p] == k,
// in increasing order (a prefix sum of the per-thread counts places them), and each
// thread adds g[o, p, j] of its column j over those positions. Every element is the
// sum of its matching entries of g in index order, as the one-thread-per-element
// kernel (index_scatter_add.wgsl) and numpy's sequential np.add.at compute it: the
// same bits, every run. The indices are read once per workgroup instead of once per
// output element. An index outside [0, axis_len) matches no row, so it adds nothing;
// workgroup 0 records a bad one in the check slot `slot`.

struct Params { groups: u32, axis_len: u32, n_idx: u32, inner: u32, slot: u32, col_blocks: u32, _p0: u32, _p1: u32, }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
${CHECKS}

const WG: u32 = 64u;
const PER: u32 = 8u;
const CHUNK: u32 = 512u;  // WG * PER

var<workgroup> hits: array<u32, 512>;
var<workgroup> scan: array<u32, 64>;
var<workgroup> found: u32;

@compute @workgroup_size(64, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let w = wid.x + wid.y * nwg.x;
    if (w >= params.groups) {
        return;  // the whole workgroup: w is uniform
    }
    let cb = w % params.col_blocks;
    let rows = w / params.col_blocks;
    let k = i32(rows % params.axis_len);
    let o = rows / params.axis_len;
    let j = cb * WG + li;
    let live = j < params.inner;
    let base = o * params.n_idx * params.inner + j;
    var acc = 0.0;
    for (var start = 0u; start < params.n_idx; start += CHUNK) {
        let q0 = start + li * PER;
        var mask = 0u;
        for (var e = 0u; e < PER; e++) {
            let q = q0 + e;
            if (q < params.n_idx) {
                let v = idx[q];
                if (v == k) {
                    mask |= 1u << e;
                }
                if (w == 0u && u32(v) >= params.axis_len) {
                    asg_flag(params.slot, v);
                }
            }
        }
        let mine = countOneBits(mask);
        // inclusive prefix sum of the per-thread counts over the workgroup
        scan[li] = mine;
        workgroupBarrier();
        for (var d = 1u; d < WG; d <<= 1u) {
            var left = 0u;
            if (li >= d) {
                left = scan[li - d];
            }
            workgroupBarrier();
            scan[li] += left;
            workgroupBarrier();
        }
        var at = scan[li] - mine;
        if (li == WG - 1u) {
            found = scan[li];
        }
        for (var e = 0u; e < PER; e++) {
            if ((mask & (1u << e)) != 0u) {
                hits[at] = q0 + e;
                at++;
            }
        }
        let n_hits = workgroupUniformLoad(&found);  // a barrier: hits are written
        if (live) {
            for (var h = 0u; h < n_hits; h++) {
                acc += g[base + hits[h] * params.inner];
            }
        }
        workgroupBarrier();  // hits and scan are reused by the next chunk
    }
    if (live) {
        out[(o * params.axis_len + u32(k)) * params.inner + j] = acc;
    }
}
