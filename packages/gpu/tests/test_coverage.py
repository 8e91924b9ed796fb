"""``python -m asgrad.gpu coverage``: every registered op runs on the GPU."""

from __future__ import annotations

import json

import pytest

from asgrad.gpu.cli import main
from asgrad.gpu.coverage import coverage, coverage_json, coverage_markdown
from asgrad.tensor import all_ops


def test_every_op_is_covered() -> None:
    rows = coverage()
    assert [r.name for r in rows] == sorted(op.name for op in all_ops())
    assert [r.name for r in rows if not r.covered] == []
    for r in rows:
        if r.leaf or r.expands:  # bound by the plan, or run as the ops it expands into
            assert r.lowering is None
            assert r.wgsl == ()
        else:
            assert r.lowering == f"asgrad.gpu.lowering.{r.family}"
            assert r.wgsl


def test_json_and_markdown_list_every_op() -> None:
    assert {row["name"] for row in json.loads(coverage_json())} == {op.name for op in all_ops()}
    text = coverage_markdown()
    assert "| `conv2d` | conv | `asgrad.gpu.lowering.conv` | `conv.wgsl`" in text
    assert f"{len(all_ops())} ops: {len(all_ops())} run on the GPU" in text


def test_the_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["coverage"]) == 0
    header = "| op | family | GPU lowering | WGSL | parity cases | float16 |"
    assert header in capsys.readouterr().out


def test_float16_column_names_the_ops_computed_through_float32() -> None:
    rows = {r.name: r for r in coverage()}
    assert rows["matmul"].float16 == rows["softmax"].float16 == rows["exp"].float16 == "f16"
    assert rows["conv2d"].float16 == "float32 kernel"
    assert rows["input"].float16 == "leaf"
    assert "| `conv2d` | conv |" in coverage_markdown()
    assert "float32 kernel |" in coverage_markdown()
