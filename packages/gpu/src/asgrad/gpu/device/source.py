"""Loading WGSL kernels shipped as package data and specialising them.

Kernel files live in ``asgrad/gpu/kernels/*.wgsl``. Specialisation is plain
``string.Template`` substitution (``${NAME}``; WGSL never uses ``$``) for what must be
known when the module is compiled (element types, tile sizes, generated expressions);
numeric knobs that WGSL allows as ``override`` constants go through pipeline constants.
"""

from __future__ import annotations

import functools
import re
import string
from importlib import resources
from typing import Any

import numpy as np

__all__ = [
    "enable_f16",
    "kernel_text",
    "numpy_dtype",
    "render",
    "storage_dtype",
    "to_storage",
    "uses_f16",
    "wgsl_type",
]


@functools.cache
def kernel_text(name: str) -> str:
    """The text of ``kernels/<name>.wgsl``."""
    return resources.files("asgrad.gpu").joinpath("kernels", f"{name}.wgsl").read_text()


def render(name: str, **subs: object) -> str:
    """``kernels/<name>.wgsl`` with every ``${KEY}`` replaced by ``subs[KEY]``.

    A missing substitution raises ``KeyError`` naming it.
    """
    return string.Template(kernel_text(name)).substitute({k: str(v) for k, v in subs.items()})


# How each numpy dtype is stored on the GPU. WGSL has no 8/64-bit storage types, so
# booleans are stored as u32 (0/1), 64-bit integers as i32 (values must fit) and
# float64 values (optimizer scalars such as a step count) are computed in float32.
# float16 is stored as f16 (the device's ``shader-f16`` feature; see `enable_f16`).
_STORAGE: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype(np.float16): np.dtype(np.float16),
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float64): np.dtype(np.float32),
    np.dtype(np.int32): np.dtype(np.int32),
    np.dtype(np.int64): np.dtype(np.int32),
    np.dtype(np.int16): np.dtype(np.int32),
    np.dtype(np.int8): np.dtype(np.int32),
    np.dtype(np.uint8): np.dtype(np.uint32),
    np.dtype(np.uint32): np.dtype(np.uint32),
    np.dtype(np.bool_): np.dtype(np.uint32),
}
_WGSL: dict[np.dtype[Any], str] = {
    np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32",
    np.dtype(np.int32): "i32",
    np.dtype(np.uint32): "u32",
}


def numpy_dtype(dtype: str) -> np.dtype[Any]:
    """The numpy dtype of a graph dtype (float64 values are computed in float32)."""
    return np.dtype(dtype)


def storage_dtype(dtype: np.dtype | type) -> np.dtype:
    """The numpy dtype a tensor of ``dtype`` has in a GPU buffer.

    Raises [`GpuUnsupportedError`][asgrad.gpu.GpuUnsupportedError] for dtypes WGSL cannot hold
    (float64: run gradient checks on the CPU backend).
    """
    from asgrad.gpu.errors import GpuUnsupportedError

    dt = np.dtype(dtype)
    try:
        return _STORAGE[dt]
    except KeyError:
        raise GpuUnsupportedError(
            f"dtype {dt} has no GPU storage type (WGSL has f16, f32, i32, u32); "
            "use float16, float32, int32/int64 or bool on the GPU"
        ) from None


def wgsl_type(dtype: np.dtype | type) -> str:
    """The WGSL scalar type that stores ``dtype`` (``f16``, ``f32``, ``i32`` or ``u32``)."""
    return _WGSL[storage_dtype(dtype)]


_I32 = np.iinfo(np.int32)


def to_storage(value: np.ndarray, storage: np.dtype[Any]) -> np.ndarray:
    """``value`` as a C-contiguous array of ``storage`` dtype, ready to upload.

    64-bit integers must fit in 32 bits (WGSL has no 64-bit storage): a value that
    does not raises [`GpuUnsupportedError`][asgrad.gpu.GpuUnsupportedError] rather than wrap.
    """
    if value.dtype.kind in "iu" and value.dtype.itemsize > 4 and value.size:
        low, high = int(value.min()), int(value.max())
        if low < _I32.min or high > _I32.max:
            from asgrad.gpu.errors import GpuUnsupportedError

            raise GpuUnsupportedError(
                f"an {value.dtype} value ({low if low < _I32.min else high}) is outside "
                "the int32 range that GPU buffers hold; keep indices and seeds below 2**31"
            )
    return np.ascontiguousarray(value, dtype=storage)


_F16 = re.compile(r"\bf16\b")
_COMMENT = re.compile(r"//[^\n]*")
_PRELUDE_MARK = "fn asg_isnan("


def uses_f16(code: str) -> bool:
    """Whether the WGSL ``code`` names the ``f16`` type outside its comments (and so
    needs ``enable f16;`` and a device granted ``shader-f16``).

    >>> uses_f16("var<storage> a: array<f16>;"), uses_f16("let x: f32 = 1.0; // not f16")
    (True, False)
    """
    return _F16.search(_COMMENT.sub("", code)) is not None


def enable_f16(code: str) -> str:
    """``code`` with the ``enable f16;`` directive a kernel of ``f16`` values needs,
    and, when it pastes ``prelude.wgsl``, the float16 helpers of ``prelude_f16.wgsl``
    (``asg_h2f``, ``asg_f2h``...); other code unchanged."""
    if not uses_f16(code):
        return code
    if _PRELUDE_MARK in code:
        code = f"{code}\n{kernel_text('prelude_f16')}"
    return f"enable f16;\n{code}"
