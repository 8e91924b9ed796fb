"""Generate ``docs/ops.md``: every registered op and where each part of it lives.

Usage:
    python scripts/ops_table.py              print the page
    python scripts/ops_table.py --write      write docs/ops.md
    python scripts/ops_table.py --check      exit 1 when docs/ops.md is not current

One row per op of the registry: its family, the file of its spec and numpy kernel
(``asgrad.tensor``), of its gradient rule (``asgrad.autograd``), of its GPU lowering
and the WGSL files it launches (``asgrad.gpu``), and whether ``asgrad.onnx`` exports it
and loads it back (``asgrad.onnx.coverage()``, when asgrad-onnx is installed). Each
location is read from the live objects (the module that defines the function), so the
page cannot claim a layout the code does not have; ``tests/test_ops_table.py`` checks
that the page is current and that every op's parts sit in files named after its family.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from asgrad.autograd import get_rule
from asgrad.gpu.lowering import LOWERINGS, kernel_files
from asgrad.tensor import OpDef, all_ops

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "ops.md"


@dataclass(frozen=True)
class OpRow:
    """Where the parts of one op live (paths relative to ``packages/*/src/asgrad/``)."""

    name: str
    family: str
    spec: str
    cpu_kernel: str
    rule: str | None  # None: not differentiable
    gpu_lowering: str | None
    wgsl: tuple[str, ...]
    parity_cases: bool
    composite: bool
    doc: str
    expands: bool = False  # a decomposition into other ops: no rule or lowering of its own
    onnx: str = "n/a"  # "export / import" verdicts, or n/a without asgrad-onnx


def module_file(module: str) -> str:
    """``tensor/ops/elementwise.py`` for ``asgrad.tensor.ops.elementwise``."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return module
    path = Path(spec.origin).resolve()
    parts = path.parts
    if "asgrad" in parts:
        return "/".join(parts[len(parts) - parts[::-1].index("asgrad") :])
    return module


def kernel_location(op: OpDef) -> str:
    """The file of the op's numpy kernel, or the numpy function it is."""
    module = getattr(op.kernel, "__module__", None)
    if module == "asgrad.tensor.ir.scalar":  # a scalar primitive's numpy meaning (erf)
        return f"numpy.{op.expression.__name__ if op.expression else op.name}"
    if isinstance(module, str) and module.startswith("asgrad."):
        return module_file(module)
    return f"numpy.{getattr(op.kernel, '__name__', repr(op.kernel))}"


def onnx_coverage() -> dict[str, str]:
    """``"yes / yes"`` (exported / imported) per op; empty without asgrad-onnx."""
    try:
        from asgrad.onnx import coverage
    except ImportError:
        return {}
    return {name: f"{c.exported} / {c.imported}" for name, c in coverage().items()}


def rows() -> list[OpRow]:
    """One :class:`OpRow` per registered op, sorted by name."""
    onnx = onnx_coverage()
    table = []
    for op in all_ops():
        rule = get_rule(op.name)
        lowering = LOWERINGS.get(op.name)
        table.append(
            OpRow(
                name=op.name,
                family=op.family,
                spec=module_file(op.infer.__module__),
                cpu_kernel=kernel_location(op),
                rule=(module_file(rule.__module__) if rule else "**none**")
                if op.differentiable and op.primitive
                else None,
                gpu_lowering=module_file(lowering.__module__) if lowering else None,
                wgsl=kernel_files(op.name) if lowering else (),
                parity_cases=op.cases is not None,
                composite=op.composite,
                doc=op.doc,
                expands=not op.primitive,
                onnx=onnx.get(op.name, "n/a"),
            )
        )
    return table


HEADER = """# Ops

Every primitive op of the registry, and where each part of it lives: its spec (shape
and dtype rule) and numpy kernel, the reference semantics, in `asgrad.tensor`; its
gradient rule, written in graph ops, in `asgrad.autograd`; its GPU lowering and the
WGSL kernels it launches in `asgrad.gpu`. An op of family *f* lives in files named
*f* in every package: `tensor/ops/f.py`, `autograd/rules/f.py`,
`gpu/lowering/f.py`, `gpu/kernels/f*.wgsl` (see
[the anatomy of an op](contributing.md#anatomy-of-an-op)).
Paths are relative to `packages/<distribution>/src/asgrad/`.

This page is generated from the live registry and rule and lowering tables by

```bash
python scripts/ops_table.py --write
```

and `tests/test_ops_table.py` fails when it is not current, or when an op lacks a
GPU lowering, a gradient rule (if differentiable) or test cases. *composite* marks
ops that stand for a decomposition (softmax, layer norm...) but are one primitive
with kernels of their own, for speed and numerical stability. *expands* marks ops
that are built from other ops when they are applied (their spec checks the inputs,
then the expansion in the same file builds the primitives): graphs never hold them,
so their gradients and GPU kernels are those of the ops they expand into, and their
numpy kernel is the reference their test cases check the expansion against. *ONNX* says whether
[`asgrad.onnx`](onnx.md) exports the op (`export`) and reads the exported form back
(`load`), over the op's test cases: *yes*, *some cases* (dropout: only `p = 0` has an
inference form) or *no* (gradient ops: export the forward graph).

"""


def markdown(table: list[OpRow]) -> str:
    """The table as Markdown, with a summary line."""

    def code(path: str | None) -> str:
        if path is None:
            return "n/a"
        return path if path.startswith("**") else f"`{path}`"

    lines = [
        "| op | family | spec | CPU kernel | gradient rule | GPU lowering | WGSL"
        " | ONNX (export / import) | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        note = (("composite. " if r.composite else "") + r.doc).replace("|", "\\|")
        if not r.parity_cases and r.family != "leaf":
            note = "**no test cases**. " + note
        wgsl = ", ".join(f"`{w}`" for w in r.wgsl) or "—"
        rule, lowering = code(r.rule), code(r.gpu_lowering) if r.gpu_lowering else "**none**"
        if r.expands:
            note = "expands. " + note
            rule = lowering = wgsl = "its expansion's"
        lines.append(
            f"| `{r.name}` | {r.family} | {code(r.spec)} | {code(r.cpu_kernel)} "
            f"| {rule} | {lowering} | {wgsl} | {r.onnx} | {note} |"
        )
    differentiable = [r for r in table if r.rule is not None]
    lines += [
        "",
        f"{len(table)} ops in {len({r.family for r in table})} families, "
        f"{sum(r.expands for r in table)} of them expanding into others: "
        f"{sum(r.gpu_lowering is not None for r in table)} with a GPU lowering, "
        f"{sum(r.rule is not None and not r.rule.startswith('**') for r in differentiable)}"
        f" of {len(differentiable)} differentiable ops with a gradient rule, "
        f"{sum(r.onnx.startswith('yes') for r in table)} exported to ONNX.",
    ]
    return "\n".join(lines)


def page() -> str:
    """The whole ``docs/ops.md``."""
    return HEADER + markdown(rows()) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write {PAGE.relative_to(ROOT)}")
    mode.add_argument("--check", action="store_true", help="fail when the page is not current")
    args = parser.parse_args(argv)
    text = page()
    if args.write:
        PAGE.write_text(text, encoding="utf-8")
        return 0
    if args.check:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run python scripts/ops_table.py --write")
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
