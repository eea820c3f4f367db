#!/usr/bin/env python3
"""Where one kernel's issued instructions and stall samples go, by region of its SASS.

Reads the source page that scripts/gpu_profile.sh exports with SCANTUNE_NCU_SASS=1
(ncu_<n>_sass.csv.gz: one row per SASS instruction, in address order) and prints:
  - the warps that ran the kernel (executions of its first instruction) and the
    instructions a thread issues in all;
  - per region, the instructions a thread issues and the region's share of the
    stall samples. Regions end at ACQBULK (the grid-dependency wait), BAR.SYNC and
    EXIT, and wherever the execution count changes by more than --loop-ratio (a
    loop's head and back edge); regions under --min-share percent of both the samples
    and the instructions join the one before them;
  - the instructions holding the most samples, with their two largest stall reasons.

    python3 scripts/ncu_sass_regions.py bench/results/2026-12-05-s34/call2/ncu_2_sass.csv.gz [--top 12]

Counts are ncu's: "Instructions Executed" is per warp, so a thread's count is that
over the warps. Where a kernel's threads take different paths the per-thread
figures are averages over its warps.
"""
import argparse
import csv
import gzip
import sys


def read_rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        rows = list(csv.reader(f))
    # The export starts with the kernel's name row, then the header, then one row per instruction.
    header_at = next(i for i, r in enumerate(rows) if "Source" in r and "Instructions Executed" in r)
    kernel = rows[0][1] if header_at > 0 and len(rows[0]) > 1 else "?"
    return kernel, rows[header_at], [r for r in rows[header_at + 1:] if len(r) == len(rows[header_at])]


def as_int(text):
    try:
        return int(float(text))
    except ValueError:
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu source page as CSV (.gz or plain)")
    ap.add_argument("--top", type=int, default=12, help="instructions listed by their stall samples")
    ap.add_argument("--loop-ratio", type=float, default=1.5,
                    help="an execution count this many times its neighbour's starts a region")
    ap.add_argument("--min-share", type=float, default=1.0,
                    help="a region under this percentage of both the samples and the instructions joins the one before")
    args = ap.parse_args()

    kernel, header, rows = read_rows(args.csv)
    col = {name: i for i, name in enumerate(header)}
    for needed in ("Source", "Instructions Executed", "Warp Stall Sampling (All Samples)"):
        if needed not in col:
            sys.exit(f"{args.csv}: no column '{needed}' (export with --page source --csv --print-source sass)")
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    src = [r[col["Source"]].strip() for r in rows]
    executed = [as_int(r[col["Instructions Executed"]]) for r in rows]
    samples = [as_int(r[col["Warp Stall Sampling (All Samples)"]]) for r in rows]
    warps = executed[0] if executed and executed[0] > 0 else max(executed, default=0)
    total_samples = sum(samples) or 1
    if warps == 0:
        sys.exit(f"{args.csv}: no instruction was executed")

    print(kernel)
    print(f"warps {warps}, instructions a thread {sum(executed) / warps:.0f}, stall samples {sum(samples)}")

    # Region boundaries: after a wait, barrier or exit, and where the execution count jumps.
    starts = [0]
    for i in range(1, len(rows)):
        prev, cur = executed[i - 1], executed[i]
        jump = prev > 0 and cur > 0 and max(prev, cur) > args.loop_ratio * min(prev, cur)
        if any(k in src[i - 1] for k in ("ACQBULK", "BAR.SYNC", "EXIT")) or jump:
            starts.append(i)
    starts.append(len(rows))
    # Small regions (branches inside a phase: under --min-share of the samples and of the instructions) join
    # the one before them, so that the table lists phases rather than basic blocks.
    kept = [starts[0]]
    total_executed = sum(executed) or 1
    for a, b in zip(starts, starts[1:]):
        small = (sum(samples[a:b]) < args.min_share / 100 * total_samples and
                 sum(executed[a:b]) < args.min_share / 100 * total_executed)
        if a != starts[0] and not small:
            kept.append(a)
    starts = kept + [len(rows)]
    print(f"\n{'from':>5} {'to':>5}  {'per thread':>10}  {'samples':>7}  first instruction")
    for a, b in zip(starts, starts[1:]):
        ran = sum(executed[a:b])
        if ran == 0:
            continue
        share = 100.0 * sum(samples[a:b]) / total_samples
        print(f"{a:>5} {b:>5}  {ran / warps:>10.1f}  {share:>6.1f}%  {src[a][:60]}")

    print(f"\nthe {args.top} instructions with the most stall samples:")
    order = sorted(range(len(rows)), key=lambda i: -samples[i])[: args.top]
    for i in order:
        top = sorted(((as_int(rows[i][col[h]]), h[len("stall_"):]) for h in reasons), reverse=True)[:2]
        why = ", ".join(f"{name} {n}" for n, name in top if n > 0)
        print(f"{i:>5}  {100.0 * samples[i] / total_samples:>5.1f}%  x{executed[i] / warps:<5.2f} "
              f"{src[i][:56]:<56}  {why}")


if __name__ == "__main__":
    main()
