#!/usr/bin/env python3
"""Static SASS count of one group of samu's `chunked` rescan on its common path.

    python3 scripts/sass_rescan_path.py FILE.sass [--blocks]

FILE is what scripts/sass_counts.sh leaves (cuobjdump -sass of a samu module).
In samu_bwd_chunk_scan's group loop (its longest backward branch) it follows
the path an interior group of a row-wide block takes: the loop head, the
cp.async issue of the next group where all its rows are full (the first block
with 8 or more LDGSTS), the group's steps (the first block with 16 or more
MUFU.EX2: the kFull instance), the meeting's branch-free instance (the largest
block with F2FP and STG) and the back edge; between those, the path through
the fewest basic blocks. Prints the instructions on it (one thread's, for 4
tokens x 8 channels: divide by 32 for per element), before the steps, in them
and after. Static: what runs, not how long (ncu for that)."""
import collections
import re
import sys


def read_kernel(path, name):
    lines, current = [], None
    for line in open(path, errors="replace"):
        m = re.search(r"Function : (\S+)", line)
        if m:
            current = m.group(1)
            continue
        if current is None or name not in current:
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            lines.append((int(m.group(1), 16), m.group(2)))
    return lines


def branch_target(ins):
    m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", ins)
    return int(m.group(1), 16) if m else None


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    lines = read_kernel(sys.argv[1], "samu_bwd_chunk_scan")
    if not lines:
        print("no samu_bwd_chunk_scan in", sys.argv[1])
        return 1
    index = {a: i for i, (a, _) in enumerate(lines)}
    loop = None  # the longest backward branch: the group loop
    for i, (a, ins) in enumerate(lines):
        t = branch_target(ins)
        if t is not None and t < a and t in index and (loop is None or i - index[t] > loop[1] - loop[0]):
            loop = (index[t], i)
    lo, hi = loop
    targets = {branch_target(ins) for _, ins in lines[lo:hi + 1]} - {None}
    blocks, start = [], lo
    for i in range(lo, hi + 1):
        a, ins = lines[i]
        if i > start and a in targets:
            blocks.append((start, i - 1))
            start = i
        if re.search(r"\b(BRA|EXIT)\b", ins):
            blocks.append((start, i))
            start = i + 1
    if start <= hi:
        blocks.append((start, hi))
    first = {lines[s][0]: k for k, (s, _) in enumerate(blocks)}
    succ = collections.defaultdict(list)
    for k, (s, e) in enumerate(blocks):
        ins = lines[e][1]
        t = branch_target(ins)
        if t in first:
            succ[k].append(first[t])
        if not (t is not None and not ins.startswith("@")) and k + 1 < len(blocks):
            succ[k].append(k + 1)
    text = lambda k: "\n".join(ins for _, ins in lines[blocks[k][0]:blocks[k][1] + 1])
    size = lambda k: blocks[k][1] - blocks[k][0] + 1
    issue = next(k for k in range(len(blocks)) if text(k).count("LDGSTS") >= 8)
    steps = next(k for k in range(len(blocks)) if text(k).count("MUFU.EX2") >= 16)
    meet = max((k for k in range(len(blocks)) if "STG" in text(k) and "F2FP" in text(k)), key=size)

    def fewest_blocks(a, b):
        prev, queue = {a: None}, collections.deque([a])
        while queue:
            x = queue.popleft()
            if x == b:
                break
            for y in succ[x]:
                if y not in prev:
                    prev[y] = x
                    queue.append(y)
        path, x = [], b
        while x is not None:
            path.append(x)
            x = prev[x]
        return path[::-1]

    path = fewest_blocks(0, issue)
    for a, b in ((issue, steps), (steps, meet), (meet, len(blocks) - 1)):
        path += fewest_blocks(a, b)[1:]
    total = sum(size(k) for k in path)
    before = sum(size(k) for k in path[:path.index(steps)])
    print(f"{total} instructions a group ({total / 32:.1f} per element): {before} before the steps, "
          f"{size(steps)} in them, {total - before - size(steps)} after")
    if "--blocks" in sys.argv:
        for k in path:
            print(f"  {lines[blocks[k][0]][0]:#07x}-{lines[blocks[k][1]][0]:#07x}  {size(k):4d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
