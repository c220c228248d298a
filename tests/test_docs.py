"""The README stays short, and every relative link of the README and of docs/ leads somewhere:
the file exists and, for a link into a Markdown page, so does the heading its anchor names."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token

from icecdc.config import parse_config

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
README_MAX_LINES = 250


def tokens(page: Path) -> list[Token]:
    """The page's block tokens, each inline token's children included."""
    flat: list[Token] = []
    for token in MarkdownIt("commonmark").enable("table").parse(page.read_text()):
        flat.append(token)
        flat.extend(token.children or [])
    return flat


def relative_links(page: Path) -> list[str]:
    """Every link and image target of the page but URLs (code spans and blocks hold none)."""
    found = []
    for token in tokens(page):
        target = token.attrs.get("href") or token.attrs.get("src")
        if isinstance(target, str) and not urlsplit(target).scheme:
            found.append(target)
    return found


def slug(heading: str, seen: Counter[str]) -> str:
    """GitHub's heading anchor: lower case, no punctuation, hyphens for spaces, -n on repeats."""
    base = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
    seen[base] += 1
    return base if seen[base] == 1 else f"{base}-{seen[base] - 1}"


def anchors(page: Path) -> set[str]:
    """The anchors of the page's headings (a heading's text is the token after its opening)."""
    seen: Counter[str] = Counter()
    flat = tokens(page)
    return {slug(flat[i + 1].content, seen) for i, t in enumerate(flat) if t.type == "heading_open"}


def test_the_readme_is_read_in_ten_minutes() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md: {len(lines)} lines; move detail to docs/"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in relative_links(page):
        parts = urlsplit(link)
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif parts.fragment and target.suffix == ".md" and parts.fragment not in anchors(target):
            broken.append(f"{link}: no heading #{parts.fragment} in {target.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_page_of_docs_is_reached_from_the_readme() -> None:
    reached, todo = {README}, [README]
    while todo:
        page = todo.pop()
        for link in relative_links(page):
            path = urlsplit(link).path
            target = (page.parent / unquote(path)).resolve()
            if path and target.suffix == ".md" and target.exists() and target not in reached:
                reached.add(target)
                todo.append(target)
    orphans = [str(p.relative_to(ROOT)) for p in PAGES if p.resolve() not in reached]
    assert not orphans, f"no link leads to {orphans}"


def test_the_configuration_reference_parses() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    examples = [block.split("```", 1)[0] for block in page.split("```yaml\n")[1:]]
    assert examples, "docs/configuration.md has no yaml example"
    for example in examples:
        assert parse_config(yaml.safe_load(example)).tables


# The steps of a first hour on one's own table, as both pages give them.
FIRST_HOUR = ("pip install", "icecdc dev-server", "icecdc init", "icecdc check", "icecdc sync", "icecdc status", "icecdc verify")


def shell_commands(page: Path) -> list[str]:
    """The commands of the page's sh blocks, a line each (comments and continuations left off)."""
    blocks = [t.content for t in tokens(page) if t.type == "fence" and t.info.strip() == "sh"]
    lines = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [part.strip() for line in lines for part in line.split("&&") if part.strip()]


@pytest.mark.parametrize("page", [README, ROOT / "docs" / "getting-started.md"], ids=["README.md", "getting-started.md"])
def test_the_first_hour_installs_from_the_clone_and_takes_the_same_steps(page: Path) -> None:
    """Reproduced: `pip install 'icecdc[local]'` finds no distribution (icecdc is not published),
    and the README and getting-started gave the steps in different orders."""
    commands = shell_commands(page)
    installs = [c for c in commands if c.startswith("pip install")]
    assert installs == ["pip install -e '.[local]' -c infra/locks/tested.txt"], installs
    assert (ROOT / "infra" / "locks" / "tested.txt").exists()
    assert "local" in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    steps = [next(s for s in FIRST_HOUR if c.startswith(s)) for c in commands if c.startswith(FIRST_HOUR)]
    assert list(dict.fromkeys(steps)) == list(FIRST_HOUR), steps
