"""The root conftest's policies, run in a scratch pytest session: PyTorch's saved answers
(``torch_reference``), the skip count by reason, the missing-package rule of CI, the
line that says what ``hatch run test`` left out and the header naming the BLAS kernels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFTEST = (ROOT / "conftest.py").read_text()


@pytest.fixture
def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A scratch repository with the root conftest and a ``tests`` folder."""
    for name in ("ASGRAD_REQUIRE_PACKAGES", "ASGRAD_TORCH_FIXTURES", "ASGRAD_TORCH_FIXTURES_OUT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    (pytester.path / "tests").mkdir()
    return pytester


def _write_fixture(folder: Path, key: str, inputs: list[np.ndarray], out: np.ndarray) -> None:
    """A fixture file as scripts/torch_fixtures.py writes it, for ``fn(torch, *inputs)``."""
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {f"{key}:in.{i}": a for i, a in enumerate(inputs)}
    arrays[f"{key}:out"] = out
    arrays[f"{key}:tree"] = np.asarray(json.dumps({"leaf": "out", "python": False}))
    save: Any = np.savez  # numpy types the keyword arrays as its own options
    save(folder / "root.npz", **arrays)


TEST = """
import numpy as np

def test_exp(torch_reference):
    x = np.array([0.0, 1.0])
    want = torch_reference(lambda torch, x: torch.tensor(x).exp(), x)
    np.testing.assert_allclose(want, np.exp(x))
"""


def test_the_saved_answer_is_returned_where_pytorch_is_missing(session: pytest.Pytester) -> None:
    _write_fixture(
        session.path / "tests" / "data" / "torch",
        "test_exp#0",
        [np.array([0.0, 1.0])],
        np.exp(np.array([0.0, 1.0])),
    )
    (session.path / "tests" / "test_it.py").write_text(TEST)
    result = session.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_changed_inputs_or_a_missing_answer_fail_and_name_the_script(
    session: pytest.Pytester,
) -> None:
    (session.path / "tests" / "test_it.py").write_text(TEST)
    result = session.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no PyTorch fixture for tests/test_it.py::test_exp#0*"])
    result.stdout.fnmatch_lines(["*scripts/torch_fixtures.py*"])
    _write_fixture(
        session.path / "tests" / "data" / "torch",
        "test_exp#0",
        [np.array([0.0, 2.0])],  # not the input the test gives now
        np.exp(np.array([0.0, 2.0])),
    )
    result = session.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*inputs changed since the fixture was written*"])


SKIPS = """
import pytest

def test_a():
    pytest.importorskip("no_such_package_here")

def test_b():
    pytest.skip("not today")

def test_c():
    pytest.skip("not today")
"""


def test_skips_are_counted_by_reason(session: pytest.Pytester) -> None:
    (session.path / "tests" / "test_skips.py").write_text(SKIPS)
    result = session.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*skips by reason (3 in all)*", "*2  not today"])


def test_a_skip_for_a_package_ci_installs_fails_under_require_packages(
    session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    (session.path / "tests" / "test_skips.py").write_text(SKIPS)
    monkeypatch.setenv("ASGRAD_REQUIRE_PACKAGES", "1")
    result = session.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*skipped for packages that CI installs: no_such_package_here*"])


def test_a_skip_for_a_package_ci_lacks_on_purpose_passes(
    session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    (session.path / "tests" / "test_skips.py").write_text(
        "import pytest\n\ndef test_a():\n    pytest.skip(\"could not import 'jax': no\")\n"
    )
    monkeypatch.setenv("ASGRAD_REQUIRE_PACKAGES", "1")
    result = session.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == 0


def test_the_header_names_numpy_its_blas_kernels_and_the_cpu(
    session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")  # read per run: no BLAS is reloaded
    (session.path / "tests" / "test_one.py").write_text("def test_a():\n    pass\n")
    result = session.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [f"numpy {np.__version__}, BLAS: * (OPENBLAS_CORETYPE=Haswell); CPU: ?*"]
    )


def test_leaving_out_slow_tests_says_how_many_and_how_to_run_them(
    session: pytest.Pytester,
) -> None:
    (session.path / "tests" / "test_slow.py").write_text(
        "import pytest\n\n@pytest.mark.slow\ndef test_a():\n    pass\n\ndef test_b():\n    pass\n"
    )
    result = session.runpytest_inprocess("-p", "no:cacheprovider", "-m", "not slow")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*left out 1 tests marked slow*`hatch run test-all` runs them"])


ORDER = """
import os
import time

def _ran(name):
    with open(os.environ["ORDER_LOG"], "a") as log:
        log.write(name + "\\n")
"""


def test_a_run_with_recorded_durations_hands_out_the_longest_file_first(
    session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file of three quick tests, then a file of one slow test: the first run goes in the
    # order collected; once it has recorded the durations, the slow file goes first.
    tests = session.path / "tests"
    (tests / "test_a_many.py").write_text(
        ORDER + "".join(f"\ndef test_{i}():\n    _ran('many')\n" for i in range(3))
    )
    (tests / "test_b_long.py").write_text(
        ORDER + "\ndef test_it():\n    time.sleep(0.5)\n    _ran('long')\n"
    )
    log = session.path / "order.txt"
    monkeypatch.setenv("ORDER_LOG", str(log))
    for expected in (["many", "many", "many", "long"], ["long", "many", "many", "many"]):
        log.unlink(missing_ok=True)
        result = session.runpytest_subprocess("-n", "1", "--dist", "loadgroup", "-p", "xdist")
        result.assert_outcomes(passed=4)
        assert log.read_text().split() == expected
