"""How an elementwise op is registered: its numpy kernel derived from its scalar
expression (`asgrad.tensor.ir.scalar`), the checks of its attributes, and the
integer kernels that refuse what numpy would silently compute."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from asgrad.tensor.errors import DTypeError, IntegerArithmeticError
from asgrad.tensor.ir import scalar as s
from asgrad.tensor.ir.dtypes import as_dtype
from asgrad.tensor.ir.registry import CasesFn, KernelFn, OpDef, TensorType, get_op, register_op
from asgrad.tensor.ir.scalar import Expr
from asgrad.tensor.ops.elementwise_types import _infer_binary, _infer_unary_float


def rendered_kernel(name: str) -> KernelFn:
    """The numpy kernel of op ``name`` that is its expression rendered by numpy: the
    op's attributes completed by its schema, the result dtype from its shape rule."""
    made: dict[Any, Callable[..., np.ndarray]] = {}  # (input dtypes, attrs) -> function

    def kernel(*arrays: Any, **attrs: Any) -> np.ndarray:
        xs = [a if isinstance(a, np.ndarray) else np.asarray(a) for a in arrays]
        key = (*(x.dtype for x in xs), *attrs.items())  # another order: a second entry
        fn = made.get(key)
        if fn is None:
            op = get_op(name)
            assert op.expression is not None
            full = op.normalize_attrs(attrs)
            dtype = op.infer([TensorType(x.shape, x.dtype.name) for x in xs], full).dtype
            e = s.build(op.expression, len(xs), full, dtype)
            fn = made[key] = s.numpy_function(e, len(xs), dtype)
        return fn(*xs)

    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = f"``{name}``'s expression, rendered by numpy."
    return kernel


def primitive_kernel(expression: Callable[..., Expr], arity: int) -> KernelFn | None:
    """The numpy function of the one primitive that ``expression`` (of an op without
    attributes) applies to the op's inputs in order (``add(x0, x1)``: ``np.add``), or
    None. The CPU backend writes a numpy ufunc's result in place, so such an op keeps
    the ufunc as its kernel."""
    e = expression(*(s.arg(i) for i in range(arity)))
    if e.op in s.PRIMITIVES and e.args == tuple(s.arg(i) for i in range(arity)):
        return s.PRIMITIVES[e.op].numpy
    return None


def _int_division(fn: Callable[..., Any], op: str) -> KernelFn:
    """numpy's ``fn`` (// or %), with a zero integer divisor an error, not numpy's 0."""

    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if b.dtype.kind in "iu" and not b.all():
            raise IntegerArithmeticError(f"{op}: integer division by zero; mask the divisor")
        return np.asarray(fn(a, b))

    return kernel


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if b.dtype.kind in "iu" and (b < 0).any():
        raise IntegerArithmeticError("pow: an integer to a negative power; cast to float first")
    return np.asarray(np.power(a, b))


def _finite_nonzero(value: float) -> str | None:
    return None if value != 0.0 and math.isfinite(value) else "must be a finite non-zero number"


def _one_of(*options: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in options else f"must be one of {', '.join(map(repr, options))}"

    return check


def _dtype_name(value: Any) -> str | None:
    try:
        as_dtype(value)
    except DTypeError as exc:
        return f"is not a dtype asgrad has ({exc})"
    return None


def _elementwise(
    name: str, kernel: KernelFn | None, doc: str, cases: CasesFn, **fields: Any
) -> None:
    """Register an elementwise op; ``fields`` are further [`OpDef`][asgrad.tensor.OpDef] fields, by
    keyword (by default one float input, no attributes). A kernel of None: the op's kernel is its
    ``expression``, rendered by numpy (the primitive's numpy function for an op that is
    one primitive of its inputs)."""
    fields = {"arity": 1, "infer": _infer_unary_float, "attrs": (), **fields}
    if kernel is None:
        expression = fields["expression"]
        simple = not fields["attrs"] and primitive_kernel(expression, fields["arity"])
        kernel = simple or rendered_kernel(name)
    register_op(
        OpDef(name=name, family="elementwise", kernel=kernel, doc=doc, cases=cases, **fields)
    )


def _binary(name: str, kernel: KernelFn | None, doc: str, cases: CasesFn, **fields: Any) -> None:
    _elementwise(name, kernel, doc, cases, **{"arity": 2, "infer": _infer_binary, **fields})
