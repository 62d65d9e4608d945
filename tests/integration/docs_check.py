#!/usr/bin/env python3
"""Checks Tollgate's user docs (README.md, CHANGELOG.md, docs/*.md).

    docs_check.py [--root DIR] [--readme-max N] links|history|readme

links    every relative link [text](path#anchor) names a file that exists
         and, with an anchor, a heading of that file (GitHub's anchors: the
         heading in lower case, punctuation dropped, spaces as dashes,
         repeats numbered -1, -2, ...)
history  no commit hash in the docs: user docs describe what is, not which
         commit measured or changed it (a 7-40 digit hex word with a digit
         and a letter, outside code blocks)
readme   README.md is at most --readme-max lines (default 250) and its first
         screenfuls (the first 120 lines) hold install, upgrade and
         troubleshooting

Prints one line per problem ("FILE:LINE: what") and exits 1 if there is any.
"""
import argparse
import glob
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")


def slug(text):
    """GitHub's anchor of a heading: inline markup dropped, lower case,
    everything but letters, digits, spaces, '-' and '_' removed, spaces as '-'."""
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    t = t.replace("`", "").strip().lower()
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


def prose_lines(path):
    """(number, line) of the lines outside fenced code blocks."""
    fenced = False
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if not fenced:
                yield n, line.rstrip("\n")


def anchors(path):
    seen = {}
    out = set()
    for _, line in prose_lines(path):
        m = HEADING.match(line)
        if not m:
            continue
        s = slug(m.group(2))
        k = seen.get(s, 0)
        out.add(s if k == 0 else "%s-%d" % (s, k))
        seen[s] = k + 1
    return out


def doc_files(root):
    files = [os.path.join(root, f) for f in ("README.md", "CHANGELOG.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    return [f for f in files if os.path.exists(f)]


def check_links(root):
    problems = []
    cache = {}
    for f in doc_files(root):
        rel = os.path.relpath(f, root)
        for n, line in prose_lines(f):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # https:, mailto:
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
                if not os.path.exists(dest):
                    problems.append("%s:%d: link to %s: no such file" % (rel, n, target))
                    continue
                if anchor and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        problems.append("%s:%d: link to %s: %s has no heading with anchor #%s"
                                        % (rel, n, target, os.path.relpath(dest, root), anchor))
    return problems


def check_history(root):
    problems = []
    for f in doc_files(root):
        rel = os.path.relpath(f, root)
        for n, line in prose_lines(f):
            for h in HASH.findall(line):
                problems.append("%s:%d: '%s' looks like a commit hash: say what is, not which "
                                "commit it was" % (rel, n, h))
    return problems


def check_readme(root, limit):
    path = os.path.join(root, "README.md")
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    problems = []
    if len(lines) > limit:
        problems.append("README.md: %d lines, more than %d: move detail into docs/" % (len(lines), limit))
    head = [l for l in lines[:120] if HEADING.match(l)]
    for want in ("install", "upgrade", "troubleshoot"):
        if not any(want in l.lower() for l in head):
            problems.append("README.md: no heading about '%s' in its first 120 lines" % want)
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--readme-max", type=int, default=250)
    ap.add_argument("what", choices=("links", "history", "readme"))
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    problems = {"links": lambda: check_links(root),
                "history": lambda: check_history(root),
                "readme": lambda: check_readme(root, a.readme_max)}[a.what]()
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
