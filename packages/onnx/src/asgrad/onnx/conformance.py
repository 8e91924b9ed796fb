"""ONNX's own node conformance cases, run through `asgrad.onnx.load`.

The ``onnx`` wheel ships one small model per case (``onnx.backend.test.case.node``)
with inputs and the outputs ONNX's reference gives. Each case is loaded with
`load` (an input that ``load`` says must be known at load time, a
``Reshape``'s shape say, is given through ``constants=``), run with
[`evaluate`][asgrad.tensor.evaluate] and compared with the expected outputs (shape, dtype
and values within the case's tolerance). A case ends as one of:

- ``pass``: every output matches;
- ``fail``: an output has the wrong shape, dtype or value (never acceptable);
- ``refused``: ``load`` raised an [`OnnxImportError`][asgrad.onnx.OnnxImportError] naming the op
  and the node;
- ``error``: anything else went wrong (a bug to fix or a refusal to type).

A case is *holdable* when all its inputs and expected outputs are arrays of dtypes
asgrad's ONNX import maps (float32, float64, int32, int64, bool); an op type *passes* when it has a
holdable case and all its holdable cases pass.

``python scripts/onnx_conformance.py`` prints the table by op type.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from asgrad.onnx.builder import ONNX_TO_DTYPE
from asgrad.onnx.errors import OnnxConstantRequiredError, OnnxImportError
from asgrad.onnx.load import OnnxModel, load
from asgrad.tensor import evaluate

__all__ = ["CaseResult", "collect_cases", "op_table", "run_case", "run_cases", "summary"]

STATUSES = ("pass", "fail", "refused", "error")
_DTYPES = frozenset(ONNX_TO_DTYPE.values())


@dataclass(frozen=True)
class CaseResult:
    """How one conformance case went: its ``status`` (one of `STATUSES`)."""

    name: str
    op_type: str
    holdable: bool
    status: str
    detail: str = ""
    error: BaseException | None = None


def collect_cases() -> list[Any]:
    """ONNX's node test cases (``onnx.backend.test.case.node.collect_testcases``)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():  # the case generators overflow casts on purpose
        warnings.simplefilter("ignore")
        return list(collect_testcases())


_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


def op_types(cases: Sequence[Any]) -> dict[str, str]:
    """Each case's op type: its one node's, or (an ``_expanded`` case, a function's
    body) the op type of the case it expands."""
    single = {c.name: c.model.graph.node[0].op_type for c in cases if len(c.model.graph.node) == 1}
    out: dict[str, str] = {}
    for c in cases:
        base = _EXPANDED.sub("", c.name)
        if c.name in single:
            out[c.name] = single[c.name]
        elif base in single:
            out[c.name] = single[base]
        else:
            out[c.name] = c.model.graph.node[-1].op_type
    return out


def _array(value: object) -> np.ndarray | None:
    """``value`` as an array (a numpy scalar too); None for a sequence or an optional."""
    if isinstance(value, np.ndarray | np.generic):
        return np.asarray(value)
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return None


def _holdable(value: object) -> bool:
    array = _array(value)
    return array is not None and array.dtype.name in _DTYPES


def _static_inputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> onnx.ModelProto:
    """``model`` with each input's shape set to the shape of the array fed to it."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for info in out.graph.input:
        array = feeds.get(info.name)
        if array is None or not info.type.HasField("tensor_type"):
            continue
        shape = info.type.tensor_type.shape
        shape.ClearField("dim")
        for size in array.shape:
            shape.dim.add().dim_value = int(size)
    return out


def _compare(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    """Why ``got`` is not ``want`` (empty when it is)."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind == "f":
        if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
            worst = float(np.nanmax(np.abs(got.astype(np.float64) - want)))
            return f"values differ (max abs diff {worst:.3g})"
        return ""
    if not np.array_equal(got, want):
        return "values differ"
    return ""


def _load(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> OnnxModel:
    """``load(model)``, giving as ``constants`` the inputs it says must be known."""
    constants: dict[str, np.ndarray] = {}
    while True:
        try:
            return load(model, constants=constants)
        except OnnxConstantRequiredError as exc:
            wanted = [n for n in exc.inputs if n in feeds and n not in constants]
            if not wanted:
                raise
            constants.update({n: feeds[n] for n in wanted})


def run_case(case: Any, op_type: str) -> CaseResult:
    """Load ``case``'s model with [`load`][asgrad.onnx.load.load] and check every data set it
    has."""
    holdable = all(_holdable(v) for inputs, outputs in case.data_sets for v in [*inputs, *outputs])
    graph = case.model.graph
    input_names = [i.name for i in graph.input]
    output_names = [o.name for o in graph.output]
    try:
        for inputs, expected in case.data_sets:
            arrays = {n: _array(v) for n, v in zip(input_names, inputs, strict=False)}
            feeds = {n: a for n, a in arrays.items() if a is not None}
            model = _load(_static_inputs(case.model, feeds), feeds)
            names = [s.name for s in model.input_specs]
            wanted = [model.outputs[n] for n in output_names[: len(expected)]]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = evaluate(wanted, {n: feeds[n] for n in names})
            for name, g, w in zip(output_names, got, expected, strict=False):
                want = _array(w)
                if want is None:
                    raise OnnxImportError(f"output {name!r} is not a tensor")
                why = _compare(g, want, case.rtol, case.atol)
                if why:
                    return CaseResult(case.name, op_type, holdable, "fail", f"{name}: {why}")
    except OnnxImportError as exc:
        return CaseResult(case.name, op_type, holdable, "refused", str(exc), exc)
    except Exception as exc:  # a case must never stop the run: it is counted instead
        detail = f"{type(exc).__name__}: {exc}"
        return CaseResult(case.name, op_type, holdable, "error", detail, exc)
    return CaseResult(case.name, op_type, holdable, "pass")


def run_cases(cases: Iterable[Any] | None = None) -> list[CaseResult]:
    """Every case (default: all of ONNX's), in order."""
    chosen = collect_cases() if cases is None else list(cases)
    kinds = op_types(chosen)
    return [run_case(c, kinds[c.name]) for c in chosen]


@dataclass(frozen=True)
class OpRow:
    """One op type's counts, and whether it passes (all its holdable cases do)."""

    op_type: str
    counts: dict[str, int]
    holdable: int
    passes: bool


def op_table(results: Sequence[CaseResult]) -> list[OpRow]:
    """The results by op type, sorted by name."""
    by_op: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        by_op[r.op_type].append(r)
    rows = []
    for op_type in sorted(by_op):
        rs = by_op[op_type]
        counts = Counter(r.status for r in rs)
        held = [r for r in rs if r.holdable]
        passes = bool(held) and all(r.status == "pass" for r in held)
        rows.append(OpRow(op_type, {s: counts.get(s, 0) for s in STATUSES}, len(held), passes))
    return rows


def summary(results: Sequence[CaseResult]) -> str:
    """One line: the totals and how many op types pass at least one case, and all."""
    counts = Counter(r.status for r in results)
    rows = op_table(results)
    some = sum(1 for row in rows if row.counts["pass"])
    return (
        f"{len(results)} cases over {len(rows)} op types: "
        + ", ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES)
        + f"; {some} op types pass at least one case,"
        f" {sum(row.passes for row in rows)} pass all their holdable cases"
    )
