"""Build every distribution's wheel and sdist into dist/, and check them.

Usage: python scripts/build_all.py [--out DIR] [--check-reproducible] [--root PATH] [--jobs N]

For each distribution (several at a time: --jobs, by default the number of cores
plus two, since a build mostly waits on its isolated environment; each one's output
is printed whole, in dependency order):
1. build the sdist and the wheel from the source tree (isolated, PEP 517);
2. check the wheel's contents: every file of the leaf package is there (so
   package data such as `.wgsl` kernels ships), `py.typed` is there, and there
   is no `asgrad/__init__.py` (a PEP 420 namespace); the meta-distribution's
   wheel holds metadata only;
3. rebuild the wheel from the sdist and require the same contents, so the
   sdist is complete.
Then `twine check --strict` over everything. With --check-reproducible, build
everything a second time, after the first (so a clock that leaks into a file
shows), and require byte-identical files.

SOURCE_DATE_EPOCH is taken from the environment, or else from the last commit.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from workspace import ROOT, Distribution, load_distributions


class BuildError(Exception):
    """A build or a check of a built file failed."""


def run(command: list[str], cwd: Path | None = None, log: io.StringIO | None = None) -> None:
    """Run COMMAND; with LOG, its output goes there (and into the error when it fails)."""
    if log is None:
        print("+ " + " ".join(command), flush=True)
        subprocess.run(command, cwd=cwd, check=True)
        return
    log.write("+ " + " ".join(command) + "\n")
    done = subprocess.run(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    log.write(done.stdout)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, command, done.stdout)


def build_command() -> list[str]:
    command = [sys.executable, "-m", "build"]
    if shutil.which("uv"):
        command.append("--installer=uv")  # isolated build envs in seconds
    return command


def source_date_epoch(root: Path) -> str:
    if "SOURCE_DATE_EPOCH" in os.environ:
        return os.environ["SOURCE_DATE_EPOCH"]
    try:
        result = subprocess.run(
            ["git", "log", "-1", "--pretty=%ct"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "315532800"  # 1980-01-01, the earliest time a zip file can hold


def artifact(out: Path, dist: Distribution, suffix: str) -> Path:
    stem = dist.name.replace("-", "_")
    matches = sorted(out.glob(f"{stem}-{dist.version}{suffix}"))
    if len(matches) != 1:
        raise BuildError(f"expected one {stem}-{dist.version}{suffix} in {out}")
    return matches[0]


def wheel_contents(wheel: Path) -> dict[str, str]:
    """File name -> sha256 of every file in a wheel, RECORD excluded."""
    with zipfile.ZipFile(wheel) as archive:
        return {
            name: hashlib.sha256(archive.read(name)).hexdigest()
            for name in archive.namelist()
            if not name.endswith(".dist-info/RECORD")
        }


def check_wheel(dist: Distribution, wheel: Path) -> None:
    names = set(wheel_contents(wheel))
    code = {name for name in names if ".dist-info/" not in name}
    if dist.leaf_directory is None:
        if code:
            raise BuildError(f"{wheel.name} must hold metadata only, found {sorted(code)}")
        return
    if "asgrad/__init__.py" in names:
        raise BuildError(f"{wheel.name} ships asgrad/__init__.py; asgrad is a namespace")
    src = dist.directory / "src"
    expected = {
        path.relative_to(src).as_posix()
        for path in dist.leaf_directory.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }
    missing = expected - code
    if missing:
        raise BuildError(f"{wheel.name} lacks {sorted(missing)}")
    leaf_prefix = dist.leaf_directory.relative_to(src).as_posix() + "/"
    if leaf_prefix + "py.typed" not in code:
        raise BuildError(f"{wheel.name} lacks {leaf_prefix}py.typed")
    strays = {name for name in code if not name.startswith(leaf_prefix)}
    if strays:
        raise BuildError(f"{wheel.name} ships files outside {leaf_prefix}: {sorted(strays)}")


def rebuild_from_sdist(
    dist: Distribution, sdist: Path, wheel: Path, scratch: Path, log: io.StringIO
) -> None:
    unpack = scratch / f"{dist.name}-sdist"
    with tarfile.open(sdist) as archive:
        archive.extractall(unpack, filter="data")
    (tree,) = list(unpack.iterdir())
    rebuilt = scratch / f"{dist.name}-rebuilt"
    run([*build_command(), "--wheel", "--outdir", str(rebuilt), str(tree)], log=log)
    again = artifact(rebuilt, dist, "-*.whl")
    if wheel_contents(again) != wheel_contents(wheel):
        raise BuildError(
            f"{wheel.name}: the wheel built from the sdist differs from the one "
            "built from the tree; the sdist lacks files "
            "(see [tool.hatch.build.targets.sdist])"
        )


def build_one(root: Path, dist: Distribution, out: Path, scratch: Path) -> tuple[str, list[Path]]:
    """Build and check one distribution into OUT: its log, and its sdist and wheel."""
    log = io.StringIO()
    log.write(f"\n=== {dist.name} {dist.version} ({dist.directory.relative_to(root)})\n")
    try:
        run(
            [*build_command(), "--sdist", "--wheel", "--outdir", str(out), str(dist.directory)],
            log=log,
        )
        sdist = artifact(out, dist, ".tar.gz")
        wheel = artifact(out, dist, "-*.whl")
        check_wheel(dist, wheel)
        rebuild_from_sdist(dist, sdist, wheel, scratch, log)
    except (BuildError, subprocess.CalledProcessError) as error:
        error.add_note(log.getvalue())
        raise
    return log.getvalue(), [sdist, wheel]


def build_all(root: Path, out: Path, jobs: int) -> list[Path]:
    """Build every distribution into OUT (emptied first), JOBS at a time.

    Each build's log is printed whole, in dependency order; a failed build's log
    comes with its error.
    """
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    built: list[Path] = []
    with (
        tempfile.TemporaryDirectory(prefix="asgrad-build-") as scratch_name,
        concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool,
    ):
        scratch = Path(scratch_name)
        futures = [
            pool.submit(build_one, root, dist, out, scratch) for dist in load_distributions(root)
        ]
        try:
            for future in futures:
                log, files = future.result()
                print(log, end="", flush=True)
                built += files
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return built


def show_error(error: BuildError | subprocess.CalledProcessError) -> None:
    for note in getattr(error, "__notes__", ()):
        print(note, end="")
    print(f"error: {error}", file=sys.stderr)


def digests(directory: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.iterdir())
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    parser.add_argument("--out", type=Path, default=None, help="default: ROOT/dist")
    parser.add_argument(
        "--check-reproducible",
        action="store_true",
        help="build twice and require byte-identical files",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=(os.cpu_count() or 1) + 2,
        help="builds at a time (default: the number of cores plus two)",
    )
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    out: Path = (args.out or root / "dist").resolve()
    os.environ["SOURCE_DATE_EPOCH"] = source_date_epoch(root)
    print(f"SOURCE_DATE_EPOCH={os.environ['SOURCE_DATE_EPOCH']}")

    try:
        built = build_all(root, out, args.jobs)
        run([sys.executable, "-m", "twine", "check", "--strict", *map(str, built)])
        if args.check_reproducible:
            with tempfile.TemporaryDirectory(prefix="asgrad-rebuild-") as second_name:
                second = Path(second_name) / "dist"
                build_all(root, second, args.jobs)
                first_digests, second_digests = digests(out), digests(second)
                differing = sorted(
                    name
                    for name in first_digests.keys() | second_digests.keys()
                    if first_digests.get(name) != second_digests.get(name)
                )
                if differing:
                    raise BuildError(f"not reproducible: {', '.join(differing)} differ")
                print(f"\nreproducible: {len(first_digests)} files byte-identical")
    except (BuildError, subprocess.CalledProcessError) as error:
        show_error(error)
        return 1
    print(f"\nbuilt {len(built)} files into {out}:")
    for path in built:
        print(f"  {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
