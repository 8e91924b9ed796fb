"""Row programs (`asgrad.tensor.ir.rows`) rendered as one WGSL row kernel.

A composite along rows (softmax, log-softmax, layer and batch norm and their input
gradients) states its meaning once, as a row program; `row_kernel` renders it into
``kernels/norm_rows.wgsl``: one workgroup per row (a short row takes fewer
invocations and shares its workgroup with other rows: `lanes_for`), each pass of
stages (`RowProgram.groups`) one loop over the row (unrolled over the elements an
invocation holds in registers, loaded once: `cached_elements`) and one combination
across the row's lanes (subgroup shuffles where the device has subgroups, else a
tree in workgroup memory; the stages of a pass share it), the row scalars'
subexpressions computed once per row, then one loop writing the output expression.
Every expression is spelled by `render_wgsl`, NaN and infinities
as numpy's (a row max propagates NaN).
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.gpu.device import fold_groups
from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.device.source import kernel_text, render
from asgrad.gpu.errors import GpuError, GpuUnsupportedError
from asgrad.gpu.lowering.scalar import render_wgsl
from asgrad.tensor.ir.rows import RowProgram, Stage, reads_inputs
from asgrad.tensor.ir.scalar import Expr, arg, cast, substitute

__all__ = [
    "WGSL_FILES",
    "kernel_source",
    "lanes_for",
    "row_kernel",
    "row_kernel_stores",
    "widened",
]

WGSL_FILES: tuple[str, ...] = ("norm_rows.wgsl", "prelude.wgsl")

_NEG_INF = "bitcast<f32>(0xff800000u)"


class _Writer:
    def __init__(
        self,
        program: RowProgram,
        kinds: Sequence[str],
        wrapped: Mapping[int, int] | None = None,
    ) -> None:
        self.p = program
        self.n = len(program.inputs)
        self.wrapped = dict(wrapped or {})
        self.names = [
            _wrapped_name(i, self.wrapped[i])
            if i in self.wrapped
            else {"element": f"x{i}", "position": f"in{i}[k]"}.get(layout, f"in{i}[row]")
            for i, layout in enumerate(program.inputs)
        ]
        self.names.extend(f"s{j}" for j in range(len(program.stages)))
        # each input as stored (a float16 one is read as f16: the program's expressions
        # widen it where they compute in f32), the row scalars and hoisted values f32
        self.kinds = [*kinds, *(["f32"] * len(program.stages))]
        self.halves = {i for i, k in enumerate(kinds) if k == "f16"}
        self.hoisted: dict[Expr, Expr] = {}
        self.lines: list[str] = []

    def render(self, e: Expr, out: str = "f32") -> str:
        return render_wgsl(e, self.names, self.kinds, out)

    def render_slot(self, e: Expr, j: int, out: str = "f32") -> str:
        """``e`` at the invocation's element slot ``j`` (`kernel_source`'s ``cache``):
        an input read per element (at the element, along the row, wrapped) is its
        register ``x{i}_{j}`` (`slot_load`), one value or one per row read as it is."""
        names = list(self.names)
        for i, layout in enumerate(self.p.inputs):
            if self.wrapped.get(i) == 1:
                names[i] = f"in{i}[0]"
            elif i in self.wrapped or layout in ("element", "position"):
                names[i] = f"x{i}_{j}"
        return render_wgsl(e, names, self.kinds, out)

    def slot_load(self, i: int, j: int) -> str | None:
        """Where input ``i`` is read for the element slot ``j`` (None: not per element)."""
        if self.wrapped.get(i) == 1:
            return None
        if i in self.wrapped:
            return f"in{i}[at{j} % {self.wrapped[i]}u]"
        return {"element": f"in{i}[at{j}]", "position": f"in{i}[k{j}]"}.get(self.p.inputs[i])

    def hoist(self, e: Expr) -> Expr:
        """``e`` with each subexpression of row scalars alone computed once, before
        (one reading a float16 input stays where it is: its kind is its own)."""
        if e.op in ("arg", "const"):
            return e
        if self.p.is_row_level(e):
            if self.halves & reads_inputs(e, self.n):
                return e
            if e not in self.hoisted:
                name = f"h{len(self.hoisted)}"
                self.lines.append(f"    let {name} = {self.render(e)};")
                self.names.append(name)
                self.kinds.append("f32")
                self.hoisted[e] = arg(len(self.names) - 1)
            return self.hoisted[e]
        return Expr(e.op, tuple(self.hoist(a) for a in e.args), e.value)

    def loads(self, exprs: list[Expr], indent: str) -> list[str]:
        """The element inputs ``exprs`` read, loaded at ``at``."""
        read = sorted(set().union(*(reads_inputs(e, self.n) for e in exprs)))
        return [
            f"{indent}let x{i} = in{i}[at];"
            for i in read
            if self.p.inputs[i] == "element" and i not in self.wrapped
        ]

    def loop(self, lanes: int, at: str) -> list[str]:
        """The head of a loop over the invocation's elements of the row."""
        return [f"    for (var k = lane; k < R; k += {lanes}u) {{", at]


def _wrapped_name(i: int, modulus: int) -> str:
    """Input ``i`` read at the element's flat index modulo ``modulus`` (1: one value)."""
    return f"in{i}[0]" if modulus == 1 else f"in{i}[at % {modulus}u]"


def kernel_source(
    program: RowProgram,
    stores: tuple[Expr, ...] = (),
    wrapped: Mapping[int, int] | None = None,
    per_row: bool = False,
    kinds: Sequence[str] = (),
    out: str = "f32",
    store_kinds: Sequence[str] = (),
    lanes: int = 256,
    flat: bool = False,
    cache: int = 0,
    subgroups: bool = False,
) -> str:
    """The WGSL of ``program``'s row kernel (its pipeline's source); each of ``stores``
    (expressions of the inputs at the element, as the output's) is written into an
    output of its own too. An input ``i`` in ``wrapped`` is read at the element's flat
    index modulo ``wrapped[i]`` whatever its layout says (1: one value for all; a
    broadcast over leading axes otherwise); ``per_row``: the output (of the row
    scalars alone) is written once per row. ``kinds``: each input's storage type,
    ``f32`` or ``f16`` (default all ``f32``), read as stored: the program's
    expressions say where a float16 input is widened (``cast``); ``out`` and
    ``store_kinds`` (default ``f32``): the output's and the stores' storage types, each
    value converted as it is written (rounded once to f16). ``lanes`` (a power of two
    from 32 to 256): the invocations per row, 256 / lanes rows per workgroup
    (`lanes_for`); ``flat``: the row's elements are one stride apart (the layout's
    ``S >= R``: `flat_rows`), each one's index one multiply-add from the row's start;
    ``cache`` (at least the row's length over ``lanes``; 0: none; only with ``flat``):
    the elements each invocation holds, in registers named per element (no array: a
    dynamically indexed one lives in slow memory), all loaded from memory at once
    before the first pass, so each is read once and every load is in flight together
    (`cached_elements`); ``subgroups``: the lanes of a row combine their partial
    results by subgroup shuffles (WGSL's ``subgroupShuffleXor``), through workgroup
    memory only across subgroups, where the device has the ``subgroup`` feature."""
    kinds = tuple(kinds) or ("f32",) * len(program.inputs)
    store_kinds = tuple(store_kinds) or ("f32",) * len(stores)
    w = _Writer(program, kinds, wrapped)
    at = "        let at = start + k * params.d;" if flat else "        let at = addr(start, k);"
    width = max(len(g) for g in program.groups()) if program.stages else 0
    if subgroups:  # the lanes of a row that one subgroup holds
        w.lines.append(f"    let width = min({lanes}u, sg);")
    if cache:
        if not flat:
            raise GpuError("a row kernel keeps its elements in registers only over flat rows")
        every = (*(st.expr for st in program.stages), program.out, *stores)
        read = set().union(*(reads_inputs(e, w.n) for e in every))
        for j in range(cache):
            w.lines += [
                f"    let ok{j} = lane + {j * lanes}u < R;",
                f"    let k{j} = select(0u, lane + {j * lanes}u, ok{j});",
                f"    let at{j} = start + k{j} * params.d;",
            ]
        # every input read per element, in registers: loaded once, all in flight at once
        for j in range(cache):
            loads = [(i, w.slot_load(i, j)) for i in sorted(read)]
            w.lines += [f"    let x{i}_{j} = {at};" for i, at in loads if at is not None]
    for group in program.groups():
        exprs = [w.hoist(program.stages[j].expr) for j in group]
        for j in group:
            start = _NEG_INF if program.stages[j].reduce == "max" else "0.0"
            w.lines.append(f"    var t{j} = {start};")
        if cache:
            for slot in range(cache):
                for j, e in zip(group, exprs, strict=True):
                    combined = _combine(program, j, f"t{j}", w.render_slot(e, slot))
                    w.lines.append(f"    t{j} = select(t{j}, {combined}, ok{slot});")
        else:
            w.lines.extend(w.loop(lanes, at))
            w.lines.extend(w.loads(exprs, "        "))
            for j, e in zip(group, exprs, strict=True):
                w.lines.append(f"        t{j} = {_combine(program, j, f't{j}', w.render(e))};")
            w.lines.append("    }")
        w.lines += _across_lanes(program, group, lanes, subgroups)
    result = w.hoist(program.out)
    extra = [w.hoist(e) for e in stores]
    bindings = [
        f"@group(0) @binding({i + 1}) var<storage, read> in{i}: array<{kinds[i]}>;"
        for i in range(len(program.inputs))
    ]
    first = len(program.inputs) + 1
    bindings.append(f"@group(0) @binding({first}) var<storage, read_write> dst: array<{out}>;")
    bindings += [
        f"@group(0) @binding({first + 1 + m}) var<storage, read_write> dst{m}: array<{k}>;"
        for m, k in enumerate(store_kinds)
    ]

    def value(e: Expr, kind: str, slot: int | None = None) -> str:  # as stored
        typed = cast(e, _DTYPES[kind])
        return w.render(typed, kind) if slot is None else w.render_slot(typed, slot, kind)

    output: list[str] = []
    if cache:
        for slot in range(cache):
            written = [] if per_row else [f"        dst[at{slot}] = {value(result, out, slot)};"]
            written += [
                f"        dst{m}[at{slot}] = {value(e, k, slot)};"
                for m, (e, k) in enumerate(zip(extra, store_kinds, strict=True))
            ]
            if written:
                output += [f"    if (ok{slot}) {{", *written, "    }"]
    else:
        written = [
            f"        dst{m}[at] = {value(e, k)};"
            for m, (e, k) in enumerate(zip(extra, store_kinds, strict=True))
        ]
        loop = [*w.loads([result, *extra] if not per_row else extra, "        ")]
        loop += [f"        dst[at] = {value(result, out)};"] if not per_row else []
        output = w.loop(lanes, at)
        output = [*output, *loop, *written, "    }"] if loop or written else []
    if per_row:
        store = f"        dst[row] = {value(result, out)};"
        output += ["    if (lane == 0u && live) {", store, "    }"]
    return render(
        "norm_rows",
        LANES=str(lanes),
        ROWS=str(256 // lanes),
        PRELUDE=kernel_text("prelude"),
        BINDINGS="\n".join(bindings),
        PARTIALS="\n".join(f"var<workgroup> p{m}: array<f32, 256>;" for m in range(width)),
        SUBGROUP=", @builtin(subgroup_size) sg: u32" if subgroups else "",
        PASSES="\n".join(w.lines),
        OUTPUT="\n".join(output),
    )


def _across_lanes(program: RowProgram, group: list[int], lanes: int, subgroups: bool) -> list[str]:
    """WGSL combining each lane's partial results ``t{j}`` of the stages of ``group``
    over the row's ``lanes`` invocations into the row scalars ``s{j}``: a tree in
    workgroup memory (log2(lanes) barriers), or subgroup shuffles within each subgroup
    (a row's lanes are consecutive invocations, so they fill one subgroup or several
    whole ones) and workgroup memory across the row's subgroups (two barriers; none
    where the row fits one subgroup)."""
    lines: list[str] = []
    if subgroups:
        lines.append("    for (var o = 1u; o < width; o = o << 1u) {")
        for j in group:
            shuffled = _combine(program, j, f"t{j}", f"subgroupShuffleXor(t{j}, o)")
            lines.append(f"        t{j} = {shuffled};")
        lines.append("    }")
        lines += [f"    var r{j} = t{j};" for j in group]
        lines.append(f"    if (width < {lanes}u) {{  // uniform: the row spans subgroups")
        lines += [f"        p{m}[li] = t{j};" for m, j in enumerate(group)]
        lines.append("        workgroupBarrier();")
        lines += [f"        r{j} = p{m}[base];" for m, j in enumerate(group)]
        lines.append(f"        for (var o = width; o < {lanes}u; o += width) {{")
        for m, j in enumerate(group):
            lines.append(f"            r{j} = {_combine(program, j, f'r{j}', f'p{m}[base + o]')};")
        lines.append("        }")
        lines.append("        workgroupBarrier();")
        lines.append("    }")
        lines += [f"    let s{j} = r{j}{_scale(program, j)};" for j in group]
        return lines
    for m, j in enumerate(group):
        lines.append(f"    p{m}[li] = t{j};")
    lines.append("    workgroupBarrier();")
    lines.append(f"    for (var s = {lanes // 2}u; s > 0u; s = s >> 1u) {{")
    lines.append("        if (lane < s) {")
    for m, j in enumerate(group):
        lines.append(
            f"            p{m}[li] = {_combine(program, j, f'p{m}[li]', f'p{m}[li + s]')};"
        )
    lines.append("        }")
    lines.append("        workgroupBarrier();")
    lines.append("    }")
    lines += [f"    let s{j} = p{m}[base]{_scale(program, j)};" for m, j in enumerate(group)]
    lines.append("    workgroupBarrier();")
    return lines


def _scale(program: RowProgram, j: int) -> str:
    return " * params.inv_r" if program.stages[j].reduce == "mean" else ""


_DTYPES = {"f32": "float32", "f16": "float16"}


def widened(program: RowProgram, kinds: Sequence[str]) -> RowProgram:
    """``program`` reading its float16 inputs (``kinds[i] == "f16"``) widened to
    float32 where its expressions read them: a program stated over float32 values
    computed on float16 inputs (exactly: every f16 value is an f32 value)."""
    halves = [i for i, k in enumerate(kinds) if k == "f16"]
    if not halves:
        return program
    n = len(program.inputs)
    args = [cast(arg(i), "float32") if i in halves else arg(i) for i in range(n)]
    args += [arg(n + j) for j in range(len(program.stages))]
    stages = tuple(Stage(st.reduce, substitute(st.expr, args)) for st in program.stages)
    return RowProgram(program.inputs, program.axes, stages, substitute(program.out, args))


# Elements each invocation of a row reads per pass at least, where the row is long
# enough: rows shorter than 256 * ROW_ELEMENTS share a workgroup (fewer lanes each).
# The environment variable ROW_ELEMENTS_VARIABLE overrides it for the kernels built
# while it is set (a measurement; 1 gives each row of 256 elements or more a
# workgroup of its own, as before rows shared them).
ROW_ELEMENTS = 8
ROW_ELEMENTS_VARIABLE = "ASGRAD_GPU_ROW_ELEMENTS"
MIN_LANES = 32


def row_elements() -> int:
    """`ROW_ELEMENTS`, or ``ASGRAD_GPU_ROW_ELEMENTS`` where set (a positive integer)."""
    raw = os.environ.get(ROW_ELEMENTS_VARIABLE, "").strip()
    if not raw:
        return ROW_ELEMENTS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise GpuError(f"{ROW_ELEMENTS_VARIABLE}={raw!r}: expected a positive integer")
    return value


def lanes_for(length: int) -> int:
    """The invocations per row of ``length`` elements: the fewest powers of two from
    `MIN_LANES` to 256 that leave each at most `row_elements` elements per pass, so a
    short row (attention's scores, a layer norm's features) shares its workgroup's
    barriers with other rows.

    >>> lanes_for(256), lanes_for(512), lanes_for(1000), lanes_for(1 << 20)
    (32, 64, 128, 256)
    """
    lanes, per = MIN_LANES, row_elements()
    while lanes < 256 and lanes * per < length:
        lanes *= 2
    return lanes


# Whether a row's lanes combine by subgroup shuffles on a device with the ``subgroup``
# feature (False: always the tree in workgroup memory, the kernels of a device without
# it). H200, 2026-12-02, `gpu_micro.py --rows transformer_large`: the causal softmax
# over [32, 8, 256, 256] at 0.70 of the copy kernel's bandwidth with shuffles, 0.40 with
# the tree (0.19 before rows were held in registers).
SUBGROUPS = True

# The most elements of a row one invocation keeps (`cached_elements`).
MAX_CACHED = 16


def cached_elements(length: int, lanes: int) -> int:
    """The elements each of ``lanes`` invocations keeps of a row of ``length`` (a
    power of two at least ``length / lanes``; the kernel holds each in a register of
    its own), 0 where that is over `MAX_CACHED`.

    >>> cached_elements(256, 32), cached_elements(300, 64), cached_elements(1 << 20, 256)
    (8, 8, 0)
    """
    need = -(-length // lanes)
    cache = 1
    while cache < need:
        cache *= 2
    return cache if cache <= MAX_CACHED else 0


def flat_rows(layout: Sequence[int]) -> bool:
    """Whether a kernel layout ``(rows, R, P, a, b, S, c, d)`` puts a row's elements
    one stride ``d`` apart (``S >= R``: ``k / S`` is 0 for every element)."""
    return layout[5] >= layout[1]


def _combine(program: RowProgram, j: int, a: str, b: str) -> str:
    return f"asg_max({a}, {b})" if program.stages[j].reduce == "max" else f"{a} + {b}"


def _layout(program: RowProgram, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``(rows, R, P, a, b, S, c, d)`` of the kernel's addressing (see its header)."""
    axes = program.axes
    kept = [i for i in range(len(shape)) if i not in axes]
    reduced = math.prod(shape[i] for i in axes)
    if axes == tuple(range(axes[0], axes[-1] + 1)):
        post = math.prod(shape[axes[-1] + 1 :])
        rows = math.prod(shape[: axes[0]]) * post
        return (rows, reduced, max(post, 1), reduced * post, 1, max(reduced, 1), 0, post)
    if kept == list(range(kept[0], kept[-1] + 1)):
        inner = math.prod(shape[kept[-1] + 1 :])
        rows = math.prod(shape[i] for i in kept)
        return (rows, reduced, max(rows, 1), 0, inner, max(inner, 1), rows * inner, 1)
    raise GpuUnsupportedError(
        f"a row program over axes {list(axes)} of {list(shape)}: the reduced axes, or the"
        " kept ones, must follow one another"
    )


def row_kernel(program: RowProgram, inputs: list[GpuArray], kind: str = "norm") -> GpuArray:
    """``program`` on float32 ``inputs``, or float16 ones (accumulated in float32, the
    result rounded to float16 once), of the first's shape; one dispatch labelled
    ``kind`` (what a plan's dispatch counts call it)."""
    dtype = inputs[0].dtype
    for a in inputs:
        if a.dtype != dtype or a.dtype not in (np.float32, np.float16):
            shown = ", ".join(str(i.dtype) for i in inputs)
            raise GpuUnsupportedError(
                f"{kind} on the GPU takes float32 or float16 inputs of one dtype, got {shown}"
            )
    program = widened(program, [a.wgsl for a in inputs])
    return row_kernel_stores(program, inputs, inputs[0].shape, kind, out_dtype=dtype)[0]


def row_kernel_stores(
    program: RowProgram,
    inputs: list[GpuArray],
    shape: tuple[int, ...],
    kind: str = "norm",
    stores: tuple[Expr, ...] = (),
    wrapped: Mapping[int, int] | None = None,
    per_row: bool = False,
    out_dtype: np.dtype[Any] | type[np.floating[Any]] = np.float32,
    store_dtypes: Sequence[np.dtype[Any] | type[np.floating[Any]]] = (),
) -> tuple[GpuArray, list[GpuArray]]:
    """`row_kernel` over elements of ``shape`` (``inputs`` laid out as
    ``program.inputs`` say, or as ``wrapped``: see `kernel_source`; each float32 or
    float16, read as stored: ``program`` widens a float16 one where it computes in
    float32), also writing each of ``stores`` (an expression of the inputs at the
    element) into an array of ``shape``: the output (one value per row when
    ``per_row``) of ``out_dtype`` and those arrays of ``store_dtypes`` (default
    float32), each value rounded once as it is written."""
    for a in inputs:
        if a.dtype not in (np.float32, np.float16):
            shown = ", ".join(str(i.dtype) for i in inputs)
            raise GpuUnsupportedError(
                f"{kind} on the GPU takes float32 or float16 inputs, got {shown}"
            )
    store_dtypes = tuple(store_dtypes) or (np.float32,) * len(stores)
    device = inputs[0].device
    layout = _layout(program, shape)
    out = GpuArray.empty((layout[0],) if per_row else shape, out_dtype, device)
    extra = [GpuArray.empty(shape, d, device) for d in store_dtypes]
    if math.prod(shape) == 0:
        return out, extra
    binds = ("uniform",) + ("read",) * len(inputs) + ("write",) * (1 + len(stores))
    wraps = tuple(sorted((wrapped or {}).items()))
    kinds = tuple(a.wgsl for a in inputs)
    out_kind, store_kinds = out.wgsl, tuple(a.wgsl for a in extra)
    lanes, flat = lanes_for(layout[1]), flat_rows(layout)
    cache = cached_elements(layout[1], lanes) if flat else 0
    subgroups = SUBGROUPS and device.capabilities.subgroups
    key: tuple[object, ...] = (kind, program, kinds, out_kind, store_kinds, stores, wraps)
    key += (per_row, lanes, cache, *("subgroups",) * subgroups)
    pipe = device.pipeline(
        key,
        lambda: kernel_source(
            program,
            stores,
            dict(wraps),
            per_row,
            kinds,
            out_kind,
            store_kinds,
            lanes,
            flat,
            cache,
            subgroups,
        ),
        binds,
    )
    inv_r = np.float32(1.0 / layout[1]) if layout[1] else np.float32(0.0)
    meta = struct.pack("<8If3I", *layout, inv_r, 0, 0, 0)
    buffers = (device.params(meta), *(a.buffer for a in inputs), out.buffer)
    buffers += tuple(a.buffer for a in extra)
    groups = -(-layout[0] // (256 // lanes))
    device.dispatch(pipe, buffers, fold_groups(groups, device.max_groups))
    return out, extra
