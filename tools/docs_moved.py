#!/usr/bin/env python3
"""Nothing lost in a move of the docs (issue 31): every heading, sentence, table row and code line of
an old version of README.md must appear somewhere in today's README.md, docs/*.md or bench/README.md
(whitespace and line breaks aside). Prints what does not, with the line of the old file; exit 1 if any.

    .venv/bin/python tools/docs_moved.py [REV]      # REV: the commit of the old README (default 6918c58)

A script, not a test: the pages go on changing after the move (a section rewritten for a new
feature is not a loss), so it checks one move, when it is made.
"""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent


def norm(s: str) -> str:
    """Whitespace, backquotes and link targets aside (a link to a section became a link to a page)."""
    s = re.sub(r"\]\([^)\s]*\)", "]", s)
    return " ".join(s.replace("`", "").split())


def pieces(text: str):
    """(line, piece) of the old README: headings, table rows, code lines, sentences of paragraphs."""
    out, para, start, fence = [], [], 0, False
    lines = text.split("\n")

    def flush():
        if para:
            joined = " ".join(x.strip() for x in para)
            for sent in re.split(r"(?<=[.:;!?)])\s+(?=[A-Z`(\[*])", joined):
                if len(sent.strip()) > 12:
                    out.append((start, sent.strip()))
        para.clear()

    for k, line in enumerate(lines, start=1):
        s = line.strip()
        if s.startswith("```"):
            fence = not fence
            flush()
            continue
        if fence or line.startswith("    ") and not para:
            if s:
                out.append((k, s.split("  #")[0].strip() if not s.startswith("#") else s))
            continue
        if not s:
            flush()
        elif s.startswith("#") or s.startswith("|"):
            flush()
            out.append((k, s.lstrip("#").strip() if s.startswith("#") else s))
        else:
            if not para:
                start = k
            para.append(line)
    flush()
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    rev = argv[0] if argv else "6918c58"
    old = subprocess.run(["git", "show", f"{rev}:README.md"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    pages = [REPO / "README.md", REPO / "bench" / "README.md"] + sorted((REPO / "docs").glob("*.md"))
    now = norm("\n".join(p.read_text() for p in pages))
    lost = [(k, p) for k, p in pieces(old) if norm(p) not in now]
    for k, p in lost:
        print(f"README.md@{rev}:{k}: {p[:150]}")
    print(f"{len(lost)} of {len(pieces(old))} pieces of the old README not found in README.md, docs/, bench/README.md")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
