"""``docs/ops.md`` is current, and every op's parts live in files named after its family."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import ops_table  # noqa: E402  # a script, importable once scripts/ is on the path


@pytest.fixture(scope="module")
def rows() -> list[ops_table.OpRow]:
    return ops_table.rows()


def test_docs_ops_page_is_current() -> None:
    assert ops_table.PAGE.read_text(encoding="utf-8") == ops_table.page(), (
        "docs/ops.md is stale: run python scripts/ops_table.py --write"
    )


def test_every_op_lives_in_its_family_files(rows: list[ops_table.OpRow]) -> None:
    misplaced = []
    for r in rows:
        if r.family == "leaf":  # no kernel: the backends read leaves themselves
            continue
        expected = {
            "spec": (r.spec, f"tensor/ops/{r.family}.py"),
            "gpu lowering": (
                r.gpu_lowering,
                None if r.expands else f"gpu/lowering/{r.family}.py",
            ),
        }
        if r.rule is not None:
            expected["gradient rule"] = (r.rule, f"autograd/rules/{r.family}.py")
        if not r.cpu_kernel.startswith("numpy."):
            expected["CPU kernel"] = (r.cpu_kernel, f"tensor/ops/{r.family}.py")
        for part, (found, wanted) in expected.items():
            if found != wanted and not _topic_file_of(found, wanted):
                misplaced.append(f"{r.name}: {part} in {found}, expected {wanted}")
    assert misplaced == []


def _topic_file_of(found: str | None, wanted: str | None) -> bool:
    """Whether ``found`` is a topic file of the family file ``wanted``.

    A family's specs and kernels may be split over ``tensor/ops/<family>.py`` and
    ``tensor/ops/<family>_<topic>.py`` (``elementwise_rounding.py``) when one file
    would pass the size limit, as its WGSL kernels are over ``<family>_<topic>.wgsl``.
    """
    if found is None or wanted is None or not wanted.startswith("tensor/ops/"):
        return False
    return found.startswith(wanted.removesuffix(".py") + "_") and found.endswith(".py")


def test_a_topic_file_belongs_to_its_family_only() -> None:
    assert _topic_file_of("tensor/ops/norm_groups.py", "tensor/ops/norm.py")
    assert not _topic_file_of("tensor/ops/normal.py", "tensor/ops/norm.py")
    assert not _topic_file_of("autograd/rules/norm_x.py", "autograd/rules/norm.py")


def test_every_computing_op_is_complete(rows: list[ops_table.OpRow]) -> None:
    for r in rows:
        if r.family == "leaf":
            continue
        assert r.parity_cases, f"{r.name} has no test cases"
        if r.expands:  # graphs hold only the ops it expands into
            assert r.gpu_lowering is None, f"{r.name} expands but has a GPU lowering"
            assert r.rule is None, f"{r.name} expands but has a gradient rule"
            continue
        assert r.wgsl, f"{r.name}'s GPU lowering names no WGSL file"
        if r.rule is not None:
            assert not r.rule.startswith("**"), f"{r.name} has no gradient rule"


def test_kernel_files_exist(rows: list[ops_table.OpRow]) -> None:
    kernels = ROOT / "packages/gpu/src/asgrad/gpu/kernels"
    for r in rows:
        for name in r.wgsl:
            assert (kernels / name).is_file(), f"{r.name}: {name} is not in {kernels}"


def test_check_mode_reports_a_stale_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "ops.md"
    stale.write_text("# Ops\n", encoding="utf-8")
    monkeypatch.setattr(ops_table, "PAGE", stale)
    monkeypatch.setattr(ops_table, "ROOT", tmp_path)
    assert ops_table.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().out
    assert ops_table.main(["--write"]) == 0
    assert ops_table.main(["--check"]) == 0
