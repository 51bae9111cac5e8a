"""report_sections.py - the sections of docs/performance.md after the mailbox: dispatch,
overlap, e2e, hol, startup, idle, kernels and GPU. Each reads its mode's JSON from the raw
directory of one report.sh run, sets its {{fields}} on the report, adds its targets,
and draws its plot. Used by report_render.py."""

from __future__ import annotations

import os

from report_render import load, median, ms, num, table, times, us

# the targets of the report's Targets table
DISPATCH_TARGET = 15.0
OVERLAP_TARGET = 1.85
IDLE_CPU_PCT = 1.0
SUP_RSS_MIB = 16.0
WORKER_EXTRA_MIB = 32.0
MIB = 1048576.0


def dispatch(rep):
    d = load(rep.raw, "dispatch.json")
    peer = d.get("peer", {})
    prow = {r["name"]: r for r in peer.get("rows", [])}
    ratios = d.get("chipd_over_peer_tasks_per_s") or peer.get("chipd_over_peer_tasks_per_s", {})
    rows = []
    for r in d["rows"]:
        p = prow.get(r["name"], {})
        ratio = ratios.get(r["name"])
        runs = ", ".join(f"{x:.1f}" for x in r.get("runs_ns_per_task", []))
        rows.append([r["name"], f"{r['ns_per_task']:.1f}" if r.get("ok") else "failed", runs,
                     num(r.get("tasks_per_s")),
                     f"{p['ns_per_task']:.1f}" if p.get("ok") else "skipped",
                     num(p.get("tasks_per_s")), times(ratio, 1) if ratio else "—"])
    rep.fields["dispatch_config"] = (
        f"{d['tasks']:,} empty tasks per run in steps of {d['step']:,}, {d['streams']} sim "
        f"streams, {d['runs']} runs, medians")
    rep.fields["dispatch_peer"] = (
        f"skipped: {peer.get('why', '')}" if peer.get("skipped")
        else f"{peer.get('what', '?')}, {peer.get('cpu_workers', '?')} CPU worker(s)")
    rep.fields["dispatch_table"] = table(
        ["tasks", "chipd ns/task", "chipd runs (ns/task)", "chipd tasks/s", "StarPU ns/task",
         "StarPU tasks/s", "chipd / StarPU"], rows, "lrlrrrr")
    for name in ("independent", "chain"):
        ratio = ratios.get(name)
        rep.targets.append((f"dispatch, {name} empty tasks: chipd / StarPU throughput",
                            times(ratio, 1) if ratio
                            else "skipped: " + (peer.get("why") or "no StarPU result"),
                            f"≥ {DISPATCH_TARGET:.0f}×",
                            None if ratio is None else ratio >= DISPATCH_TARGET))


def _overlap_rows(rows):
    out = []
    for r in rows:
        if not r.get("ok"):
            out.append([f"{r['host_device_ratio']:.1f}", "failed", "", "", "", ""])
            continue
        h = r["host_device_ratio"]
        ideal = (1 + h) / max(1, h)
        out.append([f"{h:.1f}", num(r["overlap_tps"]), num(r["no_overlap_tps"]),
                    f"**{r['ratio']:.2f}**" if h == 1 else f"{r['ratio']:.2f}",
                    f"{r['overlap_s_overlapped_pct']:.0f}%", f"{ideal:.2f}"])
    return out


def overlap(rep):
    d = load(rep.raw, "overlap.json")
    head = ["host / device cost", "overlap tok/s", "no-overlap tok/s", "ratio", "O∥S of S",
            "ideal"]
    rep.fields["overlap_config"] = (
        f"{d['requests']} request(s) of {d['tokens']} tokens, device cost {d['device_us']} µs "
        f"per step")
    rep.fields["overlap_table"] = table(head, _overlap_rows(d["rows"]), "rrrrrr")
    c = d.get("chipd", {})
    if c.get("skipped"):
        rep.fields["overlap_chipd_table"] = f"Skipped: {c.get('why', '')}"
    else:
        rep.fields["overlap_chipd_table"] = table(head, _overlap_rows(c["rows"]), "rrrrrr")
    one = [r for r in d["rows"] if r["host_device_ratio"] == 1 and r.get("ok")]
    onec = [r for r in c.get("rows", []) if r["host_device_ratio"] == 1 and r.get("ok")]
    for what, rows in (("in a worker", one), ("through chipd", onec)):
        v = rows[0]["ratio"] if rows else None
        rep.targets.append((f"overlap speed-up at host = device cost, {what}", times(v),
                            f"≥ {OVERLAP_TARGET}×", None if v is None else v >= OVERLAP_TARGET))
    dat = os.path.join(rep.raw, "overlap.dat")
    with open(dat, "w", encoding="utf-8") as f:
        for rows in (d["rows"], c.get("rows", [])):
            for r in rows:
                if r.get("ok"):
                    h = r["host_device_ratio"]
                    f.write(f"{h} {r['ratio']} {(1 + h) / max(1, h)}\n")
            f.write("\n\n")
    rep.plot("perf_overlap.png", f"""
set title "O/S overlap: tokens/s with two banks over one bank (device {d['device_us']} µs/step)"
set xlabel "host cost / device cost per step"
set ylabel "speed-up (overlap / no overlap)"
set xrange [0:2.5]
set yrange [0:*]
set key bottom right
set grid
ideal(x) = (1 + x) / (x > 1 ? x : 1)
set samples 200
plot ideal(x) title "ideal (h + d) / max(h, d)" with lines dt 2 lw 2, \\
     "{dat}" index 0 using 1:2 title "in a worker (wrk_main)" with linespoints pt 7 ps 1.5 lw 2, \\
     "{dat}" index 1 using 1:2 title "through chipd (1 chip)" with linespoints pt 5 ps 1.5 lw 2
""")
    rep.fields["overlap_plot"] = f"![overlap speed-up]({rep.img_rel}/perf_overlap.png)"


def e2e_small(rep, sm):
    """The small-request section of e2e.json: one-token zero-work requests against
    chipd_ping of the same node, and the issue's two targets."""
    if not sm:
        rep.fields["e2e_small"] = "Not measured in this run (`--no-small`)."
        return
    ping = sm.get("ping_p50_ns")
    rows = []
    for r in sm["rows"]:
        if not r.get("ok"):
            rows.append([r["clients"], "failed", "", "", "", "", ""])
            continue
        rng = (f"{num(r['rps_min'])}–{num(r['rps_max'])}" if r.get("repeats") else "")
        rows.append([r["clients"], num(r["rps"]), rng, us(r["request_p50_ns"], 1),
                     us(r["request_p99_ns"], 1), r["refused"],
                     times(r.get("request_p50_per_ping_p50"))])
    head = ("`chipd_ping` on the same node: p50 "
            + (f"{us(ping, 1)}, p99 {us(sm['ping_p99_ns'], 1)}" if ping else "failed") + ".")
    if sm.get("floor_ok"):
        floor = sm["floor_ns"]
        head += (f" The path's floor in the same run: {sm['floor_threads']} threads passing a "
                 f"word round a ring, waiting as chipd's threads do, take "
                 f"{us(sm['handoff_p50_ns'], 1)} per hand-off (p50); a one-token request "
                 f"crosses {sm['floor_handoffs']} hand-offs in a row, so it cannot take less "
                 f"than {us(floor, 1)}"
                 + (f" = {times(floor / ping)} `chipd_ping`" if ping else "") + " here.")
    reps = next((r["repeats"] for r in sm["rows"] if r.get("repeats")), None)
    if reps:
        head += (f" Each row is the window of the median req/s among {reps} windows of the "
                 f"same length, run one after the other; \"req/s range\" gives the fewest "
                 f"and the most of them.")
    rep.fields["e2e_small"] = head + "\n\n" + table(
        ["clients", "req/s", "req/s range", "request p50", "request p99", "refused",
         "request p50 / ping p50"], rows, "rrrrrrr")
    one = next((r for r in sm["rows"] if r["clients"] == 1 and r.get("ok")), None)
    v = one.get("request_p50_per_ping_p50") if one else None
    rep.targets.append(("one-token zero-work request, 1 client: submit → final token p50 / "
                        "`chipd_ping` p50", times(v), f"≤ {sm['target_pings']:.0f}×",
                        None if v is None else v <= sm["target_pings"]))
    at = next((r for r in sm["rows"] if r["clients"] == sm["target_rps_clients"]
               and r.get("ok")), None)
    v = at["rps"] if at else None
    rep.targets.append((f"one-token zero-work requests/s at {sm['target_rps_clients']} clients",
                        num(v), f"≥ {num(sm['target_rps'])}",
                        None if v is None else v >= sm["target_rps"]))


def e2e(rep):
    d = load(rep.raw, "e2e.json")
    rows = []
    for r in d["rows"]:
        if not r.get("ok"):
            rows.append([r["clients"], "failed"] + [""] * 9)
            continue
        rows.append([r["clients"], num(r["rps"]), num(r["tps"]), us(r["token_p50_ns"], 1),
                     us(r["token_p99_ns"], 1), us(r["admit_p50_ns"], 1),
                     us(r["admit_p99_ns"], 1), r["refused"], times(r["rps_ratio"]),
                     times(r["token_p50_ratio"]), times(r["admit_p50_ratio"])])
    rep.fields["e2e_config"] = (
        f"synthetic requests of {d['tokens']} tokens, device_us {d['device_us']}, "
        f"{d['seconds']:g} s per row, {d['chips']} sim chips")
    rep.fields["e2e_table"] = table(
        ["clients", "req/s", "tok/s", "token p50", "token p99", "admit p50", "admit p99",
         "refused", "req/s ratio", "token p50 ratio", "admit p50 ratio"], rows, "rrrrrrrrrrr")
    dl = d.get("delivery")
    if dl:
        drows = []
        for what, r in (("spins 50 µs, then sleeps (default)", dl["sleeping"]),
                        ("spins, never sleeps", dl["spinning"])):
            drows.append([what, us(r.get("token_p50_ns")), us(r.get("token_p99_ns")),
                          num(r.get("tokens"))])
        rep.fields["e2e_delivery"] = (
            f"One client, requests of {dl['tokens']} tokens with device_us {dl['device_us']} "
            f"(tokens spaced, the node otherwise idle):\n\n"
            + table(["reader", "token p50", "token p99", "tokens"], drows, "lrrr"))
        v = dl["spinning"].get("token_p50_ns")
        rep.targets.append(("token delivery p50 (publish → client), spinning reader",
                            us(v), f"≤ {dl['target_p50_ns'] / 1e3:.0f} µs",
                            None if v is None else v <= dl["target_p50_ns"]))
    else:
        rep.fields["e2e_delivery"] = "Not measured in this run (`--no-delivery`)."
    e2e_small(rep, d.get("small"))
    dat = os.path.join(rep.raw, "e2e.dat")
    with open(dat, "w", encoding="utf-8") as f:
        for r in d["rows"]:
            if r.get("ok"):
                f.write(f"{r['clients']} {r['tps']} {r['token_p50_ns'] / 1e3} "
                        f"{r['token_p99_ns'] / 1e3} {r['admit_p50_ns'] / 1e3}\n")
    rep.plot("perf_e2e.png", f"""
set title "chipd end to end: {d['chips']} sim chips, synthetic {d['tokens']}-token requests"
set xlabel "concurrent clients"
set logscale x 2
set ylabel "tokens/s"
set y2label "latency, µs (log scale)"
set logscale y2
set ytics nomirror
set y2tics
set yrange [0:*]
set key top left
set grid
plot "{dat}" using 1:2 axes x1y1 title "tokens/s" with linespoints pt 7 ps 1.5 lw 2, \\
     "" using 1:3 axes x1y2 title "token delivery p50" with linespoints pt 5 lw 2, \\
     "" using 1:4 axes x1y2 title "token delivery p99" with linespoints pt 4 lw 2 dt 2, \\
     "" using 1:5 axes x1y2 title "admission p50" with linespoints pt 9 lw 2
""")
    rep.fields["e2e_plot"] = f"![e2e tokens/s and latency]({rep.img_rel}/perf_e2e.png)"


def hol(rep):
    d = load(rep.raw, "hol.json")
    rows = []
    for i, r in enumerate(d["runs"], 1):
        if not r.get("ok"):
            rows.append([i, "failed", "", "", ""])
            continue
        rows.append([i, num(r["alone_tps"]), num(r["with_slow_tps"]), times(r["ratio"]),
                     num(r["slow_tps"], 1)])
    rows.append(["median", num(d["median_alone_tps"]), num(d["median_with_slow_tps"]),
                 times(d["median_ratio"]), ""])
    rep.fields["hol_config"] = (
        f"{d['fast']} fast clients (synthetic requests of {d['tokens']} tokens, device_us "
        f"{d['fast_device_us']}) and one slow request (device_us {d['slow_device_us']}), "
        f"{d['seconds']:g} s per phase, {len(d['runs'])} runs")
    rep.fields["hol_table"] = table(
        ["run", "fast tok/s alone", "fast tok/s beside the slow one", "ratio",
         "slow request tok/s"], rows, "rrrrr")
    ok = all(r.get("ok") for r in d["runs"])
    rep.targets.append(("fast requests beside a slow one on their chip / alone (tokens/s)",
                        times(d["median_ratio"]) if ok else "failed",
                        f"≥ {d['target_ratio']:.1f}×", d["median_ratio"] >= d["target_ratio"]
                        if ok else False))


def startup(rep):
    d = load(rep.raw, "startup.json")
    rows = [[r["what"].replace("->", "→"), ms(r["p50_ns"]), ms(r["min_ns"]), ms(r["max_ns"]),
             times(r["ratio"])] for r in d["rows"] if r.get("ok")]
    rows += [[r["what"], "failed", "", "", ""] for r in d["rows"] if not r.get("ok")]
    rep.fields["startup_table"] = table(["what", "median", "min", "max", "ratio"], rows, "lrrrr")
    rep.fields["startup_runs"] = d["runs"]


def idle(rep):
    d = load(rep.raw, "idle.json")
    rows = [[p["role"], f"{p['cpu_pct']:.2f}%", f"{p['vmrss'] / MIB:.1f} MiB",
             f"{p['rss_anon'] / MIB:.1f} MiB", f"{p['rss_shmem'] / MIB:.1f} MiB"]
            for p in d["procs"]]
    rows.append(["**node**", f"**{d['cpu_pct_total']:.2f}%**", "", "", ""])
    rep.fields["idle_table"] = table(["process", "CPU (% of a core)", "VmRSS", "RssAnon",
                                      "RssShmem"], rows, "lrrrr")
    rep.fields["idle_config"] = f"{d['chips']} sim workers, {d['seconds']:.1f} s"
    sup = [p for p in d["procs"] if p["role"] == "supervisor"]
    wrk = [p for p in d["procs"] if p["role"].startswith("worker")]
    conf = d["worker_configured_bytes"] / MIB
    rep.targets.append(("idle node CPU (supervisor + spawner + 2 workers)",
                        f"{d['cpu_pct_total']:.2f}% of a core", f"≤ {IDLE_CPU_PCT:.0f}%",
                        d["cpu_pct_total"] <= IDLE_CPU_PCT))
    if sup:
        v = sup[0]["vmrss"] / MIB
        rep.targets.append(("supervisor resident memory (VmRSS)", f"{v:.1f} MiB",
                            f"≤ {SUP_RSS_MIB:.0f} MiB", v <= SUP_RSS_MIB))
    if wrk:
        v = max(p["vmrss"] for p in wrk) / MIB
        lim = conf + WORKER_EXTRA_MIB
        rep.targets.append(("idle sim worker resident memory", f"{v:.1f} MiB",
                            f"≤ {conf:.0f} configured + {WORKER_EXTRA_MIB:.0f} MiB",
                            v <= lim))


def kernels(rep):
    rows = []
    with open(os.path.join(rep.raw, "kernels.txt"), encoding="utf-8") as f:
        for line in f:
            w = line.split()
            # ERRTAB kernel shape max_abs A max_rel R tol T ok
            rows.append([w[1], w[2], w[4], w[6], w[8], w[9]])
    rep.fields["kernels_table"] = table(["kernel", "shape", "max abs", "max rel", "tolerance",
                                         ""], rows, "llrrrl")


def gpu(rep):
    path = os.path.join(rep.raw, "gpu_results.txt")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            rep.fields["gpu"] = ("From `tests/gpu/run.sh OUTDIR` on the machine it names "
                                 "(the file as written):\n\n```\n" + f.read().rstrip()
                                 + "\n```")
    else:
        rep.fields["gpu"] = (
            "**Not measured.** This report's run had no GPU results (`report.sh --gpu`), so "
            "nothing here ran on a GPU. The NVIDIA (nvcc, sm_90) and AMD "
            "(hipcc, gfx90a) variants compile in the test command, and their GPU programs "
            "skip cleanly without a device.")


def render_all(rep):
    dispatch(rep)
    overlap(rep)
    e2e(rep)
    hol(rep)
    startup(rep)
    idle(rep)
    kernels(rep)
    gpu(rep)
