// Device-side checks (asgrad/gpu/device/checks.py), pasted into the kernels that check.
//
// A kernel that meets a bad value (an index outside [0, n), an integer result the
// GPU cannot hold) still writes a defined result, and records the fault in its slot
// of this buffer: word 4s counts the bad elements, words 4s + 1 and 4s + 2 hold the
// largest value and the complement of the smallest (i32 values mapped to u32 in
// order), and word 0 says that some slot is set. Only a faulty element touches the
// buffer, so the check costs a comparison on the good path.

@group(0) @binding(${CHECK_BINDING}) var<storage, read_write> asg_checks: array<atomic<u32>>;

fn asg_flag(slot: u32, value: i32) {
    let key = bitcast<u32>(value) ^ 0x80000000u;
    atomicAdd(&asg_checks[4u * slot], 1u);
    atomicMax(&asg_checks[4u * slot + 1u], key);
    atomicMax(&asg_checks[4u * slot + 2u], ~key);
    atomicMax(&asg_checks[0], 1u);
}

// int64 arithmetic on int32 storage: the wrapped result, flagged when the exact one
// leaves the int32 range
fn asg_chk_add(a: i32, b: i32, slot: u32) -> i32 {
    let r = a + b;
    if (((a ^ r) & (b ^ r)) < 0i) {
        asg_flag(slot, r);
    }
    return r;
}

fn asg_chk_sub(a: i32, b: i32, slot: u32) -> i32 {
    let r = a - b;
    if (((a ^ b) & (a ^ r)) < 0i) {
        asg_flag(slot, r);
    }
    return r;
}

fn asg_chk_mul(a: i32, b: i32, slot: u32) -> i32 {
    let r = a * b;
    let min_i32 = bitcast<i32>(0x80000000u);
    if (a != 0i && (r / a != b || (a == -1i && b == min_i32))) {
        asg_flag(slot, r);
    }
    return r;
}

fn asg_chk_neg(a: i32, slot: u32) -> i32 {
    if (a == bitcast<i32>(0x80000000u)) {
        asg_flag(slot, a);
    }
    return -a;
}

fn asg_chk_abs(a: i32, slot: u32) -> i32 {
    if (a == bitcast<i32>(0x80000000u)) {
        asg_flag(slot, a);
    }
    return abs(a);
}

// float32 -> int64 held as int32: flagged outside [-2**31, 2**31) (NaN and inf too)
fn asg_chk_f2i(x: f32, slot: u32) -> i32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) >= 0x4f000000u && b != 0xcf000000u) {
        asg_flag(slot, 0i);
    }
    return select(i32(x), bitcast<i32>(0x80000000u), (b & 0x7fffffffu) >= 0x4f000000u);
}

// a 64-bit sum (lo, hi) narrowed to int32, flagged when it does not fit
fn asg_chk_narrow(v: vec2<i32>, slot: u32) -> i32 {
    if (v.y != (v.x >> 31u)) {
        asg_flag(slot, 0i);
    }
    return v.x;
}

// Integer division, remainder and power, needing no prelude. A zero divisor or a negative
// power flags `bad` and gives 0; with `wide` (an int64 held as int32) a result that
// leaves the int32 range flags `ovf` (int32 results wrap, as numpy's).
fn asg_chk_floordiv(a: i32, b: i32, bad: u32, ovf: u32, wide: bool) -> i32 {
    if (b == 0i) {
        asg_flag(bad, a);
        return 0i;
    }
    if (wide && b == -1i && a == bitcast<i32>(0x80000000u)) {
        asg_flag(ovf, a);
    }
    // rounded down, as numpy's // (WGSL's / truncates). The remainder is a - q * b, not
    // a % b: NVIDIA's Vulkan driver computed i32 % of negative operands as unsigned.
    let q = a / b;
    return select(q, q - 1i, (a - q * b != 0i) && ((a < 0i) != (b < 0i)));
}

fn asg_chk_mod(a: i32, b: i32, bad: u32, ovf: u32, wide: bool) -> i32 {
    if (b == 0i) {
        asg_flag(bad, a);
        return 0i;
    }
    // the sign of the divisor, as numpy's % (WGSL's % takes the dividend's); a - q * b
    // rather than a % b, which NVIDIA's Vulkan driver computed as unsigned for negatives
    let r = a - (a / b) * b;
    return select(r, r + b, r != 0i && ((r < 0i) != (b < 0i)));
}

fn asg_chk_ipow(a: i32, b: i32, bad: u32, ovf: u32, wide: bool) -> i32 {
    if (b < 0i) {
        asg_flag(bad, b);
        return 0i;
    }
    // by squaring; once the base overflows with bits of b left, so does the result
    var r = 1i;
    var base = a;
    var e = b;
    var over = false;
    loop {
        if (e == 0i) {
            break;
        }
        if ((e & 1i) == 1i) {
            let p = r * base;
            over = over || (r != 0i && (p / r != base || (r == -1i && base == bitcast<i32>(0x80000000u))));
            r = p;
        }
        e = e >> 1u;
        if (e != 0i) {
            let sq = base * base;
            over = over || (base != 0i && (sq / base != base || base == bitcast<i32>(0x80000000u)));
            base = sq;
        }
    }
    if (wide && over) {
        asg_flag(ovf, r);
    }
    return r;
}

// int64 a << s with a held as int32: numpy's 0 outside [0, 64); flagged when the
// exact 64-bit result leaves the int32 range
fn asg_chk_shl64(a: i32, s: i32, ovf: u32) -> i32 {
    if (s < 0i || s >= 64i) {
        return 0i;
    }
    let hi0 = a >> 31u;
    var lo = bitcast<u32>(a);
    var hi = bitcast<u32>(hi0);
    if (s >= 32i) {
        hi = lo << u32(s - 32i);
        lo = 0u;
    } else if (s > 0i) {
        hi = (hi << u32(s)) | (lo >> u32(32i - s));
        lo = lo << u32(s);
    }
    if (bitcast<i32>(hi) != (bitcast<i32>(lo) >> 31u)) {
        asg_flag(ovf, a);
    }
    return bitcast<i32>(lo);
}
