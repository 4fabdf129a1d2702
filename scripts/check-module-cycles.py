#!/usr/bin/env python3
"""Fail when the top-level modules of a crate import each other in a cycle.

For every crate under crates/, each top-level module of src/ (a `name.rs` or `name/` folder) is a node, and
`crate::other` anywhere in its files (outside comments) is an edge to `other`. A strongly connected
component of more than one module is a cycle: layers inside a crate should read one way, like the crates do.
Prints each cycle as `crate: a -> b -> a` and exits 1 when there is one.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
USE = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
GROUP = re.compile(r"\bcrate::\{([^}]*)\}")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = [line.split("//", 1)[0] for line in text.splitlines()]
    # Unit tests (a `#[cfg(test)]` module, by convention at the end of a file) may use test-only helpers.
    for k, line in enumerate(lines):
        if line.strip() == "#[cfg(test)]" and k + 1 < len(lines) and re.match(r"\s*(pub(\(crate\))?\s+)?mod\s", lines[k + 1]):
            lines = lines[:k]
            break
    return "\n".join(lines)


def test_only(src):
    """Modules that lib.rs declares under `#[cfg(test)]`."""
    lib = src / "lib.rs"
    if not lib.is_file():
        return set()
    text = lib.read_text(encoding="utf-8")
    return set(re.findall(r"#\[cfg\(test\)\]\s*(?:pub(?:\(crate\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;", text))


def modules(src):
    found = {}
    for path in src.iterdir():
        if path.suffix == ".rs" and path.stem not in ("lib", "main"):
            found.setdefault(path.stem, []).append(path)
        elif path.is_dir():
            found.setdefault(path.name, []).extend(sorted(path.rglob("*.rs")))
    return found


def graph(src):
    mods = modules(src)
    for name in test_only(src):
        mods.pop(name, None)
    edges = {name: set() for name in mods}
    for name, files in mods.items():
        for path in files:
            text = strip_comments(path.read_text(encoding="utf-8"))
            targets = set(USE.findall(text))
            for group in GROUP.findall(text):
                targets |= {part.strip().split("::")[0] for part in group.split(",")}
            edges[name] |= {t for t in targets if t in mods and t != name}
    return edges


def cycles(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    problems = []
    crates = sorted(p for p in (ROOT / "crates").iterdir() if (p / "src").is_dir())
    for crate in crates:
        edges = graph(crate / "src")
        for component in cycles(edges):
            inside = {m: sorted(edges[m] & set(component)) for m in component}
            detail = "; ".join(f"{m} uses {', '.join(t)}" for m, t in inside.items())
            problems.append(f"{crate.name}: modules in a cycle: {' <-> '.join(component)} ({detail})")
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"check-module-cycles: no module cycle in {len(crates)} crates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
