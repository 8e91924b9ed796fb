"""Every registry case of every op, run on one path and saved; two such files compared.

Run a tree's ops before and after a change and compare the results:

    python scripts/op_results.py dump --out before.npz --backend numpy
    python scripts/op_results.py dump --out before_gpu.npz --backend gpu
    ... change the code ...
    python scripts/op_results.py dump --out after.npz --backend numpy
    python scripts/op_results.py compare before.npz after.npz

``dump`` builds a one-node graph per case (float32 and float16 inputs; on the CPU paths
float64 too) and runs it on the numpy path (``numpy``: ``ASGRAD_CPU_JIT=0``), the compiled CPU
path (``compiled``: ``ASGRAD_CPU_JIT=1``) or the GPU backend (``gpu``). A case whose
graph refuses its inputs (an int64 beyond the GPU's int32, say) is saved as its
error's type. ``compare`` prints, per op, the largest absolute and relative
difference, how many results are bit-identical, and whether every result is within
the op's tolerance (the registry's, read from the tree running the script); it exits
1 when one is not.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

_SEP = "|"


def _float(x: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(over="ignore"):  # a case's value beyond float16: inf
        return x.astype(dtype) if x.dtype.kind == "f" else x


def _attrs(attrs: Mapping[str, Any], dtype: str) -> dict[str, Any]:
    # a case's dtype attribute names float64 for the float64 reference run
    return {k: (dtype if v == "float64" else v) for k, v in attrs.items()}


def dump(out: str, backend: str) -> int:
    os.environ["ASGRAD_CPU_JIT"] = "1" if backend == "compiled" else "0"
    from asgrad.tensor import Graph, all_ops, evaluate

    name = "gpu" if backend == "gpu" else "cpu"
    dtypes = ("float32", "float16") if backend == "gpu" else ("float32", "float64", "float16")
    results: dict[str, np.ndarray] = {}
    for op in all_ops():
        if op.cases is None:
            continue
        for i, case in enumerate(op.cases(np.random.default_rng(0))):
            for dtype in dtypes:
                key = _SEP.join((op.name, str(i), dtype))
                inputs = [_float(np.asarray(x), dtype) for x in case.inputs]
                try:
                    g = Graph()
                    xs = [
                        g.input(f"x{k}", x.shape, x.dtype.name, free=())
                        for k, x in enumerate(inputs)
                    ]
                    node = g.apply(op.name, xs, _attrs(case.attrs, dtype))
                    feeds = {f"x{k}": x for k, x in enumerate(inputs)}
                    with np.errstate(all="ignore"):  # numpy warns of what cases feed
                        (value,) = evaluate([node], feeds, backend=name)
                    results[key] = np.asarray(value)
                except Exception as exc:  # the error is the result
                    results[key + _SEP + "error"] = np.asarray(type(exc).__name__)
    np.savez_compressed(out, allow_pickle=False, **results)
    print(f"{len(results)} results of {backend} written to {out}")
    return 0


def _split(key: str) -> tuple[str, bool]:
    return key.split(_SEP)[0], key.endswith(_SEP + "error")


def compare(a_path: str, b_path: str) -> int:
    from asgrad.tensor import get_op

    a, b = np.load(a_path), np.load(b_path)
    ops: dict[str, dict[str, Any]] = {}
    for key in sorted(set(a.files) | set(b.files)):
        op, _ = _split(key)
        row = ops.setdefault(
            op, {"abs": 0.0, "rel": 0.0, "same": 0, "total": 0, "bad": [], "missing": 0}
        )
        row["total"] += 1
        if key not in a.files or key not in b.files:
            row["missing"] += 1
            row["bad"].append(f"{key} only in {'B' if key in b.files else 'A'}")
            continue
        x, y = a[key], b[key]
        if x.shape != y.shape or x.dtype != y.dtype:
            row["bad"].append(f"{key}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
            continue
        if x.tobytes() == y.tobytes():
            row["same"] += 1
            continue
        if x.dtype.kind not in "fc":
            if not np.array_equal(x, y):
                row["bad"].append(f"{key}: values differ")
            else:
                row["same"] += 1  # equal values, other bits (strings)
            continue
        rtol, atol = get_op(op).tolerance
        rtol = max(rtol, 1e-6)
        if key.split(_SEP)[2] == "float64":
            rtol, atol = 1e-9, 1e-12
        if key.split(_SEP)[2] == "float16":  # two float16 steps (as the GPU parity test)
            rtol, atol = max(rtol, 2e-3), max(atol, 1e-4)
        both = np.isfinite(x) & np.isfinite(y)
        diff = np.abs(x[both].astype(np.float64) - y[both])
        if diff.size:
            row["abs"] = max(row["abs"], float(diff.max()))
            scale = np.abs(x[both].astype(np.float64))
            rel = diff / np.where(scale > 0, scale, 1.0)
            row["rel"] = max(row["rel"], float(rel.max()))
        if not np.allclose(y, x, rtol=rtol, atol=atol, equal_nan=True):
            row["bad"].append(f"{key}: beyond rtol {rtol}, atol {atol}")
    failed = 0
    print(f"{'op':28} {'max abs':>10} {'max rel':>10} {'bit-identical':>14}  verdict")
    for op, row in ops.items():
        verdict = "ok" if not row["bad"] else "EXCEEDS"
        failed += bool(row["bad"])
        same = f"{row['same']}/{row['total']}"
        print(f"{op:28} {row['abs']:10.3g} {row['rel']:10.3g} {same:>14}  {verdict}")
        for line in row["bad"][:5]:
            print(f"    {line}")
    total = sum(r["total"] for r in ops.values())
    same = sum(r["same"] for r in ops.values())
    print(f"{len(ops)} ops, {total} results, {same} bit-identical, {failed} ops beyond tolerance")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="run every registry case and save the results")
    d.add_argument("--out", required=True)
    d.add_argument("--backend", choices=("numpy", "compiled", "gpu"), default="numpy")
    c = sub.add_parser("compare", help="compare two dumps; exit 1 beyond a tolerance")
    c.add_argument("a")
    c.add_argument("b")
    args = parser.parse_args(argv)
    if args.command == "dump":
        return dump(args.out, args.backend)
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
