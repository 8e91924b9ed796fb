"""Read and roll CHANGELOG.md (Keep a Changelog format).

Sections start with `## [VERSION]` (optionally ` - YYYY-MM-DD`) or
`## [Unreleased]`; link definitions such as `[0.1.0]: https://...` at the end
of the file belong to no section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SECTION_HEADING = re.compile(r"^## \[(?P<name>[^\]]+)\](?P<suffix>.*)$", re.MULTILINE)
LINK_DEFINITION = re.compile(r"^\[[^\]]+\]:\s+\S+", re.MULTILINE)
UNRELEASED = "Unreleased"


@dataclass(frozen=True)
class Section:
    name: str
    heading_start: int
    body_start: int
    end: int


def sections(text: str) -> list[Section]:
    headings = list(SECTION_HEADING.finditer(text))
    links = LINK_DEFINITION.search(text, headings[-1].end()) if headings else None
    tail = links.start() if links else len(text)
    found: list[Section] = []
    for index, heading in enumerate(headings):
        end = headings[index + 1].start() if index + 1 < len(headings) else tail
        found.append(Section(heading["name"], heading.start(), heading.end() + 1, end))
    return found


def section_body(text: str, name: str) -> str | None:
    """The text under `## [name]`, stripped; None when there is no such section."""
    for section in sections(text):
        if section.name == name:
            return text[section.body_start : section.end].strip()
    return None


def has_entries(body: str) -> bool:
    """True when a section body lists at least one change (a `- ` bullet)."""
    return any(line.lstrip().startswith(("- ", "* ")) for line in body.splitlines())


def roll_unreleased(text: str, version: str, date: str) -> str:
    """Turn `## [Unreleased]` into `## [version] - date` under a fresh, empty one."""
    for section in sections(text):
        if section.name == UNRELEASED:
            heading = f"## [{UNRELEASED}]\n\n## [{version}] - {date}\n"
            return text[: section.heading_start] + heading + text[section.body_start :]
    raise ValueError("CHANGELOG.md has no `## [Unreleased]` section")
