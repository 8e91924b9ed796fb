"""``meta.json``, a checkpoint's manifest: written with its own checksum, read checked.

Besides the training state (step, epoch, metrics, scheduler and RNG state, ``extra``)
it lists every file of the folder with its size (``files``) and checksum (``sha256``,
the value in that file's header). Its last entry, ``meta_sha256``, is the SHA-256 of
the text before it, as ``json.dumps(meta, indent=2)`` wrote it::

    {
      "format": "asgrad-checkpoint",
      ...
      "sha256": {"model.safetensors": "9f2c..."},
      "meta_sha256": "<sha256 of the text up to '"sha256" ... }' followed by '\\n}'>"
    }

Checkpoints written before checksums existed have neither entry and load unverified
(sizes are still checked); if either entry is present, both must be and must match.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from asgrad.nn.errors import CheckpointCorruptError, CheckpointError, InvalidStateError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "META_FILE",
    "Default",
    "check_json",
    "meta_bytes",
    "parse_meta",
]

FORMAT = "asgrad-checkpoint"
FORMAT_VERSION = 1
META_FILE = "meta.json"
_SEP = b',\n  "meta_sha256": "'
_TAIL = re.compile(rb'([0-9a-f]{64})"\n}\n')


Default = Callable[[Any], Any]


def check_json(payload: Mapping[str, Any], default: Default) -> None:
    """Raise [`InvalidStateError`][asgrad.nn.InvalidStateError] unless ``payload`` can go into
    ``meta.json``.

    ``default`` is ``json.dumps``'s hook for values JSON has no type for.
    """
    try:
        json.dumps(payload, default=default)
    except (TypeError, ValueError) as exc:
        raise InvalidStateError(
            f"save_checkpoint: meta.json cannot hold a value: {exc}; scheduler_state, "
            "metrics, extra and the optimizer's non-array entries must be JSON-able "
            "(numbers, strings, lists, dicts)"
        ) from exc


def meta_bytes(meta: Mapping[str, Any], default: Default) -> bytes:
    """The text of ``meta.json`` for ``meta`` (checked with `check_json`)."""
    body = json.dumps(meta, indent=2, default=default).encode("utf-8")
    checksum = hashlib.sha256(body).hexdigest().encode("ascii")
    return body[:-2] + _SEP + checksum + b'"\n}\n'


def _corrupt(path: Path, what: str) -> CheckpointCorruptError:
    return CheckpointCorruptError(
        f"{path} is damaged: {what}; the checkpoint changed after it was written. "
        "Load another checkpoint (an older step)",
        path=path,
    )


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "step": int,
    "files": dict,
    "model_keys": list,
    "metrics": dict,
    "extra": dict,
    "epoch": (int, type(None)),
    "optimizer": (dict, type(None)),
    "scheduler_state": (dict, type(None)),
    "rng_state": (dict, type(None)),
}


def _check_fields(meta: dict[str, Any], path: Path) -> None:
    for key, kind in _FIELDS.items():
        if key in meta and not isinstance(meta[key], kind):
            raise _corrupt(path, f"its entry {key!r} has the wrong type")
    for key in ("step", "files"):
        if key not in meta:
            raise _corrupt(path, f"its entry {key!r} is missing")
    files, sums = meta["files"], meta.get("sha256", {})
    if not (
        all(isinstance(k, str) and type(v) is int for k, v in files.items())
        and all(k not in ("", ".", "..") and "/" not in k and "\\" not in k for k in files)
        and isinstance(sums, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in sums.items())
        and all(isinstance(k, str) for k in meta.get("model_keys", []))
    ):
        raise _corrupt(path, "its file list, checksums or model keys are malformed")
    optimizer = meta.get("optimizer")
    if optimizer is not None and not (
        isinstance(optimizer.get("keys"), list) and isinstance(optimizer.get("scalars"), dict)
    ):
        raise _corrupt(path, "its optimizer entry is malformed")


def parse_meta(raw: bytes, path: Path) -> dict[str, Any]:
    """The checked contents of ``meta.json`` file ``path`` whose bytes are ``raw``."""
    at = raw.rfind(_SEP)
    if at >= 0:
        tail = _TAIL.fullmatch(raw, at + len(_SEP))
        if tail is None:
            raise _corrupt(path, "its checksum entry is damaged")
        actual = hashlib.sha256(raw[:at] + b"\n}").hexdigest()
        if actual != tail.group(1).decode("ascii"):
            raise _corrupt(path, f"its SHA-256 is {actual}, it says {tail.group(1).decode()}")
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise _corrupt(path, f"it is not valid JSON ({exc})") from exc
    if not isinstance(meta, dict):
        raise _corrupt(path, "it is not a JSON object")
    if (at >= 0) != ("sha256" in meta) or (at < 0 and "meta_sha256" in meta):
        raise _corrupt(path, "one of its two checksum entries is missing")
    if meta.get("format") != FORMAT or not isinstance(meta.get("version"), int):
        raise CheckpointCorruptError(
            f"{path} is not an {FORMAT} meta.json (no format/version entry); check the path",
            path=path,
        )
    if meta["version"] > FORMAT_VERSION:
        raise CheckpointError(
            f"{path.parent} uses checkpoint format version {meta['version']}, newer than "
            f"this asgrad's {FORMAT_VERSION}; upgrade asgrad to load it",
            path=path.parent,
        )
    _check_fields(meta, path)
    return meta
