#!/usr/bin/env python3
"""Writes a typing trace for `ghostline bench` (format: fixtures/traces/README.md).

    scripts/make-trace.py SOURCE.py TEXT_FILE OUT.json --name NAME [--seed N] [--debounce-ms 150] [--workspace DIR]

SOURCE.py holds the starting document with a `<CURSOR>` marker; TEXT_FILE holds what is typed at
the cursor. Inter-key gaps follow a typist's rhythm (log-normal around 110 ms, longer after a line
break or a space, seeded, so the trace is fixed); the editor's auto-indentation after a line break
arrives as one edit; `~` in TEXT_FILE is a typo that is typed and then deleted with Backspace. A
completion request follows every key that the next key does not come within the editor's
debounce of, as VS Code's inline completion does.
"""
import argparse
import json
import os
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("text")
    ap.add_argument("out")
    ap.add_argument("--name", required=True)
    ap.add_argument("--description", default="")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--debounce-ms", type=int, default=150)
    ap.add_argument("--workspace", help="the project folder SOURCE belongs to (the bench opens it as the workspace)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    text = open(args.text, encoding="utf-8").read()

    keys = []  # (key, gap_ms)
    i = 0
    previous = ""
    while i < len(text):
        ch = text[i]
        gap = rng.lognormvariate(4.7, 0.35)  # median ~110 ms
        if previous == "\n":
            gap += rng.uniform(300, 900)  # reading the line just written
        elif previous == " ":
            gap += rng.uniform(0, 120)
        if ch == "\n" or (i == 0 and ch == " "):
            # The editor auto-indents after a line break: the indentation arrives with it.
            j = i + 1
            while j < len(text) and text[j] == " ":
                j += 1
            keys.append((text[i:j], gap))
            i = j
        elif ch == "~":
            keys.append(("q", gap))  # a typo...
            keys.append(("\b", rng.uniform(250, 450)))  # ...noticed and deleted
            i += 1
        else:
            keys.append((ch, gap))
            i += 1
        previous = keys[-1][0][-1]

    events = []
    carried = 0.0  # time already spent since the key before, by a completion request
    for n, (key, gap) in enumerate(keys):
        events.append({"gap_ms": round(gap - carried), "key": key})
        carried = 0.0
        next_gap = keys[n + 1][1] if n + 1 < len(keys) else 1e9
        if next_gap >= args.debounce_ms:
            events.append({"gap_ms": args.debounce_ms, "complete": True})
            carried = args.debounce_ms

    trace = {
        "name": args.name,
        "description": args.description,
        "file": os.path.relpath(args.source, os.path.dirname(os.path.abspath(args.out))),
        "language_id": "python",
        "cursor_marker": "<CURSOR>",
        **({"workspace": os.path.relpath(args.workspace, os.path.dirname(os.path.abspath(args.out)))} if args.workspace else {}),
        "events": [{"gap_ms": 0, "complete": True}] + events,
    }
    # One event per line: readable, and diffs stay small.
    head = {k: v for k, v in trace.items() if k != "events"}
    lines = json.dumps(head, indent=1, ensure_ascii=False)[:-2] + ',\n "events": [\n'
    lines += ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in trace["events"])
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(lines + "\n ]\n}\n")
    requests = sum(1 for e in trace["events"] if e.get("complete"))
    print(f"{args.out}: {len(keys)} keys, {requests} completion requests")


if __name__ == "__main__":
    main()
