#!/usr/bin/env python3
"""Check that every relative link in the project's Markdown points at something.

A link is `[text](target)` or `[text]: target`. Web links (http, https, mailto) are not fetched (CI has no
network); every other target must name a file or folder that exists, relative to the Markdown file, and a
`#fragment` must name a heading of the target file (GitHub's anchor rules). Exits 1 listing each broken
link as FILE:LINE: problem.
"""
import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", ".venv", "target", "out", "node_modules", ".venv-harness", ".venv-models"}
INLINE = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files():
    for path in sorted(ROOT.rglob("*.md")):
        rel = path.relative_to(ROOT)
        if any(part in SKIP_DIRS or part.startswith("wt-") for part in rel.parts[:-1]):
            continue
        yield path


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_ " or cat[0] in "LN" or cat == "Mn":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        in_fence = False
        for line in path.read_text(encoding="utf-8").splitlines():
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", path.read_text(encoding="utf-8")):
            found.add(m.group(1))
        cache[path] = found
    return cache[path]


def check(path):
    problems = []
    in_fence = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        code_free = re.sub(r"`[^`]*`", "", line)
        targets = [m.group(1) for m in INLINE.finditer(code_free)]
        targets += [m.group(1) for m in IMAGE.finditer(code_free)]
        m = REFDEF.match(code_free)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            file_part, _, fragment = target.partition("#")
            dest = path if not file_part else (path.parent / file_part).resolve()
            where = f"{path.relative_to(ROOT)}:{number}"
            if not dest.exists():
                problems.append(f"{where}: {target}: no such file or folder")
                continue
            if fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                problems.append(f"{where}: {target}: {dest.name} has no heading #{fragment}")
    return problems


def main():
    problems = []
    count = 0
    for path in markdown_files():
        count += 1
        problems += check(path)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-links: {len(problems)} broken links in {count} Markdown files", file=sys.stderr)
        return 1
    print(f"check-links: every relative link in {count} Markdown files resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
