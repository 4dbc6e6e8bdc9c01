#!/usr/bin/env python3
"""Compute a model's centre for centred one-bit vectors (src/embed/centre.rs).

The centre is the mean passage embedding of this repository's own fixture specs (never of an
evaluated corpus): every spec's sections, code blocks removed, embedded as
"passage: <title> > <section path> > <text>" with mean pooling and L2 normalisation, averaged.
It is written as raw little-endian f32 values (dims of them).

Needs, from PyPI: onnxruntime, tokenizers, numpy. Usage:
    python3 tools/models/centre.py MODEL_DIR OUT.f32
e.g. MODEL_DIR = ~/.local/share/kdd/models/multilingual-e5-small-int8 and
OUT = src/embed/centre/multilingual-e5-small-int8.f32. Deterministic for one model file
(sorted file order, batches of one).
"""
import re
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ["demo", "core-es", "core-en", "core-multi", "specs-multi", "specs-v2"]


def passages(path):
    text = path.read_text(encoding="utf-8")
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end > 0:
            text = text[end + 4:]
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    m = re.search(r"^#\s+(.*)", text, re.M)
    title = m.group(1).strip() if m else path.stem
    heads, body, out = [], [], []

    def flush():
        t = "\n".join(body).strip()
        if len(t.split()) >= 3:
            out.append(f"passage: {title} > {' > '.join(heads)} > {t}")

    for line in text.splitlines():
        h = re.match(r"^(#{1,4})\s+(.*)", line)
        if h:
            flush()
            heads = heads[: len(h.group(1)) - 1] + [h.group(2).strip()]
            body = []
        else:
            body.append(line)
    flush()
    return out


def main():
    model, dest = Path(sys.argv[1]), Path(sys.argv[2])
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    tok.enable_truncation(512)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(model / "model.onnx"), so)
    names = {i.name for i in sess.get_inputs()}
    files = sorted(p for d in FIXTURES for p in (ROOT / "fixtures" / d / "specs").rglob("*")
                   if p.suffix in (".md", ".feature") and p.is_file())
    total, n = None, 0
    for f in files:
        for t in passages(f):
            e = tok.encode(t)
            ids = np.array([e.ids], dtype=np.int64)
            am = np.array([e.attention_mask], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": am}
            if "token_type_ids" in names:
                feed["token_type_ids"] = np.zeros_like(ids)
            h = sess.run(None, feed)[0][0]
            v = h.mean(0)
            v = v / np.linalg.norm(v)
            total = v.astype(np.float64) if total is None else total + v
            n += 1
    centre = (total / n).astype("<f4")
    dest.parent.mkdir(parents=True, exist_ok=True)
    centre.tofile(dest)
    print(f"{dest}: centre of {n} passages from {len(files)} files, norm {np.linalg.norm(centre):.4f}")


if __name__ == "__main__":
    main()
