#!/usr/bin/env python3
"""Print every `crate::<module>` use in src/ that points UP the pipeline (see ARCHITECTURE.md).

Comments are ignored. The layer order is the single source of truth shared with the test
`layers::no_module_imports_one_above_it` (tests/it/layers.rs reads the same table from
ARCHITECTURE.md). Usage: layers.py [SRC_DIR]
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "src"
ARCH = os.path.join(os.path.dirname(os.path.abspath(ROOT)), "ARCHITECTURE.md")


def layers():
    text = open(ARCH, encoding="utf-8").read()
    m = re.search(r"<!-- layers -->\n```text\n(.*?)```", text, re.S)
    order = {}
    for i, line in enumerate(l for l in m.group(1).splitlines() if l.strip()):
        for name in line.split(":", 1)[1].split():
            order[name] = i
    return order


order = layers()
bad = []
for d, _, files in os.walk(ROOT):
    for f in files:
        if not f.endswith(".rs"):
            continue
        p = os.path.join(d, f)
        rel = os.path.relpath(p, ROOT)
        top = rel.split(os.sep)[0].removesuffix(".rs")
        if top not in order:
            continue
        for n, line in enumerate(open(p, encoding="utf-8"), 1):
            code = line.split("//", 1)[0]
            for used in re.findall(r"crate::([a-z_]+)", code):
                if used in order and order[used] > order[top]:
                    bad.append(f"{p}:{n}: {top} (layer {order[top]}) uses {used} (layer {order[used]})")
print("\n".join(bad) if bad else "no upward imports")
sys.exit(1 if bad else 0)
