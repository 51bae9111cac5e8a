#!/usr/bin/env python3
"""report_render.py - turns one run of tests/bench/report.sh (the JSON of every
chipbench mode, the kernel error table, the machine description) into
docs/performance.md: fills the {{placeholders}} of the template with tables and
draws the plots with gnuplot. Called by report.sh; standard library only."""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys


def load(raw: str, name: str):
    path = os.path.join(raw, name)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_runs(raw: str, mode: str) -> list:
    paths = sorted(glob.glob(os.path.join(raw, f"{mode}.*.json")),
                   key=lambda p: int(p.rsplit(".", 2)[1]))
    return [load(raw, os.path.basename(p)) for p in paths]


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def us(ns, digits=2):
    if ns is None:
        return "—"
    v = ns / 1e3
    if v >= 1000:
        return f"{v / 1e3:.{digits}f} ms"
    return f"{v:.{digits}f} µs"


def ms(ns):
    return "—" if ns is None else f"{ns / 1e6:.1f} ms"


def num(x, digits=0):
    if x is None:
        return "—"
    return f"{x:,.{digits}f}"


def times(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}×"


def table(head: list, rows: list, align: str) -> str:
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def verdict(ok) -> str:
    return "—" if ok is None else ("**met**" if ok else "**missed**")


class Report:
    def __init__(self, raw: str, img: str, img_rel: str):
        self.raw, self.img, self.img_rel = raw, img, img_rel
        self.env = {}
        with open(os.path.join(raw, "machine.env"), encoding="utf-8") as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                self.env[k] = v
        self.targets = []  # (what, measured, target, ok)
        self.fields = {}

    # ---- machine ----
    def machine(self):
        e = self.env
        lines = [
            f"- run: {e['date']}, commit `{e['commit']}`"
            + (" (with uncommitted changes)" if e.get("dirty") == "yes" else ""),
            f"- CPU: {e['ncpu']} × {e['cpu']} ({e['virt']} guest)"
            if e.get("virt") not in ("none", "", None) else f"- CPU: {e['ncpu']} × {e['cpu']}",
            f"- memory: {int(e['mem_kib']) / 1048576:.1f} GiB; {e['os']}; Linux {e['kernel']}",
            f"- compiler: {e['cc']}, `-O3` (`CMAKE_BUILD_TYPE=Release`)",
            f"- load average before / after the run: {e['load_before']} / {e.get('load_after', '?')}",
            f"- hardware performance counters: {'available' if e.get('perf_counters') == 'yes' else 'none in this guest (profiles use callgrind instruction counts and strace)'}",
        ]
        if e.get("quick") == "1":
            lines.insert(0, "- **`--quick` run: small sizes, the numbers below are not "
                            "measurements, only a check of the pipeline**")
        self.fields["machine"] = "\n".join(lines)
        self.fields["runs"] = e["runs"]

    # ---- mailbox ----
    def mailbox(self):
        runs = load_runs(self.raw, "mailbox")
        names, labels, skipped = [], {}, {}
        for r in runs:
            for x in r["results"]:
                if x["name"] not in names:
                    names.append(x["name"])
                labels[x["name"]] = x["label"]
                if x.get("skipped"):
                    skipped[x["name"]] = x.get("why", "skipped")
        med = {}
        rows = []
        for i, n in enumerate(names):
            got = [x for r in runs for x in r["results"] if x["name"] == n and not x.get("skipped")]
            letter = f"({chr(ord('a') + i)})"
            if not got:
                rows.append([letter, f"`{n}`", labels[n], "skipped: " + skipped.get(n, ""), "", ""])
                continue
            p50 = median([x["p50_ns"] for x in got])
            p99 = median([x["p99_ns"] for x in got])
            rps = median([x["rps"] for x in got])
            med[n] = (p50, p99, rps)
            per = " (8 in flight)" if n == "mbox_pipe8" else ""
            rows.append([letter, f"`{n}`", labels[n], us(p50) + per, us(p99), num(rps)])
        self.fields["mailbox_table"] = table(
            ["", "variant", "what", "p50", "p99", "round trips/s"], rows, "lllrrr")

        ratio_keys = []
        for r in runs:
            for k in r.get("ratios", {}):
                if k not in ratio_keys:
                    ratio_keys.append(k)
        rrows = []
        for k in ratio_keys:
            vals = [r["ratios"].get(k) for r in runs]
            vals = [v for v in vals if v]
            rrows.append([f"`{k}`", ", ".join(f"{v:.2f}" for v in vals) or "skipped",
                          times(median(vals))])
        pipe = [r.get("pipelined_rps") for r in runs]
        rrows.append(["`pipelined_rps` (8 in flight)",
                      ", ".join(f"{v / 1e6:.2f} M" for v in pipe if v),
                      f"{median(pipe) / 1e6:.2f} M/s" if median(pipe) else "—"])
        self.fields["mailbox_ratios"] = table(["ratio (p50)", "per run", "median"], rrows, "lll")

        def rmed(key):
            return median([r["ratios"].get(key) for r in runs])

        a_c = rmed("mbox_spin_over_raw_spin")
        g_a = rmed("iceoryx_over_mbox_spin")
        b_d = rmed("mbox_sleep_over_raw_futex")
        self.targets += [
            ("mailbox round trip p50 / raw shared-memory floor", times(a_c), "≤ 2×",
             None if a_c is None else a_c <= 2.0),
            ("iceoryx busy-poll round trip / mailbox", times(g_a)
             if g_a else "skipped: " + skipped.get("iceoryx_busy", "no result"), "≥ 5×",
             None if g_a is None else g_a >= 5.0),
            ("mailbox sleeping / raw futex ping-pong", times(b_d), "≤ 1.2×",
             None if b_d is None else b_d <= 1.2),
            ("mailbox pipelined, 8 in flight", f"{median(pipe) / 1e6:.2f} M req/s", "≥ 2 M req/s",
             median(pipe) >= 2e6),
        ]
        # plot: p50 and p99 by transport
        dat = os.path.join(self.raw, "mailbox.dat")
        with open(dat, "w", encoding="utf-8") as f:
            for n in names:
                if n in med and n != "mbox_pipe8":
                    f.write(f'"{n}" {med[n][0] / 1e3:.4f} {med[n][1] / 1e3:.4f}\n')
        self.plot("perf_mailbox.png", f"""
set title "Round trip by transport (64-byte request and answer; median of {len(runs)} runs)"
set ylabel "round trip, µs (log scale)"
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -30 noenhanced
set key top left
set grid ytics
plot "{dat}" using 2:xtic(1) title "p50", "" using 3 title "p99"
""")
        self.fields["mailbox_plot"] = f"![round trip by transport]({self.img_rel}/perf_mailbox.png)"

    # ---- plots ----
    def plot(self, png: str, script: str):
        path = os.path.join(self.img, png)
        full = (f'set terminal pngcairo size 900,520 font "DejaVu Sans,10" noenhanced\n'
                f'set output "{path}"\n' + script)
        gp = os.path.join(self.raw, png.replace(".png", ".gp"))
        with open(gp, "w", encoding="utf-8") as f:
            f.write(full)
        subprocess.run(["gnuplot", gp], check=True)


def fill(template: str, fields: dict) -> str:
    def sub(m):
        key = m.group(1)
        if key not in fields:
            sys.exit(f"report_render: the template asks for {{{{{key}}}}}, which no section made")
        return str(fields[key])

    return re.sub(r"\{\{([a-z0-9_]+)\}\}", sub, template)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--raw", required=True)
    ap.add_argument("--template", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--img", required=True)
    a = ap.parse_args()
    os.makedirs(a.img, exist_ok=True)
    img_rel = os.path.relpath(a.img, os.path.dirname(os.path.abspath(a.out)))
    rep = Report(a.raw, a.img, img_rel)
    import report_sections  # the per-mode sections, next to this file

    rep.machine()
    rep.mailbox()
    report_sections.render_all(rep)
    rep.fields["targets"] = table(
        ["target", "measured", "target", "verdict"],
        [[w, m, t, verdict(ok)] for w, m, t, ok in rep.targets], "lrrl")
    with open(a.template, encoding="utf-8") as f:
        text = fill(f.read(), rep.fields)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
