"""Compile outputs into a schedule and run it.

``compile`` turns the values a user wants (and the variable updates of a training
step) into a [`Schedule`][asgrad.tensor.Schedule]: the minimal nodes in order, after the graph
passes, with the step at which each value is used for the last time. A backend turns the
schedule into an executable that runs it. The CPU backend (`asgrad.tensor.cpu`)
generates one Python function per schedule, a line per node, freeing each
intermediate after its last use, so that running a compiled graph costs little more
than the numpy calls themselves.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.api.arguments import require_tensors
from asgrad.tensor.api.precision import with_precision
from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import FeedError, MemoryBudgetError, PrecisionWarning
from asgrad.tensor.ir.cache import LRUCache
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.memory import MemoryPlan, format_bytes
from asgrad.tensor.ir.retrace import needs_retrace, pinned_by, retrace
from asgrad.tensor.ir.schedule import Schedule, Updates, make_schedule
from asgrad.tensor.runtime.backends import get_backend, resolve_backend_name
from asgrad.tensor.runtime.device_values import DeviceValue
from asgrad.tensor.runtime.numerics import NumericsProbe, checking_by_default
from asgrad.tensor.runtime.progress import reporting

__all__ = [
    "Program",
    "Schedule",
    "Updates",
    "compile",
    "evaluate",
    "make_schedule",
]


class Program:
    """A compiled computation: call it with feeds, get numpy outputs.

    A feed is anything numpy can make an array of, converted to the input's dtype; or a
    device array of the program's backend (the GPU backend's ``GpuArray``, which its
    ``to_gpu`` makes), taken as it is, with no copy through the host: its shape is
    checked as a numpy feed's, and its dtype must be the input's.

    A graph holding an expansion built for the declared size of a free axis (``roll``
    along the batch, constant padding of it...) is traced again, scheduled and compiled
    for each set of fed sizes, the `MAX_PLANS` used last kept
    (`asgrad.tensor.ir.retrace`).

    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> x = g.input("x", (2, 2))
    >>> prog = compile([(x * 2.0).sum()])
    >>> float(prog({"x": np.ones((2, 2), np.float32)})[0])
    8.0
    """

    MAX_PLANS = 8

    def __init__(
        self,
        outputs: Sequence[Tensor],
        updates: Updates | None = None,
        *,
        backend: str | None = None,
        optimize_graph: bool = True,
        check_numerics: bool | None = None,
        memory_budget: int | None = None,
    ) -> None:
        self.backend = resolve_backend_name(backend)
        self.memory_budget = memory_budget
        with reporting("compiling") as progress:
            size = len(outputs[0].graph) if outputs else 0
            progress.stage(f"scheduling a graph of {size:,} nodes")
            self.schedule = _budgeted_schedule(outputs, updates, optimize_graph, memory_budget)
            progress.stage(f"{self.backend}: compiling {len(self.schedule.nodes):,} nodes")
            compile_schedule = get_backend(self.backend).compile
            check = checking_by_default() if check_numerics is None else check_numerics
            self.check_numerics = check
            self.executable = (
                NumericsProbe(self.schedule, compile_schedule)
                if self.check_numerics
                else compile_schedule(self.schedule)
            )
            if memory_budget is not None:
                self._fit_device(outputs, updates, optimize_graph, memory_budget, compile_schedule)
        self._inputs = {n.name: n for n in self.schedule.inputs}
        # numpy dtypes compared by identity per run (``dtype.name`` builds a string each time)
        self._dtypes = {n.name: np.dtype(n.dtype) for n in self.schedule.inputs}
        self._known_names = {n.name for n in outputs[0].graph.inputs} if outputs else set()
        self._checked: set[tuple[tuple[str, tuple[int, ...]], ...]] = set()
        self._warned: set[str] = set()
        # The last feeds that needed no conversion: (name, class, dtype, shape) per input.
        self._last_feeds: tuple[tuple[str, type[Any], np.dtype[Any], tuple[int, ...]], ...] = ()
        # A graph with an expansion built for the declared sizes of a free axis is traced
        # again, scheduled and compiled per set of fed sizes (asgrad.tensor.ir.retrace).
        self._pairs = list(updates.items()) if isinstance(updates, Mapping) else list(updates or [])
        self._roots = [t.node for t in outputs] + [t.node for _, t in self._pairs]
        self._optimize_graph = optimize_graph
        self._plans: LRUCache[tuple[tuple[str, tuple[int, ...]], ...], Any] | None = (
            LRUCache(self.MAX_PLANS) if needs_retrace(self._roots) else None
        )
        self._active = self.executable
        # Otherwise such a graph (loaded from a file: no records) runs the declared sizes.
        self._pinned = None if self._plans is not None else pinned_by(self._roots)

    def __call__(self, feeds: Mapping[str, Any] | None = None, **kwargs: Any) -> list[np.ndarray]:
        return self.run(_merge(feeds, kwargs))

    def run(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """Run once: returns the outputs' values, and applies the updates."""
        prepared = self._prepare(feeds)
        return self._active.run(prepared)

    def launch(self, feeds: Mapping[str, Any] | None = None, **kwargs: Any) -> list[DeviceValue]:
        """Start one run and return at once: the outputs stay on the device until read.

        Fed like a call; returns one [`DeviceValue`][asgrad.tensor.DeviceValue]
        per output, read with ``float(v)``, ``v.item()``, ``np.asarray(v)`` or
        ``v.numpy()``. The updates apply in launch order, so the next launch (or a
        ``variable.value`` read) sees them. On the GPU a training loop that launches
        every step and reads the loss every N steps keeps the device busy instead of
        waiting for each step; on the CPU, and with ``check_numerics``, the run
        completes before ``launch`` returns and the values are ready.
        """
        prepared = self._prepare(_merge(feeds, kwargs), stacklevel=3)
        launch = getattr(self._active, "launch", None)
        if launch is None:  # a synchronous backend: the values are ready
            return [DeviceValue.ready_value(v) for v in self._active.run(prepared)]
        values: list[DeviceValue] = launch(prepared)
        return values

    # Schedule budgets tried (by bisection) when a device's own buffers exceed the budget.
    DEVICE_FIT_TRIES = 6

    def _fit_device(
        self,
        outputs: Sequence[Tensor],
        updates: Updates | None,
        optimize_graph: bool,
        budget: int,
        compile_schedule: Any,
    ) -> None:
        """Meet ``budget`` with the device's own buffers, where the backend counts them.

        A backend whose executable has ``transient_bytes(feeds)`` (the GPU: its plan's
        buffers, after fusion and rounded to the pool's size classes) may hold more
        than the schedule's plan. Its plan is built at the declared shapes (nothing
        runs); while it holds more than the budget, the schedule is planned for a
        smaller budget, the largest (by bisection, `DEVICE_FIT_TRIES` plans) between
        the smallest reachable and ``budget`` whose device buffers fit.
        """
        if getattr(self.executable, "transient_bytes", None) is None or self.check_numerics:
            return
        feeds = {n.name: np.zeros(n.shape, n.dtype) for n in self.schedule.inputs}

        def held(program: tuple[Schedule, Any]) -> int:
            plan = program[0].memory()
            fixed = plan.parameters + plan.state + plan.inputs
            return fixed + int(program[1].transient_bytes(feeds))

        def build(target: int) -> tuple[Schedule, Any]:
            schedule = make_schedule(
                outputs, updates, optimize_graph=optimize_graph, memory_budget=target
            )
            return schedule, compile_schedule(schedule)

        if held((self.schedule, self.executable)) <= budget:
            return
        try:
            make_schedule(outputs, updates, optimize_graph=optimize_graph, memory_budget=1)
            low = 1
        except MemoryBudgetError as error:
            low = error.reachable
        # The device's bytes do not fall in step with the plan's (fusion decides them
        # too): the smallest schedule budget is tried, then halves between it and
        # ``budget``; the largest that fits is kept.
        floor = build(low)
        smallest = held(floor)
        best = floor if smallest <= budget else None
        high = budget
        for _ in range(self.DEVICE_FIT_TRIES):
            if high - low <= budget // 100:
                break
            mid = (low + high) // 2
            trial = build(mid)
            trial_held = held(trial)
            smallest = min(smallest, trial_held)
            if trial_held <= budget:
                best, low = trial, mid
            else:
                high = mid
        if best is None:
            raise MemoryBudgetError(
                f"on the {self.backend} backend the step holds at least"
                f" {format_bytes(smallest)} ({smallest:,} bytes) of device buffers and"
                f" variables in the plans tried, over the memory budget of"
                f" {format_bytes(budget)}. Raise memory_budget to at least {smallest:,},"
                " or feed smaller batches",
                budget=budget,
                reachable=smallest,
            )
        self.schedule, self.executable = best

    def memory(self, feeds: Mapping[str, Any] | None = None, **kwargs: Any) -> MemoryPlan:
        """The planned memory of one run, before any run: the peak in bytes and what
        holds it (parameters, optimizer state, inputs, activations kept for the
        backward, temporaries); see [`MemoryPlan`][asgrad.tensor.MemoryPlan].

        At the declared shapes, or at those of ``feeds`` (arrays, or anything with a
        ``shape``) when the inputs have free axes.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (1024,))
        >>> program = compile([(x * 2.0).sum()])
        >>> program.memory().peak  # x and x * 2.0: 4 KiB each; 2.0 and the sum: 4 bytes
        8200
        >>> program.memory(x=np.zeros(2048, np.float32)).inputs  # 8 KiB and the 2.0
        8196
        """
        merged = _merge(feeds, kwargs)
        if not merged:
            return self.schedule.memory()
        shapes = {name: tuple(np.shape(v)) for name, v in merged.items() if name in self._inputs}
        for name, shape in shapes.items():
            _check_fed_shape(self._inputs[name], shape)
        return self.schedule.memory(shapes)

    def _prepare(self, feeds: Mapping[str, Any], stacklevel: int = 4) -> dict[str, np.ndarray]:
        last = self._last_feeds
        if last and len(feeds) == len(last):  # a loop feeding the same arrays' kinds: no checks
            fast: dict[str, np.ndarray] = {}
            for name, kind, dtype, shape in last:
                value: Any = feeds.get(name)  # None: its class is no feed's
                if value.__class__ is not kind or value.dtype is not dtype:
                    break
                if value.shape != shape:
                    break
                fast[name] = value
            else:
                return fast
        out: dict[str, np.ndarray] = {}
        for name, node in self._inputs.items():
            if name not in feeds:
                needed = ", ".join(f"{n.name}: {n.type}" for n in self._inputs.values())
                unknown = [k for k in feeds if k not in self._inputs and k not in self._known_names]
                hint = ""
                if unknown:
                    hint = f"; it was fed {', '.join(map(repr, unknown))}, which is not an input"
                    if _near(name, unknown):
                        hint += f" (did you mean {name!r} for {_near(name, unknown)!r}?)"
                raise FeedError(f"input {name!r} was not fed{hint}; this program needs {needed}")
            value = feeds[name]
            if getattr(value.__class__, "__asgrad_backend__", None) == self.backend:
                _check_device_feed(name, value, node)  # fed as it is: no host round trip
            elif not isinstance(value, np.ndarray) or value.dtype != self._dtypes[name]:
                original = getattr(value, "dtype", None)
                value, rounded = _convert_feed(name, value, node.dtype)
                if rounded and name not in self._warned:
                    self._warned.add(name)
                    warnings.warn(
                        f"input {name!r} is {node.dtype}: the {original} array fed was rounded"
                        f" to {node.dtype} (warned once per program). Feed {node.dtype} arrays"
                        " to avoid the conversion",
                        PrecisionWarning,
                        stacklevel=stacklevel,
                    )
            out[name] = value
        for name in feeds:
            if name not in self._inputs and name not in self._known_names:
                near = _near(name, list(self._known_names))
                hint = f"; did you mean {near!r}?" if near else ""
                raise FeedError(f"{name!r} is not an input of this graph{hint}")
        signature = tuple((name, v.shape) for name, v in out.items())
        if signature not in self._checked:
            for name, v in out.items():
                _check_fed_shape(self._inputs[name], v.shape)
            if self._pinned is not None:
                self._refuse_other_sizes(signature)
            if self._plans is None:  # a traced graph is checked when traced
                self.schedule.infer_types({name: v.shape for name, v in out.items()})
            self._checked.add(signature)
        if self._plans is not None:
            self._active = self._plan_for(signature)
        if len(feeds) == len(out) and all(feeds[name] is v for name, v in out.items()):
            # every feed taken as it is: a numpy array of the input's dtype, or a device array
            self._last_feeds = tuple(
                (name, v.__class__, v.dtype, v.shape) for name, v in out.items()
            )
        return out

    def _refuse_other_sizes(self, signature: tuple[tuple[str, tuple[int, ...]], ...]) -> None:
        """A graph that cannot be traced again, holding an op built for the declared size
        of a free axis, refuses other sizes instead of giving that op's declared-size
        result (a fed size 1 would broadcast into its tables)."""
        other = {n: s for n, s in signature if s != self._inputs[n].shape}
        if not other:
            return
        declared = ", ".join(f"{n}: {list(self._inputs[n].shape)}" for n in other)
        fed = ", ".join(f"{n}: {list(s)}" for n, s in other.items())
        raise FeedError(
            f"fed {fed}, but this graph runs only at the declared sizes ({declared}): it holds"
            f" {self._pinned}, built for the declared size of a free axis, and a graph loaded"
            " from a graph file keeps no record of how its ops were built, so it is not traced"
            " again at other sizes. Feed the declared shape, or build the graph in this"
            " process (it is then traced again per set of fed sizes)"
        )

    def _plan_for(self, signature: tuple[tuple[str, tuple[int, ...]], ...]) -> Any:
        """The executable for inputs of these shapes: the graph traced again at them,
        scheduled and compiled once (the declared shapes: the program's own)."""
        assert self._plans is not None
        if all(shape == self._inputs[name].shape for name, shape in signature):
            return self.executable
        plan = self._plans.get(signature)
        if plan is None:
            roots = [Tensor(n) for n in retrace(self._roots, dict(signature))]
            outs, values = (
                roots[: len(roots) - len(self._pairs)],
                roots[len(roots) - len(self._pairs) :],
            )
            updates = [(var, v) for (var, _), v in zip(self._pairs, values, strict=True)]
            schedule = _budgeted_schedule(outs, updates, self._optimize_graph, self.memory_budget)
            compile_schedule = get_backend(self.backend).compile
            plan = self._plans.put(
                signature,
                NumericsProbe(schedule, compile_schedule)
                if self.check_numerics
                else compile_schedule(schedule),
            )
        return plan


# The share of a memory budget left, where the plan can spare it, to the scratch buffers
# a backend keeps between runs (the CPU's: fresh memory costs page faults each run).
SCRATCH_SHARE = 0.06


def _budgeted_schedule(
    outputs: Sequence[Tensor],
    updates: Updates | None,
    optimize_graph: bool,
    budget: int | None,
) -> Schedule:
    """The schedule, planned for ``budget`` less `SCRATCH_SHARE` where that is reachable,
    else for ``budget``; its ``memory_budget`` is ``budget``."""
    if budget is None:
        return make_schedule(outputs, updates, optimize_graph=optimize_graph)
    try:
        schedule = make_schedule(
            outputs,
            updates,
            optimize_graph=optimize_graph,
            memory_budget=int(budget * (1 - SCRATCH_SHARE)),
        )
    except MemoryBudgetError:
        schedule = make_schedule(
            outputs, updates, optimize_graph=optimize_graph, memory_budget=budget
        )
    schedule.memory_budget = budget
    return schedule


def _merge(feeds: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    both = sorted(set(feeds) & set(kwargs)) if feeds and kwargs else []
    if both:
        raise FeedError(
            f"{', '.join(map(repr, both))} fed both in the dict and as a keyword; feed each"
            " input once"
        )
    return {**(feeds or {}), **kwargs}


def _near(name: str, candidates: Sequence[str]) -> str | None:
    """The candidate closest to ``name`` (case differences first), if one is close."""
    by_case = [c for c in candidates if c.lower() == name.lower()]
    if by_case:
        return by_case[0]
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def _check_fed_shape(node: Node, fed: tuple[int, ...]) -> None:
    """A feed has the declared rank and the declared size on every axis not free."""
    declared = node.shape
    free = node.attrs["free"]  # Graph.input always records it
    fixed = [a for a in range(len(declared)) if a not in free]
    if len(fed) != len(declared) or any(fed[a] != declared[a] for a in fixed):
        if free:
            rule = f"axes {list(free)} may change size, the others must match"
        else:
            rule = "no axis may change size"
        raise FeedError(
            f"input {node.name!r} was declared {node.type} ({rule}); it was fed an array of"
            f" shape {list(fed)}. Feed the declared shape, or declare the axes that vary with"
            f" g.input(..., free=(axis, ...))"
        )


def _check_device_feed(name: str, value: Any, node: Node) -> None:
    """A device array is fed as it is: its dtype must be the input's (no conversion)."""
    if value.dtype != np.dtype(node.dtype):
        raise FeedError(
            f"input {name!r} is {node.dtype}; got a {value.dtype} device array"
            f" ({type(value).__name__}), which is fed as it is, never converted. Convert"
            f" the host array with .astype({node.dtype!r}) before placing it on the device"
        )


def _convert_feed(name: str, value: Any, dtype: str) -> tuple[np.ndarray, bool]:
    """``value`` as an array of ``dtype``, and whether float values were rounded.

    Conversion may not change a value: an integer out of the input's range, an integer
    a float input cannot hold exactly, or a finite float that overflows is an error.
    """
    try:
        array = np.asarray(value)
    except ValueError as exc:  # ragged nested sequences
        raise FeedError(f"input {name!r}: cannot make an array of the value fed ({exc})") from None
    target = np.dtype(dtype)
    kind = array.dtype.kind
    if kind not in "biuf" or (kind == "f" and target.kind in "iub") or target.kind == "b" != kind:
        raise FeedError(
            f"input {name!r} is {dtype}; got a {array.dtype} array. Convert it with"
            f" .astype({dtype!r})"
        )
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is checked below
        converted = array.astype(target, copy=False)
    if converted is array or array.size == 0:
        return converted, False
    if kind in "iu" and target.kind in "iu":
        info = np.iinfo(target)
        low, high = array.min(), array.max()
        if low < info.min or high > info.max:
            raise FeedError(
                f"input {name!r} is {dtype}, which holds {info.min}..{info.max}; the {array.dtype}"
                f" array fed has values in {low}..{high}. Feed values in range or declare the"
                " input with a wider dtype"
            )
    elif kind in "iu":  # integers into a float input
        limit = 2 ** (np.finfo(target).nmant + 1)
        if (np.abs(array.min()) > limit or np.abs(array.max()) > limit) and not np.array_equal(
            converted.astype(array.dtype), array
        ):
            raise FeedError(
                f"input {name!r} is {dtype}, which holds integers exactly only up to {limit};"
                f" the {array.dtype} array fed has larger values that would change. Declare the"
                " input float64 or an integer dtype"
            )
    elif kind == "f" and target.itemsize < array.dtype.itemsize:
        overflow = np.isinf(converted) & np.isfinite(array)
        if overflow.any():
            first = array[overflow].flat[0]
            raise FeedError(
                f"input {name!r} is {dtype}; the {array.dtype} array fed has finite values"
                f" beyond its range (e.g. {first:g}), which would become infinite. Scale the"
                " values or declare the input with a wider dtype"
            )
        return converted, isinstance(value, np.ndarray | np.generic)
    return converted, False


def compile(  # the natural name; shadows the builtin only in this module
    outputs: Sequence[Tensor],
    updates: Updates | None = None,
    *,
    backend: str | None = None,
    optimize_graph: bool = True,
    check_numerics: bool | None = None,
    memory_budget: int | None = None,
    precision: str = "float32",
) -> Program:
    """Compile ``outputs`` (and variable ``updates``) into a [`Program`][asgrad.tensor.Program].

    ``precision="mixed"`` first rebuilds the graph with float16 matrix products and
    the casts around them (`asgrad.tensor.api.precision`); ``"float32"`` (the
    default) compiles the graph as it is.

    ``memory_budget`` (bytes) makes the planned peak at the declared shapes (see
    [`Program.memory`][asgrad.tensor.Program.memory]) fit: the compiler recomputes
    chosen forward values in the backward pass instead of keeping them
    (`asgrad.tensor.ir.remat`), with bit-identical results, or raises
    [`MemoryBudgetError`][asgrad.tensor.MemoryBudgetError] naming the smallest peak it
    can reach.

    ``check_numerics=True`` stops each run at the first op that makes a NaN or an
    infinity, naming it (see `asgrad.tensor.runtime.numerics`); the default comes from
    the ``ASGRAD_CHECK_NUMERICS`` environment variable.

    >>> from asgrad.tensor import Graph, compile
    >>> x = Graph().input("x", (2,))
    >>> program = compile([x * 2.0])
    >>> program.run({"x": [1.0, 2.0]})[0].tolist()
    [2.0, 4.0]
    """
    outputs = require_tensors(outputs, "compile")
    if precision != "float32":
        pairs = updates.items() if isinstance(updates, Mapping) else (updates or ())
        outputs, updates = with_precision(outputs, dict(pairs), precision)
    return Program(
        outputs,
        updates,
        backend=backend,
        optimize_graph=optimize_graph,
        check_numerics=check_numerics,
        memory_budget=memory_budget,
    )


def evaluate(
    outputs: Sequence[Tensor] | Tensor,
    feeds: Mapping[str, Any] | None = None,
    *,
    backend: str | None = None,
    check_numerics: bool | None = None,
) -> list[np.ndarray]:
    """Compute ``outputs`` on ``feeds`` once (``check_numerics``: see
    [`compile`][asgrad.tensor.compile]).

    Compiled programs are cached per graph, the `Graph.MAX_PROGRAMS` used most
    recently; to run the same outputs many times, [`compile`][asgrad.tensor.compile] them once
    instead.

    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> evaluate([x * x], {"x": np.array([1, 2, 3], np.float32)})[0].tolist()
    [1.0, 4.0, 9.0]
    """
    single = isinstance(outputs, Tensor)
    outs = require_tensors(outputs, "evaluate")
    if not outs:
        return []
    graph = outs[0].graph
    cache = graph.programs
    check = checking_by_default() if check_numerics is None else bool(check_numerics)
    key = (tuple(t.node.id for t in outs), resolve_backend_name(backend), check)
    program: Program | None = cache.get(key)
    if program is None:
        program = cache.put(key, Program(outs, backend=key[1], check_numerics=check))
    result = program.run(feeds or {})
    return result[:1] if single else result
