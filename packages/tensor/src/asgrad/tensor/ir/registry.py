"""The op registry: one entry per primitive op, read by every layer of asgrad.

An [`OpDef`][asgrad.tensor.OpDef] holds what the tensor package knows of an op, all of it declared
by keyword in the op's family file (``asgrad/tensor/ops/<family>.py``):

* what it is: ``name``, ``family``, ``arity``, ``doc``, and whether it is
  ``differentiable``, ``composite`` or ``pure``;
* what it takes: ``attrs``, the attribute schema (each `Attr`'s name, type,
  default and check, stated once);
* what it means: ``infer`` (the shape/dtype rule) and ``kernel`` (the numpy
  reference semantics), checked on ``cases`` within ``tolerance``;
* what the CPU code generator may assume about the kernel, so that adding an op
  never edits the backend: ``shape_only_inputs``, ``identity_if_same_type``,
  ``fresh_result``, ``writes_out`` and ``into`` (an `IntoKernel`).

The autograd package adds a gradient rule per op and the GPU package a WGSL kernel
per op, both keyed by the op's name; tests fail when an op lacks either.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, GraphError

if TYPE_CHECKING:
    from asgrad.tensor.ir.rows import RowProgram
    from asgrad.tensor.ir.scalar import Expr

Shape = tuple[int, ...]
Attrs = Mapping[str, Any]

# The op families. Each family is one file of the same name in every package.
FAMILIES = (
    "leaf",
    "elementwise",
    "reduction",
    "shape",
    "index",
    "linalg",
    "conv",
    "pool",
    "norm",
    "random",
    "optim",
    "control",
)


@dataclass(frozen=True, slots=True)
class TensorType:
    """The static type of a graph value: its shape and dtype.

    >>> from asgrad.tensor import Graph
    >>> str(Graph().input("x", (2, 3)).node.type)
    'float32[2, 3]'
    """

    shape: Shape
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.shape)}"


@dataclass(frozen=True)
class OpCase:
    """One test case of an op: input arrays (float64 where floating) and attributes.

    ``wrt`` lists the inputs a gradient check differentiates (None: every floating
    input). ``grad=False`` marks a case that is a value test only (a kink, say).

    >>> import numpy as np
    >>> from asgrad.tensor import get_op
    >>> case = get_op("exp").cases(np.random.default_rng(0))[0]
    >>> case.inputs[0].dtype, case.grad
    (dtype('float64'), True)
    """

    inputs: tuple[np.ndarray, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    wrt: tuple[int, ...] | None = None
    grad: bool = True
    label: str = ""


class _Required:
    """The default of an attribute that every node of the op must be given."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True, kw_only=True)
class Attr:
    """One attribute of an op, stated once: its name, type, default and check.

    Every node of an op with a schema holds every attribute of it (a missing one
    takes its default), so a backend, the Tensor methods, the ONNX exporter and the
    graph file read ``node.attrs[name]`` and never restate a default.

    Attributes:
        name: The keyword the op takes it by.
        kind: The Python types a value may have (``float`` accepts an ``int`` or a
            numpy number and stores a float; ``int`` accepts a numpy integer and
            refuses a ``bool``; ``tuple`` accepts a list and stores a tuple);
            ``object`` accepts anything.
        default: The value a node takes when none is given, or `REQUIRED`.
        check: A condition on the value: ``check(value)`` returns what is wrong with
            it (a phrase such as ``"must be positive"``), or None when it is fine.
        optional: Whether None is accepted besides values of ``kind``.
        doc: One line for the docs' op table.
    """

    name: str
    kind: type | tuple[type, ...] = object
    default: Any = REQUIRED
    check: Callable[[Any], str | None] | None = None
    optional: bool = False
    doc: str = ""

    def validate(self, op: str, value: Any) -> Any:
        """``value`` checked (and a float attribute's int widened), or a typed error."""
        if value is None and self.optional:
            return None
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        if object not in kinds:
            number = not isinstance(value, bool | np.bool_)
            if float in kinds and number and isinstance(value, int | np.integer | np.floating):
                value = float(value)
            elif int in kinds and number and isinstance(value, np.integer):
                value = int(value)
            elif tuple in kinds and isinstance(value, list):
                value = tuple(value)
            refused = isinstance(value, bool | np.bool_) and bool not in kinds
            if refused or not isinstance(value, kinds):
                names = " or ".join(k.__name__ for k in kinds)
                names += " or None" if self.optional else ""
                raise ArgumentTypeError(
                    f"{op}: attribute {self.name!r} must be {names}, got"
                    f" {type(value).__name__} {value!r}"
                )
        if self.check is not None:
            problem = self.check(value)
            if problem is not None:
                raise ArgumentError(f"{op}: attribute {self.name!r} {problem}, got {value!r}")
        return value


InferFn = Callable[[Sequence[TensorType], Attrs], TensorType]
KernelFn = Callable[..., np.ndarray]
CasesFn = Callable[[np.random.Generator], list[OpCase]]


@dataclass(frozen=True, kw_only=True)
class IntoKernel:
    """A float32 path of an op's kernel that writes its result into a given array.

    The CPU code generator calls it instead of the kernel when every input and the
    result are float32 and the result has rank >= 1 (and elements, for an exact
    path) and ``when(attrs)`` holds, so that the result lands in a buffer that is
    already there (a dying input or a scratch slot kept across runs) instead of
    fresh memory.

    Calling convention: ``fn(*inputs, out=out, work=work, **attrs)``, where

    * ``out`` is an array of the result's type (C-contiguous unless the function
      copes with strides) that receives the result, or None for a fresh result;
    * ``work`` is a tuple of ``work`` scratch arrays of the result's type, passed
      (as a keyword) only when ``work > 0``; their contents on entry are garbage and
      on exit are free to be anything;
    * the return value is the result, which the generated code uses: ``out``
      itself when it was given (a path may leave an ``out`` it cannot write
      through, a strided one, and return a fresh result instead).

    ``out`` and the ``work`` arrays never overlap one another, nor any input other
    than one of the first ``leading`` inputs (see ``leading``).

    Attributes:
        fn: The function, with the calling convention above.
        leading: How many leading inputs may *be* ``out`` (a dying input written
            in place): ``fn`` reads each element or row of them before it writes
            that element or row of ``out``. With ``leading > 0`` the path is taken
            only when those inputs have the result's type and the others (a
            weight, a bias) another, so that no other input is ever written.
            0: ``out`` never overlaps an input.
        work: How many scratch arrays of the result's type ``fn`` needs.
        exact: True: the result is the kernel's, bit for bit, so the path is taken
            only where it writes into a buffer (never for a fresh result). False: a
            faster approximation within the op's ``tolerance``, taken for every
            float32 result of rank >= 1: called as ``fn(*inputs, **attrs)`` when
            no buffer is free, so ``out`` and ``work`` must default to None.
        when: A condition on the node's attributes (e.g. GELU's exact form only),
            or None for always.
    """

    fn: Callable[..., np.ndarray]
    leading: int = 0
    work: int = 0
    exact: bool = True
    when: Callable[[Attrs], bool] | None = None


@dataclass(frozen=True, kw_only=True)
class OpDef:
    """Everything the tensor package knows about one primitive op, declared by keyword.

    >>> from asgrad.tensor import get_op
    >>> op = get_op("matmul")
    >>> op.name, op.family, op.arity, op.differentiable
    ('matmul', 'linalg', 2, True)

    Attributes:
        name: The op's unique name (``"matmul"``); backward ops are
            ``<op>_backward``.
        family: The op family, one of `FAMILIES`; the same file name holds the
            op in every package (``tensor/ops/<family>.py``,
            ``autograd/rules/<family>.py``, ``gpu/lowering/<family>.py``).
        infer: The shape/dtype rule ``infer(input_types, attrs) -> TensorType``;
            raises [`ShapeError`][asgrad.tensor.ShapeError]/[`DTypeError`][asgrad.tensor.DTypeError]
            naming the fix.
        kernel: The numpy kernel, ``kernel(*arrays, **attrs) -> ndarray``: the
            reference semantics every backend is tested against.
        arity: The number of inputs, or None for a variadic op.
        differentiable: Whether autograd must hold a gradient rule for it.
        tolerance: ``(rtol, atol)`` within which a float32 backend (or an inexact
            float32 path) must match the numpy kernel.
        cases: Random test cases for value, gradient and parity tests.
        composite: Whether the op is a composite operation (softmax, layer norm...)
            kept as one primitive with its own kernels instead of being decomposed;
            the docs' op table says which.
        doc: One line for the coverage table.
        pure: Whether the value depends on the inputs and attributes only, so that
            equal nodes may be merged and nodes of constants folded (dropout is
            pure: its randomness is a seed input).
        shape_only_inputs: The inputs the kernel reads for their shape (and dtype)
            only, never their values: at known shapes the code generator passes a
            zero-strided stand-in, so the value may be freed early or folded away.
        identity_if_same_type: Whether the op computes nothing (returns its first
            input) when its result's type equals its first input's: a reshape to
            the same shape, a cast to the same dtype. Such nodes are dropped; one
            whose target shape comes from a ``shape_only_inputs`` input only when
            no axis has size 1 (a size 1 declared may be fed larger), and one whose
            target shape is an attribute (see ``result_shape_from_attrs``) only at
            fed shapes.
        result_shape_from_attrs: Whether the result's shape is fixed by the
            attributes (a reshape or broadcast to a given shape) rather than by the
            inputs' shapes: such an op is an identity at the declared shapes but not
            at every fed shape (a larger batch), so the graph passes keep it and
            only a backend that knows the fed shapes may drop it.
        ties_free_axes: Whether the shape rule holds at one size of an input axis
            only, given the other inputs (the gradient of a slice has the slice's
            extent of its second input): an input axis that follows a free axis
            where the rule then fails is refused when the graph is built
            ([`FreeAxisError`][asgrad.tensor.FreeAxisError]), not when it runs.
        fresh_result: Whether the kernel (called without ``out``) always returns a
            new array that nothing else references (no view of an input, no
            scratch memory), so that a later elementwise op may write into it.
        writes_out: Whether the kernel also takes ``out=`` (an array of the
            result's type, overlapping no input) and writes its whole result there,
            so that its result may land in a scratch slot.
        into: A float32 path writing into a given array (see `IntoKernel`),
            or None.
        expand: For an op defined as a decomposition into other registered ops
            (``flip``, ``mish``...): ``expand(*inputs, **attrs) -> Tensor`` builds
            it, and [`Graph.apply`][asgrad.tensor.Graph.apply] calls it after the shape rule instead
            of adding a node of its own. Backends and autograd see only the ops it
            builds, so such an op needs no gradient rule or GPU lowering; its
            ``kernel`` stays the numpy reference its cases are checked against.
        attrs: The attribute schema, one `Attr` each (``()``: none), or None
            where the op has not declared one (its attributes pass unchecked). A node,
            and each of the op's registered cases, holds every attribute, so
            ``infer``, ``kernel`` and ``expand`` take them all and state no default.
        expression: For an elementwise op, what it computes per element, once, as a
            scalar expression (`asgrad.tensor.ir.scalar`):
            ``expression(arg(0), arg(1), ..., **attrs) -> Expr``, with every
            attribute of the schema given, and ``dtype=`` (the result's dtype name)
            when the function takes that keyword. Backends render their code from
            it (numpy, Numba, WGSL), and fuse chains of elementwise ops by
            substituting one op's expression into the next.
        rows: For a composite along rows (softmax, layer norm...), its meaning once,
            as a row program (`asgrad.tensor.ir.rows`):
            ``rows(ndim, arity, **attrs) -> RowProgram`` for a node whose first input
            has rank ``ndim`` and which has ``arity`` inputs. Backends render their
            row kernels from it; the numpy ``kernel`` is
            ``rows_kernel`` of the same function.
    """

    name: str
    family: str
    infer: InferFn
    kernel: KernelFn
    arity: int | None
    differentiable: bool = True
    tolerance: tuple[float, float] = (1e-5, 1e-6)
    cases: CasesFn | None = None
    composite: bool = False
    doc: str = ""
    pure: bool = True
    shape_only_inputs: tuple[int, ...] = ()
    identity_if_same_type: bool = False
    result_shape_from_attrs: bool = False
    ties_free_axes: bool = False
    fresh_result: bool = False
    writes_out: bool = False
    into: IntoKernel | None = None
    expand: Callable[..., Any] | None = None
    attrs: tuple[Attr, ...] | None = None
    expression: Callable[..., Expr] | None = None
    rows: Callable[..., RowProgram] | None = None

    def normalize_attrs(self, attrs: Attrs) -> dict[str, Any]:
        """``attrs`` checked against the schema, every missing attribute at its default.

        Raises:
            ArgumentError: An unknown or missing attribute, or a value its check refuses.
            ArgumentTypeError: A value of the wrong type.
        """
        if self.attrs is None:
            return dict(attrs)
        known = {a.name for a in self.attrs}
        unknown = sorted(set(attrs) - known)
        if unknown:
            takes = ", ".join(sorted(known)) or "none"
            raise ArgumentError(
                f"{self.name}: unknown attribute {', '.join(map(repr, unknown))}; it takes: {takes}"
            )
        out: dict[str, Any] = {}
        for a in self.attrs:
            if a.name in attrs:
                out[a.name] = a.validate(self.name, attrs[a.name])
            elif a.default is REQUIRED:
                raise ArgumentError(f"{self.name}: attribute {a.name!r} is required")
            else:
                out[a.name] = a.default
        return out

    def attr(self, name: str) -> Attr:
        """The schema entry of attribute ``name``."""
        for a in self.attrs or ():
            if a.name == name:
                return a
        raise GraphError(f"op {self.name!r} declares no attribute {name!r}")

    @property
    def primitive(self) -> bool:
        """Whether graphs hold nodes of this op (it does not expand into others)."""
        return self.expand is None


_REGISTRY: dict[str, OpDef] = {}


def given_attrs(**attrs: Any) -> dict[str, Any]:
    """The attributes a front door was given: those not None (None leaves an attribute
    to its op's schema, which states its default once)."""
    return {k: v for k, v in attrs.items() if v is not None}


def register_op(op: OpDef) -> OpDef:
    """Add ``op`` to the registry; a second op of the same name is an error.

    A new op is declared once, at import, by the module of its family. The example shows
    that refusal, which leaves the registry as it was:

    >>> from asgrad.tensor import GraphError, get_op, register_op
    >>> try:
    ...     register_op(get_op("add"))
    ... except GraphError as e:
    ...     print(e)
    op 'add' is already registered
    """
    if op.family not in FAMILIES:
        raise GraphError(f"op {op.name!r} has unknown family {op.family!r}; use one of {FAMILIES}")
    if op.name in _REGISTRY:
        raise GraphError(f"op {op.name!r} is already registered")
    if op.arity is not None:
        for i in op.shape_only_inputs:
            if not 0 <= i < op.arity:
                raise GraphError(f"op {op.name!r}: shape-only input {i} is not one of its inputs")
        if op.into is not None and op.into.leading > op.arity:
            raise GraphError(f"op {op.name!r}: into.leading exceeds its {op.arity} inputs")
    names = [a.name for a in op.attrs or ()]
    if len(set(names)) != len(names):
        raise GraphError(f"op {op.name!r} declares an attribute twice: {names}")
    if op.attrs is not None and op.cases is not None:
        op = dataclasses.replace(op, cases=_complete_cases(op, op.cases))
    _REGISTRY[op.name] = op
    return op


def _complete_cases(op: OpDef, cases: CasesFn) -> CasesFn:
    """``cases`` with each case's attributes completed by the schema, as a node's are:
    a case states only what it varies, and a kernel is always called with them all."""

    @functools.wraps(cases)
    def complete(rng: np.random.Generator) -> list[OpCase]:
        return [dataclasses.replace(c, attrs=op.normalize_attrs(c.attrs)) for c in cases(rng)]

    return complete


def register_expanding(
    name: str,
    infer: InferFn,
    kernel: KernelFn,
    expand: Callable[..., Any],
    cases: CasesFn,
    doc: str,
    *,
    family: str,
    arity: int | None = None,
    tolerance: tuple[float, float] = (1e-5, 1e-6),
    **fields: Any,
) -> OpDef:
    """Register an op that expands into others (``OpDef.expand``), by position as the
    family files list them: ``name, infer, kernel, expand, cases, doc``."""
    op = OpDef(
        name=name,
        family=family,
        infer=infer,
        kernel=kernel,
        expand=expand,
        arity=arity,
        cases=cases,
        doc=doc,
        tolerance=tolerance,
        **fields,
    )
    return register_op(op)


def get_op(name: str) -> OpDef:
    """The registered op called ``name``.

    >>> from asgrad.tensor import get_op
    >>> get_op("exp").name
    'exp'
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise GraphError(f"no op called {name!r} is registered") from None


_EXPANDING: list[str] = []  # the ops whose expansions are being built, innermost last


def expanding() -> str | None:
    """The op whose expansion is being built now (its errors name it), if any."""
    return _EXPANDING[-1] if _EXPANDING else None


def expand_op(op: OpDef, inputs: Sequence[Any], attrs: Attrs, type_: TensorType) -> Any:
    """``op`` built from the ops it expands into (``op.expand``), which must give the type
    its shape rule gave (``Graph.apply`` calls this after the rule)."""
    assert op.expand is not None
    _EXPANDING.append(op.name)
    try:
        result = op.expand(*inputs, **attrs)
    finally:
        _EXPANDING.pop()
    if result.node.type != type_:
        raise GraphError(
            f"{op.name}: its expansion built {result.node.type}, but its shape rule"
            f" says {type_}; this is a bug in the op's definition, please report it"
        )
    return result


def all_ops() -> list[OpDef]:
    """Every registered op, sorted by name.

    >>> from asgrad.tensor import all_ops
    >>> names = [op.name for op in all_ops()]
    >>> "matmul" in names and "exp" in names
    True
    """
    # Importing this module imports the package ``asgrad.tensor`` first, whose
    # ``__init__`` imports the ops package: every built-in op is registered by now.
    return sorted(_REGISTRY.values(), key=lambda op: op.name)
