"""Vendor the viewer's JavaScript from npm into packages/viz (run after a version bump).

    python scripts/vendor_js.py           # fetch with `npm pack`, check, write
    python scripts/vendor_js.py --check   # fetch and compare with the committed files

The files and versions are ``asgrad.viz.page.VENDORED``; each file's SHA-256 is
pinned below, so a changed package on the registry is noticed. Needs ``npm``.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "packages/viz/src/asgrad/viz/vendor"
sys.path.insert(0, str(ROOT / "packages/viz/src"))
sys.path.insert(0, str(ROOT / "packages/tensor/src"))

SHA256 = {
    "elk.bundled.js": "b1032b7cfd2a57c54c6f0e8369d7665e19a579954f7cd20a6dae28f1912ea0d7",
    "elkjs-LICENSE.md": "637e81f4a1b6b4079535c499fca05e238cf7605c1ff5b76d60d7da7ce96700c9",
}


def fetch(package: str, member: str, work: Path) -> bytes:
    """``member`` of the npm ``package`` (``name@version``), via ``npm pack``."""
    done = subprocess.run(
        ["npm", "pack", package, "--silent", "--pack-destination", str(work)],
        check=True,
        capture_output=True,
        text=True,
    )
    tarball = work / done.stdout.strip().splitlines()[-1]
    with tarfile.open(tarball) as tar:
        extracted = tar.extractfile(f"package/{member}")
        if extracted is None:
            raise SystemExit(f"{package} has no file {member}")
        return extracted.read()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    from asgrad.viz.page import VENDORED

    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for package, member, name in VENDORED:
            data = fetch(package, member, Path(tmp))
            digest = hashlib.sha256(data).hexdigest()
            if digest != SHA256[name]:
                print(f"{name}: {package} gives sha256 {digest}, pinned {SHA256[name]}")
                failed = True
                continue
            target = VENDOR / name
            if args.check:
                same = target.exists() and target.read_bytes() == data
                print(f"{name}: {'matches' if same else 'DIFFERS from'} {package}/{member}")
                failed |= not same
            else:
                target.write_bytes(data)
                print(f"{name}: written from {package}/{member}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
