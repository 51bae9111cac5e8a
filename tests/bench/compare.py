#!/usr/bin/env python3
"""compare.py RAW ROUNDS [MODES] - the table of tests/bench/compare.sh.

Reads RAW/MODE.{old,new}.R.json for each MODE of the comma list MODES (mailbox, e2e,
overlap, dispatch; default mailbox,e2e) and R in 1..ROUNDS (chipbench --json) and
prints a Markdown table: for each metric the median over the rounds of each side,
after / before, and the median of the per-round after / before ratios ("paired").
A metric missing from a run (a skipped row, a client count not run) is left out of
that round; a metric no round has on both sides is not printed.
"""
import json
import statistics
import sys


def mailbox_metrics(doc):
    out = {}
    for r in doc.get("results", []):
        if r.get("skipped"):
            continue
        name = r["name"]
        if name in ("mbox_spin", "mbox_sleep", "chipd_ping", "raw_spin", "raw_futex",
                    "unix_seqpacket"):
            out[f"`{name}` p50"] = ("lower", r["p50_ns"] / 1e3, "µs")
        if name == "mbox_spin":
            out[f"`{name}` p99"] = ("lower", r["p99_ns"] / 1e3, "µs")
        if name == "mbox_pipe8":
            out["`mbox_pipe8` (8 in flight)"] = ("higher", r["rps"] / 1e6, "M req/s")
    return out


def e2e_metrics(doc):
    out = {}
    for row in doc.get("rows", []):
        if not row.get("ok"):
            continue
        n = row["clients"]
        n = f"{n} client" if n == 1 else f"{n} clients"
        out[f"e2e, {n}: req/s"] = ("higher", row["rps"], "")
        out[f"e2e, {n}: admit p50"] = ("lower", row["admit_p50_ns"] / 1e3, "µs")
        out[f"e2e, {n}: token p50"] = ("lower", row["token_p50_ns"] / 1e3, "µs")
    spin = doc.get("delivery", {}).get("spinning", {})
    if spin.get("ok"):
        out["e2e delivery, spinning reader: token p50"] = (
            "lower", spin["token_p50_ns"] / 1e3, "µs")
    small = doc.get("small", {})
    for row in small.get("rows", []):
        if row.get("ok") and row["clients"] in (1, 16):
            n = "1 client" if row["clients"] == 1 else f"{row['clients']} clients"
            out[f"e2e small, {n}: request p50"] = ("lower", row["request_p50_ns"] / 1e3, "µs")
            out[f"e2e small, {n}: req/s"] = ("higher", row["rps"], "")
    return out


def overlap_metrics(doc):
    out = {}
    for where, rows in (("in the worker", doc.get("rows", [])),
                        ("through chipd", doc.get("chipd", {}).get("rows", []))):
        for row in rows:
            # 1×: host and device cost the same per step, where overlap can gain most (2×)
            if row.get("ok") and row["host_device_ratio"] == 1.0:
                out[f"overlap {where}, 1×: overlap tok/s"] = ("higher", row["overlap_tps"], "")
                out[f"overlap {where}, 1×: ratio"] = ("higher", row["ratio"], "")
    return out


def dispatch_metrics(doc):
    return {f"dispatch, {row['name']}: ns/task": ("lower", row["ns_per_task"], "")
            for row in doc.get("rows", []) if row.get("ok")}


METRICS = {"mailbox": mailbox_metrics, "e2e": e2e_metrics, "overlap": overlap_metrics,
           "dispatch": dispatch_metrics}


def load(raw, mode, side, rnd):
    with open(f"{raw}/{mode}.{side}.{rnd}.json", encoding="utf-8") as f:
        return METRICS[mode](json.load(f))


def fmt(v, unit):
    text = f"{v:.3g}" if v < 100 else f"{v:.0f}"
    return f"{text} {unit}".strip()


def main():
    modes = (sys.argv[3] if len(sys.argv) == 4 else "mailbox,e2e").split(",")
    if len(sys.argv) not in (3, 4) or not set(modes) <= METRICS.keys():
        sys.exit("usage: compare.py RAW ROUNDS [MODES]")
    raw, rounds = sys.argv[1], int(sys.argv[2])
    order, seen = [], {}
    for mode in modes:
        for rnd in range(1, rounds + 1):
            old, new = load(raw, mode, "old", rnd), load(raw, mode, "new", rnd)
            for key in old:
                if key not in new:
                    continue
                if key not in seen:
                    order.append(key)
                    seen[key] = []
                seen[key].append((old[key], new[key]))
    print(f"{rounds} rounds; medians over the rounds; paired = median of per-round ratios\n")
    print("| metric | better | before | after | after / before | paired |")
    print("|---|---|---:|---:|---:|---:|")
    for key in order:
        pairs = seen[key]
        better, unit = pairs[0][0][0], pairs[0][0][2]
        before = statistics.median(o[1] for o, _ in pairs)
        after = statistics.median(n[1] for _, n in pairs)
        ratios = [n[1] / o[1] for o, n in pairs if o[1] > 0]
        ratio = f"{after / before:.2f}×" if before > 0 else "-"
        paired = f"{statistics.median(ratios):.2f}×" if ratios else "-"
        print(f"| {key} | {better} | {fmt(before, unit)} | {fmt(after, unit)} | {ratio} | "
              f"{paired} |")


if __name__ == "__main__":
    main()
