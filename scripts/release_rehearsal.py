"""Rehearse a release: upload to a local index, install each distribution alone.

Usage: python scripts/release_rehearsal.py [--dist DIR] [--root PATH] [--keep] [--jobs N]

1. Start pypiserver on 127.0.0.1 (a free port, an empty temporary folder) and
   upload every file of dist/ (see scripts/build_all.py) with twine.
2. Download the third-party dependencies that the wheels declare (numpy, wgpu,
   ...) from PyPI into a local wheelhouse, which holds no asgrad file.
3. For each distribution, in a fresh virtual environment, install it on its own
   from the local index with uv (`uv pip install`: `--index-url` = the local
   server, `--find-links` = the wheelhouse, no other index, no uv configuration,
   a cache of its own), so an asgrad distribution can only come from the files
   just uploaded, never from PyPI. Then, from a folder outside the repository,
   check which distributions got installed, run `uv pip check`, import the
   packages and evaluate a small graph. The environments are made several at a
   time (--jobs, by default the number of cores plus two); each one's output is
   printed whole, in order.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from workspace import ROOT, is_internal, load_distributions

GRAPH_SMOKE = """
import numpy as np
from asgrad.tensor import Graph, evaluate
g = Graph()
x = g.input("x", (2, 2))
result = evaluate([(x * 2).sum()], {"x": np.ones((2, 2), np.float32)})
print("graph:", result)
assert float(np.asarray(result[0])) == 8.0, result
"""

GPU_SMOKE = """
import importlib.resources
import wgpu
kernels = importlib.resources.files("asgrad.gpu").joinpath("kernels")
if kernels.is_dir():
    names = [p.name for p in kernels.iterdir() if p.name.endswith(".wgsl")]
    assert names, "asgrad/gpu/kernels holds no .wgsl file"
    print("wgsl kernels:", len(names))
print("wgpu", wgpu.__version__)
"""

EXAMPLES_SMOKE = """
import importlib.resources
data = importlib.resources.files("asgrad.examples").joinpath("data")
if data.is_dir():
    print("example data files:", sorted(p.name for p in data.iterdir()))
"""

ONNX_SMOKE = """
import os, tempfile
import numpy as np
import onnxruntime
from asgrad.onnx import export, load
g2 = Graph()
x2 = g2.input("x", (1, 3))
path = os.path.join(tempfile.mkdtemp(), "smoke.onnx")
export({"y": (x2 * 2.0).relu()}, path)
session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
(served,) = session.run(None, {"x": np.array([[1, -1, 2], [0, 3, -4]], np.float32)})
assert served.tolist() == [[2.0, 0.0, 4.0], [0.0, 6.0, 0.0]], served
print("onnx round trip:", load(path))
"""

VIZ_SMOKE = """
import importlib.resources
from asgrad.tensor import Graph
vendor = importlib.resources.files("asgrad.viz").joinpath("vendor")
assert vendor.joinpath("elk.bundled.js").is_file() and vendor.joinpath("elkjs-LICENSE.md").is_file()
g = Graph()
(g.input("x", (2,)) * 2.0).sum()
html = g._repr_html_()  # found through the asgrad.viewers entry point, without an import
assert html.startswith("<iframe srcdoc="), html[:80]
print("viewer page:", len(html), "characters")
"""


@dataclass(frozen=True)
class Scenario:
    """One fresh environment: what to install, and what must (not) be there."""

    requirement: str
    installed: tuple[str, ...]
    absent: tuple[str, ...]
    imports: tuple[str, ...]
    extra_code: str = ""


def scenarios(version: str) -> list[Scenario]:
    every = (
        "asgrad-tensor",
        "asgrad-autograd",
        "asgrad-nn",
        "asgrad-gpu",
        "asgrad-onnx",
        "asgrad-viz",
        "asgrad-examples",
    )
    return [
        Scenario(
            f"asgrad-tensor=={version}",
            installed=("asgrad-tensor",),
            absent=("asgrad-autograd", "asgrad-nn", "asgrad-gpu", "asgrad-examples"),
            imports=("asgrad.tensor",),
        ),
        Scenario(
            f"asgrad-autograd=={version}",
            installed=("asgrad-tensor", "asgrad-autograd"),
            absent=("asgrad-nn", "asgrad-gpu", "asgrad-examples"),
            imports=("asgrad.tensor", "asgrad.autograd"),
        ),
        Scenario(
            f"asgrad-nn=={version}",
            installed=("asgrad-tensor", "asgrad-autograd", "asgrad-nn"),
            absent=("asgrad-gpu", "asgrad-examples"),
            imports=("asgrad.tensor", "asgrad.autograd", "asgrad.nn"),
        ),
        Scenario(
            f"asgrad-gpu=={version}",
            installed=("asgrad-tensor", "asgrad-gpu"),
            absent=("asgrad-autograd", "asgrad-nn", "asgrad-examples"),
            imports=("asgrad.tensor", "asgrad.gpu"),
            extra_code=GPU_SMOKE,
        ),
        Scenario(
            f"asgrad-onnx=={version}",
            installed=("asgrad-tensor", "asgrad-onnx"),
            absent=("asgrad-autograd", "asgrad-nn", "asgrad-gpu", "asgrad-examples"),
            imports=("asgrad.tensor", "asgrad.onnx"),
            extra_code=ONNX_SMOKE,
        ),
        Scenario(
            f"asgrad-viz=={version}",
            installed=("asgrad-tensor", "asgrad-viz"),
            absent=("asgrad-autograd", "asgrad-nn", "asgrad-gpu", "asgrad-examples"),
            imports=("asgrad.tensor",),
            extra_code=VIZ_SMOKE,
        ),
        Scenario(
            f"asgrad-examples=={version}",
            installed=(
                "asgrad-tensor",
                "asgrad-autograd",
                "asgrad-nn",
                "asgrad-examples",
            ),
            absent=("asgrad-gpu", "asgrad-onnx", "asgrad-viz"),
            imports=(
                "asgrad.tensor",
                "asgrad.autograd",
                "asgrad.nn",
                "asgrad.examples",
            ),
            extra_code=EXAMPLES_SMOKE,
        ),
        Scenario(
            f"asgrad[gpu,onnx,viz]=={version}",
            installed=("asgrad", *every),
            absent=(),
            imports=tuple("asgrad." + name.removeprefix("asgrad-") for name in every),
            extra_code=GPU_SMOKE + EXAMPLES_SMOKE + VIZ_SMOKE + ONNX_SMOKE,
        ),
    ]


def smoke_code(scenario: Scenario, version: str) -> str:
    lines = [
        "import importlib.metadata as md",
        "import importlib.util",
        f"for name in {scenario.installed!r}:",
        f"    assert md.version(name) == {version!r}, (name, md.version(name))",
        f"for name in {scenario.absent!r}:",
        "    try:",
        "        md.version(name)",
        "    except md.PackageNotFoundError:",
        "        continue",
        "    raise AssertionError(name + ' was installed but nothing asked for it')",
        *(f"import {module}" for module in scenario.imports),
        *(
            f"assert 'site-packages' in str(list({module}.__path__)), {module}.__path__"
            for module in scenario.imports
        ),
        "print('imports ok:', " + repr(", ".join(scenario.imports)) + ")",
    ]
    return "\n".join(lines) + "\n" + GRAPH_SMOKE + scenario.extra_code


def run(
    command: list[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    log: io.StringIO | None = None,
) -> None:
    """Run COMMAND; with LOG, its output goes there (and into the error when it fails)."""
    shown = [*command[:2], "<smoke test>"] if command[1:2] == ["-c"] else command
    if log is None:
        print("+ " + " ".join(shown), flush=True)
        subprocess.run(command, check=True, cwd=cwd, env=env)
        return
    log.write("+ " + " ".join(shown) + "\n")
    done = subprocess.run(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    log.write(done.stdout)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, shown, done.stdout)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def local_index(packages: Path) -> Iterator[str]:
    """Run pypiserver on loopback, accepting uploads without authentication."""
    port = free_port()
    command = [
        sys.executable, "-m", "pypiserver", "run",
        "--host", "127.0.0.1", "--port", str(port),
        "--authenticate", ".", "--passwords", ".",
        "--disable-fallback",
        str(packages),
    ]  # fmt: skip
    print("+ " + " ".join(command), flush=True)
    server = subprocess.Popen(command)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/simple/", timeout=5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("pypiserver did not start") from None
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def third_party_requirements(dist_dir: Path) -> list[str]:
    """Every requirement of every wheel (extras included) that is not asgrad's."""
    requirements: set[str] = set()
    for wheel in sorted(dist_dir.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            (metadata_name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
            metadata = Parser().parsestr(archive.read(metadata_name).decode())
        for requirement in metadata.get_all("Requires-Dist") or []:
            requirement_only = requirement.split(";")[0].strip()
            name = requirement_only.split("[")[0]
            for separator in "=<>!~ ":
                name = name.split(separator)[0]
            if not is_internal(name.lower()):
                requirements.add(requirement_only)
    return sorted(requirements)


def isolated_environment() -> dict[str, str]:
    """The environment without any pip or uv setting that could add an index."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PIP_", "UV_")) and key != "VIRTUAL_ENV"
    }


def find_uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError("uv is needed: the hatch environment has it (pip install uv)")
    return uv


def install_and_check(scenario: Scenario, number: int, work: Path, url: str, version: str) -> str:
    """Install SCENARIO into a fresh environment and check it; the log of it all."""
    log = io.StringIO()
    log.write(f"\n=== install {scenario.requirement} on its own\n")
    uv, env = find_uv(), isolated_environment()
    venv = work / f"venv-{number}"
    python = str(venv / "bin" / "python")
    try:
        run([uv, "venv", "--no-config", "--python", sys.executable, str(venv)], env=env, log=log)
        run([uv, "pip", "install", "--no-config", "--python", python,
             "--cache-dir", str(work / "uv-cache"),
             "--index-url", f"{url}/simple/", "--find-links", str(work / "wheelhouse"),
             scenario.requirement], env=env, log=log)  # fmt: skip
        run([uv, "pip", "check", "--no-config", "--python", python], env=env, log=log)
        outside = work / f"cwd-{number}"
        outside.mkdir()
        run([python, "-c", smoke_code(scenario, version)], cwd=outside, log=log)
    except subprocess.CalledProcessError as error:
        error.add_note(log.getvalue())
        raise
    return log.getvalue()


def rehearse(dist_dir: Path, work: Path, version: str, jobs: int) -> None:
    files = sorted(p for p in dist_dir.iterdir() if p.suffix in {".whl", ".gz"})
    if not files:
        raise RuntimeError(f"{dist_dir} is empty: run scripts/build_all.py first")

    wheelhouse = work / "wheelhouse"
    print("\n=== third-party dependencies into a local wheelhouse", flush=True)
    requirements = third_party_requirements(dist_dir)
    run([sys.executable, "-m", "pip", "download", "--only-binary=:all:",
         "--dest", str(wheelhouse), *requirements])  # fmt: skip
    leaked = [p.name for p in wheelhouse.iterdir() if p.name.lower().startswith("asgrad")]
    if leaked:
        raise RuntimeError(f"the wheelhouse must hold no asgrad file, found {leaked}")

    packages = work / "index"
    packages.mkdir()
    with local_index(packages) as url:
        print(f"\n=== upload {len(files)} files to {url}", flush=True)
        run([sys.executable, "-m", "twine", "upload", "--non-interactive",
             "--repository-url", f"{url}/", "--username", "rehearsal",
             "--password", "rehearsal", *map(str, files)])  # fmt: skip

        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [
                pool.submit(install_and_check, scenario, number, work, url, version)
                for number, scenario in enumerate(scenarios(version))
            ]
            try:
                for future in futures:
                    print(future.result(), end="", flush=True)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    parser.add_argument("--dist", type=Path, default=None, help="default: ROOT/dist")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument(
        "--jobs",
        type=int,
        default=(os.cpu_count() or 1) + 2,
        help="environments made at a time (default: the number of cores plus two)",
    )
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    dist_dir: Path = (args.dist or root / "dist").resolve()
    version = load_distributions(root)[0].version

    work = Path(tempfile.mkdtemp(prefix="asgrad-rehearsal-"))
    try:
        rehearse(dist_dir, work, version, args.jobs)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        for note in getattr(error, "__notes__", ()):
            print(note, end="")
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    count = len(scenarios(version))
    print(f"\nrelease rehearsal passed: {count} fresh installs of {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
