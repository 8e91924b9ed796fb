"""Attribute values of the graph file as JSON data, exactly (see :mod:`asgrad.tensor.io.graph_file`).

>>> decode_value(encode_value((1, 2.5, slice(None, 3))), "example")
(1, 2.5, slice(None, 3, None))
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import asgrad.tensor.ir.graph as _g  # graph.py imports graph_file, which imports this module
from asgrad.tensor.errors import GraphFileError
from asgrad.tensor.ir.dtypes import DTYPES

__all__ = ["decode_value", "encode_value"]


def _array(value: np.ndarray) -> dict[str, Any]:
    if value.dtype.name not in DTYPES:
        raise GraphFileError(f"cannot save an array of dtype {value.dtype}")
    data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
    return {
        "dtype": value.dtype.name,
        "shape": list(value.shape),
        "data": base64.b64encode(data).decode("ascii"),
    }


def encode_value(value: Any, variables: dict[int, int] | None = None) -> Any:
    """``value`` (an attribute) as JSON data, exactly (see the module docstring)."""
    if isinstance(value, np.ndarray):
        return {"$array": _array(value)}
    if isinstance(value, np.generic):
        return {"$scalar": _array(np.asarray(value))}
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, tuple):
        return {"$tuple": [encode_value(v, variables) for v in value]}
    if isinstance(value, list):
        return [encode_value(v, variables) for v in value]
    if isinstance(value, slice):
        return {"$slice": [encode_value(v) for v in (value.start, value.stop, value.step)]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode_value(v, variables) for k, v in value.items()}
        return {"$dict": [[encode_value(k), encode_value(v, variables)] for k, v in value.items()]}
    if isinstance(value, _g.Variable) and variables is not None and id(value) in variables:
        return {"$variable": variables[id(value)]}
    raise GraphFileError(
        f"cannot save an attribute of type {type(value).__module__}.{type(value).__qualname__}"
        f" ({value!r}); a graph file holds numbers, strings, tuples, lists, dicts, slices and"
        " numpy arrays"
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


def _shape(value: list[Any], where: str) -> list[int]:
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value):
        raise _fail(where, f"a shape must be a list of integers >= 0, got {value!r}")
    return value


def decode_value(data: Any, where: str, variables: Sequence[_g.Variable] = ()) -> Any:
    """The attribute value that :func:`encode_value` wrote as ``data``."""
    if data is None or isinstance(data, str | bool | int | float):
        return data
    if isinstance(data, list):
        return [decode_value(v, where, variables) for v in data]
    if not isinstance(data, dict):
        raise _fail(where, f"unexpected JSON value {data!r}")
    tagged = [k for k in data if k.startswith("$")]
    if not tagged:
        return {k: decode_value(v, where, variables) for k, v in data.items()}
    if len(data) != 1:
        raise _fail(where, f"a tagged value has one key, got {sorted(data)}")
    tag, body = tagged[0], data[tagged[0]]
    if tag == "$tuple" and isinstance(body, list):
        return tuple(decode_value(v, where, variables) for v in body)
    if tag == "$float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "$slice" and isinstance(body, list) and len(body) == 3:
        return slice(*(decode_value(v, where) for v in body))
    if tag == "$array":
        array = _read_array(body, where)
        array.setflags(write=False)
        return array
    if tag == "$scalar":
        return _read_array(body, where)[()]
    if tag == "$dict" and isinstance(body, list) and all(len(p) == 2 for p in body):
        return {decode_value(k, where): decode_value(v, where, variables) for k, v in body}
    if tag == "$variable" and isinstance(body, int) and 0 <= body < len(variables):
        return variables[body]
    raise _fail(where, f"unknown or malformed tagged value {tag!r}")
