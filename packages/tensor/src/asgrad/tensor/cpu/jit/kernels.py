"""The compiled kernels' table: op name -> a Numba kernel with the op's semantics.

Each `JitKernel` names a wrapper in a topic module (``kernels_<topic>.py``,
imported on first use, so that importing asgrad never imports Numba) with the
calling convention of an `IntoKernel`:
``fn(*inputs, out=None, **attrs)``, the result written into ``out`` when it is
given. The code generator (`asgrad.tensor.cpu.codegen`) calls it instead of
the op's numpy kernel when the compiled path is on and `lookup` finds an entry
whose ``applies`` holds at the node's exact types; everything else runs numpy.

The kernels agree with the numpy kernels within each op's registered tolerance
(``tests/test_cpu_jit_kernels.py`` runs every op's registry cases both ways).

Convolution has no entry: a compiled im2col measured slower than numpy's strided
copy (rows of a 14-pixel image are too short for a loop to beat it), and a compiled
col2im around the same BLAS product made the input gradient no faster
(``benchmarks/jit_kernels.py`` before this table dropped it: 8.08 ms numpy, 8.20 ms
compiled); the products, the bulk of the time, are the same BLAS calls either way.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from asgrad.tensor.ir.registry import TensorType

__all__ = ["JIT_KERNELS", "JitKernel", "lookup"]

Applies = Callable[[Sequence[TensorType], TensorType, Mapping[str, Any]], bool]
_FLOATS = ("float32", "float64")


@dataclass(frozen=True)
class JitKernel:
    """A compiled kernel for one op.

    Attributes:
        module: The topic module under ``asgrad.tensor.cpu.jit`` holding the wrapper.
        function: The wrapper's name there.
        applies: Whether it runs a node, from the inputs' and result's types and the
            attributes (beyond `lookup`'s common checks).
        leading: How many leading inputs the result may be written into (the wrapper
            reads each element or row of them before writing it); 0: ``out``
            overlaps no input.
    """

    module: str
    function: str
    applies: Applies
    leading: int = 0

    def load(self) -> Callable[..., Any]:
        """The wrapper (imports its module, and Numba, on first use)."""
        module = importlib.import_module(f"asgrad.tensor.cpu.jit.{self.module}")
        fn: Callable[..., Any] = getattr(module, self.function)
        return fn


def _always(ins: Sequence[TensorType], out: TensorType, attrs: Mapping[str, Any]) -> bool:
    return True


def _exact_gelu(ins: Sequence[TensorType], out: TensorType, attrs: Mapping[str, Any]) -> bool:
    return bool(attrs.get("approximate", "none") == "none")


def _float_gradient(ins: Sequence[TensorType], out: TensorType, attrs: Mapping[str, Any]) -> bool:
    return ins[0].dtype in _FLOATS and ins[1].dtype in ("int32", "int64")


JIT_KERNELS: dict[str, JitKernel] = {
    "gelu": JitKernel("kernels_elementwise", "gelu", _exact_gelu, leading=1),
    "gelu_backward": JitKernel("kernels_elementwise", "gelu_backward", _exact_gelu, leading=2),
    "adam_ema": JitKernel("kernels_elementwise", "adam_ema", _always, leading=2),
    "adam_update": JitKernel("kernels_elementwise", "adam_update", _always, leading=3),
    "softmax": JitKernel("kernels_norm", "softmax", _always, leading=1),
    "log_softmax": JitKernel("kernels_norm", "log_softmax", _always),
    "layer_norm": JitKernel("kernels_norm", "layer_norm", _always, leading=1),
    "layer_norm_backward": JitKernel("kernels_norm", "layer_norm_backward", _always, leading=2),
    "max_pool2d_backward": JitKernel("kernels_pool", "max_pool2d_backward", _always),
    "scatter_add": JitKernel("kernels_pool", "scatter_add", _float_gradient),
}


def lookup(
    op: str, ins: Sequence[TensorType], out: TensorType, attrs: Mapping[str, Any]
) -> JitKernel | None:
    """The compiled kernel for a node of ``op`` at these exact types, or None.

    Common conditions: a float32 or float64 result of rank >= 1, and every floating
    input of the result's dtype (integer inputs are indices).
    """
    entry = JIT_KERNELS.get(op)
    if entry is None or out.dtype not in _FLOATS or not out.shape:
        return None
    if any(t.dtype != out.dtype for t in ins if t.dtype.startswith("float")):
        return None
    return entry if entry.applies(ins, out, attrs) else None
