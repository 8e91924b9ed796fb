"""The viewer's data and page: what the passes did, the profile, the
self-contained HTML, the command line and Jupyter's ``_repr_html_``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, compile
from asgrad.tensor.cpu.profile import profile_program
from asgrad.tensor.errors import BackendError
from asgrad.tensor.ir.scopes import scope
from asgrad.viz import VizError, show, to_html
from asgrad.viz.data import page_data, subject_of


def _graph() -> tuple[Graph, Any]:
    g = Graph("demo")
    x = g.input("x", (4, 3))
    with scope("encoder"), scope("layer0"):
        w = g.parameter("w", (3, 3), init=np.eye(3, dtype=np.float32))
        h = (x @ w).relu()
    twice = (x * 2.0) + (x * 2.0)  # a common subexpression
    _unused = x.exp()  # dead code for the output below
    folded = g.constant(1.0) + g.constant(2.0)  # folded into one constant
    y = (h.sum() + twice.sum()) * folded
    return g, y


def _data(html: str) -> dict[str, Any]:
    match = re.search(
        r'<script type="application/json" id="asgrad-data">(.*?)</script>', html, re.S
    )
    assert match is not None
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def test_page_data_says_what_the_passes_did() -> None:
    _, y = _graph()
    data = page_data(subject_of(y))
    before = {n["name"]: n for n in data["views"]["before"]["nodes"]}
    after = data["views"]["after"]["nodes"]
    statuses = {n["status"] for n in before.values()}
    assert statuses == {"kept", "dead", "replaced"}
    exp = next(n for n in before.values() if n["op"] == "exp")
    assert exp["status"] == "dead"
    muls = [n for n in before.values() if n["op"] == "mul" and n["shape"] == [4, 3]]
    assert sorted(n["status"] for n in muls) == ["kept", "replaced"]  # CSE kept one
    assert any(n["status"] == "new" and n["op"] == "constant" for n in after)  # 1 + 2 folded
    assert before["w"]["scope"] == "encoder.layer0"
    relu = next(n for n in before.values() if n["op"] == "relu")
    assert relu["scope"] == "encoder.layer0"
    assert relu["role"] == "forward"
    assert before["w"]["attrs"]["variable"] == "variable 'w' float32[3, 3]"
    assert relu["loc"].startswith(__file__)
    # inputs are indices into the same view
    assert [before_name(data, i) for i in relu["inputs"]] == [
        "matmul_" + relu["name"].split("_")[1]
    ] or relu["inputs"]


def before_name(data: dict[str, Any], i: int) -> str:
    return str(data["views"]["before"]["nodes"][i]["name"])


def test_program_view_and_profile() -> None:
    _, y = _graph()
    program = compile([y])
    feeds = {"x": np.ones((4, 3), np.float32)}
    prof = profile_program(program, feeds, repeat=2)
    data = page_data(subject_of(program), profile=prof)
    after = data["views"]["after"]["nodes"]
    timed = [n for n in after if "time" in n]
    assert timed
    assert all(n["time"] >= 0 and n["bytes"] == 4 * int(np.prod(n["shape"])) for n in timed)
    assert data["profile"]["total"] > 0
    assert [n["name"] for n in after] == [n.name for n in program.schedule.nodes]


def test_profile_restores_updated_variables() -> None:
    g = Graph()
    x = g.input("x", (2,))
    w = g.parameter("w", (2,), init=np.ones(2, np.float32))
    step = compile([(x * w).sum()], {w.node.attrs["variable"]: w + 1.0})
    profile_program(step, {"x": np.ones(2, np.float32)}, repeat=3)
    np.testing.assert_array_equal(w.node.attrs["variable"].value, np.ones(2))


def test_profile_refuses_other_backends() -> None:
    g = Graph()
    x = g.input("x", (2,))
    program = compile([x * 2.0])
    program.backend = "gpu"  # as a GPU program reports itself
    with pytest.raises(BackendError, match="Compile it with backend='cpu'"):
        profile_program(program, {"x": np.ones(2, np.float32)})


def test_html_is_self_contained(tmp_path: Path) -> None:
    _, y = _graph()
    html = to_html(y, feeds={"x": np.ones((4, 3), np.float32)}, title="demo </script>")
    assert "default-src 'none'" in html
    # nothing is loaded from elsewhere: no src/href attribute, no stylesheet link
    assert not re.search(r"""<(script|img|link|iframe)[^>]*\b(src|href)\s*=""", html)
    assert html.count("</script>") == html.count("<script")  # no early end of a script
    assert "demo &lt;/script&gt;" in html
    data = _data(html)
    assert data["profile"]["backend"] == "cpu"
    path = show(y, tmp_path / "page.html", open_browser=False)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_command_line_opens_a_saved_graph(tmp_path: Path) -> None:
    g, y = _graph()
    g.save(tmp_path / "g.json", outputs=[y])
    out = tmp_path / "g.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "asgrad.viz",
            str(tmp_path / "g.json"),
            "--out",
            str(out),
            "--no-open",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = _data(out.read_text(encoding="utf-8"))
    assert {n["name"] for n in data["views"]["before"]["nodes"]} == {n.name for n in g.nodes}
    (tmp_path / "bad.json").write_text('{"format": "asgrad-graph", "version": 7}')
    bad = subprocess.run(
        [sys.executable, "-m", "asgrad.viz", str(tmp_path / "bad.json"), "--no-open"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 1
    assert "version 7 is not supported" in bad.stderr


def test_jupyter_repr_and_bad_input() -> None:
    g, _ = _graph()
    html = g._repr_html_()
    assert html.startswith("<iframe srcdoc=")
    assert "asgrad-data" in html
    with pytest.raises(VizError, match="show\\(\\) takes a Graph"):
        to_html(42)


def test_a_large_flat_scope_is_cut_into_parts() -> None:
    g = Graph("flat")
    t = g.input("x", (3,))
    for _ in range(700):
        t = t * 1.5
    data = page_data(subject_of(t))
    nodes = data["views"]["before"]["nodes"]
    assert len(nodes) > 1400  # 700 muls, 700 constants, the input
    parts = {n["scope"] for n in nodes}
    assert {"part1", "part2"} <= parts
    assert all(n["module"] == "" for n in nodes)
    counts = [sum(n["scope"] == p for n in nodes) for p in parts]
    assert max(counts) == 200


def test_names_that_look_like_markup_stay_data() -> None:
    g = Graph("<!--<script>")
    x = g.input("x<!--<script>&amp;", (2,))
    y = x * 2.0
    html = to_html(y, title="</script><!--")
    block = html.split('id="asgrad-data">', 1)[1].split("</script>", 1)[0]
    assert not {"<", ">", "&"} & set(block)  # nothing the HTML parser could read as markup
    data = json.loads(block)
    assert data["views"]["before"]["nodes"][0]["name"] == "x<!--<script>&amp;"
    assert data["title"] == "</script><!--"


def test_a_saved_loop_opens_as_a_nested_view(tmp_path: Path) -> None:
    from asgrad.tensor import scan

    g = Graph("loop")
    w = g.input("w", (3, 3))
    xs = g.input("xs", (5, 2, 3))
    h, ys = scan(lambda h, x: ((h @ w + x).tanh(),) * 2, g.constant(np.zeros((2, 3))), xs)
    g.save(tmp_path / "loop.json", outputs=[h, ys])
    data = _data(to_html(tmp_path / "loop.json"))
    loop = next(n for n in data["views"]["before"]["nodes"] if n["op"] == "scan")
    body = data["bodies"][loop["body"]]
    assert body["captures"] == ["w"]
    assert [n.get("io") for n in body["nodes"] if n["op"] == "input"] == [
        "carry 0 in",
        "xs 0, one step",
        "captured w",
    ]
    assert [o for n in body["nodes"] for o in n.get("outputs", [])] == [
        "carry 0 out",
        "ys 0, one step",
    ]
