#!/usr/bin/env python3
"""The table of bench/llm-compare.sh's results: tokens/s per model, test and program, the
ratios of dawn-llm to each llama.cpp backend, and each program's peak device memory per model.

Usage: python3 bench/llm-table.py OUT_DIR  (the folder llm-compare.sh wrote)
"""
import json
import os
import sys
from collections import defaultdict


def load(out):
    rows = []
    with open(os.path.join(out, "llm.jsonl")) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def test_name(r):
    if "test" in r:
        return r["test"] + (f" @ d{r['n_depth']}" if r.get("n_depth") else "")
    base = f"pp{r['n_prompt']}" if r.get("n_prompt") else f"tg{r['n_gen']}"
    return base + (f" @ d{r['n_depth']}" if r.get("n_depth") else "")


def peaks(out):
    """Peak MiB used during each run, minus the reading just before it started."""
    mem_path, runs_path = os.path.join(out, "memory.csv"), os.path.join(out, "runs.txt")
    if not (os.path.exists(mem_path) and os.path.exists(runs_path)):
        return {}
    from datetime import datetime

    samples = []
    for line in open(mem_path):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2:
            continue
        try:
            t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((t, float(parts[1])))
        except ValueError:
            continue
    result = defaultdict(float)
    start = None
    for line in open(runs_path):
        f = line.split()
        if f[1] == "start":
            start = (float(f[0]), f[2], f[3])
        elif f[1] == "end" and start:
            t0, program, model = start
            t1 = float(f[0])
            before = [m for t, m in samples if t <= t0]
            base = before[-1] if before else 0.0
            during = [m for t, m in samples if t0 <= t <= t1]
            if during:
                key = (model, program)
                result[key] = max(result[key], max(during) - base)
            start = None
    return result


def main():
    out = sys.argv[1]
    rows = load(out)
    programs = []
    table = defaultdict(dict)
    for r in rows:
        p = r["program"]
        if p not in programs:
            programs.append(p)
        key = (os.path.basename(r["model_filename"]), test_name(r))
        table[key][p] = r
    gpu = open(os.path.join(out, "gpu.txt")).read().strip() if os.path.exists(os.path.join(out, "gpu.txt")) else "?"
    print(f"GPU: {gpu}\n")
    others = [p for p in programs if p != "dawn"]
    head = ["model", "test"] + [f"{p} t/s" for p in programs] + [f"dawn / {p}" for p in others]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join([" --- "] * 2 + [" ---: "] * (len(head) - 2)) + "|")
    for (model, test), by in table.items():
        cells = [model, test]
        for p in programs:
            r = by.get(p)
            if r is None or "avg_ts" not in r:
                cells.append("failed" if r else "")
            else:
                cells.append(f"{r['avg_ts']:.1f} ± {r.get('stddev_ts', 0):.1f}")
        for p in others:
            a, b = by.get("dawn", {}), by.get(p, {})
            cells.append(f"{a['avg_ts'] / b['avg_ts']:.2f}" if "avg_ts" in a and "avg_ts" in b else "")
        print("| " + " | ".join(cells) + " |")
    host = [(k, by["dawn"]) for k, by in table.items() if "dawn" in by and "host_us_per_token" in by["dawn"]]
    if host:
        print("\ndawn-llm's host time recording a step, per token (`bench -v`):\n")
        for (model, test), r in host:
            d = r.get("dispatches_per_token")
            extra = f", {d:.1f} dispatches a token" if d else ""
            print(f"- {model} {test}: {r['host_us_per_token']:.1f} us, {r.get('steps', '?')} steps a repetition{extra}")
    mem = peaks(out)
    if mem:
        print("\nPeak device memory while running (MiB over the reading before the program started):\n")
        models = sorted({m for m, _ in mem})
        print("| model | " + " | ".join(programs) + " |")
        print("| --- |" + " ---: |" * len(programs))
        for m in models:
            print(f"| {m} | " + " | ".join(f"{mem.get((m, p), 0):.0f}" for p in programs) + " |")


if __name__ == "__main__":
    main()
