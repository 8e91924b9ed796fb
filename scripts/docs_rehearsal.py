"""Rehearse the versioned publish of the docs site, offline (`hatch run docs-rehearse`).

Usage: python scripts/docs_rehearsal.py [--keep] [--link-check]

What the docs workflow (.github/workflows/docs.yml) does on GitHub, on a copy:

1. A bare repository in a temporary folder stands in for GitHub: HEAD is pushed
   to it as `main`, and the tag vX.Y.Z (the workspace's version) points at it.
2. In a clone of it, scripts/docs_publish.py publishes the release (the tag checked
   out, `--ref refs/tags/vX.Y.Z --push`), then main (`--ref refs/heads/main
   --push`), each with mike into the bare repository's gh-pages branch, as the
   workflow does after a release and then a push to main.
3. Then, from a checkout of that gh-pages branch: versions.json lists the release
   with the alias `latest` and `dev` with none; the site's root redirects, through
   `latest`, to the release; every page of the release has a redirect page under
   `latest/` that leads to it; each version's index.html is a page of the site (not
   a redirect) with the version selector configured; nothing else is at the root.

Only HEAD is published (commit first). The link check is left to `hatch run docs`,
which checks the same tree; --link-check runs it in both builds too.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import time
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

from workspace import ROOT, load_distributions

DEV = "dev"
LATEST = "latest"
MAX_REDIRECTS = 5

# Material for MkDocs writes its configuration into every page as JSON.
MATERIAL_CONFIG = re.compile(
    r'<script id="__config" type="application/json">(.*?)</script>', re.DOTALL
)


class _RefreshParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.target: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag != "meta" or (values.get("http-equiv") or "").lower() != "refresh":
            return
        _, _, url = (values.get("content") or "").partition(";")
        url = url.strip()
        if url.lower().startswith("url="):
            self.target = unescape(url[4:].strip())


def redirect_target(html: str) -> str | None:
    """The URL a redirect page (mike's: a meta refresh) sends to; None for a page."""
    parser = _RefreshParser()
    parser.feed(html)
    parser.close()
    return parser.target


def follow(pages: Path, path: str) -> str:
    """The page that PATH (a file of the site, relative to its root) ends up showing."""
    seen = [path]
    for _ in range(MAX_REDIRECTS + 1):
        file = pages / path
        if not file.is_file():
            raise ValueError(f"{' -> '.join(seen)}: no such file")
        target = redirect_target(file.read_text(encoding="utf-8"))
        if target is None:
            return path
        if "://" in target or target.startswith("/"):
            raise ValueError(f"{' -> '.join(seen)}: redirects off the site, to {target}")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if target.endswith("/") or resolved == ".":
            resolved = posixpath.join(resolved, "index.html")
        resolved = posixpath.normpath(resolved)
        if resolved.startswith("../"):
            raise ValueError(f"{' -> '.join(seen)}: redirects above the site, to {target}")
        path = resolved
        seen.append(path)
    raise ValueError(f"{' -> '.join(seen)}: more than {MAX_REDIRECTS} redirects")


def version_provider(html: str) -> str | None:
    """The version selector's provider configured in a Material page, if any."""
    match = MATERIAL_CONFIG.search(html)
    if match is None:
        return None
    config = json.loads(match.group(1))
    version = config.get("version") or {}
    provider = version.get("provider")
    return provider if isinstance(provider, str) else None


def check_published(pages: Path, release: str) -> list[str]:
    """What is wrong with the gh-pages tree PAGES after publishing RELEASE, then dev."""
    try:
        versions = json.loads((pages / "versions.json").read_text(encoding="utf-8"))
        aliases = {str(entry["version"]): sorted(entry["aliases"]) for entry in versions}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"versions.json: cannot read the versions and their aliases: {exc!r}"]
    problems: list[str] = []
    expected = {release: [LATEST], DEV: []}
    if aliases != expected or len(versions) != len(expected):
        problems.append(f"versions.json: {aliases}, expected {expected}")

    names = {path.name for path in pages.iterdir()} - {".git"}
    wanted = {".nojekyll", "index.html", "versions.json", release, DEV, LATEST}
    if names != wanted:
        problems.append(f"the root holds {sorted(names)}, expected {sorted(wanted)}")

    for version in (release, DEV):
        index = pages / version / "index.html"
        if not index.is_file():
            problems.append(f"{version}/index.html is missing")
            continue
        html = index.read_text(encoding="utf-8")
        if redirect_target(html) is not None:
            problems.append(f"{version}/index.html is a redirect, not the site")
        elif version_provider(html) != "mike":
            problems.append(f"{version}/index.html: the version selector (mike) is not enabled")

    try:
        shown = follow(pages, "index.html")
        if shown != f"{release}/index.html":
            problems.append(f"the root shows {shown}, expected {release}/index.html")
        if follow(pages, f"{LATEST}/index.html") != f"{release}/index.html":
            problems.append(f"{LATEST}/ does not lead to {release}/")
    except ValueError as exc:
        problems.append(str(exc))

    release_dir = pages / release
    release_pages = sorted(release_dir.rglob("*.html")) if release_dir.is_dir() else []
    for page in release_pages:
        relative = page.relative_to(release_dir).as_posix()
        try:
            shown = follow(pages, f"{LATEST}/{relative}")
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if shown != f"{release}/{relative}":
            problems.append(f"{LATEST}/{relative} shows {shown}, expected {release}/{relative}")
    return problems


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, cwd=cwd, env=env, check=True)


def publish_environment(link_check: bool) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")
    }
    identity = {"NAME": "asgrad docs rehearsal", "EMAIL": "docs-rehearsal@example.invalid"}
    for role in ("AUTHOR", "COMMITTER"):
        for field, value in identity.items():
            env[f"GIT_{role}_{field}"] = value
    env["ASGRAD_DOCS_LINK_CHECK"] = "true" if link_check else "false"
    return env


def rehearse(temporary: Path, link_check: bool) -> list[str]:
    release = load_distributions()[0].version
    tag = f"v{release}"
    origin, work, pages = temporary / "origin.git", temporary / "work", temporary / "pages"
    env = publish_environment(link_check)

    run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(origin)], temporary)
    # A shallow clone (CI's checkout) can only push to a repository that accepts that.
    run(["git", "--git-dir", str(origin), "config", "receive.shallowUpdate", "true"], temporary)
    run(["git", "push", "--quiet", str(origin), "HEAD:refs/heads/main"], ROOT, env)
    run(["git", "--git-dir", str(origin), "update-ref", f"refs/tags/{tag}", "main"], temporary)
    run(["git", "clone", "--quiet", str(origin), str(work)], temporary, env)
    for ref, checkout in ((f"refs/tags/{tag}", tag), ("refs/heads/main", "main")):
        began = time.monotonic()
        run(["git", "checkout", "--quiet", checkout], work, env)
        publish = [sys.executable, "scripts/docs_publish.py", "--ref", ref, "--push"]
        run(publish, work, env)
        print(f"published {ref} in {time.monotonic() - began:.0f}s", flush=True)
    run(["git", "clone", "--quiet", "--branch", "gh-pages", str(origin), str(pages)], temporary)
    return check_published(pages, release)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument(
        "--link-check", action="store_true", help="run the link check in both builds too"
    )
    args = parser.parse_args(argv)
    temporary = Path(tempfile.mkdtemp(prefix="asgrad-docs-rehearsal-"))
    try:
        problems = rehearse(temporary, args.link_check)
    except subprocess.CalledProcessError as exc:
        problems = [f"{' '.join(map(str, exc.cmd))} exited with {exc.returncode}"]
    finally:
        if args.keep:
            print(f"kept {temporary}")
        else:
            shutil.rmtree(temporary, ignore_errors=True)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        return 1
    print("versioned publish rehearsal ok: versions.json, latest, root redirect, both versions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
