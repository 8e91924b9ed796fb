// Device-side checks (asgrad/gpu/checks.py), pasted into the kernels that check.
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
