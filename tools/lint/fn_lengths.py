#!/usr/bin/env python3
"""List functions in src/ longer than N lines (default 100), longest first.

Counts from the `fn` line to its closing brace by brace depth, ignoring braces inside string
and char literals and comments well enough for this code base. A function preceded by a
`// table:` comment (data written as code) is exempt, as in tests/it/layers.rs, which enforces
the limit. Usage: fn_lengths.py [N] [DIR]
"""
import os
import re
import sys

LIMIT = int(sys.argv[1]) if len(sys.argv) > 1 else 100
ROOT = sys.argv[2] if len(sys.argv) > 2 else "src"
FN = re.compile(r"^\s*(pub(\([a-z]+\))?\s+)?(async\s+)?(unsafe\s+)?fn\s+([A-Za-z_0-9]+)")


def strip(line):
    line = re.sub(r'r#*".*?"#*', '""', line)
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//", 1)[0]


out = []
for d, _, files in os.walk(ROOT):
    for f in files:
        if not f.endswith(".rs"):
            continue
        p = os.path.join(d, f)
        lines = open(p, encoding="utf-8").read().split("\n")
        i = 0
        while i < len(lines):
            m = FN.match(lines[i])
            if not m or (i > 0 and lines[i - 1].lstrip().startswith("// table:")):
                i += 1
                continue
            depth, opened, j = 0, False, i
            while j < len(lines):
                s = strip(lines[j])
                depth += s.count("{") - s.count("}")
                if "{" in s:
                    opened = True
                if opened and depth <= 0:
                    break
                if not opened and s.rstrip().endswith(";"):
                    break
                j += 1
            n = j - i + 1
            if opened and n > LIMIT:
                out.append((n, f"{p}:{i + 1}", m.group(5)))
            i += 1
for n, loc, name in sorted(out, reverse=True):
    print(f"{n:5} {loc} {name}")
