"""examples_blocks.py - the code blocks of the documents, for examples.py: the
documents found in the tree, each Markdown file's fenced blocks by their tag, the man
pages' .EX/.nf blocks, and the command lines of a shell block. Which blocks are
examples (the rule): examples.py's docstring."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from examples_rules import PLACEHOLDERS

DOCS_ROFF = ["docs/chipctl.1", "docs/chipd.8"]
EXEC_TAGS = {"sh", "console", "python", "json", "msgpack"}
NOT_EXAMPLE_TAGS = {"text"}
ROFF_NOT_EXAMPLE = re.compile(r'^\.\\"\s*not an example:\s*\S')


class Failure(Exception):
    """What makes a block fail, with the document's file:line in its message."""


@dataclass
class Block:
    path: str  # relative to the root
    line: int  # of the opening fence or .EX/.nf
    tag: str  # sh, console, python, json, msgpack, text, roff
    body: list[str]
    section: str = ""

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def markdown_blocks(root: Path, rel: str, errors: list[str]) -> list[Block]:
    blocks: list[Block] = []
    lines = (root / rel).read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^\s*(```+|~~~+)(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        tag = info.split()[0] if info else ""
        start = i
        i += 1
        body = []
        while i < len(lines) and not re.match(r"^\s*" + re.escape(fence[0]) + "{%d,}\\s*$"
                                              % len(fence), lines[i]):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            errors.append(f"{rel}:{start + 1}: fenced block not closed")
        i += 1
        if tag not in EXEC_TAGS | NOT_EXAMPLE_TAGS:
            errors.append(f"{rel}:{start + 1}: a fenced block tagged '{tag or '(none)'}': tag "
                          f"an example {', '.join(sorted(EXEC_TAGS))}, anything else 'text' "
                          f"(tests/docs/examples.py)")
            continue
        blocks.append(Block(rel, start + 1, tag, body))
    return blocks


# roff escapes an example may hold, and what they stand for.
ROFF_ESCAPES = {"\\-": "-", "\\fB": "", "\\fR": "", "\\fP": "", "\\&": "", "\\:": "",
                "\\e": "\\", "\\ ": " ", "\\(aq": "'", "\\(dq": '"', "\\(ti": "~"}


def roff_unescape(line: str, where: str) -> str:
    def placeholder(m: re.Match) -> str:
        if m.group(1) not in PLACEHOLDERS:
            raise Failure(f"{where}: placeholder {m.group(1)} has no value in PLACEHOLDERS "
                          f"(tests/docs/examples_rules.py)")
        return PLACEHOLDERS[m.group(1)]

    def escape(m: re.Match) -> str:
        if m.group(0) not in ROFF_ESCAPES:
            raise Failure(f"{where}: roff escape {m.group(0)} in an example: add it to "
                          f"ROFF_ESCAPES (tests/docs/examples_blocks.py)")
        return ROFF_ESCAPES[m.group(0)]

    line = re.sub(r"\\fI([^\\]*)\\f[PR]", placeholder, line)
    return re.sub(r"\\(\(..|f.|.)", escape, line)


def roff_blocks(root: Path, rel: str, errors: list[str]) -> list[Block]:
    blocks: list[Block] = []
    lines = (root / rel).read_text().splitlines()
    section = ""
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith(".SH"):
            section = ln[3:].strip().strip('"')
        end = {".EX": ".EE", ".nf": ".fi"}.get(ln.split()[0] if ln.split() else "")
        if not end:
            i += 1
            continue
        start = i
        body = []
        i += 1
        while i < len(lines) and lines[i].split()[:1] != [end]:
            body.append(lines[i])
            i += 1
        if i == len(lines):
            errors.append(f"{rel}:{start + 1}: {ln.split()[0]} without {end}")
        i += 1
        if section == "EXAMPLES":
            blocks.append(Block(rel, start + 1, "roff", body, section))
            continue
        j = start - 1
        while j >= 0 and re.match(r"^\.(RS|RE|PP|P|LP|IP|sp|in)\b", lines[j]):
            j -= 1
        if j >= 0 and ROFF_NOT_EXAMPLE.match(lines[j]):
            blocks.append(Block(rel, start + 1, "text", body, section))
        else:
            errors.append(f'{rel}:{start + 1}: a {ln.split()[0]} block outside EXAMPLES: '
                          f'put it in EXAMPLES, or mark it with a line `.\\" not an '
                          f'example: WHY` before it (tests/docs/examples.py)')
    return blocks


def markdown_files(root: Path, build: Path) -> list[str]:
    """Every *.md file of the tree under @root, relative to it, sorted, found when the
    test runs: a document added anywhere is checked without a list to update. Left out:
    .git and build trees, whose Markdown (fetched or generated) is no document of this
    tree: the top-level build*/ folders (.gitignore), any folder holding a
    CMakeCache.txt, and @build, the build under test."""
    build = build.resolve()

    def skipped(d: Path) -> bool:
        return (d.name in (".git", "__pycache__") or
                (d.parent == root and d.name.startswith("build")) or
                (d / "CMakeCache.txt").exists() or d.resolve() == build)

    found: list[str] = []
    for top, dirs, files in os.walk(root):
        here = Path(top)
        dirs[:] = [d for d in dirs if not skipped(here / d)]
        found += [str((here / f).relative_to(root)) for f in files if f.endswith(".md")]
    return sorted(found)


def all_blocks(root: Path, build: Path, errors: list[str]) -> list[Block]:
    """The blocks of every Markdown file (markdown_files) and of the man pages, in
    that order; what is wrong with a document's blocks is appended to @errors."""
    blocks: list[Block] = []
    for rel in markdown_files(root, build):
        blocks += markdown_blocks(root, rel, errors)
    for rel in DOCS_ROFF:
        blocks += roff_blocks(root, rel, errors)
    return blocks


def command_lines(block: Block) -> list[tuple[int, str]]:
    """The block's commands: (line number, logical line), comments and blanks left out."""
    out: list[tuple[int, str]] = []
    cur, first = "", 0
    for k, raw in enumerate(block.body):
        lineno = block.line + 1 + k
        if block.tag == "roff":
            if raw.startswith("."):
                if raw.startswith('.\\"'):
                    continue
                raise Failure(f"{block.path}:{lineno}: roff request '{raw}' inside an example")
            raw = roff_unescape(raw, f"{block.path}:{lineno}")
        elif block.tag == "console":
            if not raw.startswith("$ ") and not cur:
                continue
            raw = raw[2:] if raw.startswith("$ ") else raw
        text = raw.strip()
        if not cur and (not text or text.startswith("#")):
            continue
        if not cur:
            first = lineno
        if text.endswith("\\"):
            cur += text[:-1] + " "
            continue
        cur += text
        if re.search(r"(&&|\|\||\|)$", re.sub(r"\s#.*$", "", cur).rstrip()):
            cur += " "
            continue
        out.append((first, cur))
        cur = ""
    if cur:
        raise Failure(f"{block.path}:{first}: the example's last line goes on past the block")
    return out

