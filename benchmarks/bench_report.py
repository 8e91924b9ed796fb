"""The benchmark runner's bookkeeping: which frameworks run, what a row holds, the tables.

Pure functions over plain dicts (no framework is imported here), so that the tests
check them without PyTorch, JAX or PyTensor installed. A *measurement* is what one
worker process returned (``steps_per_s``, ``first_step_s``, ``peak_rss_mib``, ... or
``skipped``/``error``) plus ``repeat``: 0 for the first worker of a (workload,
framework, device), which started with an empty cache folder (*cold*), and 1, 2, ...
for the workers after it, which reuse that folder (*warm*). :func:`summarize` folds
them into one *result* per (workload, framework, device).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

Row = dict[str, Any]
FRAMEWORKS = ("asgrad", "torch", "jax", "pytensor")
LABELS = {"asgrad": "asgrad", "torch": "PyTorch", "jax": "JAX", "pytensor": "PyTensor"}
PYTENSOR_WORKLOADS = ("xor", "mlp")
INSTALL = {
    "torch": "pip install torch==2.13.0",
    "jax": "pip install jax",
    "pytensor": "pip install pytensor",
}


class SelectionError(ValueError):
    """``--frameworks`` names a framework the runner does not know."""


def select_frameworks(
    requested: str | None, with_torch: bool, importable: Callable[[str], bool]
) -> tuple[list[str], dict[str, str]]:
    """The frameworks to run, and those left out with the reason.

    ``requested`` is the ``--frameworks`` text (``None``: every framework);
    ``with_torch`` is ``--torch/--no-torch``; ``importable(name)`` says whether a
    framework imports (asgrad is always asked too: without it there is no ratio, but
    the peers still run). A framework that does not import is left out with an
    install hint, never an error.
    """
    names = list(FRAMEWORKS) if requested is None else _split(requested)
    unknown = [n for n in names if n not in FRAMEWORKS]
    if unknown:
        raise SelectionError(
            f"unknown frameworks: {', '.join(unknown)}; choose from {', '.join(FRAMEWORKS)}"
        )
    selected: list[str] = []
    skipped: dict[str, str] = {}
    for name in dict.fromkeys(names):
        if name == "torch" and not with_torch:
            skipped[name] = "left out (--no-torch)"
        elif not importable(name):
            hint = INSTALL.get(name, "the workspace's packages are not importable")
            skipped[name] = f"not importable ({hint})"
        else:
            selected.append(name)
    return selected, skipped


def not_applicable(framework: str, workload: str, device: str) -> str | None:
    """Why ``framework`` does not run ``workload`` on ``device`` (None: it does)."""
    if framework == "pytensor":
        if device != "cpu":
            return "CPU only"
        if workload not in PYTENSOR_WORKLOADS:
            return f"{', '.join(PYTENSOR_WORKLOADS)} only (the anchor's workloads)"
    return None


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` (asgrad's steps/s over a peer's), or None when either is missing."""
    if not a or not b:
        return None
    return a / b


def summarize(measurements: Iterable[Row]) -> list[Row]:
    """One result per (workload, framework, device), in the order first measured.

    ``steps_per_s`` and ``final_loss`` come from the fastest measurement;
    ``first_step_cold_s`` and ``import_cold_s`` from the cold one (``repeat`` 0);
    ``first_step_warm_s`` is the quickest of the warm ones; ``peak_rss_mib`` and
    ``peak_gpu_mib`` the largest of any worker; ``measurements`` counts the workers that
    returned a figure. A skip or an error of any worker is kept as ``skipped``/``error``.
    """
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for m in measurements:
        groups.setdefault((m["workload"], m["framework"], m["device"]), []).append(m)
    results: list[Row] = []
    for (workload, framework, device), rows in groups.items():
        result: Row = {"workload": workload, "framework": framework, "device": device}
        for key in ("skipped", "error"):
            reasons = [r[key] for r in rows if r.get(key)]
            if reasons:
                result[key] = reasons[0]
        good = [r for r in rows if r.get("steps_per_s")]
        result["measurements"] = len(good)
        if good:
            best = max(good, key=lambda r: float(r["steps_per_s"]))
            result["steps_per_s"] = best["steps_per_s"]
            result["final_loss"] = best.get("final_loss")
            cold = [r["first_step_s"] for r in good if r.get("repeat", 0) == 0]
            warm = [r["first_step_s"] for r in good if r.get("repeat", 0) > 0]
            result["first_step_cold_s"] = cold[0] if cold else None
            imports = [r.get("import_s") for r in good if r.get("repeat", 0) == 0]
            result["import_cold_s"] = imports[0] if imports else None
            result["first_step_warm_s"] = min(warm) if warm else None
            for key in ("peak_rss_mib", "peak_gpu_mib"):
                values = [r[key] for r in good if r.get(key) is not None]
                result[key] = max(values) if values else None
            for key in ("version", "backend", "blas"):
                if best.get(key) is not None:
                    result[key] = best[key]
        results.append(result)
    return results


def fmt_rate(value: float | None) -> str:
    """Steps per second, to about three significant figures (``-`` when missing)."""
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def fmt_ratio(value: float | None) -> str:
    """A ratio as ``1.23x`` (``-`` when missing)."""
    return "-" if value is None else f"{value:.2f}x"


def fmt_seconds(value: float | None) -> str:
    """Seconds, to three significant figures (``-`` when missing)."""
    return "-" if value is None else f"{value:.3g}"


def fmt_mib(value: float | None) -> str:
    """MiB, whole (``-`` when missing)."""
    return "-" if value is None else f"{value:,.0f}"


def _cell(result: Row | None) -> str:
    if result is None:
        return "n/a"
    if "steps_per_s" in result:
        return fmt_rate(result["steps_per_s"])
    return "skipped" if result.get("skipped") else "error"


def _md(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def rate_table(results: Sequence[Row], frameworks: Sequence[str]) -> str:
    """Markdown: steps/s of each framework per (workload, device), and asgrad's ratios.

    A framework that does not run a workload shows ``n/a``; one whose worker skipped
    or failed shows ``skipped`` or ``error`` (the notes say why).
    """
    index = {(r["workload"], r["framework"], r["device"]): r for r in results}
    peers = [f for f in frameworks if f != "asgrad"]
    head = ["workload", "device"] + [f"{LABELS[f]} steps/s" for f in frameworks]
    if "asgrad" in frameworks:
        head += [f"asgrad / {LABELS[f]}" for f in peers]
    lines = [_md(head), _md(["---", "---"] + ["---:"] * (len(head) - 2))]
    for workload, device in _keys(results):
        cells = [workload, device]
        row = {f: index.get((workload, f, device)) for f in frameworks}
        cells += [_cell(row[f]) for f in frameworks]
        if "asgrad" in frameworks:
            mine = (row["asgrad"] or {}).get("steps_per_s")
            cells += [fmt_ratio(ratio(mine, (row[f] or {}).get("steps_per_s"))) for f in peers]
        lines.append(_md(cells))
    return "\n".join(lines)


def startup_table(results: Sequence[Row], frameworks: Sequence[str]) -> str:
    """Markdown: import and first-step times (cold, warm), peak memory, final loss."""
    gpu = any(r["device"] != "cpu" for r in results)
    head = [
        "workload", "device", "framework", "import, cold (s)", "first step, cold (s)",
        "first step, warm (s)", "peak RSS (MiB)",
    ]  # fmt: skip
    head += ["peak GPU (MiB)"] if gpu else []
    head += ["final loss"]
    lines = [_md(head), _md(["---"] * 3 + ["---:"] * (len(head) - 3))]
    order = {f: i for i, f in enumerate(frameworks)}
    for workload, device in _keys(results):
        group = [
            r
            for r in results
            if r["workload"] == workload and r["device"] == device and "steps_per_s" in r
        ]
        for r in sorted(group, key=lambda r: order.get(r["framework"], len(order))):
            cells = [
                workload,
                device,
                str(LABELS.get(r["framework"], r["framework"])),
                fmt_seconds(r.get("import_cold_s")),
                fmt_seconds(r.get("first_step_cold_s")),
                fmt_seconds(r.get("first_step_warm_s")),
                fmt_mib(r.get("peak_rss_mib")),
            ]
            cells += [fmt_mib(r.get("peak_gpu_mib"))] if gpu else []
            loss = r.get("final_loss")
            cells.append("-" if loss is None else f"{loss:.4g}")
            lines.append(_md(cells))
    return "\n".join(lines)


def notes(results: Sequence[Row], skipped: dict[str, str]) -> list[str]:
    """One line per framework left out, and per skipped or failed result."""
    out = [f"- {LABELS.get(f, f)}: {why}" for f, why in skipped.items()]
    for r in results:
        why = r.get("skipped") or r.get("error")
        if why and "steps_per_s" not in r:
            kind = "skipped" if r.get("skipped") else "error"
            label = LABELS.get(r["framework"], r["framework"])
            out.append(f"- {label}, {r['workload']} on {r['device']}: {kind}: {why}")
    return out


def blas_line(info: Sequence[Row] | None) -> str:
    """One line naming numpy's BLAS from ``threadpoolctl.threadpool_info()`` entries."""
    if info is None:
        return "BLAS: unknown (threadpoolctl is not importable)"
    blas = [i for i in info if i.get("user_api") == "blas"]
    if not blas:
        return "BLAS: threadpoolctl finds no BLAS loaded by numpy"
    parts = []
    for i in blas:
        arch = i.get("architecture") or i.get("corename") or "?"
        parts.append(
            f"{i.get('internal_api', '?')} {i.get('version') or '?'}, core {arch},"
            f" {i.get('num_threads', '?')} threads ({_basename(i.get('filepath'))})"
        )
    return "BLAS (numpy, threadpoolctl): " + "; ".join(parts)


def _basename(path: Any) -> str:
    return str(path).replace("\\", "/").rsplit("/", 1)[-1] if path else "?"


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _keys(results: Sequence[Row]) -> list[tuple[str, str]]:
    return list(dict.fromkeys((r["workload"], r["device"]) for r in results))
