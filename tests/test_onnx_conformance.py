"""ONNX's own node conformance cases, loaded by asgrad.onnx and run against ONNX's
expected outputs (the cases ship with the ``onnx`` wheel; about 10 s for all 1,884)."""

from __future__ import annotations

from collections import Counter

import pytest

from asgrad.onnx import OnnxImportError, UnsupportedOnnxOpsError
from asgrad.onnx.conformance import CaseResult, op_table, run_cases

# The op types whose every case asgrad's dtypes can hold passes: a floor, raised as
# importers are added (``python scripts/onnx_conformance.py`` prints the table).
PASSING_OP_TYPES_FLOOR = 153

# One worker runs every test of the file, so that the cases run once (the module fixture),
# not once on each worker that gets one of the tests.
pytestmark = pytest.mark.xdist_group("onnx_conformance")


@pytest.fixture(scope="module")
def results() -> list[CaseResult]:
    return run_cases()


def test_no_conformance_case_gives_a_wrong_value_shape_or_dtype(
    results: list[CaseResult],
) -> None:
    failed = [f"{r.name}: {r.detail}" for r in results if r.status == "fail"]
    assert failed == []


def test_every_case_passes_or_is_refused_with_a_typed_error(results: list[CaseResult]) -> None:
    errors = [f"{r.name}: {r.detail}" for r in results if r.status == "error"]
    assert errors == []
    refused = [r for r in results if r.status == "refused"]
    assert refused, "the suite holds forms asgrad refuses; a run with none is suspect"
    for r in refused:
        assert isinstance(r.error, OnnxImportError), r.name
        assert r.error.op_type, f"{r.name}: the refusal names no op type: {r.detail}"
        assert r.error.node, f"{r.name}: the refusal names no node: {r.detail}"
        assert r.error.node in str(r.error) or isinstance(r.error, UnsupportedOnnxOpsError)


def test_the_number_of_fully_passing_op_types_does_not_drop(results: list[CaseResult]) -> None:
    rows = op_table(results)
    passing = sorted(row.op_type for row in rows if row.passes)
    assert len(passing) >= PASSING_OP_TYPES_FLOOR, passing
    assert len(rows) >= 190  # the suite itself was collected whole
    assert Counter(r.status for r in results)["pass"] >= 1167
