"""Numerics checking: stop at the first op that makes a NaN or an infinity.

A program compiled with ``check_numerics=True`` (or with the environment variable
``ASGRAD_CHECK_NUMERICS=1``) runs a *probe* of its schedule on its own backend: the
same nodes, every floating-point value returned, no variable written. The values
are scanned in the order they were computed; the first op whose result holds a NaN
although none of its inputs did, or an infinity although all its inputs were finite,
raises [`NumericsError`][asgrad.tensor.NumericsError] naming the op, the source line
that made it and its inputs' ranges. A NaN fed or held by a variable is reported the
same way. Only when every value is clean are the variable updates written, so a
failing training step leaves the model as it was.

The probe costs memory for every intermediate value and a read-back of each: a mode
for finding a bug, not for training at speed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from asgrad.tensor.errors import NumericsError
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.schedule import Schedule

if TYPE_CHECKING:
    from asgrad.tensor.runtime.backends import Executable

ENVIRONMENT_VARIABLE = "ASGRAD_CHECK_NUMERICS"

__all__ = ["ENVIRONMENT_VARIABLE", "NumericsProbe", "checking_by_default"]


def checking_by_default() -> bool:
    """Whether ``ASGRAD_CHECK_NUMERICS`` asks every new program to check numerics."""
    return os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower() in {"1", "true", "yes", "on"}


class NumericsProbe:
    """Runs a schedule with every float value returned, checks them, then writes updates."""

    def __init__(
        self, schedule: Schedule, compile_schedule: Callable[[Schedule], Executable]
    ) -> None:
        self.nodes = schedule.nodes
        watched = [n for n in schedule.nodes if n.op != "constant" and _is_float(n)]
        returned: list[Node] = []
        index: dict[int, int] = {}
        for node in [*watched, *schedule.outputs, *(n for _, n in schedule.updates)]:
            if node.id not in index:
                index[node.id] = len(returned)
                returned.append(node)
        self._index = index
        self._outputs = [index[n.id] for n in schedule.outputs]
        self._updates = [(var, index[n.id]) for var, n in schedule.updates]
        end = len(schedule.nodes)
        last_use = {**schedule.last_use, **{n.id: end for n in returned}}
        probe = Schedule(schedule.nodes, returned, [], schedule.inputs, last_use)
        self.executable = compile_schedule(probe)

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        with np.errstate(all="ignore"):  # numpy's warnings would come before the report
            values = self.executable.run(feeds)
        by_id = {node_id: values[i] for node_id, i in self._index.items()}
        by_id.update({n.id: n.attrs["value"] for n in self.nodes if n.op == "constant"})
        for node in self.nodes:
            if node.id in self._index:
                _check(node, by_id)
        for var, i in self._updates:
            var.value = np.array(values[i], dtype=var.dtype, copy=True)
        return [values[i] for i in self._outputs]


def _is_float(node: Node) -> bool:
    return np.dtype(node.dtype).kind == "f"


def _check(node: Node, values: Mapping[int, np.ndarray]) -> None:
    value = values[node.id]
    nan = int(np.isnan(value).sum())
    inf = int(np.isinf(value).sum())
    if not nan and not inf:
        return
    if node.op == "input" or node.op == "parameter":
        if nan:
            source = "was fed" if node.op == "input" else "(a variable) holds"
            raise NumericsError(
                f"check_numerics: {node.op} {node.name!r} {source} {nan} NaN value(s) of"
                f" {value.size} ({node.type}); the program did not run past it"
            )
        return
    inputs = [(n, values.get(n.id)) for n in node.inputs]
    inputs_nan = any(v is not None and _kind(v) == "f" and np.isnan(v).any() for _, v in inputs)
    inputs_finite = all(v is None or _kind(v) != "f" or np.isfinite(v).all() for _, v in inputs)
    if (nan and not inputs_nan) or (inf and inputs_finite):
        made = []
        if nan:
            made.append(f"{nan} NaN")
        if inf:
            made.append(f"{inf} infinite")
        described = "\n".join(f"    {_describe(n, v)}" for n, v in inputs)
        raise NumericsError(
            f"check_numerics: {node.op} made at {node.location} produced {' and '.join(made)}"
            f" value(s) of {value.size} in its {node.type} result (node %{node.name}).\n"
            f"  Its inputs:\n{described}\n"
            "  No variable was updated by this run."
        )


def _kind(value: np.ndarray) -> str:
    return str(np.asarray(value).dtype.kind)


def _describe(node: Node, value: np.ndarray | None) -> str:
    where = f"%{node.name} ({node.op}) {node.type}"
    if value is None:
        return f"{where}: not a float value"
    value = np.asarray(value)
    if value.dtype.kind != "f":
        if value.size == 0:
            return f"{where}: empty"
        return f"{where}: values in [{value.min()}, {value.max()}]"
    finite = value[np.isfinite(value)]
    parts = [f"{where}:"]
    if finite.size:
        parts.append(f"finite values in [{finite.min():.6g}, {finite.max():.6g}]")
    else:
        parts.append("no finite value")
    nan, pos, neg = (
        int(np.isnan(value).sum()),
        int(np.isposinf(value).sum()),
        int(np.isneginf(value).sum()),
    )
    extra = [f"{k} {label}" for k, label in ((nan, "NaN"), (pos, "+inf"), (neg, "-inf")) if k]
    if extra:
        parts.append("(" + ", ".join(extra) + ")")
    return " ".join(parts)
