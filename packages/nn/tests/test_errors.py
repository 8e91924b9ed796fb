"""Every exception class of ``asgrad.nn`` belongs to asgrad's one hierarchy."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import asgrad.nn
from asgrad.nn import (
    CheckpointError,
    DataError,
    Dropout,
    MetricError,
    NNError,
    StateMismatchError,
    UnknownMetricError,
)
from asgrad.nn.metrics import MetricLogger
from asgrad.tensor.errors import ArgumentError, AsgradError


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    names = [asgrad.nn.__name__]
    names += [m.name for m in pkgutil.walk_packages(asgrad.nn.__path__, "asgrad.nn.")]
    for name in names:
        module = importlib.import_module(name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            # warnings are categories for warnings.warn, never raised: not errors
            error = issubclass(obj, BaseException) and not issubclass(obj, Warning)
            if error and obj.__module__.startswith("asgrad."):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_nn_exception_derives_from_asgrad_error() -> None:
    classes = _exception_classes()
    assert "asgrad.nn.errors.NNError" in classes  # the walk reaches the errors module
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, AsgradError))
    assert outside == [], f"not derived from AsgradError: {outside}"


def test_errors_keep_their_standard_library_bases() -> None:
    assert issubclass(NNError, AsgradError)
    assert issubclass(DataError, ValueError)
    assert issubclass(MetricError, ValueError)
    assert issubclass(StateMismatchError, CheckpointError)
    assert issubclass(StateMismatchError, KeyError)
    err = StateMismatchError("line one\nline two", missing=["w"])
    assert str(err) == "line one\nline two"
    assert err.missing == ["w"]


BUILTIN_ERRORS = {"ValueError", "TypeError", "IndexError", "KeyError", "RuntimeError"}
# A json ``default`` hook must raise TypeError: that is json's protocol, not a user error.
PROTOCOL_RAISES = {("serialization/checkpoint.py", "_to_json")}


def test_nn_raises_no_bare_builtin_error() -> None:
    src = Path(asgrad.nn.__file__).parent
    bare = []
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Raise)
                    and isinstance(node.exc, ast.Call)
                    and isinstance(node.exc.func, ast.Name)
                    and node.exc.func.id in BUILTIN_ERRORS
                    and (path.relative_to(src).as_posix(), fn.name) not in PROTOCOL_RAISES
                ):
                    bare.append(f"{path.relative_to(src)}:{node.lineno} {node.exc.func.id}")
    assert bare == [], f"raise an AsgradError subclass instead: {bare}"


def test_argument_errors_are_asgrad_errors_and_keep_their_builtin_base() -> None:
    with pytest.raises(ArgumentError, match="Dropout probability") as info:
        Dropout(p=1.5)
    assert isinstance(info.value, ValueError)
    logger = MetricLogger()
    with pytest.raises(UnknownMetricError, match="no metric 'loss'") as missing:
        logger.latest("loss")
    assert isinstance(missing.value, KeyError)
    assert isinstance(missing.value, AsgradError)


def test_recompile_warning_is_a_user_warning() -> None:
    assert issubclass(asgrad.nn.RecompileWarning, UserWarning)
