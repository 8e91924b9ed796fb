"""The viewer's vendored JavaScript is what scripts/vendor_js.py pins.

The script fetches the files from npm and checks their SHA-256 (CI runs it with
``--check``); this test checks, offline, that the committed files have those digests
and that the wheel's licence list names the vendored licence.
"""

from __future__ import annotations

import hashlib
import sys
import tomllib
from pathlib import Path

from asgrad.viz.page import VENDORED

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import vendor_js  # noqa: E402


def test_committed_files_have_the_pinned_digests() -> None:
    names = [name for _, _, name in VENDORED]
    assert sorted(names) == sorted(vendor_js.SHA256)
    for name in names:
        data = (vendor_js.VENDOR / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == vendor_js.SHA256[name], name


def test_the_licence_ships_with_the_package() -> None:
    project = tomllib.loads((ROOT / "packages/viz/pyproject.toml").read_text())["project"]
    assert "src/asgrad/viz/vendor/elkjs-LICENSE.md" in project["license-files"]
    assert "EPL-2.0" in project["license"]
