"""Values of the graph file as JSON data: attribute values, exactly, and source
locations, portably (see `asgrad.tensor.io.graph_file`).

An attribute value is JSON where JSON can say it exactly (a string, a bool, an int,
a finite float, a list, a dict with string keys whose keys do not start with ``$``),
and otherwise one object of one key: ``{"$tuple": [...]}``, ``{"$float": "nan"}``,
``{"$slice": [start, stop, step]}``, ``{"$array": {"dtype", "shape", "data"}}``
(data: the little-endian bytes in base64), ``{"$scalar": ARRAY}`` (a numpy scalar),
``{"$dict": [[key, value], ...]}``, ``{"$variable": index}`` (a parameter's
variable), ``{"$body": index}`` (a loop body of the file's ``bodies``).

>>> decode_value(encode_value((1, 2.5, slice(None, 3))), "example")
(1, 2.5, slice(None, 3, None))
"""

from __future__ import annotations

import base64
import functools
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import asgrad.tensor.ir.graph as _g  # graph.py imports graph_file, which imports this module
from asgrad.tensor.errors import GraphFileError
from asgrad.tensor.ir.dtypes import DTYPES

__all__ = ["decode_value", "encode_value", "portable_location"]


def _array(value: np.ndarray) -> dict[str, Any]:
    if value.dtype.name not in DTYPES:
        raise GraphFileError(f"cannot save an array of dtype {value.dtype}")
    data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
    return {
        "dtype": value.dtype.name,
        "shape": list(value.shape),
        "data": base64.b64encode(data).decode("ascii"),
    }


def encode_value(
    value: Any,
    variables: dict[int, int] | None = None,
    bodies: Callable[[Any], int | None] | None = None,
) -> Any:
    """``value`` (an attribute) as JSON data, exactly (see the module docstring).

    ``bodies`` gives a loop body's index in the file's table of bodies (None for a
    value that is not one)."""
    if isinstance(value, np.ndarray):
        return {"$array": _array(value)}
    if isinstance(value, np.generic):
        return {"$scalar": _array(np.asarray(value))}
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, tuple):
        return {"$tuple": [encode_value(v, variables, bodies) for v in value]}
    if isinstance(value, list):
        return [encode_value(v, variables, bodies) for v in value]
    if isinstance(value, slice):
        return {"$slice": [encode_value(v) for v in (value.start, value.stop, value.step)]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode_value(v, variables, bodies) for k, v in value.items()}
        return {
            "$dict": [
                [encode_value(k), encode_value(v, variables, bodies)] for k, v in value.items()
            ]
        }
    if isinstance(value, _g.Variable) and variables is not None and id(value) in variables:
        return {"$variable": variables[id(value)]}
    found = bodies(value) if bodies is not None else None
    if found is not None:
        return {"$body": found}
    raise GraphFileError(
        f"cannot save an attribute of type {type(value).__module__}.{type(value).__qualname__}"
        f" ({value!r}); a graph file holds numbers, strings, tuples, lists, dicts, slices and"
        " numpy arrays (and loop bodies)"
    )


def _fail(where: str, what: str) -> GraphFileError:
    return GraphFileError(f"{where}: {what}")


def _field(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise _fail(where, f"missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _fail(where, f"field {key!r} is {type(value).__name__}, expected {kind}")
    return value


def _read_array(obj: Any, where: str) -> np.ndarray:
    dtype = _field(obj, "dtype", str, where)
    if dtype not in DTYPES:
        raise _fail(where, f"unknown dtype {dtype!r}")
    shape = tuple(_shape(_field(obj, "shape", list, where), where))
    try:
        data = base64.b64decode(_field(obj, "data", str, where), validate=True)
    except ValueError:
        raise _fail(where, "array data is not base64") from None
    item = np.dtype(dtype).newbyteorder("<")
    if len(data) != math.prod(shape) * item.itemsize:
        raise _fail(where, f"array data has {len(data)} bytes; {dtype}{list(shape)} needs more")
    return np.frombuffer(data, dtype=item).astype(dtype).reshape(shape)


def _pair(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2


def _shape(value: list[Any], where: str) -> list[int]:
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value):
        raise _fail(where, f"a shape must be a list of integers >= 0, got {value!r}")
    return value


# Attribute values nested deeper than this are refused (no op's attribute comes close;
# a deeper one would exhaust Python's recursion limit).
MAX_NESTING = 64


def decode_value(
    data: Any,
    where: str,
    variables: Sequence[_g.Variable] = (),
    depth: int = 0,
    bodies: Callable[[Any], Any] | None = None,
) -> Any:
    """The attribute value that `encode_value` wrote as ``data``; ``bodies``
    reads the loop body that ``{"$body": index}`` names."""
    if depth > MAX_NESTING:
        raise _fail(where, f"a value is nested more than {MAX_NESTING} deep")
    inner = depth + 1
    if data is None or isinstance(data, str | bool | int | float):
        return data
    if isinstance(data, list):
        return [decode_value(v, where, variables, inner, bodies) for v in data]
    if not isinstance(data, dict):
        raise _fail(where, f"unexpected JSON value {data!r}")
    tagged = [k for k in data if k.startswith("$")]
    if not tagged:
        return {k: decode_value(v, where, variables, inner, bodies) for k, v in data.items()}
    if len(data) != 1:
        raise _fail(where, f"a tagged value has one key, got {sorted(data)}")
    tag, body = tagged[0], data[tagged[0]]
    if tag == "$tuple" and isinstance(body, list):
        return tuple(decode_value(v, where, variables, inner, bodies) for v in body)
    if tag == "$float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "$slice" and isinstance(body, list) and len(body) == 3:
        return slice(*(decode_value(v, where, (), inner) for v in body))
    if tag == "$array":
        array = _read_array(body, where)
        array.setflags(write=False)
        return array
    if tag == "$scalar":
        return _read_array(body, where)[()]
    if tag == "$dict" and isinstance(body, list) and all(_pair(p) for p in body):
        return {
            decode_value(k, where, (), inner): decode_value(v, where, variables, inner, bodies)
            for k, v in body
        }
    if tag == "$variable" and isinstance(body, int) and 0 <= body < len(variables):
        return variables[body]
    if tag == "$body" and bodies is not None:
        return bodies(body)
    raise _fail(where, f"unknown or malformed tagged value {tag!r}")


@functools.cache
def _portable_path(path: str) -> str:
    p = Path(path)
    cwd = Path.cwd()
    if cwd != Path(cwd.anchor) and p.is_relative_to(cwd):
        return p.relative_to(cwd).as_posix()
    roots = sorted(
        (Path(e) for e in sys.path if e and os.path.isabs(e)), key=lambda r: -len(r.parts)
    )
    for root in roots:
        if root != Path(root.anchor) and p.is_relative_to(root):
            return p.relative_to(root).as_posix()
    return p.name


def portable_location(location: str) -> str:
    """``location`` (``file:line``) as a graph file stores it: no absolute path of the
    machine that made it. A file under the working directory is named relative to it
    (``examples/train.py:12``), one under an entry of ``sys.path`` relative to that
    (``asgrad/nn/layers/linear.py:40``), any other by its name alone.

    >>> portable_location("<stdin>:3")
    '<stdin>:3'
    """
    path, sep, line = location.rpartition(":")
    if not sep or not os.path.isabs(path):
        return location
    return f"{_portable_path(path)}:{line}"
