"""Entry points given the wrong kind of value raise a typed asgrad error, not an internal one."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from asgrad.tensor import ArgumentTypeError, AsgradError, Graph, compile, evaluate


def _x() -> object:
    return Graph().input("x", (2, 3))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: evaluate([np.ones(2)], {}), "evaluate: item 0 must be a Tensor"),
        (lambda: evaluate(3.0, {}), "evaluate takes a Tensor or a list"),  # type: ignore[arg-type]
        (lambda: compile([1.0]), "compile: item 0 must be a Tensor"),  # type: ignore[list-item]
        (lambda: _x().sum(axis=1.7), "axis must be an integer"),  # type: ignore[attr-defined]
        (lambda: _x().sum(axis=(0, 1.5)), "axis must be an integer"),  # type: ignore[attr-defined]
    ],
)
def test_wrong_kinds_of_argument_are_named(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ArgumentTypeError, match=message) as info:
        call()
    assert isinstance(info.value, AsgradError)
    assert isinstance(info.value, TypeError)
