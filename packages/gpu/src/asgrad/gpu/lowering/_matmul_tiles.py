"""Tile shapes of the matmul kernel and the WGSL each one is generated into.

``kernels/linalg_matmul_tiled.wgsl`` holds the fixed frame; this module writes the
parts that depend on the tile: the named accumulators, the unrolled inner product, the
tile loaders for each operand layout (scalar or vec4 global reads) and the stores.
A tile is named ``"BMxBN_TMxTN_kBK[flags][_wW]"`` (``"128x64_8x4_k8"``,
``"128x128_8x8_k16dpu_w8"``): a BM x BN block of C per workgroup, TM x TN outputs per
thread (4, 8 or 16 each), K steps of BK; the flags ``d`` (two K-step buffers in
workgroup memory), ``p`` (with ``d``: the K loop unrolled by two so each buffer is
named by a constant, no buffer index at run time), ``q`` (an operand read along K is
fetched in blocks of 4 rows x 4 k, transposed in registers and stored as 4 vec4 instead
of 16 scalars; BM and BN multiples of 32), ``s`` (C stored as vec4 where N is a
multiple of 4 and C float32; as 4 scalars otherwise), ``c`` (a B read along K, such
as a linear layer's weight in ``x @ W^T``, is first copied into a contiguous K x N
array, so the product runs on the kernel for B read along N: `asgrad.gpu.lowering.
linalg.matmul_into`; the kernel is the tile's without ``c``) and ``u`` (the K-step's
inner loop written out);
``_wW``: each 32-invocation subgroup (an NVIDIA warp) covers a W x (32 / W) block of
threads, so its fragment reads from workgroup memory touch W vec4 of B and 32 / W of A
(without it, a subgroup is 32 / (BN / TN) whole rows of threads).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from asgrad.gpu.device.array import Operand, contiguous_strides
from asgrad.gpu.device.source import kernel_text, render
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.elementwise import _collapse, offset_lines
from asgrad.gpu.lowering.scalar import render_wgsl_lets, simplify
from asgrad.tensor.ir.scalar import Expr

__all__ = ["ALIASES", "IDENTITY", "Tile", "epilogue_source", "source", "tile"]

# Short names kept from the first kernels (tests and benchmarks use them).
ALIASES = {"128": "128x128_8x8_k8", "64": "64x64_4x4_k16", "32": "32x32_4x4_k8"}

_XYZW = "xyzw"


@dataclass(frozen=True)
class Tile:
    """One tile shape: BM x BN outputs per workgroup, TM x TN per thread, K steps of BK."""

    bm: int
    bn: int
    tm: int
    tn: int
    bk: int
    double: bool = False  # two K-step buffers in workgroup memory, one barrier a step
    unroll: bool = False  # the K-step's inner loop written out
    pingpong: bool = False  # (double) the K loop unrolled by two: constant buffer indexes
    warp: int = 0  # threads along N per 32-invocation subgroup (0: whole rows of threads)
    quad: bool = False  # operands read along K: 4x4 blocks transposed in registers
    vstore: bool = False  # C stored as vec4 where its rows allow
    copy_b: bool = False  # a B read along K copied first to one contiguous along N

    @property
    def name(self) -> str:
        flags = (
            "c" * self.copy_b
            + "d" * self.double
            + "p" * self.pingpong
            + "q" * self.quad
            + "s" * self.vstore
            + "u" * self.unroll
        )
        lanes = f"_w{self.warp}" if self.warp else ""
        return f"{self.bm}x{self.bn}_{self.tm}x{self.tn}_k{self.bk}{flags}{lanes}"

    @property
    def stages(self) -> int:
        return 2 if self.double else 1

    @property
    def shared(self) -> int:
        """Bytes of workgroup memory."""
        return (self.bm + self.bn) * self.bk * 4 * self.stages

    @property
    def wx(self) -> int:
        return self.bn // self.tn

    @property
    def wy(self) -> int:
        return self.bm // self.tm

    @property
    def threads(self) -> int:
        return self.wx * self.wy


def tile(name: str) -> Tile:
    """The `Tile` named ``name`` (or one of `ALIASES`), checked."""
    full = ALIASES.get(name, name)
    try:
        block, thread, depth, *rest = full.split("_")
        bm, bn = (int(v) for v in block.split("x"))
        tm, tn = (int(v) for v in thread.split("x"))
        flags = depth.removeprefix("k").lstrip("0123456789")
        bk = int(depth.removeprefix("k").removesuffix(flags))
        if (
            set(flags) - {"c", "d", "p", "q", "s", "u"}
            or len(rest) > 1
            or not depth.startswith("k")
        ):
            raise ValueError(flags)
        warp = int(rest[0].removeprefix("w")) if rest else 0
        if rest and not rest[0].startswith("w"):
            raise ValueError(rest)
    except ValueError:
        raise GpuUnsupportedError(
            f"matmul tile {name!r} is not of the form BMxBN_TMxTN_kBK[flags][_wW] (e.g. "
            "128x64_8x4_k8, 128x128_8x8_k16dpu_w8)"
        ) from None
    t = Tile(
        bm, bn, tm, tn, bk, "d" in flags, "u" in flags, "p" in flags, warp, "q" in flags,
        "s" in flags, "c" in flags,
    )  # fmt: skip
    ok = (
        tm in (4, 8, 16)
        and tn in (4, 8, 16)
        and bm % tm == 0
        and bn % tn == 0
        and bk % 4 == 0
        and t.threads <= 1024
        and t.shared <= 32768
        and (t.double or not t.pingpong)
        and (not t.quad or (bm % 32 == 0 and bn % 32 == 0))
        and (warp == 0 or (warp in (2, 4, 8, 16) and t.wx % warp == 0 and t.wy % (32 // warp) == 0))
    )
    if not ok:
        raise GpuUnsupportedError(
            f"matmul tile {name!r}: TM and TN must be 4, 8 or 16, dividing BM and BN; BK a "
            "multiple of 4; at most 1024 threads and 32 KiB of workgroup memory; flags "
            "after BK: d (double buffer), p (with d: constant buffer indexes), q (4x4 "
            "blocks of an operand read along K, BM and BN multiples of 32), s (vec4 "
            "stores), c (B read along K copied along N first), u "
            "(unrolled); _wW: W of 2, 4, 8 or 16 dividing BN / TN, 32 / W dividing BM / TM"
        )
    return t


def _fetch(
    operand: str, t: Tile, layout: str, vec: bool
) -> tuple[str, list[str], list[str], list[str]]:
    """Loader functions of one operand, and the code of the first fetch, the stashes
    into workgroup memory and the next fetch (one vec4 register per chunk)."""
    if t.quad and layout == "k":
        return _fetch_quad(operand, t, vec)
    big = t.bm if operand == "a" else t.bn  # the tile's extent along M (A) or N (B)
    total = big * t.bk // 4  # vec4 chunks in the tile
    shared = "As" if operand == "a" else "Bs"
    along_k = layout == "k"
    # chunk c -> (outer index, k) inside the tile
    if along_k:  # 4 consecutive k for one row (A) / column (B)
        pos = f"let i = c / {t.bk // 4}u;\n    let k = (c % {t.bk // 4}u) * 4u;"
    else:  # 4 consecutive rows (A) / columns (B) for one k
        pos = f"let k = c / {big // 4}u;\n    let i = (c % {big // 4}u) * 4u;"
    origin = "row0" if operand == "a" else "col0"
    if operand == "a":
        scal = "load_a(base, g{d}, kg{k}, kend)"
        inside = "g < params.M && kg < kend"
        flat = "(base + g * params.a_sm + kg * params.a_sk) / 4u"
        arr = "A"
    else:
        scal = "load_b(base, kg{k}, g{d}, kend)"
        inside = "kg < kend && g < params.N"
        flat = "(base + kg * params.b_sk + g * params.b_sn) / 4u"
        arr = "B"
    if vec:
        body = (
            f"if ({inside}) {{\n        return vec4<f32>({arr}[{flat}]);\n    }}\n"
            "    return vec4<f32>(0.0);"
        )
    else:
        parts = []
        for e in range(4):
            d, k = ("", f" + {e}u") if along_k else (f" + {e}u", "")
            parts.append(scal.format(d=d, k=k))
        body = "return vec4<f32>(" + ", ".join(parts) + ");"
    fetch = (
        f"fn fetch_{operand}(c: u32, base: u32, {origin}: u32, k0: u32, kend: u32)"
        " -> vec4<f32> {\n"
        f"    {pos}\n    let g = {origin} + i;\n    let kg = k0 + k;\n    {body}\n}}"
    )
    if along_k:
        stores = "\n".join(
            f"    {shared}[stage][k + {e}u][i / 4u][i % 4u] = v.{_XYZW[e]};" for e in range(4)
        )
    else:
        stores = f"    {shared}[stage][k][i / 4u] = v;"
    stash = f"fn stash_{operand}(c: u32, v: vec4<f32>, stage: u32) {{\n    {pos}\n{stores}\n}}"
    first, stash_calls, nxt = _fetch_calls(operand, t, total, origin, "vec4<f32>(0.0)")
    return fetch + "\n\n" + stash, first, stash_calls, nxt


def _fetch_calls(
    operand: str, t: Tile, total: int, origin: str, zero: str
) -> tuple[list[str], list[str], list[str]]:
    """The calls of `_fetch`/`_fetch_quad`'s functions for each block an invocation
    loads (of ``total`` in the tile): its register declared as ``zero`` and the first K
    step's fetch, the stash into workgroup memory, the next K step's fetch; guarded
    where the last blocks do not cover every invocation."""
    per = -(-total // t.threads)
    guard = total % t.threads != 0
    first, stash_calls, nxt = [], [], []
    for q in range(per):
        c = f"li + {q * t.threads}u"
        reg = f"next_{operand}{q}"
        cond = f"if ({c} < {total}u) " if guard and (q + 1) * t.threads > total else ""
        first.append(
            f"    var {reg} = {zero};\n    {cond}{{ {reg} = fetch_{operand}({c}, "
            f"{operand}_base, {origin}, kbeg, kend); }}"
        )
        stash_calls.append(f"{cond}{{ stash_{operand}({c}, {reg}, STAGE); }}")
        nxt.append(
            f"{cond}{{ {reg} = fetch_{operand}({c}, {operand}_base, {origin}, "
            f"k0 + {t.bk}u, kend); }}"
        )
    return first, stash_calls, nxt


def _fetch_quad(operand: str, t: Tile, vec: bool) -> tuple[str, list[str], list[str], list[str]]:
    """`_fetch` of an operand read along K with `Tile.quad`: each fetch reads 4 rows (A)
    / columns (B) x 4 k as a mat4x4 (a vec4 of 4 consecutive k per row), and the stash
    writes its transpose, 4 vec4 of 4 rows at one k, into the k-major workgroup tile.
    Block ``c`` of a workgroup: rows ``4 * r`` where ``r = (c / (8 * BK / 4)) * 8 + c %
    8``, k ``4 * ((c / 8) % (BK / 4))``: 8 neighbouring blocks share k, so a quarter
    subgroup's vec4 stores fall in 8 different banks, and a subgroup reads runs of BK
    / 4 vec4 along K of 32 / (BK / 4) rows."""
    big = t.bm if operand == "a" else t.bn
    kc = t.bk // 4
    total = big * kc // 4  # 4x4 blocks in the tile
    shared = "As" if operand == "a" else "Bs"
    pos = f"let r = (c / {8 * kc}u) * 8u + c % 8u;\n    let k = ((c / 8u) % {kc}u) * 4u;"
    origin = "row0" if operand == "a" else "col0"
    if operand == "a":
        inside = "g < params.M && kg < kend"
        flat = "(base + g * params.a_sm + kg * params.a_sk) / 4u"
        scal = "load_a(base, g, kg{k}, kend)"
        arr = "A"
    else:
        inside = "kg < kend && g < params.N"
        flat = "(base + kg * params.b_sk + g * params.b_sn) / 4u"
        scal = "load_b(base, kg{k}, g, kend)"
        arr = "B"
    if vec:
        body = (
            f"if ({inside}) {{\n        return vec4<f32>({arr}[{flat}]);\n    }}\n"
            "    return vec4<f32>(0.0);"
        )
    else:
        parts = [scal.format(k=f" + {e}u" if e else "") for e in range(4)]
        body = "return vec4<f32>(" + ", ".join(parts) + ");"
    line = (
        f"fn line_{operand}(base: u32, g: u32, kg: u32, kend: u32) -> vec4<f32> {{\n    {body}\n}}"
    )
    rows = ", ".join(f"line_{operand}(base, g + {j}u, kg, kend)" for j in range(4))
    fetch = (
        f"fn fetch_{operand}(c: u32, base: u32, {origin}: u32, k0: u32, kend: u32)"
        " -> mat4x4<f32> {\n"
        f"    {pos}\n    let g = {origin} + 4u * r;\n    let kg = k0 + k;\n"
        f"    return mat4x4<f32>({rows});\n}}"
    )
    stores = "\n".join(f"    {shared}[stage][k + {e}u][r] = w[{e}];" for e in range(4))
    stash = (
        f"fn stash_{operand}(c: u32, v: mat4x4<f32>, stage: u32) {{\n    {pos}\n"
        f"    let w = transpose(v);\n{stores}\n}}"
    )
    first, stash_calls, nxt = _fetch_calls(operand, t, total, origin, "mat4x4<f32>()")
    return line + "\n\n" + fetch + "\n\n" + stash, first, stash_calls, nxt


IDENTITY = (
    "fn ep_row(r: u32) -> array<u32, 1> {\n    return array<u32, 1>(0u);\n}\n"
    "fn epilogue(x0: f32, i: u32, n: u32, er: array<u32, 1>) -> f32 {\n    return x0;\n}\n"
    "fn c_at(i: u32, n: u32, er: array<u32, 1>) -> u32 {\n    return i;\n}"
)

# The uniform slot of a strided destination's offset (that of operand slot 7: an
# epilogue reads at most `MAX_EPILOGUE_OPERANDS` = 5 operands); its dims and strides are
# constants of the kernel.
_STORE_SLOT = 7


def epilogue_source(
    expr: Expr,
    operands: Sequence[Operand],
    out_shape: tuple[int, ...],
    second: bool = False,
    product: str = "f32",
    store: Operand | None = None,
) -> tuple[str, bytes]:
    """The epilogue functions of ``expr`` (a scalar expression of ``arg(0)``, the
    product's element, and ``arg(k)``, operand k - 1 read at the same position of the
    output, broadcast through its strides), the prelude, the bindings of its uniform
    (4) and operands (5, 6...), and that uniform's bytes.

    A row of C is stored through ``ep_row(r)`` (once per row: the offsets of the strided
    operands at the start of row ``r`` of the output, its leading dims decomposed) and
    ``epilogue(x0, i, n, er)`` per element (the product's element, its flat index in the
    C-contiguous output of ``out_shape``, its column and the row's offsets): an operand is
    read at ``i`` (contiguous), at its offset (one element) or at its row offset plus
    ``n`` times its column stride (strided), so an element costs no division. With
    ``second`` the value goes into a second output (bound after the operands) at ``i``
    and C keeps the product. ``product``: the storage type of C (``f16``: the product
    is rounded to float16 before ``expr`` reads it, and ``expr`` computes in float16 as
    the unfused ops would). ``store``: a view of ``out_shape`` that C is (a strided
    destination): element i is stored at ``c_at(i, n, er)``, the row's offset in it plus
    ``n`` times its column stride, instead of at ``i``.
    """
    if len(out_shape) < 2:
        raise GpuUnsupportedError(
            f"a matmul epilogue needs the product as a matrix (its rows and columns); got "
            f"shape {out_shape}"
        )
    if store is not None and (second or tuple(store.shape) != tuple(out_shape)):
        raise GpuUnsupportedError(
            f"a matmul's strided destination must be of the product's shape {out_shape} and "
            f"its only output; got shape {store.shape}"
        )
    strides = [o.broadcast_strides(out_shape) for o in operands]
    contiguous = contiguous_strides(out_shape)
    modes = [
        "scalar" if all(s == 0 for s in st) else "contig" if st == contiguous else "strided"
        for st in strides
    ]
    walked = strides + ([tuple(store.strides)] if store is not None else [])
    lead, lead_strides = _collapse(out_shape[:-1], [st[:-1] for st in walked])
    if len(lead) > _MAX_LEAD_DIMS:
        raise GpuUnsupportedError(
            f"a matmul epilogue reads operands over at most {_MAX_LEAD_DIMS} leading "
            f"dims of the product after merging; got {len(lead)} ({out_shape})"
        )
    meta = [0] * 96
    meta[0], meta[1] = math.prod(out_shape), len(lead)
    meta[4 : 4 + len(lead)] = lead
    for k, (st, o) in enumerate(zip(strides, operands, strict=True)):
        meta[12 + 8 * k : 12 + 8 * k + len(lead)] = [v & 0xFFFFFFFF for v in lead_strides[k]]
        meta[76 + k] = o.offset
        meta[84 + k] = st[-1] & 0xFFFFFFFF if st else 0
    if store is not None:
        meta[76 + _STORE_SLOT] = store.offset
    root = simplify(expr)
    types = (product, *(o.array.wgsl for o in operands))
    # a destination's dims and strides are constants of the kernel (a division by a
    # constant is a multiply and a shift); its offset is read from the uniform
    layout = None
    if store is not None:
        layout = (tuple(lead), tuple(lead_strides[-1]), int(store.strides[-1]))
    rank = len(lead) if "strided" in modes else 0
    key = (id(root), tuple(modes), rank, types, second, layout)
    hit = _EPILOGUES.get(key)
    if hit is not None and hit[0] is root:
        text = hit[1]
    else:
        text = _epilogue_text(root, modes, rank, types, second, layout)
        if len(_EPILOGUES) >= _MAX_EPILOGUES:
            _EPILOGUES.clear()
        _EPILOGUES[key] = (root, text)
    return text, struct.pack(f"<{len(meta)}I", *meta)


# The uniform holds 8 leading dims of the product and, per operand, 8 strides.
_MAX_LEAD_DIMS = 8

# Epilogue sources by simplified expression (kept alive here), operand modes, rank,
# types and output: a model's repeated layers share one.
_EPILOGUES: dict[tuple[object, ...], tuple[Expr, str]] = {}
_MAX_EPILOGUES = 1024


def _epilogue_text(
    root: Expr,
    modes: Sequence[str],
    rank: int,
    types: Sequence[str],
    second: bool,
    store: tuple[tuple[int, ...], tuple[int, ...], int] | None = None,
) -> str:
    """The WGSL of an epilogue (see `epilogue_source`): ``types`` those of the product
    and the operands, ``rank`` the merged leading dims' where an operand is strided;
    ``store``: a strided destination's merged leading dims, its strides over them and
    its column stride (written into the kernel as constants)."""
    n_operands = len(modes)
    strided = [k for k, m in enumerate(modes) if m == "strided"]
    slots = max(1, len(strided) + (store is not None))  # the destination's offset last
    row = [f"    var o = array<u32, {slots}>({', '.join(['0u'] * slots)});"]
    if strided:
        row += [f"    o[{j}] = emu({76 + k}u);" for j, k in enumerate(strided)]
        row += offset_lines("r", [(f"o[{j}]", k) for j, k in enumerate(strided)], rank, "emu")
    at = "i"
    if store is not None:
        dims, steps, column = store
        row += [f"    o[{slots - 1}] = emu({76 + _STORE_SLOT}u);", "    var at = r;"]
        for d in range(len(dims) - 1, -1, -1):
            coord = "at" if d == 0 else f"at % {dims[d]}u"
            row.append(f"    o[{slots - 1}] += ({coord}) * {steps[d] & 0xFFFFFFFF}u;")
            if d:
                row.append(f"    at = at / {dims[d]}u;")
        at = f"er[{slots - 1}] + n * {column & 0xFFFFFFFF}u"
    row.append("    return o;")
    lines: list[str] = []
    for k, mode in enumerate(modes):
        if mode == "strided":
            where = f"er[{strided.index(k)}] + n * emu({84 + k}u)"
        else:
            where = {"contig": f"i + emu({76 + k}u)", "scalar": f"emu({76 + k}u)"}[mode]
        lines.append(f"    let x{k + 1} = E{k + 1}[{where}];")
    names = [f"x{k}" for k in range(len(types))]
    if types[0] == "f16":  # the product as the unfused matmul stores it
        lines.append("    let h0 = asg_f2h(x0);")
        names[0] = "h0"
    lets, body = render_wgsl_lets(root, names, types, types[0], prefix="e")
    lines += [f"    {s}" for s in lets]
    binds = [
        f"@group(0) @binding({5 + k}) var<storage, read> E{k + 1}: array<{types[k + 1]}>;"
        for k in range(n_operands)
    ]
    if n_operands or store is not None:
        binds = [
            "@group(0) @binding(4) var<uniform> ep: array<vec4<u32>, 24>;",
            *binds,
            "fn emu(i: u32) -> u32 {\n    return ep[i / 4u][i % 4u];\n}",
        ]
    if second:
        binds.append(
            f"@group(0) @binding({5 + n_operands if n_operands else 4}) "
            f"var<storage, read_write> D: array<{types[0]}>;"
        )
        lines += [f"    D[i] = {body};", "    return x0;"]
    else:  # a float16 value widens exactly; C's store rounds it back unchanged
        lines.append(f"    return {body if types[0] == 'f32' else f'asg_h2f({body})'};")
    function = "\n".join(
        [
            f"fn ep_row(r: u32) -> array<u32, {slots}> {{",
            *row,
            "}",
            f"fn epilogue(x0: f32, i: u32, n: u32, er: array<u32, {slots}>) -> f32 {{",
            *lines,
            "}",
            f"fn c_at(i: u32, n: u32, er: array<u32, {slots}>) -> u32 {{",
            f"    return {at};",
            "}",
        ]
    )
    return "\n".join([kernel_text("prelude"), *binds, "", function])


def source(
    t: Tile,
    a_layout: str,
    b_layout: str,
    vec_a: bool,
    vec_b: bool,
    epilogue: str = IDENTITY,
    loads: str | None = None,
    types: tuple[str, str] = ("f32", "f32"),
    vec_c: bool = False,
) -> str:
    """The WGSL of tile ``t`` for operands contiguous along ``a_layout`` ("k" or "m")
    and ``b_layout`` ("n" or "k"), read as vec4 where ``vec_a`` / ``vec_b``, storing
    through ``epilogue`` (`epilogue_source`). ``loads`` replaces the strided element
    loads ``load_a(base, m, k, kend)`` and ``load_b(base, k, n, kend)`` (a
    convolution's gathers; the operands then read as scalars). ``types``: the storage
    types of the operands and of C (``f16``: widened as read, C rounded as stored; the
    products accumulate in f32 either way). ``vec_c``: C's rows are multiples of 4
    long, so a tile with `Tile.vstore` stores float32 outputs as vec4."""
    if loads is not None and (vec_a or vec_b):
        raise GpuUnsupportedError("gathered matmul operands are read as scalars, not vec4")
    elem, c_elem = types
    if loads is not None and elem != "f32":
        raise GpuUnsupportedError("gathered matmul operands are float32 (conv runs in float32)")
    if c_elem == "f16" and "fn asg_isnan(" not in epilogue:
        epilogue = f"{kernel_text('prelude')}\n{epilogue}"  # asg_f2h's helpers
    fa, first_a, stash_a, next_a = _fetch("a", t, a_layout, vec_a)
    fb, first_b, stash_b, next_b = _fetch("b", t, b_layout, vec_b)
    acc = [(r, j) for r in range(t.tm) for j in range(t.tn // 4)]
    decl = "\n".join(f"    var c{r}_{j} = vec4<f32>(0.0);" for r, j in acc)

    def step(k: str, stage: str) -> list[str]:  # the products of one k of the K-step
        lines = [f"let a{i} = As[{stage}][{k}][{i * t.wy}u + ty];" for i in range(t.tm // 4)]
        lines += [f"let b{j} = Bs[{stage}][{k}][{j * t.wx}u + tx];" for j in range(t.tn // 4)]
        lines += [
            f"c{r}_{j} = fma(vec4<f32>(a{r // 4}.{_XYZW[r % 4]}), b{j}, c{r}_{j});" for r, j in acc
        ]
        return lines

    def inner(stage: str) -> list[str]:  # the products of one K-step from buffer `stage`
        if t.unroll:
            return [f"{{ {' '.join(step(f'{k}u', stage))} }}" for k in range(t.bk)]
        return [f"for (var k = 0u; k < {t.bk}u; k++) {{", *step("k", stage), "}"]

    loop = _loop(t, first_a + first_b, stash_a + stash_b, next_a + next_b, inner)
    store = "\n".join(
        f"    store_row(c_base, row0 + {4 * (r // 4) * t.wy + r % 4}u + 4u * ty, "
        f"col0 + {4 * j * t.wx}u + 4u * tx, c{r}_{j});"
        for r, j in acc
    )
    if loads is None:
        read_a = "A[i / 4u][i % 4u]" if vec_a else "A[i]"
        read_b = "B[i / 4u][i % 4u]" if vec_b else "B[i]"
        widen = (lambda r: r) if elem == "f32" else (lambda r: f"f32({r})")
        loads = _STRIDED_LOADS.format(a=widen(read_a), b=widen(read_b))
    vstore = t.vstore and vec_c and c_elem == "f32"
    return render(
        "linalg_matmul_tiled",
        A_ELEM=f"vec4<{elem}>" if vec_a else elem,
        B_ELEM=f"vec4<{elem}>" if vec_b else elem,
        C_ELEM="vec4<f32>" if vstore else c_elem,
        STORE_FN=_STORE_VEC4
        if vstore
        else _STORE_SCALARS.replace("$S", "asg_f2h" if c_elem == "f16" else ""),
        AS_ROW=t.bm // 4,
        BS_ROW=t.bn // 4,
        STAGES=t.stages,
        LOADS=loads,
        FETCH_A=fa,
        FETCH_B=fb,
        WX=t.wx,
        WY=t.wy,
        THREAD=_thread(t),
        BM=t.bm,
        BN=t.bn,
        BK=t.bk,
        ACC_DECL=decl,
        MAIN_LOOP=loop,
        EPILOGUE=epilogue,
        STORE=store,
    )


# store_row: 4 neighbouring outputs of a row of C, each where it lies inside C, stored at
# c_at (the epilogue's: the index itself, or through a strided destination's strides; $S:
# the conversion to C's type)
_STORE_SCALARS = """fn store_row(c_base: u32, m: u32, n: u32, v: vec4<f32>) {
    if (m >= params.M) {
        return;
    }
    let base = c_base + m * params.N;
    let er = ep_row(base / params.N);
    if (n + 3u < params.N) {
        C[c_at(base + n, n, er)] = $S(epilogue(v.x, base + n, n, er));
        C[c_at(base + n + 1u, n + 1u, er)] = $S(epilogue(v.y, base + n + 1u, n + 1u, er));
        C[c_at(base + n + 2u, n + 2u, er)] = $S(epilogue(v.z, base + n + 2u, n + 2u, er));
        C[c_at(base + n + 3u, n + 3u, er)] = $S(epilogue(v.w, base + n + 3u, n + 3u, er));
        return;
    }
    if (n < params.N) { C[c_at(base + n, n, er)] = $S(epilogue(v.x, base + n, n, er)); }
    if (n + 1u < params.N) {
        C[c_at(base + n + 1u, n + 1u, er)] = $S(epilogue(v.y, base + n + 1u, n + 1u, er));
    }
    if (n + 2u < params.N) {
        C[c_at(base + n + 2u, n + 2u, er)] = $S(epilogue(v.z, base + n + 2u, n + 2u, er));
    }
}"""

# store_row where every row of C is a multiple of 4 long (so 4 outputs starting at a
# multiple of 4 lie inside C together or not at all), C is float32 and stored plainly
# (no strided destination): one vec4
_STORE_VEC4 = """fn store_row(c_base: u32, m: u32, n: u32, v: vec4<f32>) {
    if (m >= params.M || n >= params.N) {
        return;
    }
    let base = c_base + m * params.N;
    let er = ep_row(base / params.N);
    let i = base + n;
    C[i / 4u] = vec4<f32>(
        epilogue(v.x, i, n, er),
        epilogue(v.y, i + 1u, n + 1u, er),
        epilogue(v.z, i + 2u, n + 2u, er),
        epilogue(v.w, i + 3u, n + 3u, er),
    );
}"""

_STRIDED_LOADS = """fn load_a(base: u32, m: u32, k: u32, kend: u32) -> f32 {{
    if (m < params.M && k < kend) {{
        let i = base + m * params.a_sm + k * params.a_sk;
        return {a};
    }}
    return 0.0;
}}

fn load_b(base: u32, k: u32, n: u32, kend: u32) -> f32 {{
    if (k < kend && n < params.N) {{
        let i = base + k * params.b_sk + n * params.b_sn;
        return {b};
    }}
    return 0.0;
}}"""


def _thread(t: Tile) -> str:
    """This invocation's column and row of threads (tx, ty): those of its local id, or
    with `Tile.warp` its subgroup's W x (32 / W) block of threads and its lane in it."""
    if not t.warp:
        return "    let tx = lid.x;\n    let ty = lid.y;"
    across = t.wx // t.warp  # subgroups along a row of threads
    return (
        "    let lane = li % 32u;\n    let sg = li / 32u;\n"
        f"    let tx = (sg % {across}u) * {t.warp}u + lane % {t.warp}u;\n"
        f"    let ty = (sg / {across}u) * {32 // t.warp}u + lane / {t.warp}u;"
    )


def _loop(
    t: Tile,
    first: list[str],
    stash: list[str],
    nxt: list[str],
    inner: Callable[[str], list[str]],
) -> str:
    """The K loop: fetch the next tiles into registers while computing on the current
    (``inner(stage)``: the products of one K-step read from buffer ``stage``)."""

    def block(lines: list[str], indent: int, stage: str = "0u") -> str:
        pad = " " * indent
        return "\n".join(pad + line for line in lines).replace("STAGE", stage)

    def guarded(lines: list[str], indent: int, stage: str) -> list[str]:
        """``lines`` run only where another K step follows."""
        pad = " " * indent
        return [f"{pad}if (more) {{", block(lines, indent + 4, stage), f"{pad}}}"]

    if not t.double:  # one buffer: a barrier before and after the products
        return "\n".join(
            [
                "\n".join(first),
                f"    for (var k0 = kbeg; k0 < kend; k0 += {t.bk}u) {{",
                block(stash, 8),
                "        workgroupBarrier();",
                f"        if (k0 + {t.bk}u < kend) {{",
                block(nxt, 12),
                "        }",
                block(inner("0u"), 8),
                "        workgroupBarrier();",
                "    }",
            ]
        )
    if t.pingpong:  # two K-steps per iteration, reading buffer 0 then buffer 1
        half = []
        for cur, other in (("0u", "1u"), ("1u", "0u")):
            half += [
                "        if (k0 >= kend) {",
                "            break;",
                "        }",
                "        {",
                f"            let more = k0 + {t.bk}u < kend;",
                *guarded(nxt, 12, other),
                block(inner(cur), 12),
                *guarded(stash, 12, other),
                "            workgroupBarrier();",
                f"            k0 += {t.bk}u;",
                "        }",
            ]
        return "\n".join(
            [
                "\n".join(first),
                block(stash, 4),
                "    workgroupBarrier();",
                "    var k0 = kbeg;",
                "    loop {",
                *half,
                "    }",
            ]
        )
    # two buffers: the next tiles go into the other one while this one is read, so one
    # barrier per step suffices
    return "\n".join(
        [
            "\n".join(first),
            block(stash, 4),
            "    workgroupBarrier();",
            "    var cur = 0u;",
            f"    for (var k0 = kbeg; k0 < kend; k0 += {t.bk}u) {{",
            f"        let more = k0 + {t.bk}u < kend;",
            *guarded(nxt, 8, "1u - cur"),
            block(inner("cur"), 8),
            *guarded(stash, 8, "1u - cur"),
            "        workgroupBarrier();",
            "        cur = 1u - cur;",
            "    }",
        ]
    )
