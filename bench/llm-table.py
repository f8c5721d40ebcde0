#!/usr/bin/env python3
"""The table of bench/llm-compare.sh's results: tokens/s per model, test and program, the
ratios of dawn-llm to each llama.cpp backend, and each program's peak device memory per model.

Usage: python3 bench/llm-table.py OUT_DIR [--svg FILE]  (the folder llm-compare.sh wrote; --svg
also draws the chart: each test's tokens/s per program, as bars relative to the fastest)
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


COLOURS = {"dawn": "#d9480f", "webgpu": "#1c7ed6", "vulkan": "#2f9e44", "cuda": "#495057"}


def svg_chart(table, programs, gpu, path):
    """Grouped horizontal bars: per model and test, each program's tokens/s as a share of the
    fastest program's, labelled with the figure."""
    rows = [(k, by) for k, by in table.items() if any("avg_ts" in r for r in by.values())]
    bar, gap, left, width = 11, 10, 250, 420
    height = 40 + sum(len(programs) * bar + gap for _ in rows) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 110}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="10" y="18" font-size="13">tokens/s beside llama.cpp ({gpu})</text>',
    ]
    for i, p in enumerate(programs):
        x = left + i * 130
        parts.append(f'<rect x="{x}" y="26" width="10" height="10" fill="{COLOURS.get(p, "#868e96")}"/>')
        parts.append(f'<text x="{x + 14}" y="35">{"dawn-llm" if p == "dawn" else "llama.cpp " + p}</text>')
    y = 50
    for (model, test), by in rows:
        best = max(r["avg_ts"] for r in by.values() if "avg_ts" in r)
        parts.append(f'<text x="{left - 8}" y="{y + len(programs) * bar / 2 + 4}" text-anchor="end">'
                     f"{model.removesuffix('.gguf')} {test}</text>")
        for p in programs:
            r = by.get(p, {})
            if "avg_ts" in r:
                w = width * r["avg_ts"] / best
                parts.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar - 2}" '
                             f'fill="{COLOURS.get(p, "#868e96")}"/>')
                parts.append(f'<text x="{left + w + 4:.1f}" y="{y + bar - 3}">{r["avg_ts"]:.0f}</text>')
            y += bar
        y += gap
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    out = sys.argv[1]
    svg = sys.argv[sys.argv.index("--svg") + 1] if "--svg" in sys.argv[2:-1] else None
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
    # Every dawn-llm program (dawn, and dawn-LABEL from DAWN_ALT).
    host = [
        (k, p, by[p])
        for k, by in table.items()
        for p in programs
        if p.startswith("dawn") and p in by and "host_us_per_token" in by[p]
    ]
    if host:
        print("\ndawn-llm's host time recording a step, per token (`bench -v`):\n")
        for (model, test), p, r in host:
            d = r.get("dispatches_per_token")
            extra = f", {d:.1f} dispatches a token" if d else ""
            name = "" if p == "dawn" else f" ({p})"
            print(f"- {model} {test}{name}: {r['host_us_per_token']:.1f} us, {r.get('steps', '?')} steps a repetition{extra}")
    if svg:
        svg_chart(table, programs, gpu, svg)
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
