"""Compiled kernels of the line path: Numba kernels a generated CPU function calls.

A `JitKernel` names a wrapper with the calling convention of an
`IntoKernel` (``fn(*inputs, out=None, **attrs)``, the
result written into ``out`` when it is given). The structural families' kernels are
hand-written in topic modules (``kernels_conv``, ``kernels_pool``, ``kernels_optim``),
listed in `asgrad.tensor.cpu.lowering.FAMILY_LOWERINGS`; an elementwise op's
kernel is rendered from its scalar expression (`rendered_kernel`): one loop over
the elements, written by `render_numba`, in a
module generated under `cache_dir`; a composite along rows (softmax, the norms) has
its kernel rendered from its row program (`asgrad.tensor.cpu.jit.render_rows`). Both
run over threads for large results (`asgrad.tensor.cpu.jit.threads`).
Nothing here imports
Numba until a kernel is loaded.

The kernels agree with the numpy kernels within each op's registered tolerance
(``tests/test_cpu_jit_kernels.py`` and ``packages/tensor/tests/test_cpu_jit_kernels.py``
run every op's registry cases both ways).

Convolution's kernels (``kernels_conv``) are direct convolutions whose Numba source is
generated per kernel size (``conv_source``), chosen per shape against the numpy
kernels (im2col/col2im around BLAS) by measuring (``route``).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from asgrad.tensor.cpu.jit.threads import CHUNK
from asgrad.tensor.ir.registry import TensorType

__all__ = ["JitKernel", "rendered_kernel"]

Applies = Callable[[Sequence[TensorType], TensorType, Mapping[str, Any]], bool]
_FLOATS = ("float32", "float64")


def _always(ins: Sequence[TensorType], out: TensorType, attrs: Mapping[str, Any]) -> bool:
    return True


@dataclass(frozen=True)
class JitKernel:
    """A compiled kernel for one op.

    Attributes:
        module: The topic module under ``asgrad.tensor.cpu.jit`` holding the wrapper
            (a generated module's name when ``source`` is given).
        function: The wrapper's name there.
        leading: How many leading inputs the result may be written into (the wrapper
            reads each element or row of them before writing it); 0: ``out``
            overlaps no input.
        applies: Whether it runs a node, from the inputs' and result's types and the
            attributes (beyond `applies_to`'s common checks).
        source: The generated module's source (a rendered kernel), or None.
    """

    module: str
    function: str
    leading: int = 0
    applies: Applies = _always
    source: str | None = None

    @staticmethod
    def index_gradient(
        ins: Sequence[TensorType], out: TensorType, attrs: Mapping[str, Any]
    ) -> bool:
        """A float gradient scattered at integer indices (the second input)."""
        return ins[0].dtype in _FLOATS and ins[1].dtype in ("int32", "int64")

    def applies_to(
        self, ins: Sequence[TensorType], out: TensorType, attrs: Mapping[str, Any]
    ) -> bool:
        """Whether it runs a node at these exact types: a float32 or float64 result of
        rank >= 1, every floating input of the result's dtype (integer inputs are
        indices), and `applies`."""
        if out.dtype not in _FLOATS or not out.shape:
            return False
        if any(t.dtype != out.dtype for t in ins if t.dtype.startswith("float")):
            return False
        return self.applies(ins, out, attrs)

    def load(self) -> Callable[..., Any]:
        """The wrapper (imports its module, and Numba, on first use)."""
        if self.source is not None:
            from asgrad.tensor.cpu.jit.step_run import load_module

            generated = load_module(self.source, self.module)
            fn: Callable[..., Any] = getattr(generated, self.function)
            return fn
        module = importlib.import_module(f"asgrad.tensor.cpu.jit.{self.module}")
        fn = getattr(module, self.function)
        return fn


class LazyKernel:
    """A `JitKernel` called as a line's function: loaded (with Numba) on its first call."""

    def __init__(self, kernel: JitKernel) -> None:
        self.kernel = kernel
        self.fn: Callable[..., Any] | None = None

    def __call__(self, *args: Any, out: Any = None) -> Any:
        if self.fn is None:
            self.fn = self.kernel.load()
        return self.fn(*args, out=out)


# An elementwise loop is compiled on the line path when its expression has at least
# this many primitives (numpy makes one pass over memory per primitive; one primitive
# is numpy's own vectorised loop, which a compiled loop does not beat on one thread).
# A smaller expression, or one with an input broadcast along the leading axes (a bias),
# is compiled only where its loop runs over threads (`threaded`): numpy's loop has one.
RENDER_MIN_PRIMITIVES = 2


def threaded(out: TensorType) -> bool:
    """Whether a kernel with result ``out`` may run its parallel form at the settings
    now (`asgrad.tensor.cpu.jit.threads.may_thread`): where it does, even a
    one-primitive loop beats numpy's single-threaded one."""
    from asgrad.tensor.cpu.jit.threads import may_thread

    return may_thread(math.prod(out.shape))


def rendered_kernel(
    expr: Any, ins: Sequence[TensorType], out: TensorType, *, fused: bool = False
) -> JitKernel | None:
    """The compiled loop of an elementwise expression at these types, or None.

    Taken for a float result of rank >= 1 whose inputs have its shape or none, or one
    shape that is a trailing part of it (a bias: ``[512]`` against ``[32, 256, 512]``;
    leading ones aside: a positional embedding's ``[1, 256, 512]``),
    when every primitive of the expression vectorises in a loop (`vectorises`) and
    either the expression applies at least `RENDER_MIN_PRIMITIVES` primitives over
    inputs of the result's shape (one compiled pass beats numpy's pass per primitive)
    or the loop runs over threads (`threaded`). ``fused``: the expression is several
    lines' (`asgrad.tensor.cpu.jit.fuse_elementwise`), taken with a bias too, where one
    pass replaces a pass per line.
    """
    from asgrad.tensor.cpu.jit.emit import UnsupportedError
    from asgrad.tensor.cpu.jit.render import PRELUDE, primitives, vectorises

    if out.dtype not in _FLOATS or not out.shape:
        return None
    rows = {_bare(t.shape) for t in ins if t.shape not in ((), out.shape)}
    if len(rows) > 1 or any(out.shape[len(out.shape) - len(r) :] != r for r in rows):
        return None
    full = [j for j, t in enumerate(ins) if t.shape == out.shape]
    if not full or not vectorises(expr):
        return None
    few = len(primitives(expr)) < RENDER_MIN_PRIMITIVES
    if (few or (rows and not fused)) and not threaded(out):
        return None
    row = math.prod(next(iter(rows))) if rows else 0
    names = [f"a{j}" for j in range(len(ins))]
    # An input the result may be written over: the executor's memory plan hands such an
    # input back as ``out`` (``k(v1, v2, out=v1)``). LLVM guards its vectorised loop with
    # a check that ``out`` overlaps no input, so an exact alias runs the scalar loop
    # (gelu_backward, 512k float32: 0.66 ms into a fresh array, 8.5 ms into its own
    # gradient input). Each such input gets a loop that reads it from ``out`` instead.
    aliasable = [j for j, t in enumerate(ins) if t.shape == out.shape and t.dtype == out.dtype]
    try:
        loops = [
            _loop_source(f"{form}_loop{'' if j is None else f'_over{j}'}", expr, ins, out, j, row)
            for j in (None, *aliasable)
            for form in ("", "_p")
        ]
    except UnsupportedError:
        return None
    flat = [
        # A scalar input is passed by value: a 0-d array reaching a prange body is
        # typed as its element there, which the serial loop it calls does not accept.
        f"_flat({n})" if t.shape else f"_{n}_dtype.type({n})"
        for n, t in zip(names, ins, strict=True)
    ]
    dtypes = "".join(
        f"_{n}_dtype = np.dtype({t.dtype!r})\n" for n, t in zip(names, ins, strict=True)
    )
    calls = [
        f"    if out is a{j} and out.flags.c_contiguous:\n"
        + _timed_call(
            f"_loop_over{j}", ", ".join([*flat[:j], *flat[j + 1 :], "out.reshape(-1)"]), "        "
        )
        + "\n        return out"
        for j in aliasable
    ]
    source = "\n".join(
        [
            "import math",
            "import numpy as np",
            "import numba",
            "from asgrad.tensor.cpu.jit.threads import CHUNK as _CHUNK",
            "from time import perf_counter as _clock",
            "from asgrad.tensor.cpu.jit.threads import Site as _Site",
            PRELUDE,
            "_site = _Site(__name__)",
            "",
            *loops,
            dtypes,
            "def _flat(a):",
            "    return np.ascontiguousarray(a).reshape(-1)",
            "",
            "",
            f"def kernel({', '.join(names)}, *, out=None, **attrs):",
            *calls,
            "    if out is None or not out.flags.c_contiguous:",
            f"        out = np.empty(a{full[0]}.shape, np.{out.dtype})",
            _timed_call("_loop", f"{', '.join(flat)}, out.reshape(-1)", "    "),
            "    return out",
            "",
        ]
    )
    # Every input is read at element i before out[i] is written: any input of the
    # result's shape may be out (up to the first that is not).
    shaped_like = [t.shape == out.shape for t in ins]
    leading = shaped_like.index(False) if rows else len(ins)
    return JitKernel("asgrad_loop", "kernel", leading=leading, source=source)


def _bare(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` without its leading ones, unless nothing would be left (``[1, 256, 512]``
    repeated along ``[32, 256, 512]``'s rows holds the elements of ``[256, 512]``)."""
    k = 0
    while k < len(shape) - 1 and shape[k] == 1:
        k += 1
    return shape[k:]


def _timed_call(loop: str, args: str, ind: str) -> str:
    """Source calling ``loop`` or its parallel form ``_p{loop}`` with ``args``, as the
    module's ``_site`` chooses (`asgrad.tensor.cpu.jit.threads.Site`), timing the call
    while it measures."""
    return (
        f"{ind}form = _site.form(out.size)\n"
        f"{ind}loop = _p{loop} if form & 1 else {loop}\n"
        f"{ind}if form < 2:\n"
        f"{ind}    loop({args})\n"
        f"{ind}else:\n"
        f"{ind}    start = _clock()\n"
        f"{ind}    loop({args})\n"
        f"{ind}    _site.timed(out.size, form, _clock() - start)"
    )


def _loop_source(
    name: str,
    expr: Any,
    ins: Sequence[TensorType],
    out: TensorType,
    over: int | None,
    row: int = 0,
) -> str:
    """A compiled loop of ``expr``; input ``over`` (if any) is read from ``out``. A
    name starting ``_p`` gets the parallel form: chunks of ``_CHUNK`` elements over
    ``numba.prange``, each handed to the serial loop (the loop written out in the
    prange body did not vectorise: silu over 512k float32 took 0.98 ms against the
    serial loop's 0.34 ms, both on one thread). ``row`` > 0: the inputs shaped neither
    like the result nor scalar hold ``row`` elements, repeated along the result's rows
    (the loop runs over rows, then over a row; a chunk is whole rows)."""
    from asgrad.tensor.cpu.jit.render import render_numba

    names = [f"a{j}" for j in range(len(ins)) if j != over]

    def elem(j: int, t: TensorType) -> str:
        if j == over:
            return "out[i]"
        if not t.shape:
            return f"a{j}"
        return f"a{j}[i]" if t.shape == out.shape else f"a{j}[c]"

    elems = [elem(j, t) for j, t in enumerate(ins)]
    body = render_numba(expr, elems, [t.dtype for t in ins], out.dtype)
    head = [
        '@numba.njit(cache=True, fastmath=False, error_model="numpy", nogil=True,'
        f" boundscheck=False{', parallel=True' if name.startswith('_p') else ''})",
        f"def {name}({', '.join([*names, 'out'])}):",
    ]
    full = {f"a{j}" for j, t in enumerate(ins) if t.shape == out.shape}
    if name.startswith("_p"):
        step = f"{max(1, CHUNK // row)} * {row}" if row else "_CHUNK"
        chunks = [f"{n}[lo:hi]" if n in full else n for n in names]
        loop = [
            "    n = out.shape[0]",
            f"    step = {step}",
            "    for c in numba.prange((n + step - 1) // step):",
            "        lo = c * step",
            "        hi = min(lo + step, n)",
            f"        {name[2:]}({', '.join([*chunks, 'out[lo:hi]'])})",
        ]
    elif row:
        loop = [
            f"    for r in range(out.shape[0] // {row}):",
            f"        for c in range({row}):",
            f"            i = r * {row} + c",
            f"            out[i] = {body}",
        ]
    else:
        loop = ["    for i in range(out.shape[0]):", f"        out[i] = {body}"]
    return "\n".join([*head, *loop, "", ""])
