// float16 helpers, pasted after prelude.wgsl into kernels that use f16 (with `enable f16;`,
// see asgrad.gpu.device.source.enable_f16).
//
// float16 values are stored and added, subtracted and multiplied as f16 (WGSL rounds
// those correctly, as numpy does). Every other float primitive widens its f16 operands
// to f32 (asg_h2f: exact), runs prelude.wgsl's f32 helper and rounds the result to f16
// once (asg_f2h): numpy's own float16 loops compute in float32 the same way. WGSL has
// no f16 bitcasts here (naga), so NaN and the infinities are made by converting the
// f32 ones, and a value beyond the f16 range is sent to an infinity explicitly (WGSL
// leaves that conversion undefined; numpy gives +-inf).

fn asg_hnan() -> f16 {
    return f16(asg_nan());
}

fn asg_hinf() -> f16 {
    return f16(asg_inf());
}

fn asg_h2f(h: f16) -> f32 {
    return f32(h);
}

// f32 -> f16 as numpy's astype: values that round beyond 65504 (from 65520 up) become
// +-inf, NaN stays NaN
fn asg_f2h(x: f32) -> f16 {
    if (asg_isnan(x)) {
        return asg_hnan();
    }
    if (abs(x) >= 65520.0) {
        return select(asg_hinf(), -asg_hinf(), x < 0.0);
    }
    return f16(x);
}
