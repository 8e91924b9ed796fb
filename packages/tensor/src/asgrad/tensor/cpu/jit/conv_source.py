"""Numba source of the direct convolution kernels, generated per tap count and block.

A direct convolution's inner loop runs along a flattened zero-padded plane (the
*wide* layout: an output row is as long as a padded input row, its pitch ``Wp``,
and the columns past the real output width are computed and dropped). The batch's
images are stacked into one *tall* plane per channel (`asgrad.tensor.cpu.jit.
kernels_conv.Tall`: the rows between two images computed and dropped too), so the
loop runs over several images at once: long and contiguous whatever the image size.
Every kernel tap (``kh * kw`` of them) and every output channel of a block is
unrolled in the loop body: each input element loaded feeds ``block`` multiply-adds,
which keeps the loop compute-bound rather than bound by loads and stores (LLVM
vectorises it with the machine's widest FMAs). The unrolling needs the tap count and
the block size at generation time, hence generated source (`forward_source`,
`weight_source`), compiled once per pair and cached on disk like every kernel.

The kernels run their outer loop with ``numba.prange`` (over chunks of images and
blocks of output channels; over weight blocks for the weight gradient). Arithmetic
may be contracted into fused multiply-adds, and the weight gradient's sums
reassociated (so that they vectorise: their order is fixed by the generated code,
the same from run to run on a machine); nothing assumes finite values, so NaN and
infinities propagate as in numpy's products. `pool_source` writes max pooling's
tiled kernels the same way (every window offset unrolled).
"""

from __future__ import annotations

_OPTIONS = (
    "cache=True, parallel=True, error_model='numpy', boundscheck=False, nogil=True, "
    "fastmath={fastmath}"
)


def _names(prefix: str, block: int, taps: int) -> list[list[str]]:
    return [[f"{prefix}{b}_{t}" for t in range(taps)] for b in range(block)]


def _accumulate(taps: int, block: int) -> list[str]:
    """``_add{block}``: ``wide[o0 + b, q0 + q] (+)= sum_c sum_t w[o0 + b, c, t] *
    xt[c0 + c, q0 + q + offs[t]]`` for q < q_len and c < cg (every row read is
    contiguous). The first channel writes ``0 + its sum`` (no zeroing pass, same bits
    as adding to zeros), the others add theirs. One call per channel block and chunk
    of the tall plane takes every input channel of the group; each channel's weights
    are loaded once per chunk."""
    w = _names("w", block, taps)
    lines = [
        "@numba.njit("
        + _OPTIONS.format(fastmath="{'contract'}").replace("parallel=True, ", "")
        + ")",
        f"def _add{block}(xt, c0, cg, w, o0, offs, wide, q0, q_len):",
        "    zero = wide.dtype.type(0)",
    ]
    lines += [f"    d{b} = wide[o0 + {b}, q0:]" for b in range(block)]
    lines += ["    for c in range(cg):", "        x = xt[c0 + c, q0:]"]
    # One view per tap, indexed by the loop counter alone: an index Numba cannot
    # prove non-negative gets a wraparound select, which stops vectorisation.
    lines += [f"        s{t} = x[offs[{t}]:]" for t in range(taps)]
    for b in range(block):
        lines += [f"        {w[b][t]} = w[o0 + {b}, c, {t}]" for t in range(taps)]
    lines += ["        if c == 0:", "            for q in range(q_len):"]
    lines += [f"                x{t} = s{t}[q]" for t in range(taps)]
    for b in range(block):
        total = " + ".join(f"{w[b][t]} * x{t}" for t in range(taps))
        lines.append(f"                d{b}[q] = zero + ({total})")
    lines += ["        else:", "            for q in range(q_len):"]
    lines += [f"                x{t} = s{t}[q]" for t in range(taps)]
    for b in range(block):
        total = " + ".join(f"{w[b][t]} * x{t}" for t in range(taps))
        lines.append(f"                d{b}[q] += {total}")
    return lines


def forward_source(taps: int, block: int, remainder: bool) -> str:
    """The module of ``conv(xt, w, b, offs, out, wide, groups, wp, rows, per, relu, bias)``.

    ``xt`` (C, L): each input channel's images zero-padded and stacked into one tall
    plane, flattened with pitch ``wp``, image ``n`` starting ``n * rows`` rows down
    (`asgrad.tensor.cpu.jit.kernels_conv.Tall`); ``w`` (O, C/groups, taps); ``offs``
    (taps,): each tap's offset in a plane; ``wide`` (O, N * rows * wp): scratch, the
    output in the same tall wide layout; ``out`` (N, O, OH, OW) gets the real columns
    and rows, plus ``b`` when ``bias``, then ``max(., 0)`` when ``relu`` (NaN stays
    NaN). Work items are a block of output channels over a chunk of ``per`` images.
    With ``remainder``, the output channels per group need not be a multiple of
    ``block`` (the rest go one by one). Each generated function costs compile time
    (seconds with an empty cache), so the module has only those its shapes need.
    """
    blocks = [block, 1] if remainder and block != 1 else [block]
    lines = ["import numpy as np", "import numba", ""]
    for size in blocks:
        lines += [*_accumulate(taps, size), "", ""]
    lines += [
        "@numba.njit("
        + _OPTIONS.format(fastmath="{'contract'}").replace("parallel=True, ", "")
        + ")",
        "def _store(src, res, wp, add, relu):",
        "    zero = src.dtype.type(0)",
        "    for y in range(res.shape[0]):",
        "        row = src[y * wp:]",
        "        dst = res[y]",
        "        if relu:",
        "            for x in range(res.shape[1]):",
        "                v = row[x] + add",
        "                dst[x] = v if v > zero or v != v else zero",
        "        else:",
        "            for x in range(res.shape[1]):",
        "                dst[x] = row[x] + add",
        "",
        "",
        "@numba.njit(" + _OPTIONS.format(fastmath="{'contract'}") + ")",
        "def conv(xt, w, b, offs, out, wide, groups, wp, rows, per, relu, bias):",
        "    n_, o_ = out.shape[0], out.shape[1]",
        "    oh = out.shape[2]",
        "    cg = w.shape[1]",
        "    og = o_ // groups",
        f"    nb = (og + {block - 1}) // {block}",
        "    chunks = (n_ + per - 1) // per",
        "    span = rows * wp",
        "    for item in numba.prange(chunks * groups * nb):",
        "        k = item // (groups * nb)",
        "        rest = item % (groups * nb)",
        "        g = rest // nb",
        f"        o0 = g * og + (rest % nb) * {block}",
        f"        o1 = min(o0 + {block}, (g + 1) * og)",
        "        n0 = k * per",
        "        n1 = min(n_, n0 + per)",
        "        q0 = n0 * span",
        "        q_len = (n1 - n0 - 1) * span + oh * wp  # not the last image's dropped rows",
        *(
            [
                f"        if o1 - o0 == {block}:",
                f"            _add{block}(xt, g * cg, cg, w, o0, offs, wide, q0, q_len)",
                "        else:",
                "            for o in range(o0, o1):",
                "                _add1(xt, g * cg, cg, w, o, offs, wide, q0, q_len)",
            ]
            if len(blocks) == 2
            else [f"        _add{block}(xt, g * cg, cg, w, o0, offs, wide, q0, q_len)"]
        ),
        "        for o in range(o0, o1):",
        "            # + 0.0 would turn -0.0 into 0.0: without a bias, add -0.0",
        "            add = b[o] if bias else w.dtype.type(-0.0)",
        "            for n in range(n0, n1):",
        "                _store(wide[o, n * span:], out[n, o], wp, add, relu)",
        "",
    ]
    return "\n".join(lines)


def weight_source(taps: int, block: int) -> str:
    """The module of ``conv_weight(xt, gt, offs, dw, groups, q_end)``.

    ``dw[o, c, t] = sum over q of gt[o, q] * xt[g * cg + c, q + offs[t]]``: ``xt`` (C, L)
    holds each input channel's images stacked into one tall zero-padded plane (see
    `asgrad.tensor.cpu.jit.kernels_conv.Tall`), ``gt`` (O, q_end) the output gradient
    in the same tall wide layout, zero in the dropped columns and rows, so one dot
    product of ``q_end`` terms runs over every image at once (its partial sums reduced
    across the vector lanes once, not once per image). The dropped positions add
    ``0 * x``: the caller checks the result where ``x`` may hold infinities or NaN.
    """
    acc = _names("s", block, taps)
    lines = [
        "import numpy as np",
        "import numba",
        "",
        "",
        "@numba.njit("
        + _OPTIONS.format(fastmath="{'contract', 'reassoc'}").replace("parallel=True, ", "")
        + ")",
        f"def _dot{block}(xt, ci, gt, offs, q_end, dw, o0, c):",
        *[f"    {acc[b][t]} = dw.dtype.type(0)" for b in range(block) for t in range(taps)],
        "    xc = xt[ci]",
        *[f"    u{t} = xc[offs[{t}]:]" for t in range(taps)],
        *[f"    g{b} = gt[o0 + {b}]" for b in range(block)],
        "    for q in range(q_end):",
        *[f"        x{t} = u{t}[q]" for t in range(taps)],
        *[f"        v{b} = g{b}[q]" for b in range(block)],
        *[f"        {acc[b][t]} += v{b} * x{t}" for b in range(block) for t in range(taps)],
        *[f"    dw[o0 + {b}, c, {t}] = {acc[b][t]}" for b in range(block) for t in range(taps)],
        "",
        "",
        "@numba.njit(" + _OPTIONS.format(fastmath="{'contract', 'reassoc'}") + ")",
        "def conv_weight(xt, gt, offs, dw, groups, q_end):",
        "    o_, cg = dw.shape[0], dw.shape[1]",
        "    og = o_ // groups",
        f"    nb = og // {block}",
        "    for item in numba.prange(groups * nb * cg):",
        "        g = item // (nb * cg)",
        "        rest = item % (nb * cg)",
        f"        o0 = g * og + (rest // cg) * {block}",
        "        c = rest % cg",
        f"        _dot{block}(xt, g * cg + c, gt, offs, q_end, dw, o0, c)",
        "",
    ]
    return "\n".join(lines)


def pool_source(kh: int, kw: int) -> str:
    """The module of ``pool(x, out)`` and ``pool_backward(g, x, out)`` for max pooling
    windows that tile the input, ``x`` and ``out`` viewed as rows of windows (R, kh,
    OW, kw), ``g`` as (R, OW). Every offset of a window is unrolled in the loop over
    ``ox`` (LLVM vectorises ``pool``'s at 16 lanes; a row of fewer windows runs the
    loop's scalar form).
    Both read each of a row's ``kh`` input rows as a 1-D slice of the flattened input
    (indexing the 3-D row instead took 1.7x as long in ``pool`` for a [32, 16, 28, 28]
    input, 0.107 against 0.063 ms on one thread). ``pool_backward`` keeps each offset's
    "taken" flag and writes the gradient where an offset was taken and no later one
    was (a running argmax index took 1.04-1.24x as long); its stores index the 3-D rows:
    through 1-D slices LLVM vectorises the loop at 16 lanes, more windows than a row
    of a small image has (14 for a 28-wide input), and it took 1.4-2x as long
    (2026-12-03, the 2-core machine).

    ``pool``: the window's maximum, NaN when any of it is NaN (``np.maximum``).
    ``pool_backward``: ``g`` at the window's argmax (its first offset, then the last
    strictly greater one: a NaN wins only at the first), zero at the other offsets;
    with ``positive``, zero too where the window's maximum is not above zero (the
    gradient of ``where(x > 0, max_pool2d_backward(g, x), 0)``: the mask at the argmax).
    """
    taps = [(i, j) for i in range(kh) for j in range(kw)]
    options = _OPTIONS.format(fastmath="False")
    rows_of = [
        f"            x{i} = flat[(r * {kh} + {i}) * w:(r * {kh} + {i} + 1) * w]" for i in range(kh)
    ]
    flat_loads = [f"                v{k} = x{i}[ox * {kw} + {j}]" for k, (i, j) in enumerate(taps)]
    lines = [
        "import numpy as np",
        "import numba",
        "",
        "ROWS = 64",
        "",
        "",
        f"@numba.njit({options})",
        "def pool(x, out):",
        "    rows, ow = out.shape",
        f"    w = ow * {kw}",
        "    flat = x.reshape(x.size)",
        "    for task in numba.prange((rows + ROWS - 1) // ROWS):",
        "        for r in range(task * ROWS, min(rows, (task + 1) * ROWS)):",
        *rows_of,
        "            dst = out[r]",
        "            for ox in range(ow):",
        *flat_loads,
        "                m = v0",
    ]
    for k in range(1, len(taps)):
        lines.append(f"                m = v{k} if (v{k} > m) | (v{k} != v{k}) else m")
    lines += [
        "                dst[ox] = m",
        "",
        "",
        f"@numba.njit({options})",
        "def pool_backward(g, x, out, positive):",
        "    rows, ow = g.shape",
        f"    w = ow * {kw}",
        "    zero = out.dtype.type(0)",
        "    flat = x.reshape(x.size)",
        "    for task in numba.prange((rows + ROWS - 1) // ROWS):",
        "        for r in range(task * ROWS, min(rows, (task + 1) * ROWS)):",
        *rows_of,
        "            gr, dst = g[r], out[r]",
        "            for ox in range(ow):",
        *flat_loads,
        "                best = v0",
    ]
    for k in range(1, len(taps)):
        lines += [
            f"                t{k} = v{k} > best",
            f"                best = v{k} if t{k} else best",
        ]
    lines += [
        "                gv = gr[ox]",
        "                if positive and not best > zero:",
        "                    gv = zero",
    ]
    # Offset k wins where it was taken and no later offset was: ``later{k}`` is the
    # union of the takes after k (the last offset's is empty).
    last = len(taps) - 1
    for k in range(last - 1, -1, -1):
        later = f"t{k + 1}" if k + 1 == last else f"(t{k + 1} | later{k + 1})"
        lines.append(f"                later{k} = {later}")
    for k, (i, j) in enumerate(taps):
        if k == last == 0:
            lines.append(f"                dst[{i}, ox, {j}] = gv")
            continue
        won = f"t{k}" if k == last else "not later0" if k == 0 else f"t{k} & (not later{k})"
        lines.append(f"                dst[{i}, ox, {j}] = gv if {won} else zero")
    lines.append("")
    return "\n".join(lines)
