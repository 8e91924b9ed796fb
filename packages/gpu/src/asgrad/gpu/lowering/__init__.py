"""The GPU twin of every registered op: a lowering from the op to WGSL kernel launches.

One module per op family, named as in every package (``tensor/ops/<family>.py``,
``autograd/rules/<family>.py``): each defines its ops' lowerings in a ``LOWERINGS``
table and names the kernel files they launch in ``WGSL_FILES``
(``asgrad/gpu/kernels/*.wgsl``). `LOWERINGS` is their union. ``lower(op, ins,
attrs, out)`` records the kernels computing one node from its input arrays and returns
the output array (``out`` gives the node's static shape and dtype). Leaves launch
nothing: a plan binds them to buffers (`asgrad.gpu.lowering.leaf`).
"""

from __future__ import annotations

from types import ModuleType

from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering import (
    control,
    conv,
    elementwise,
    index,
    leaf,
    linalg,
    norm,
    optim,
    pool,
    random,
    reduction,
    shape,
)
from asgrad.gpu.lowering.common import Attrs, Lowering
from asgrad.gpu.lowering.half import FLOAT32_FALLBACK, involves_float16, through_float32
from asgrad.gpu.lowering.leaf import LEAVES
from asgrad.tensor import TensorType, all_ops

__all__ = [
    "FAMILY_MODULES",
    "FLOAT32_FALLBACK",
    "LEAVES",
    "LOWERINGS",
    "Lowering",
    "gpu_kernel_names",
    "kernel_files",
    "lower",
]

# family -> the module of its lowerings
FAMILY_MODULES: dict[str, ModuleType] = {
    "leaf": leaf,
    "elementwise": elementwise,
    "reduction": reduction,
    "shape": shape,
    "index": index,
    "linalg": linalg,
    "conv": conv,
    "pool": pool,
    "norm": norm,
    "random": random,
    "optim": optim,
    "control": control,
}

LOWERINGS: dict[str, Lowering] = {
    **elementwise.LOWERINGS,
    **reduction.LOWERINGS,
    **shape.LOWERINGS,
    **index.LOWERINGS,
    **linalg.LOWERINGS,
    **conv.LOWERINGS,
    **pool.LOWERINGS,
    **norm.LOWERINGS,
    **random.LOWERINGS,
    **optim.LOWERINGS,
    **control.LOWERINGS,
}


def gpu_kernel_names() -> frozenset[str]:
    """Names of the ops the GPU backend can run (leaves included)."""
    return frozenset(LOWERINGS) | LEAVES


def kernel_files(op: str) -> tuple[str, ...]:
    """The WGSL files (in ``asgrad/gpu/kernels/``) that the lowering of ``op`` launches.

    They are the ``WGSL_FILES`` of the op's family module; a leaf launches none.

    >>> kernel_files("conv2d")[0]
    'conv.wgsl'
    """
    if op in LEAVES:
        return ()
    try:
        module = LOWERINGS[op].__module__
    except KeyError:
        if op in {o.name for o in all_ops() if not o.primitive}:
            return ()  # it expands into other ops, and runs as them
        raise GpuUnsupportedError(f"op {op!r} has no GPU lowering") from None
    files: tuple[str, ...] = FAMILY_MODULES[module.rsplit(".", 1)[-1]].WGSL_FILES
    return files


def lower(op: str, ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    """Record the kernels of one node; raises naming the op when it has no GPU twin.
    An op of `FLOAT32_FALLBACK` on float16 values runs its float32 kernel on them
    widened (`asgrad.gpu.lowering.half`)."""
    try:
        fn = LOWERINGS[op]
    except KeyError:
        raise GpuUnsupportedError(
            f"op {op!r} has no GPU kernel yet; run this graph with backend='cpu' "
            "(and report it: every registered op should have a WGSL twin)"
        ) from None
    if op in FLOAT32_FALLBACK and involves_float16(ins, out):
        return through_float32(fn, ins, attrs, out)
    return fn(ins, attrs, out)
