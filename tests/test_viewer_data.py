"""The viewer's data for models built with asgrad.nn: a parameter names the line that
built its layer (its definition) as well as the line that first used it, and a
recurrent layer's loop body is a view of its own."""

from __future__ import annotations

import inspect

from asgrad import nn
from asgrad.tensor import Graph
from asgrad.viz.data import page_data, subject_of


def _here() -> str:
    """The caller's ``file:line``."""
    frame = inspect.currentframe()
    assert frame is not None
    assert frame.f_back is not None
    return f"{__file__}:{frame.f_back.f_lineno}"


def test_a_parameter_names_where_its_layer_was_built() -> None:
    layer, built = nn.Linear(3, 2, rng=0), _here()
    g = Graph()
    y, used = layer(g.input("x", (4, 3))).sum(), _here()
    nodes = page_data(subject_of(y))["views"]["before"]["nodes"]
    weight = next(n for n in nodes if n["name"] == "weight")
    assert weight["defined"] == built
    assert weight["loc"] == used
    assert all("defined" not in n for n in nodes if n["op"] != "parameter")


def test_an_lstm_loop_body_is_a_view_with_named_carries_and_outputs() -> None:
    lstm = nn.LSTM(3, 4, rng=0)
    g = Graph()
    out, _ = lstm(g.input("x", (5, 2, 3)))
    data = page_data(subject_of(out.sum()))
    scan = next(n for n in data["views"]["before"]["nodes"] if n["op"] == "scan")
    body = data["bodies"][scan["body"]]
    assert (body["carries"], body["xs"], body["ys"]) == (2, 1, 1)  # h and c; a step of x
    ios = [n["io"] for n in body["nodes"] if "io" in n]
    assert ios[:3] == ["carry 0 in", "carry 1 in", "xs 0, one step"]
    assert [io for io in ios if io.startswith("captured ")] == [
        f"captured {name}" for name in body["captures"]
    ]
    outputs = sorted(o for n in body["nodes"] for o in n.get("outputs", []))
    assert outputs == ["carry 0 out", "carry 1 out", "ys 0, one step"]
    assert scan["attrs"]["loop"].startswith("loop body ")
