// Sort along one axis, a line of up to 1024 elements per workgroup: a bitonic sort in
// workgroup memory on (value, position) pairs. Ties are ordered by position, so the
// order is total and the result is the stable sort's. BEFORE(y, j, x, i): y at j
// sorts ahead of x at i. The line is padded to N (a power of two) with positions >= R,
// which sort after every element. OUT: the value, or its position.

${PRELUDE}

struct Meta { outer: u32, R: u32, inner: u32, N: u32, }

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<${T_IN}>;
@group(0) @binding(2) var<storage, read_write> dst: array<${T_OUT}>;

var<workgroup> keys: array<${T_IN}, 1024>;
var<workgroup> pos: array<u32, 1024>;

fn before(y: ${T_IN}, j: u32, x: ${T_IN}, i: u32) -> bool {
${BEFORE}
}

fn ahead(a: u32, b: u32) -> bool {
    // slot a's pair sorts ahead of slot b's; padding (a position >= R) goes last
    let pa = pos[a];
    let pb = pos[b];
    if (pa >= params.R || pb >= params.R) {
        return pa < pb;
    }
    return before(keys[a], pa, keys[b], pb);
}

@compute @workgroup_size(256, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let line = wid.x + wid.y * nwg.x;
    let valid = line < params.outer * params.inner;
    let base = (line / params.inner) * params.R * params.inner + line % params.inner;
    for (var i = li; i < params.N; i += 256u) {
        pos[i] = i;
        if (valid && i < params.R) {
            keys[i] = src[base + i * params.inner];
        }
    }
    workgroupBarrier();
    for (var k = 2u; k <= params.N; k = k << 1u) {
        for (var j = k >> 1u; j > 0u; j = j >> 1u) {
            for (var i = li; i < params.N; i += 256u) {
                let l = i ^ j;
                if (l > i) {
                    let up = (i & k) == 0u;
                    if (select(ahead(i, l), ahead(l, i), up)) {
                        let tk = keys[i];
                        keys[i] = keys[l];
                        keys[l] = tk;
                        let tp = pos[i];
                        pos[i] = pos[l];
                        pos[l] = tp;
                    }
                }
            }
            workgroupBarrier();
        }
    }
    if (valid) {
        for (var i = li; i < params.R; i += 256u) {
            let x = keys[i];
            let p = pos[i];
            dst[base + i * params.inner] = ${OUT};
        }
    }
}
