"""The device limits asgrad asks for, stated explicitly.

wgpu-py asks for the adapter's *maximum* of every limit unless told otherwise, so code
that works on a big GPU may fail on a small one. asgrad asks for WebGPU's default
limits, except where a larger value changes what can run rather than how code is
written: the buffer sizes (large tensors must fit) follow the adapter up to a cap.
Kernels are written to fit the defaults (16 KiB of workgroup memory, 256 invocations
per workgroup, 8 storage buffers per stage). The storage buffers per stage follow the
adapter too (up to `BINDING_CAPS`): the multi-tensor update
(`asgrad.gpu.plan.multi_update`) binds as many parameters in one dispatch as the
device allows, and needs only the default to work. So does the workgroup memory (up to
`TILE_CAPS`): the matmul's larger tiles run where it is granted, the others everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "BINDING_CAPS",
    "DATA_SIZE_CAPS",
    "TILE_CAPS",
    "WEBGPU_DEFAULT_LIMITS",
    "requested_limits",
]

# WebGPU's default limits (https://www.w3.org/TR/webgpu/#limits).
WEBGPU_DEFAULT_LIMITS: dict[str, int] = {
    "max-texture-dimension-1d": 8192,
    "max-texture-dimension-2d": 8192,
    "max-texture-dimension-3d": 2048,
    "max-texture-array-layers": 256,
    "max-bind-groups": 4,
    "max-bind-groups-plus-vertex-buffers": 24,
    "max-bindings-per-bind-group": 1000,
    "max-dynamic-uniform-buffers-per-pipeline-layout": 8,
    "max-dynamic-storage-buffers-per-pipeline-layout": 4,
    "max-sampled-textures-per-shader-stage": 16,
    "max-samplers-per-shader-stage": 16,
    "max-storage-buffers-per-shader-stage": 8,
    "max-storage-textures-per-shader-stage": 4,
    "max-uniform-buffers-per-shader-stage": 12,
    "max-uniform-buffer-binding-size": 65536,
    "max-storage-buffer-binding-size": 134217728,
    "min-uniform-buffer-offset-alignment": 256,
    "min-storage-buffer-offset-alignment": 256,
    "max-vertex-buffers": 8,
    "max-buffer-size": 268435456,
    "max-vertex-attributes": 16,
    "max-vertex-buffer-array-stride": 2048,
    "max-inter-stage-shader-variables": 16,
    "max-color-attachments": 8,
    "max-color-attachment-bytes-per-sample": 32,
    "max-compute-workgroup-storage-size": 16384,
    "max-compute-invocations-per-workgroup": 256,
    "max-compute-workgroup-size-x": 256,
    "max-compute-workgroup-size-y": 256,
    "max-compute-workgroup-size-z": 64,
    "max-compute-workgroups-per-dimension": 65535,
}

# Limits that decide how large a tensor can be: follow the adapter up to these caps.
DATA_SIZE_CAPS: dict[str, int] = {
    "max-storage-buffer-binding-size": 2**31 - 4,
    "max-buffer-size": 2**32,
}

# Limits that decide how many tensors one dispatch can bind: follow the adapter up to these.
BINDING_CAPS: dict[str, int] = {
    "max-storage-buffers-per-shader-stage": 128,
}

# Limits that let larger matmul tiles run (`asgrad.gpu.lowering._matmul_tiles`: a 128x128
# tile with K steps of 16, double-buffered, needs 32 KiB of workgroup memory): follow
# the adapter up to these. Every other kernel fits the default.
TILE_CAPS: dict[str, int] = {
    "max-compute-workgroup-storage-size": 32768,
}


def requested_limits(adapter_limits: Mapping[str, int]) -> dict[str, int]:
    """The limits to request from an adapter that reports ``adapter_limits``.

    A ``max-*`` limit is never asked above what the adapter offers (some drivers
    report less than WebGPU's default), a ``min-*`` alignment never below it.

    >>> requested_limits({"max-buffer-size": 2**40})["max-buffer-size"] == 2**32
    True
    """
    out: dict[str, int] = {}
    followed = {**DATA_SIZE_CAPS, **BINDING_CAPS, **TILE_CAPS}  # read now: a sweep may set them
    for name, default in WEBGPU_DEFAULT_LIMITS.items():
        have = adapter_limits.get(name)
        wanted = followed.get(name, default)
        if name in followed and have is not None:
            wanted = max(default, min(have, wanted))
        if have is None:
            out[name] = wanted
        elif name.startswith("min-"):
            out[name] = max(wanted, have)
        else:
            out[name] = min(wanted, have)
    return out
