#!/usr/bin/env python3
"""Ranking evaluation harness: per-slice scores and k-fold cross-validation (stdlib only).

The scorer is the shared development scorer `score.py` (not part of this repository; pass its
path with --score or set KDD_SCORE_PY). This script only drives it and aggregates its per-query
JSON, so the numbers are exactly the scorer's.

Sets:
  dev    the scorer's own queries over its default corpus;
  check  the check set of this repository: questions in tools/eval/check-multi/ over the
         corpus fixtures/check-multi/specs (English, two domains + _shared, questions in
         English and Spanish, written before any ranking was looked at). The scorer reads its
         case files from its own folder, so it is copied into a temporary folder next to them.
  check2 the second check set: tools/eval/check-two/ over fixtures/check-two/specs (English,
         a library and a coworking space + _shared, 40 questions in English and Spanish),
         corpus and questions written by a helper that never ran kdd nor saw a ranking.

Commands:
  run    score one setting:   cv.py run --kdd target/release/kdd --set dev [-e KDD_RANK_X=1 ...]
  sweep  score a grid and cross-validate:
         cv.py sweep --kdd target/release/kdd --set dev -g KDD_RANK_W_SEM=0.4,0.6,0.8 -g ...
         Every setting of the cartesian product is scored once on all queries (results are
         cached under --out by setting, so re-running a sweep only scores new settings). Then,
         for each of k folds (queries assigned by sorted id, i mod k), the setting with the best
         mean nDCG@10 on the other folds is chosen and scored on the held fold. Printed:
         the baseline (first setting), the best in-sample setting, and the out-of-fold figure,
         each per slice (type, lang). A change is worth keeping only if out-of-fold improves.

Knobs are the KDD_RANK_* environment variables read in src/query/knobs.rs.
"""
import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# This repository's own check sets: set name -> (question folder, corpus).
CHECK_SETS = {
    "check": (HERE / "check-multi", ROOT / "fixtures" / "check-multi" / "specs"),
    "check2": (HERE / "check-two", ROOT / "fixtures" / "check-two" / "specs"),
}
METRICS = ["nDCG@10", "Hit@5", "P@5", "MRR"]


def score_py(args):
    p = args.score or os.environ.get("KDD_SCORE_PY")
    if not p:
        near = [d / "shared" / "eval" / "score.py" for d in (ROOT.parent, ROOT.parent.parent)]
        p = str(next((c for c in near if c.is_file()), near[0]))
    if not Path(p).is_file():
        sys.exit(f"error: the scorer {p} is missing (pass --score PATH or set KDD_SCORE_PY)")
    return Path(p)


def queries_of(args):
    if args.set in CHECK_SETS:
        cases = CHECK_SETS[args.set][0]
        return json.loads((cases / "dev_queries.json").read_text(encoding="utf-8"))
    return json.loads((score_py(args).parent / "dev_queries.json").read_text(encoding="utf-8"))


def run_one(args, env_over, json_out):
    """Run the scorer once with extra environment; returns (summary line, details dict)."""
    env = dict(os.environ)
    env.update(env_over)
    scorer = score_py(args)
    cmd_extra = []
    tmp = None
    if args.set in CHECK_SETS:
        cases, corpus = CHECK_SETS[args.set]
        tmp = tempfile.mkdtemp(prefix="kdd-check-")
        shutil.copy(scorer, tmp)
        for f in cases.glob("dev_*.json"):
            shutil.copy(f, tmp)
        scorer = Path(tmp) / scorer.name
        cmd_extra = ["--corpus", str(corpus)]
    try:
        cmd = [sys.executable, str(scorer), "--kdd", str(Path(args.kdd).resolve()),
               "--json-out", str(json_out)] + cmd_extra
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"error: scorer failed ({p.returncode}): {p.stderr[-2000:]}")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    last = p.stdout.strip().splitlines()[-1]
    return last, json.loads(Path(json_out).read_text(encoding="utf-8"))


def slices(queries):
    """slice name -> list of query ids."""
    out = {"ALL": [q["id"] for q in queries]}
    for key in ("type", "lang"):
        for q in queries:
            out.setdefault(f"{key}={q[key]}", []).append(q["id"])
    return out


def per_query(details):
    return {d["id"]: d["metrics"] for d in details["per_query"]}


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def table(title, queries, pq):
    """pq: query id -> metrics."""
    lines = [f"{title}", f"  {'slice':<20}{'n':>4}" + "".join(f"{m:>9}" for m in METRICS)]
    for name, ids in slices(queries).items():
        row = "".join(f"{mean(pq[i][m] for i in ids):>9.3f}" for m in METRICS)
        lines.append(f"  {name:<20}{len(ids):>4}{row}")
    return "\n".join(lines)


def context_line(details):
    ctx = details.get("context", [])
    rec = [c["recall"] for c in ctx if c["recall"] is not None]
    prec = [c["precision"] for c in ctx]
    return f"context recall={mean(rec):.3f} precision={mean(prec):.3f} (n={len(ctx)})"


def key_of(setting):
    """A setting's name, also its results file's name (a value's `/` becomes `%`: paths)."""
    key = ",".join(f"{k}={v}" for k, v in sorted(setting.items())) or "default"
    return key.replace("/", "%")


def cmd_run(args):
    env = dict(e.split("=", 1) for e in args.env)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    last, det = run_one(args, env, out / f"{args.set}-{key_of(env)}.json")
    qs = queries_of(args)
    print(table(f"[{args.set}] {key_of(env)}", qs, per_query(det)))
    print(context_line(det))
    print(last)


def cmd_sweep(args):
    grid = []
    for g in args.grid:
        k, vs = g.split("=", 1)
        grid.append([(k, v) for v in vs.split(",")])
    settings = [dict(c) for c in itertools.product(*grid)] or [{}]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    qs = queries_of(args)
    ids = sorted(q["id"] for q in qs)
    results = {}
    for s in settings:
        f = out / f"{args.set}-{key_of(s)}.json"
        if f.is_file() and not args.rerun:
            det = json.loads(f.read_text(encoding="utf-8"))
        else:
            last, det = run_one(args, s, f)
            print(f"  {key_of(s)}: {last}", flush=True)
        results[key_of(s)] = per_query(det)
        results[key_of(s) + "#ctx"] = context_line(det)
    keys = [key_of(s) for s in settings]
    folds = [[i for n, i in enumerate(ids) if n % args.k == f] for f in range(args.k)]
    oof, chosen = {}, []
    for held in folds:
        train = [i for i in ids if i not in held]
        best = max(keys, key=lambda k: (mean(results[k][i]["nDCG@10"] for i in train), -keys.index(k)))
        chosen.append(best)
        for i in held:
            oof[i] = results[best][i]
    insample = max(keys, key=lambda k: (mean(results[k][i]["nDCG@10"] for i in ids), -keys.index(k)))
    print(table(f"[{args.set}] baseline {keys[0]}", qs, results[keys[0]]))
    print("  " + results[keys[0] + "#ctx"])
    print(table(f"[{args.set}] best in-sample {insample}", qs, results[insample]))
    print("  " + results[insample + "#ctx"])
    print(table(f"[{args.set}] out-of-fold ({args.k} folds; chosen per fold: {chosen})", qs, oof))
    for k in keys:
        print(f"  {mean(results[k][i]['nDCG@10'] for i in ids):.3f} "
              f"Hit@5={mean(results[k][i]['Hit@5'] for i in ids):.3f}  {k}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["run", "sweep"])
    ap.add_argument("--kdd", required=True)
    ap.add_argument("--score", help="path of score.py (default: ../shared/eval/score.py from the main checkout)")
    ap.add_argument("--set", choices=["dev", *CHECK_SETS], default="dev")
    ap.add_argument("--out", default=str(ROOT / "target" / "eval"))
    ap.add_argument("-e", "--env", action="append", default=[], help="NAME=VALUE for `run`")
    ap.add_argument("-g", "--grid", action="append", default=[], help="NAME=v1,v2 for `sweep`")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--rerun", action="store_true", help="ignore cached results")
    args = ap.parse_args()
    {"run": cmd_run, "sweep": cmd_sweep}[args.command](args)


if __name__ == "__main__":
    main()
