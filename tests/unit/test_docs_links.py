"""Every link of README.md and of the pages of docs/ leads somewhere, and every page of docs/ can be found from
docs/README.md.

The README is a front door and the detail lives in docs/, one page per subject: a page renamed or split, or a
heading reworded, leaves links that lead nowhere on GitHub and pages no reader reaches, and nothing else would
notice. So each relative link must name a file that exists and, where it names a heading (`page.md#heading`), a
heading that page has (GitHub's anchor for it); each `docs/<page>.md` the prose names must exist; and the index
must link every page. Links are read with markdown-it (the library rich already brings), so a link inside a code
block is no link, as on GitHub.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from support import ROOT

pytestmark = pytest.mark.unit

INDEX = "docs/README.md"
# A page named in prose, from the repository's root: "docs/calibration.md (Borrowed bounds)".
NAMED_PAGE = re.compile(r"(?<![\w/.-])docs/[\w./-]*\w\.md\b")
LINK_TARGET = re.compile(r"\]\([^)]*\)")  # checked as a link, not again as a name


@dataclass(frozen=True)
class Link:
    line: int  # 1-based line of the block the link is in
    target: str


@dataclass(frozen=True)
class Page:
    links: tuple[Link, ...]
    anchors: frozenset[str]


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: lower case, punctuation dropped but for `-` and `_`, each space a
    `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _text(inline: Token) -> str:
    """A heading's text as rendered: code spans without their backticks, emphasis without its marks."""
    return "".join(c.content if c.type in ("text", "code_inline") else " " if c.type == "softbreak" else ""
                   for c in inline.children or [])


def read_page(text: str) -> Page:
    """The links (and images) of a Markdown page with their lines, and the anchors its headings give (a repeated
    heading's second anchor ends `-1`, as on GitHub)."""
    tokens = _parser().parse(text)
    links: list[Link] = []
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if token.type != "inline":
            continue
        line = token.map[0] + 1 if token.map else 0
        for child in token.children or []:
            target = child.attrGet("href") if child.type == "link_open" else (
                child.attrGet("src") if child.type == "image" else None)
            if target is not None:
                links.append(Link(line, str(target)))
        if i and tokens[i - 1].type == "heading_open":
            base = slug(_text(token))
            count = seen.get(base, 0)
            seen[base] = count + 1
            anchors.add(base if count == 0 else f"{base}-{count}")
    return Page(tuple(links), frozenset(anchors))


def pages(root: Path) -> list[str]:
    """README.md and every page of docs/, relative to ``root``."""
    return ["README.md", *sorted(str(p.relative_to(root)) for p in (root / "docs").glob("*.md"))]


def link_problems(root: Path) -> list[str]:
    """Each relative link of README.md and docs/*.md that leads to no file, or to no heading of its page, and each
    docs page named in prose that does not exist: one line each, `page:line: ...`."""
    problems = []
    for name in pages(root):
        page = root / name
        text = page.read_text()
        for link in read_page(text).links:
            if urlparse(link.target).scheme:
                continue
            path, _, anchor = link.target.partition("#")
            dest = (page.parent / unquote(path)).resolve() if path else page
            where = f"{name}:{link.line}: ({link.target})"
            if not dest.exists():
                problems.append(f"{where} leads to no file")
            elif anchor and dest.suffix == ".md" and anchor not in read_page(dest.read_text()).anchors:
                problems.append(f"{where}: {dest.relative_to(root.resolve())} has no heading with that anchor")
        for number, line in enumerate(text.splitlines(), 1):
            problems.extend(f"{name}:{number}: {found} does not exist"
                            for found in NAMED_PAGE.findall(LINK_TARGET.sub("]", line)) if not (root / found).is_file())
    return problems


def index_problems(root: Path) -> list[str]:
    """Each page of docs/ that docs/README.md does not link to."""
    index = root / INDEX
    if not index.is_file():
        return [f"{INDEX} does not exist"]
    listed = {(index.parent / unquote(link.target.partition("#")[0])).resolve()
              for link in read_page(index.read_text()).links if not urlparse(link.target).scheme}
    return [f"{INDEX} does not link {name}" for name in pages(root)[1:]
            if name != INDEX and (root / name).resolve() not in listed]


def test_every_link_of_the_readme_and_the_docs_leads_somewhere():
    assert len(pages(ROOT)) > 20
    assert link_problems(ROOT) == []


def test_the_index_links_every_page_of_the_docs():
    assert index_problems(ROOT) == []


def test_the_readme_points_to_the_index_and_the_architecture():
    targets = {link.target for link in read_page((ROOT / "README.md").read_text()).links}
    assert {"docs/README.md", "docs/architecture.md"} <= targets


def test_anchors_are_github_s():
    page = read_page("# parity-kit\n\n## Localize: the first layer that leaves the noise\n\n"
                     "## What each case can detect: `parity-kit power`\n\n## Notes\n\n## Notes\n\n"
                     "## A *stale* golden: `golden regen`\n")
    assert page.anchors == {"parity-kit", "localize-the-first-layer-that-leaves-the-noise",
                            "what-each-case-can-detect-parity-kit-power", "notes", "notes-1",
                            "a-stale-golden-golden-regen"}


def test_a_broken_link_a_lost_heading_and_an_unlisted_page_are_found(tmp_path):
    docs = tmp_path / "docs"
    (docs / "images").mkdir(parents=True)
    (docs / "images" / "shot.png").write_bytes(b"")
    (docs / "gate.md").write_text("# The gate\n\n## The summary\n\nSee [the index](README.md) and "
                                  "[calibration](calibration.md#borrowed-bounds).\n")
    (docs / "calibration.md").write_text("# Calibration\n\n## Borrowed bounds\n")
    (docs / "triage.md").write_text("# Triage\n")
    (docs / "README.md").write_text("# The docs\n\n- [gate.md](gate.md)\n- [calibration.md](calibration.md)\n")
    (tmp_path / "README.md").write_text(
        "# kit\n\n![a shot](docs/images/shot.png) ![gone](docs/images/gone.png)\n\n"
        "[the summary](docs/gate.md#the-summary), [its table](docs/gate.md#the-table), "
        "[control](docs/control.md), [a site](https://example.org/x.md), [here](#kit)\n\n"
        "```\n[in a code block](nowhere.md)\n```\n\n"
        "The bounds: docs/calibration.md; the history: docs/history.md.\n")
    assert link_problems(tmp_path) == [
        "README.md:3: (docs/images/gone.png) leads to no file",
        "README.md:5: (docs/gate.md#the-table): docs/gate.md has no heading with that anchor",
        "README.md:5: (docs/control.md) leads to no file",
        "README.md:11: docs/history.md does not exist",
    ]
    assert index_problems(tmp_path) == ["docs/README.md does not link docs/triage.md"]


def test_a_heading_reworded_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("# The docs\n\n- [gate.md](gate.md)\n")
    (tmp_path / "docs" / "gate.md").write_text("# The gate\n\n## The summary page\n")
    (tmp_path / "README.md").write_text("# kit\n\n[the summary](docs/gate.md#the-summary)\n")
    assert link_problems(tmp_path) == [
        "README.md:3: (docs/gate.md#the-summary): docs/gate.md has no heading with that anchor"]
    (tmp_path / "docs" / "gate.md").write_text("# The gate\n\n## The summary\n")
    assert link_problems(tmp_path) == [] and index_problems(tmp_path) == []
