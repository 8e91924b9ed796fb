"""Publish the documentation site: one folder per version on the gh-pages branch.

Usage: python scripts/docs_publish.py --ref REF [--remote NAME] [--branch NAME] [--push]

The docs workflow (.github/workflows/docs.yml) runs it on every push to main and
on every release tag; `hatch run docs-rehearse` (scripts/docs_rehearsal.py) runs
it offline on a temporary clone. What REF publishes:

    refs/heads/main       the version `dev`; until a release has been published,
                          the site's root redirects to it
    refs/tags/vX.Y.Z      the version `X.Y.Z`; the alias `latest` moves to it
                          (unless a higher release is already published), and the
                          site's root redirects to `latest`
    refs/tags/vX.Y.ZrcN   the version `X.Y.ZrcN` only (a pre-release moves nothing)

Steps: fetch the remote's gh-pages branch when it has one (mike commits on top of
it), read its versions.json, `mike deploy` (a strict build, link check included,
into the folder of the version; `latest` is a folder of redirect pages), `mike
set-default` when the site's root must change, and with --push one `git push` of
the branch, so that a failed step publishes nothing. Commits need a git identity:
user.name/user.email or GIT_COMMITTER_NAME/GIT_COMMITTER_EMAIL.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workspace import VERSION_PATTERN

MAIN_REF = "refs/heads/main"
TAG_PREFIX = "refs/tags/v"
DEV = "dev"
LATEST = "latest"


class PublishError(Exception):
    """A ref that publishes nothing, or a step that failed."""


@dataclass(frozen=True)
class Plan:
    """What one run publishes."""

    version: str
    title: str
    aliases: tuple[str, ...]
    # The version or alias the site's root should redirect to; None leaves it.
    default: str | None


def _final_release_key(version: str) -> tuple[int, ...] | None:
    """Sort key of a final release (X.Y.Z or X.Y.Z.postN); None for anything else."""
    match = VERSION_PATTERN.match(version)
    if match is None or match.group(4) or match.group(9):
        return None
    return (int(match.group(1)), int(match.group(2)), int(match.group(3)), int(match.group(8) or 0))


def plan(ref: str, published: Sequence[dict[str, Any]]) -> Plan:
    """What REF publishes, given the entries of the site's versions.json."""
    has_latest = any(LATEST in entry.get("aliases", ()) for entry in published)
    if ref == MAIN_REF:
        return Plan(DEV, DEV, (), None if has_latest else DEV)
    if not ref.startswith(TAG_PREFIX):
        raise PublishError(f"{ref} publishes nothing: only {MAIN_REF} and tags v* do")
    version = ref.removeprefix(TAG_PREFIX)
    if VERSION_PATTERN.match(version) is None:
        raise PublishError(f"tag v{version}: {version!r} is not a version (X.Y.Z[rcN])")
    key = _final_release_key(version)
    if key is None:
        return Plan(version, version, (), None)
    higher = [
        str(entry["version"])
        for entry in published
        if (other := _final_release_key(str(entry["version"]))) is not None and other > key
    ]
    if higher:
        # A fix of an older line: published, but `latest` stays on the newest release.
        return Plan(version, version, (), None)
    return Plan(version, version, (LATEST,), LATEST)


def git(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=check)


def fetch_pages(remote: str, branch: str) -> bool:
    """Fetch the remote's branch into refs/remotes/REMOTE/BRANCH; False when it has none."""
    listed = git("ls-remote", "--exit-code", "--heads", remote, branch, check=False)
    if listed.returncode == 2:
        return False
    if listed.returncode != 0:
        raise PublishError(f"git ls-remote {remote} failed:\n{listed.stderr}")
    shallow = git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    fetched = git(
        "fetch",
        "--quiet",
        "--no-tags",
        *(["--depth=1"] if shallow else []),
        remote,
        f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}",
        check=False,
    )
    if fetched.returncode != 0:
        raise PublishError(f"git fetch {remote} {branch} failed:\n{fetched.stderr}")
    return True


def published_versions(remote: str, branch: str) -> list[dict[str, Any]]:
    shown = git("show", f"refs/remotes/{remote}/{branch}:versions.json", check=False)
    if shown.returncode != 0:
        return []
    versions = json.loads(shown.stdout)
    if not isinstance(versions, list):
        raise PublishError(f"{remote}/{branch}:versions.json is not a list")
    return versions


def mike(*args: str) -> None:
    executable = shutil.which("mike")
    if executable is None:
        raise PublishError("mike is not installed (it is in the hatch environment)")
    print("+ mike", " ".join(args), flush=True)
    if subprocess.run([executable, *args], check=False).returncode != 0:
        raise PublishError(f"mike {args[0]} failed")


def publish(ref: str, remote: str, branch: str, push: bool) -> Plan:
    plan(ref, [])  # refuse a ref that publishes nothing before any git command
    had_branch = fetch_pages(remote, branch)
    published = published_versions(remote, branch) if had_branch else []
    chosen = plan(ref, published)
    # mike builds on the local branch, first brought up to the fetched one (it refuses
    # a local branch that has diverged from it).
    where = ["--remote", remote, "--branch", branch]
    mike(
        "deploy",
        *where,
        "--update-aliases",
        "--title",
        chosen.title,
        chosen.version,
        *chosen.aliases,
    )
    if chosen.default is not None:
        mike("set-default", *where, chosen.default)
    if push:
        refspec = f"refs/heads/{branch}:refs/heads/{branch}"
        pushed = git("push", "--quiet", remote, refspec, check=False)
        if pushed.returncode != 0:
            raise PublishError(f"git push {remote} {branch} failed:\n{pushed.stderr}")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--ref",
        default=os.environ.get("GITHUB_REF", ""),
        help="refs/heads/main or refs/tags/vX.Y.Z (default: $GITHUB_REF)",
    )
    parser.add_argument("--remote", default="origin")
    parser.add_argument("--branch", default="gh-pages")
    parser.add_argument("--push", action="store_true", help="push the branch to the remote")
    args = parser.parse_args(argv)
    try:
        chosen = publish(args.ref, args.remote, args.branch, args.push)
    except (PublishError, subprocess.CalledProcessError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    aliases = ", ".join(chosen.aliases) or "none"
    default = chosen.default or "unchanged"
    where = f"{args.remote}/{args.branch}" if args.push else f"local {args.branch}"
    print(f"published {chosen.version} (aliases: {aliases}; default: {default}) to {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
