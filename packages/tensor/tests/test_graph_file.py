"""The graph file: every registry op case round-trips and runs bit for bit
alike; malformed files and unknown versions are refused with a GraphFileError."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import (
    Graph,
    GraphFileError,
    OpCase,
    OpDef,
    Tensor,
    all_ops,
    evaluate,
    scan,
)
from asgrad.tensor.io.graph_file import graph_to_dict, load_graph
from asgrad.tensor.ir.scopes import node_meta, scope


def _dtype(a: np.ndarray) -> str:
    return {"f": "float64", "b": "bool"}.get(a.dtype.kind, "int64")


def _cases() -> list[tuple[OpDef, OpCase]]:
    rng = np.random.default_rng(3)
    return [(op, c) for op in all_ops() if op.cases is not None for c in op.cases(rng)]


CASES = _cases()


def build_case(op: OpDef, case: OpCase) -> tuple[Graph, Tensor, dict[str, np.ndarray]]:
    """A graph applying ``op`` to the case's inputs, and the feeds."""
    g = Graph(f"case-{op.name}")
    feeds = {
        f"x{i}": np.asarray(a).astype(_dtype(np.asarray(a))) for i, a in enumerate(case.inputs)
    }
    xs = [g.input(k, v.shape, str(v.dtype), free=()) for k, v in feeds.items()]
    with scope("block"), node_meta(role="forward"):
        out = g.apply(op.name, xs, dict(case.attrs))
    return g, out, feeds


def test_every_op_with_cases_is_covered() -> None:
    covered = {op.name for op, _ in CASES}
    leaves = {"input", "parameter", "constant"}
    assert covered | leaves == {op.name for op in all_ops()}


@pytest.mark.parametrize(
    ("op", "case"), CASES, ids=[f"{op.name}[{c.label or i}]" for i, (op, c) in enumerate(CASES)]
)
def test_op_case_round_trips(op: OpDef, case: OpCase, tmp_path: Path) -> None:
    g, out, feeds = build_case(op, case)
    path = tmp_path / "g.json"
    g.save(path, outputs=[out])
    loaded = load_graph(path)
    # The same file again: names, attrs, types, locations, meta, outputs.
    assert graph_to_dict(loaded.graph, loaded.outputs) == graph_to_dict(g, [out])
    (got,) = evaluate(loaded.outputs, feeds)
    (want,) = evaluate([out], feeds)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    if out.node.op == "input":  # an op that expands into its input (flip over no axes)
        return
    assert loaded.outputs[0].node.meta == {"scope": "block", "role": "forward"}
    saved_at = loaded.outputs[0].node.location  # this file, relative to the project
    assert saved_at.startswith("packages/tensor/tests/test_graph_file.py:")
    assert out.node.location.endswith("/" + saved_at)


def test_leaves_variables_updates_and_attrs_round_trip(tmp_path: Path) -> None:
    g = Graph("leaves")
    x = g.input("x", (2, 3), free=(0,))
    w = g.parameter("w", (3,), "float64", init=np.arange(3.0), trainable=False)
    c = g.constant(np.array([[1, 2, 3]], np.int32))
    y = (x.cast("float64") * w + c.cast("float64")).sum(axis=0)
    g.add_update(w.node.attrs["variable"], w + 1.0)
    g.save(tmp_path / "g.json", outputs=[y])
    loaded = load_graph(tmp_path / "g.json")
    lw = loaded["w"].node.attrs["variable"]
    assert lw is not w.node.attrs["variable"]
    assert lw.trainable is False
    np.testing.assert_array_equal(lw.value, np.arange(3.0))
    assert list(loaded.graph.updates) == [lw]
    assert loaded.graph["x"].node.attrs["free"] == (0,)
    feeds = {"x": np.ones((5, 3), np.float32)}  # the free batch axis still varies
    np.testing.assert_array_equal(evaluate(loaded.outputs, feeds)[0], evaluate([y], feeds)[0])
    assert Graph.load(tmp_path / "g.json").name == "leaves"


def test_generic_attribute_values_round_trip() -> None:
    from asgrad.tensor.io.graph_values import decode_value, encode_value

    value: Any = {
        "t": (1, (2.5, None), "s", True),
        "l": [slice(1, None, -1), float("nan"), float("-inf")],
        "a": np.arange(6, dtype=np.int32).reshape(2, 3),
        "s": np.float32(1.5),
        1: "int key",
        "$x": "dollar key",
    }
    back = decode_value(json.loads(json.dumps(encode_value(value))), "test")
    assert back["t"] == (1, (2.5, None), "s", True)
    assert back["l"][0] == slice(1, None, -1)
    assert np.isnan(back["l"][1])
    assert back["l"][2] == float("-inf")
    np.testing.assert_array_equal(back["a"], value["a"])
    assert back["a"].dtype == np.int32
    assert back["s"].dtype == np.float32
    assert back[1] == "int key"
    assert back["$x"] == "dollar key"


def test_unsupported_attribute_is_a_typed_error(tmp_path: Path) -> None:
    g = Graph()
    x = g.input("x", (2,))
    y = x * 2.0
    y.node.attrs["callback"] = print
    with pytest.raises(GraphFileError, match="cannot save an attribute of type builtins"):
        g.save(tmp_path / "g.json")


def _saved(tmp_path: Path) -> dict[str, Any]:
    g = Graph()
    x = g.input("x", (2, 3))
    y = (x * 2.0).sum(axis=1)
    g.save(tmp_path / "g.json", outputs=[y])
    data: dict[str, Any] = json.loads((tmp_path / "g.json").read_text())
    return data


def _broken(data: dict[str, Any], change: str) -> dict[str, Any]:
    nodes = data["nodes"]
    if change == "version":
        data["version"] = 99
    elif change == "format":
        del data["format"]
    elif change == "forward-input":
        nodes[2]["inputs"] = [0, 3]
    elif change == "unknown-op":
        nodes[2]["op"] = "os_system"
    elif change == "wrong-shape":
        nodes[2]["shape"] = [2, 4]
    elif change == "missing-field":
        del nodes[1]["dtype"]
    elif change == "bad-tag":
        nodes[3]["attrs"]["axis"] = {"$pickle": "gASV"}
    elif change == "bad-array":
        nodes[1]["attrs"]["value"]["$array"]["data"] = "AAAA"
    elif change == "bad-output":
        data["outputs"] = [17]
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("version", "version 99 is not supported; this asgrad reads versions 1, 2"),
        ("format", "not an asgrad graph file"),
        ("forward-input", "inputs must be indices of earlier nodes"),
        ("unknown-op", "unknown op 'os_system'"),
        ("wrong-shape", r"the file says float32\[2, 4\], but the op makes float32\[2, 3\]"),
        ("missing-field", "missing field 'dtype'"),
        ("bad-tag", "unknown or malformed tagged value '\\$pickle'"),
        ("bad-array", "array data has 3 bytes"),
        ("bad-output", "index 17 is out of range"),
    ],
)
def test_malformed_files_are_refused(change: str, message: str, tmp_path: Path) -> None:
    data = _broken(_saved(tmp_path), change)
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(GraphFileError, match=message):
        load_graph(tmp_path / "bad.json")


def test_not_json_and_missing_file(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(GraphFileError, match="the JSON is malformed"):
        Graph.load(tmp_path / "bad.json")
    with pytest.raises(GraphFileError, match="no such graph file"):
        Graph.load(tmp_path / "absent.json")


def test_version_1_files_still_load(tmp_path: Path) -> None:
    data = _saved(tmp_path)
    assert data["version"] == 2
    data["version"] = 1  # as written before loop bodies were saved: no table of bodies
    del data["bodies"]
    (tmp_path / "v1.json").write_text(json.dumps(data))
    loaded = load_graph(tmp_path / "v1.json")
    (out,) = evaluate(loaded.outputs, {"x": np.ones((2, 3), np.float32)})
    np.testing.assert_array_equal(out, [6.0, 6.0])


def _saved_loop(tmp_path: Path) -> dict[str, Any]:
    g = Graph()
    xs = g.input("xs", (4, 3))
    total, _ = scan(lambda c, x: (c + x, c * x), g.constant(np.zeros(3, np.float32)), xs)
    g.save(tmp_path / "loop.json", outputs=[total])
    data: dict[str, Any] = json.loads((tmp_path / "loop.json").read_text())
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("self-loop", "body 0 holds a loop over itself"),
        ("outputs", "it has 1 carries and 1 ys, but 1 outputs"),
        ("counts", r"counts are \[carries, xs, ys\]"),
        ("carry-type", r"carry 0 is float32\[3\], but the body returns float32\[\]"),
        ("no-body", r"index 5 is out of range \(0..0\)"),
    ],
)
def test_malformed_loop_bodies_are_refused(change: str, message: str, tmp_path: Path) -> None:
    data = _saved_loop(tmp_path)
    body = data["bodies"][0]
    scan_node = next(n for n in data["nodes"] if n["op"] == "scan")
    if change == "self-loop":
        body["nodes"].append(dict(scan_node, inputs=[0, 1]))
    elif change == "outputs":
        body["outputs"] = body["outputs"][:1]
    elif change == "counts":
        body["counts"] = [1, 1]
    elif change == "carry-type":
        body["nodes"].append(
            {
                **body["nodes"][-1],
                "op": "sum",
                "name": "s",
                "inputs": [len(body["nodes"]) - 1],
                "attrs": {"axis": None, "keepdims": False},
                "shape": [],
            }
        )
        body["outputs"][0] = len(body["nodes"]) - 1
    elif change == "no-body":
        scan_node["attrs"]["loop"] = {"$body": 5}
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(GraphFileError, match=message):
        load_graph(tmp_path / "bad.json")
