#!/usr/bin/env python3
"""include_graph.py [ROOT] - checks docs/architecture.md's module edge list against
the code.

The modules are folders: shm, proto, kernels, worker, supervisor/chipd and
supervisor/chipctl (tests/ is not a module). Every `#include "..."` of a module's
sources is resolved to the file it names, as the compiler would: first beside the
including file, then in the modules' include directories (each module folder, and
proto/include). An include of another module's header is an edge `a -> b`.

It fails (exit 1), naming each problem, when:
  - the code has an edge that the doc's edge list lacks, or the doc lists an edge
    that the code does not have;
  - a relative include reaches into another module (`"../shm/wait.h"`): a module
    uses another through the include directories its build target declares;
  - a quoted include names no header of any module, or one found in two modules;
  - an edge is not declared in the build: no CMake target of module a links (directly,
    or through PUBLIC/INTERFACE links) a target of module b.
A module target that links another module's target without any include edge between
the two is printed as a note (a link may serve the final program, not the includes).

The doc's edge list is the fenced block right after the line
`<!-- module edges: checked by tests/docs/include_graph.py -->`, one `a -> b` per line.
"""

from __future__ import annotations

import os
import re
import sys

MODULES = ["shm", "proto", "kernels", "worker", "supervisor/chipd", "supervisor/chipctl"]
# Where quoted includes are looked up after the including file's folder: the folders
# the build puts on the include path (target_include_directories of each module).
INCLUDE_DIRS = ["shm", "proto", "proto/include", "kernels", "kernels/include", "kernels/callables",
                "worker", "supervisor/chipd",
                "supervisor/chipctl"]
SOURCE_EXT = (".c", ".h", ".hip")
DOC = "docs/architecture.md"
MARKER = "<!-- module edges: checked by tests/docs/include_graph.py -->"
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
EDGE_RE = re.compile(r"^\s*([a-z/]+)\s*->\s*([a-z/]+)\s*$")


def module_of(rel: str) -> str | None:
    """The module holding repository path @rel, or None (tests/, docs/, ...)."""
    best = None
    for m in MODULES:
        if (rel == m or rel.startswith(m + "/")) and (best is None or len(m) > len(best)):
            best = m
    return best


def sources(root: str):
    for m in MODULES:
        for d, dirs, files in os.walk(os.path.join(root, m)):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for f in sorted(files):
                if f.endswith(SOURCE_EXT):
                    yield os.path.relpath(os.path.join(d, f), root)


def resolve(root: str, includer: str, inc: str) -> list[str]:
    """Repository paths that `#include "inc"` in @includer may name, in the compiler's
    order: beside the includer first (that one wins), else every include directory."""
    beside = os.path.normpath(os.path.join(os.path.dirname(includer), inc))
    if os.path.isfile(os.path.join(root, beside)):
        return [beside]
    found = []
    for d in INCLUDE_DIRS:
        p = os.path.normpath(os.path.join(d, inc))
        if os.path.isfile(os.path.join(root, p)) and p not in found:
            found.append(p)
    return found


def code_edges(root: str, errors: list[str]) -> dict[tuple[str, str], list[str]]:
    """Module edges of the sources, each with the includes that make it."""
    edges: dict[tuple[str, str], list[str]] = {}
    for src in sources(root):
        a = module_of(src)
        with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                inc, where = m.group(1), f"{src}:{n}"
                paths = resolve(root, src, inc)
                mods = sorted({module_of(p) for p in paths}, key=str)
                if not paths:
                    errors.append(f'{where}: #include "{inc}" names no header of any module')
                    continue
                if len(mods) > 1:
                    errors.append(f'{where}: #include "{inc}" is ambiguous: '
                                  + ", ".join(paths))
                    continue
                b = mods[0]
                if b is None:
                    errors.append(f'{where}: #include "{inc}" reaches outside the modules '
                                  f"({paths[0]})")
                    continue
                if ".." in inc.split("/") and b != a:
                    errors.append(f'{where}: #include "{inc}" reaches into {b}/ by a '
                                  "relative path: include it by name, through the build's "
                                  f"declared link to {b}")
                if b != a:
                    edges.setdefault((a, b), []).append(f'{where} "{inc}"')
    return edges


def doc_edges(root: str, errors: list[str]) -> set[tuple[str, str]]:
    with open(os.path.join(root, DOC), encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        i = next(k for k, ln in enumerate(lines) if ln.strip() == MARKER)
    except StopIteration:
        errors.append(f"{DOC}: no line {MARKER}")
        return set()
    i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines) or not lines[i].startswith("```"):
        errors.append(f"{DOC}:{i + 1}: a fenced block of `a -> b` lines must follow "
                      "the edge-list marker")
        return set()
    edges = set()
    for k in range(i + 1, len(lines)):
        ln = lines[k]
        if ln.startswith("```"):
            return edges
        if not ln.strip():
            continue
        m = EDGE_RE.match(ln)
        if not m or m.group(1) not in MODULES or m.group(2) not in MODULES:
            errors.append(f"{DOC}:{k + 1}: not an edge between modules: {ln.strip()!r} "
                          f"(modules: {', '.join(MODULES)})")
            continue
        edges.add((m.group(1), m.group(2)))
    errors.append(f"{DOC}: the edge list's fenced block is not closed")
    return edges


def cmake_links(root: str):
    """(targets by module, links): links are (target, keyword, dependency)."""
    targets: dict[str, str] = {}
    links = []
    call = re.compile(r"\b(add_library|add_executable|target_link_libraries)\s*\(([^)]*)\)",
                      re.S)
    for m in MODULES + ["supervisor"]:
        path = os.path.join(root, m, "CMakeLists.txt")
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"#[^\n]*", "", f.read())
        for c in call.finditer(text):
            words = c.group(2).split()
            if not words:
                continue
            if c.group(1) != "target_link_libraries":
                targets[words[0]] = module_of(m) or m
                continue
            kw = "PUBLIC"  # the keyword-less signature propagates like PUBLIC
            for w in words[1:]:
                if w in ("PUBLIC", "PRIVATE", "INTERFACE"):
                    kw = w
                else:
                    links.append((words[0], kw, w))
    return targets, links


def link_check(root: str, edges, errors: list[str], notes: list[str]) -> None:
    targets, links = cmake_links(root)
    if not targets:
        notes.append("no module targets found in the CMakeLists.txt files: links not checked")
        return

    def reach(t: str, first: bool, seen: set[str]) -> set[str]:
        """Targets whose include directories @t gets: its links, then their
        PUBLIC/INTERFACE links, transitively."""
        out = set()
        for src, kw, dep in links:
            if src != t or dep not in targets or dep in seen:
                continue
            if not first and kw == "PRIVATE":
                continue
            seen.add(dep)
            out |= {dep} | reach(dep, False, seen)
        return out

    usable: dict[str, set[str]] = {}
    for t, mod in targets.items():
        usable.setdefault(mod, set()).update(targets[d] for d in reach(t, True, {t}))
    for (a, b), where in sorted(edges.items()):
        if b not in usable.get(a, set()):
            errors.append(f"{a} -> {b}: no target of {a} links a target of {b} "
                          f"(first include: {where[0]})")
    for src, _, dep in links:
        a, b = targets.get(src), targets.get(dep)
        if a and b and a != b and (a, b) not in edges:
            notes.append(f"note: {src} ({a}) links {dep} ({b}) without an include edge")


def main() -> int:
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1
                           else os.path.join(os.path.dirname(__file__), "..", ".."))
    errors: list[str] = []
    notes: list[str] = []
    code = code_edges(root, errors)
    doc = doc_edges(root, errors)
    for e in sorted(set(code) - doc):
        errors.append(f"{e[0]} -> {e[1]}: in the code ({code[e][0]}), not in {DOC}'s "
                      "edge list: add it there and to the diagram, or remove the include")
    for e in sorted(doc - set(code)):
        errors.append(f"{e[0]} -> {e[1]}: in {DOC}'s edge list, not in the code: "
                      "remove it there and from the diagram")
    link_check(root, code, errors, notes)
    for n in sorted(set(notes)):
        print(n)
    sys.stdout.flush()  # the notes before the errors, also when both go to one file
    if errors:
        for e in errors:
            print("include_graph: " + e, file=sys.stderr)
        return 1
    print("include_graph: the code's module edges are the doc's:")
    for a, b in sorted(code):
        print(f"  {a} -> {b}  ({len(code[(a, b)])} includes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
