"""Shader modules, with the runtime checks wgpu-native adds to them chosen.

wgpu's shader translator (naga) adds two kinds of code to every kernel: bounds checks
(each dynamic index into an array clamped into it) and loop bounding (a counter in
every loop so that a loop the compiler cannot prove finite still ends). wgpu-native
can skip them for shaders an application trusts
(``wgpuDeviceCreateShaderModuleTrusted``). ``ASGRAD_GPU_SHADER_CHECKS`` chooses, for
the pipelines of the devices made while it is set: ``all`` (wgpu's default), ``bounds``
(bounds checks, no loop bounding) or ``none`` (neither: an index out of range is then
undefined behaviour, so this is for measuring only).

Every loop of asgrad's kernels is bounded by construction (a count from the kernel's
shape), so loop bounding guards nothing there, and its counter costs time in the
inner loops of the matrix products and row kernels: ``bounds`` is the default.
"""

from __future__ import annotations

import os
from typing import Any

from asgrad.gpu.errors import GpuError

__all__ = ["CHECKS", "DEFAULT", "checks_setting", "create_shader_module"]

# Runtime checks per setting (wgpu-native's WGPUShaderRuntimeChecks flags).
CHECKS = {"all": None, "bounds": 0x1, "none": 0x0}
DEFAULT = "bounds"


def checks_setting() -> str:
    """The runtime checks asked for by ``ASGRAD_GPU_SHADER_CHECKS`` (else `DEFAULT`)."""
    value = os.environ.get("ASGRAD_GPU_SHADER_CHECKS", "").strip().lower() or DEFAULT
    if value not in CHECKS:
        raise GpuError(
            f"ASGRAD_GPU_SHADER_CHECKS={value!r} is not a setting: use one of"
            f" {', '.join(CHECKS)} (unset: {DEFAULT})"
        )
    return value


def create_shader_module(device: Any, code: str, label: str, checks: str = "all") -> Any:
    """A WGSL shader module of ``device`` compiled with the runtime ``checks`` named."""
    flags = CHECKS[checks]
    if flags is None:
        return device.create_shader_module(code=code, label=label)
    from wgpu.backends.wgpu_native import _api

    lib, ffi = _api.lib, _api.ffi
    source = _api.new_struct_p("WGPUShaderSourceWGSL *", code=_api.to_c_string_view(code))
    source[0].chain.next = ffi.NULL
    source[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
    descriptor = _api.new_struct_p(
        "WGPUShaderModuleDescriptor *",
        nextInChain=ffi.cast("WGPUChainedStruct *", source),
        label=_api.to_c_string_view(label),
    )
    handle = lib.wgpuDeviceCreateShaderModuleTrusted(device._internal, descriptor, flags)
    if handle == ffi.NULL:
        raise GpuError(f"creating the shader module {label!r} failed")
    return _api.GPUShaderModule(label, handle, device)
