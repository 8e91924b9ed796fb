"""The op-coverage table: every registered op with its CPU kernel, GPU kernel, gradient rule.

``python -m asgrad.gpu coverage`` prints it as Markdown (the table of ``docs/ops.md``);
``--json`` as JSON.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import asdict, dataclass

from asgrad.tensor.registry import all_ops

__all__ = ["OpCoverage", "coverage", "coverage_json", "coverage_markdown", "coverage_page"]


@dataclass(frozen=True)
class OpCoverage:
    """One row of the coverage table."""

    name: str
    family: str
    cpu_kernel: bool
    gpu_kernel: bool
    gradient_rule: bool | None  # None: not differentiable
    parity_cases: bool
    composite: bool
    doc: str


def _gradient_rules() -> set[str] | None:
    """Names of the ops with a gradient rule, or None without ``asgrad.autograd``."""
    try:
        autograd = importlib.import_module("asgrad.autograd")
    except ImportError:
        return None
    return set(autograd.RULES)


def coverage() -> list[OpCoverage]:
    """One :class:`OpCoverage` per registered op, sorted by name."""
    from asgrad.gpu.lowering import gpu_kernel_names

    gpu = gpu_kernel_names()
    rules = _gradient_rules()
    rows = []
    for op in all_ops():
        rule: bool | None = None
        if op.differentiable:
            rule = (op.name in rules) if rules is not None else False
        rows.append(
            OpCoverage(
                name=op.name,
                family=op.family,
                cpu_kernel=op.kernel is not None,
                gpu_kernel=op.name in gpu,
                gradient_rule=rule,
                parity_cases=op.cases is not None,
                composite=op.composite,
                doc=op.doc,
            )
        )
    return rows


def coverage_json() -> str:
    """The table as a JSON list of objects."""
    return json.dumps([asdict(r) for r in coverage()], indent=2)


def coverage_markdown() -> str:
    """The table as Markdown, with a summary line."""
    rows = coverage()

    def mark(flag: bool | None) -> str:
        return "n/a" if flag is None else ("yes" if flag else "**no**")

    lines = [
        "| op | family | CPU kernel | GPU kernel | gradient rule | parity cases | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        note = (("composite. " if r.composite else "") + r.doc).replace("|", "\\|")
        lines.append(
            f"| `{r.name}` | {r.family} | {mark(r.cpu_kernel)} | {mark(r.gpu_kernel)} "
            f"| {mark(r.gradient_rule)} | {mark(r.parity_cases)} | {note} |"
        )
    gpu = sum(r.gpu_kernel for r in rows)
    grads = [r for r in rows if r.gradient_rule is not None]
    lines.append("")
    lines.append(
        f"{len(rows)} ops: {gpu} with a GPU kernel, "
        f"{sum(bool(r.gradient_rule) for r in grads)} of {len(grads)} differentiable "
        "ops with a gradient rule."
    )
    return "\n".join(lines)


PAGE_HEADER = """# Op coverage

Every primitive op of the registry, with its numpy kernel (the reference), its WGSL
kernel (the GPU twin), its gradient rule and its parity test cases. Generated from the
registry by

```bash
python -m asgrad.gpu coverage --output docs/ops.md
```

and checked by the GPU tests, so a new op without a GPU kernel, a gradient rule or
parity cases shows up here as **no** and fails `packages/gpu/tests/test_parity.py`.
*composite* marks composite ops (softmax, layer norm...) that are primitives with their own
kernels rather than compositions of smaller ops.

"""


def coverage_page() -> str:
    """The whole ``docs/ops.md`` page: an introduction and the table."""
    return PAGE_HEADER + coverage_markdown() + "\n"
