"""Feed names: a misspelled key is named with its near match; a name fed twice is refused."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import FeedError, Graph, compile


def _program() -> object:
    g = Graph()
    x, label = g.input("x", (2,)), g.input("label", (2,))
    return compile([x + label])


@pytest.mark.parametrize(
    ("feeds", "match"),
    [
        (
            {"X": [1, 2], "label": [1, 2]},
            r"input 'x' was not fed; it was fed 'X'.*did you mean 'x'",
        ),
        ({"x": [1, 2], "lable": [1, 2]}, r"'label' was not fed; it was fed 'lable'.*did you mean"),
        ({"x": [1, 2], "label": [1, 2], "labels": 1}, r"'labels' is not an input.*'label'\?"),
        ({"x": [1, 2], "label": [1, 2], "zzz": 1}, r"'zzz' is not an input of this graph$"),
    ],
)
def test_unknown_feed_names_are_named_with_their_near_match(
    feeds: dict[str, object], match: str
) -> None:
    with pytest.raises(FeedError, match=match):
        _program()(feeds)  # type: ignore[operator]


def test_a_name_fed_in_the_dict_and_as_a_keyword_is_refused() -> None:
    program = _program()
    with pytest.raises(FeedError, match="'x' fed both in the dict and as a keyword"):
        program({"x": [1.0, 2.0], "label": [0.0, 0.0]}, x=[3.0, 4.0])  # type: ignore[operator]
    (out,) = program({"label": [0.0, 0.0]}, x=[3.0, 4.0])  # type: ignore[operator]
    np.testing.assert_array_equal(out, [3.0, 4.0])
