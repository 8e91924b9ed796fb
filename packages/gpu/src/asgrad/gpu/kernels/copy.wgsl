// Contiguous copy of n words (dtype-agnostic: moves bits). Used where a buffer must be
// duplicated inside a compute pass; a strided copy is an elementwise kernel with the
// identity expression.
//
// WORD is vec4<u32> (16-byte loads and stores, the main path) or u32 (the scalar tail
// of a byte size that is not a multiple of 16 and cannot be rounded up). Each thread
// moves ITEMS words of a block of 256 * ITEMS, 256 words apart (every load and store of
// a warp is coalesced); all loads of a block are issued before its stores so ITEMS
// memory requests are in flight per thread. Workgroups walk the blocks grid-stride, so
// a launch may have fewer workgroups than blocks (and a folded 2-D grid may have a
// few more: the loop bound skips them).

struct Params {
    n: u32,        // words to copy
    offset: u32,   // first word (the scalar tail starts after the vec4 part)
    blocks: u32,   // ceil(n / (256 * ITEMS))
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<${WORD}>;
@group(0) @binding(2) var<storage, read_write> dst: array<${WORD}>;

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let total = nwg.x * nwg.y;
    let n = params.n;
    let off = params.offset;
    for (var blk = wid.x + wid.y * nwg.x; blk < params.blocks; blk += total) {
        let i = blk * ${BLOCK}u + li;
        if (i + ${LAST}u < n) {
${LOADS}
${STORES}
        } else {
${GUARDED}
        }
    }
}
