"""Every exception class of ``asgrad.nn`` belongs to asgrad's one hierarchy."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import asgrad.nn
from asgrad.nn import CheckpointError, DataError, MetricError, NNError, StateMismatchError
from asgrad.tensor.errors import AsgradError


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    names = [asgrad.nn.__name__]
    names += [m.name for m in pkgutil.walk_packages(asgrad.nn.__path__, "asgrad.nn.")]
    for name in names:
        module = importlib.import_module(name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__.startswith("asgrad."):
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
