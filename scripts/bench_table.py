#!/usr/bin/env python3
"""Prints EventKernel's benchmark results as one row per comparison, with ratios and targets.

Input: the influx CSV that `swift package benchmark --format influx --path DIR` writes
(DIR/Current_run.influx.csv). Uses the median (p50) over a benchmark's iterations. Raw values in
that file are per iteration: wall clock in nanoseconds, malloc counts in allocations; an
iteration runs SCALE operations (see scale() below, which mirrors the benchmark configurations).

Usage: scripts/bench_table.py Current_run.influx.csv [--markdown]
"""
import csv
import sys
from collections import defaultdict


def load(path):
    data = defaultdict(dict)  # test -> metric -> p50 value
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r and not r[0].startswith("#")]
    if not rows:
        sys.exit(f"{path}: no results. Did the run fail, or did --filter match nothing? Filters are regexes "
                 "matched against whole benchmark names: --filter 'Ledger.*', not --filter Ledger.")
    header = rows[0]
    ix = {name: i for i, name in enumerate(header)}
    for r in rows[1:]:
        percentile = float(r[ix["percentile"]])
        if percentile == 50.0:
            data[r[ix["test"]]][r[ix["metric"]]] = float(r[ix["value"]])
        elif percentile == 99.0:
            # Latency benchmarks report their tail too (the scale-out observe latency).
            data[r[ix["test"]]][r[ix["metric"]] + "@p99"] = float(r[ix["value"]])
    return data


# LedgerBenchmarks: operations per iteration (see the header of LedgerBenchmarks.swift).
LEDGER_SCALE = {
    "Ledger.AddBatch1000.EventKernel": 1000, "Ledger.AddBatch1000.GRDB": 1000,
    "Ledger.SyncedSave.EventKernel": 1000, "Ledger.SyncedSave.GRDB": 1000,
    "Ledger.AccountNewest50.EventKernel": 1000, "Ledger.AccountNewest50.GRDB": 1000,
    "Ledger.Range7d.EventKernel": 16, "Ledger.Range7d.GRDB": 16,
    "Ledger.PageOffset10k.EventKernel": 1000, "Ledger.PageOffset10k.GRDB": 1,
    "Ledger.CategoryCount.EventKernel": 1000, "Ledger.CategoryCount.GRDB": 6,
}


def scale(test):
    """Operations per iteration, as configured in Benchmarks/Benchmarks/*."""
    if test in LEDGER_SCALE:
        return LEDGER_SCALE[test]
    if test.startswith("Append.") or (test.startswith("ScaleOut.Synced.")):
        return 1000
    if test.startswith("Log."):
        return {"Log.Append.Synced.OneTask": 1, "Log.Floor.PwriteFdatasync": 1, "Log.Read.FullScan1M": 1_000_000}.get(test, 1000)
    if test.startswith("Query."):
        if test.endswith(".NaiveArray") or (test.startswith("Query.Overlap1d.GRDB")):
            return 1
        return 1000
    return 1


def metric(data, test, *names):
    for name in names:
        for key, value in data.get(test, {}).items():
            if key.lower().replace(" ", "") == name:
                return value
    return None


def per_op_ns(data, test):
    wall = metric(data, test, "time(wallclock)")
    return None if wall is None else wall / scale(test)


def allocs_per_op(data, test):
    m = metric(data, test, "malloc(total)")
    return None if m is None else m / scale(test)


def fmt_time(ns):
    if ns is None:
        return "n/a"
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def fmt_num(v, unit=""):
    if v is None:
        return "n/a"
    return f"{v:,.1f}{unit}" if v < 100 else f"{v:,.0f}{unit}"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        print(__doc__)
        return 2
    data = load(args[0])
    rows = []  # (what, eventkernel, peer name, peer value, ratio text, target text, status)
    ledger_rows = []

    def speed(what, ek, peer, peer_label, target=None, out=rows):
        """Throughput-style comparison: ratio = peer time / EventKernel time (higher is better)."""
        a, b = per_op_ns(data, ek), per_op_ns(data, peer)
        if a is None and b is None:
            return  # not in this run (a filtered subset)
        ratio = b / a if a and b else None
        status = ""
        if target is not None and ratio is not None:
            status = "MET" if ratio >= target else f"MISSED ({ratio / target:.2f} of target)"
        out.append((what, fmt_time(a) + "/op", peer_label, fmt_time(b) + "/op",
                     "n/a" if ratio is None else f"{ratio:,.1f}x faster" if ratio >= 1 else f"{1 / ratio:,.1f}x slower",
                     "" if target is None else f">= {target}x", status))

    def at_most(what, a, a_text, b, b_text, peer_label, target=None, unit="", out=rows):
        """Smaller-is-better comparison: ratio = a / b."""
        if a is None and b is None:
            return  # not in this run (a filtered subset)
        ratio = a / b if a is not None and b else None
        status = ""
        if target is not None and ratio is not None:
            status = "MET" if ratio <= target else f"MISSED ({ratio / target:.2f}x the limit)"
        out.append((what, a_text, peer_label, b_text, "n/a" if ratio is None else f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:.3f}x",
                     "" if target is None else f"<= {target}x", status))

    ek = "EventKernel"
    # Appends (per activity)
    # Append targets from the write-path issue (#12).
    speed("Append buffered, batches of 1,000", "Append.Buffered.Batch1000.EventKernel", "Append.Buffered.Batch1000.GRDB", "GRDB (NORMAL, 1,000-row txn)", 20)
    speed("Append buffered, batches of 100", "Append.Buffered.Batch100.EventKernel", "Append.Buffered.Batch100.GRDB", "GRDB (NORMAL, 100-row txn)")
    speed("Append buffered, batches of 1,000", "Append.Buffered.Batch1000.EventKernel", "Append.Buffered.Batch1000.NaiveArray", "naive array (no persistence)")
    speed("Append buffered, batches of 100", "Append.Buffered.Batch100.EventKernel", "Append.Buffered.Batch100.JSONFile", "JSON file (rewrite per save, jsonN)")
    speed("Append synced, 1 task, 1 per call", "Append.Synced.OneTask.EventKernel", "Append.Synced.OneTask.GRDB", "GRDB (FULL, 1-row txn)", 1.5)
    speed("Append synced, 1 task, 1 per call", "Append.Synced.OneTask.EventKernel", "Log.Floor.PwriteFdatasync", "floor: bare pwrite+fdatasync")
    speed("GRDB FULL synced, 1 task (not EventKernel)", "Append.Synced.OneTask.GRDB", "Log.Floor.PwriteFdatasync", "floor: bare pwrite+fdatasync")
    speed("Append synced, 64 tasks, 1 per call", "Append.Synced.64Tasks.EventKernel", "Append.Synced.64Tasks.GRDB", "GRDB (FULL, 1-row txn)", 20)

    def interleaved(what, test, target=None, floor=True, out=None, peer="GRDB (FULL, 1-row txn), same moments", peer_name="GRDB FULL, 1 task"):
        """Synced appends measured in alternating slices of one process (AppendBenchmarks'
        interleaved benchmarks): EventKernel against GRDB FULL and the bare floor at the same
        moments, so that the disk's drift between benchmarks does not decide the ratio."""
        out = rows if out is None else out
        a = metric(data, test, "eknanosperop")
        b = metric(data, test, "grdbnanosperop")
        f = metric(data, test, "floornanosperop")
        if a is None or b is None:
            return
        ratio = b / a
        status = "" if target is None else ("MET" if ratio >= target else f"MISSED ({ratio / target:.2f} of target)")
        out.append((what + " (interleaved)", fmt_time(a) + "/op", peer, fmt_time(b) + "/op",
                     f"{ratio:,.1f}x faster" if ratio >= 1 else f"{1 / ratio:,.1f}x slower", "" if target is None else f">= {target}x", status))
        if floor and f is not None:
            r = f / a
            out.append((what + " (interleaved)", fmt_time(a) + "/op", "floor: bare pwrite+fdatasync, same moments", fmt_time(f) + "/op",
                         f"{r:,.1f}x faster" if r >= 1 else f"{1 / r:,.1f}x slower", "", ""))
            r = f / b
            out.append((peer_name + " (interleaved; not EventKernel)", fmt_time(b) + "/op", "floor: bare pwrite+fdatasync, same moments", fmt_time(f) + "/op",
                         f"{r:,.1f}x faster" if r >= 1 else f"{1 / r:,.1f}x slower", "", ""))

    interleaved("Append synced, 1 task, 1 per call", "Append.Synced.Interleaved.OneTask", 1.5)
    interleaved("Append synced, 64 tasks, 1 per call", "Append.Synced.Interleaved.64Tasks", 20, floor=False)
    # Queries (per query)
    for label, what, t_rec in [("Window7d.Limit50", "7-day window, limit 50, newest first", 80),
                               ("Window7d.TwoTypes.Limit50", "7-day window + 2 of 6 types, limit 50", 50),
                               ("Range1d", "closed date range (1 day, all)", None),
                               ("Overlap1d", "overlap (1 day, all)", None)]:
        speed(what, f"Query.{label}.EventKernel", f"Query.{label}.GRDBRecords", "GRDB records", t_rec)
        speed(what, f"Query.{label}.EventKernel", f"Query.{label}.GRDBRows", "GRDB raw rows")
        speed(what, f"Query.{label}.EventKernel", f"Query.{label}.NaiveArray", "naive array (filter+sort)")
    # Startup
    snap, replay = per_op_ns(data, "Startup.Snapshot.EventKernel"), per_op_ns(data, "Startup.FullReplay.EventKernel")
    grown = per_op_ns(data, "Startup.Snapshot.Grown5x.EventKernel")
    grown_replay = per_op_ns(data, "Startup.FullReplay.Grown5x.EventKernel")
    at_most("Startup from snapshot vs full replay", snap, fmt_time(snap), replay, fmt_time(replay), "EventKernel full replay", 0.1)
    at_most("Startup from snapshot, history x5 vs x1", grown, fmt_time(grown), snap, fmt_time(snap), "EventKernel snapshot, x1", 1.3)
    at_most("Full replay, history x5 vs x1", grown_replay, fmt_time(grown_replay), replay, fmt_time(replay), "EventKernel full replay, x1")
    g = per_op_ns(data, "Startup.GRDB")
    at_most("Startup (open + first query)", snap, fmt_time(snap), g, fmt_time(g), "GRDB open + first query")
    j = per_op_ns(data, "Startup.JSONFile")
    at_most("Startup (open + first query)", snap, fmt_time(snap), j, fmt_time(j), "JSON file load (jsonN)")
    # Footprint
    ekd = metric(data, "Footprint.Disk.EventKernel", "bytesperactivity")
    ekl = metric(data, "Footprint.Disk.EventKernel", "logbytesperactivity")
    sq = metric(data, "Footprint.Disk.GRDB", "bytesperactivity")
    js = metric(data, "Footprint.Disk.JSONFile", "bytesperactivity")
    at_most("Bytes on disk per activity (log+snapshot)", ekd, fmt_num(ekd, " B"), sq, fmt_num(sq, " B"), "SQLite file", 0.5)
    at_most("Bytes on disk per activity (log only)", ekl, fmt_num(ekl, " B"), sq, fmt_num(sq, " B"), "SQLite file")
    at_most("Bytes on disk per activity (log+snapshot)", ekd, fmt_num(ekd, " B"), js, fmt_num(js, " B"), "JSON file (jsonN)")
    for key, label in [("residentbytesperactivity", "resident")]:
        a = metric(data, "Footprint.Memory.EventKernel", key)
        b = metric(data, "Footprint.Memory.NaiveArray", key)
        c = metric(data, "Footprint.Memory.GRDB", key)
        at_most(f"Memory per activity ({label})", a, fmt_num(a, " B"), b, fmt_num(b, " B"), "naive array of ActivityModel")
        at_most(f"Memory per activity ({label})", a, fmt_num(a, " B"), c, fmt_num(c, " B"), "GRDB (page cache, bounded)")
        if a is not None:
            at_most(f"Memory per activity ({label})", a, fmt_num(a, " B"), 100, "100 B", "the target", 1.0)
    fa, fb = per_op_ns(data, "Observation.FanOut100.EventKernel"), per_op_ns(data, "Observation.FanOut100.GRDB")
    speed("Observation fan-out: 100 observers, 1 write", "Observation.FanOut100.EventKernel", "Observation.FanOut100.GRDB", "GRDB ValueObservation")

    # Scale-out (ScaleOutBenchmarks): the repository on a PostgreSQL log, per activity; the
    # peers are AppendBenchmarks' figures of the same run (the local log, GRDB FULL). Targets
    # from the scale-out issue (#13).
    so_rows = []
    so = "ScaleOut.Synced."
    speed("Synced add, 1 task, PostgreSQL log", so + "OneTask.Postgres", "Append.Synced.OneTask.GRDB", "GRDB (FULL, 1-row txn)", out=so_rows)
    speed("Synced add, 1 task, PostgreSQL log", so + "OneTask.Postgres", "Append.Synced.OneTask.EventKernel", "EventKernel, local log", out=so_rows)
    speed("Synced add, 64 tasks, one instance", so + "64Tasks.Postgres", "Append.Synced.64Tasks.GRDB", "GRDB (FULL, 1-row txn)", 5, out=so_rows)
    speed("Synced add, 64 tasks, one instance", so + "64Tasks.Postgres", "Append.Synced.64Tasks.EventKernel", "EventKernel, local log", out=so_rows)
    speed("Synced add, 64 tasks over three instances", so + "64Tasks.ThreeInstances.Postgres", "Append.Synced.64Tasks.GRDB", "GRDB (FULL, 1-row txn)", out=so_rows)
    speed("Synced add, 64 tasks over three instances", so + "64Tasks.ThreeInstances.Postgres", "Append.Synced.64Tasks.EventKernel", "EventKernel, local log", out=so_rows)
    latency = metric(data, "ScaleOut.ObserveLatency.Postgres", "time(wallclock)")
    latency99 = metric(data, "ScaleOut.ObserveLatency.Postgres", "time(wallclock)@p99")
    if latency is not None:
        so_rows.append(("Add on A until observe yields it on B, p50", fmt_time(latency), "", "", "", "", ""))
        status = "" if latency99 is None else "MET" if latency99 < 50e6 else f"MISSED ({latency99 / 50e6:.2f}x the limit)"
        so_rows.append(("Add on A until observe yields it on B, p99", fmt_time(latency99), "", "", "", "< 50 ms", status))

    # Consumers (StartupBenchmarks, ConsumerBenchmarks.swift): a named consumer's run against the
    # store's full replay of the same log, same run; the lag of a consumer following 64 writer
    # tasks. Targets from issue 29.
    consumer_rows = []
    speed("Consumer run vs full replay (same log, every event)", "Consumer.Throughput.EventKernel",
          "Consumer.FullReplay.EventKernel", "full replay (forEachEnvelope)", 0.8, out=consumer_rows)
    # The same log opened by full replay into the activity projections (StartupBenchmarks).
    speed("Consumer run vs open by full replay (same log)", "Consumer.Throughput.EventKernel",
          "Startup.FullReplay.EventKernel", "open + replay into projections", 0.8, out=consumer_rows)
    for test, what in [("Consumer.FullReplay.EventKernel", "Full replay, events/s"),
                       ("Consumer.Throughput.EventKernel", "Consumer run, events/s")]:
        eps = metric(data, test, "eventspersecond")
        if eps is not None:
            consumer_rows.append((what, f"{eps:,.0f}", "", "", "", "", ""))
    lag50 = metric(data, "Consumer.Lag.64Writers.EventKernel", "lagmicroseconds")
    lag99 = metric(data, "Consumer.Lag.64Writers.EventKernel", "lagmicroseconds@p99")
    if lag50 is not None:
        consumer_rows.append(("Lag following 64 writer tasks, p50", fmt_time(lag50 * 1e3), "", "", "", "", ""))
        status = "" if lag99 is None else "MET" if lag99 < 50e3 else f"MISSED ({lag99 / 50e3:.2f}x the limit)"
        consumer_rows.append(("Lag following 64 writer tasks, p99", fmt_time(None if lag99 is None else lag99 * 1e3), "", "", "", "< 50 ms", status))

    # Ledger (LedgerBenchmarks): the finance domain on the generic repository, per transaction,
    # query or open. Targets from the ledger issue.
    lg = "Ledger."
    speed("Add, batches of 1,000 (per transaction)", lg + "AddBatch1000.EventKernel", lg + "AddBatch1000.GRDB", "GRDB (NORMAL, 1,000-row txn)", 10, out=ledger_rows)
    speed("Synced save, 1 per call", lg + "SyncedSave.EventKernel", lg + "SyncedSave.GRDB", "GRDB (FULL, 1-row txn)", 1, out=ledger_rows)
    interleaved("Synced save, 1 per call", lg + "SyncedSave.Interleaved", 1, out=ledger_rows, peer_name="GRDB FULL save")
    speed("One account's 50 newest", lg + "AccountNewest50.EventKernel", lg + "AccountNewest50.GRDB", "GRDB records", 20, out=ledger_rows)
    speed("7-day date range (all, oldest first)", lg + "Range7d.EventKernel", lg + "Range7d.GRDB", "GRDB records", 20, out=ledger_rows)
    speed("Page of 40 at offset 10,000 (date order)", lg + "PageOffset10k.EventKernel", lg + "PageOffset10k.GRDB", "GRDB records", 20, out=ledger_rows)
    speed("One category's count", lg + "CategoryCount.EventKernel", lg + "CategoryCount.GRDB", "GRDB SELECT COUNT(*)", 20, out=ledger_rows)
    lsnap, lreplay = per_op_ns(data, lg + "Reopen.Snapshot.EventKernel"), per_op_ns(data, lg + "Reopen.FullReplay.EventKernel")
    at_most("Reopen from snapshot vs full replay", lsnap, fmt_time(lsnap), lreplay, fmt_time(lreplay), "EventKernel full replay", 0.25, out=ledger_rows)
    lg_open = per_op_ns(data, lg + "Reopen.GRDB")
    at_most("Reopen (open + first query)", lsnap, fmt_time(lsnap), lg_open, fmt_time(lg_open), "GRDB open + first query", out=ledger_rows)
    lbytes = metric(data, lg + "Disk.EventKernel", "bytespertransaction")
    llog = metric(data, lg + "Disk.EventKernel", "logbytespertransaction")
    lsql = metric(data, lg + "Disk.GRDB", "bytespertransaction")
    at_most("Bytes on disk per transaction (log+snapshot)", lbytes, fmt_num(lbytes, " B"), lsql, fmt_num(lsql, " B"), "SQLite file (+WAL, checkpointed)", 1.0, out=ledger_rows)
    at_most("Bytes on disk per transaction (log only)", llog, fmt_num(llog, " B"), lsql, fmt_num(lsql, " B"), "SQLite file (+WAL, checkpointed)", out=ledger_rows)

    # Allocations per operation
    alloc_rows = []
    for test in sorted(data):
        if test.startswith(("Append.", "Query.", "Observation.", "ScaleOut.Synced.")) or test in LEDGER_SCALE:
            a = allocs_per_op(data, test)
            if a is not None:
                alloc_rows.append((test, f"{a:,.2f}"))

    log_rows = []
    for test, what in [("Log.Append.Buffered.Batch1000x64B", "EventLog append, buffered, batches of 1,000 x 64 B"),
                       ("Log.Append.Synced.OneTask", "EventLog append, synced, 1 task (fresh store each iteration)"),
                       ("Log.Append.Synced.64Tasks", "EventLog append, synced, 64 tasks"),
                       ("Log.Floor.PwriteFdatasync", "floor: bare pwrite + fdatasync, 100 B (no EventLog)"),
                       ("Log.Read.FullScan1M", "EventLog full scan of 1M records")]:
        if per_op_ns(data, test) is not None:
            log_rows.append((what, fmt_time(per_op_ns(data, test)) + "/record"))

    # Scaling: each figure per size, and its growth per step against linear (target <= 1.3x).
    scaling_rows = []
    kinds = [("OpenSnapshot", "open from snapshot"), ("FullReplay", "full replay"), ("SnapshotWrite", "snapshot write"),
             ("Verify", "log verify (every byte)"), ("ScanEvents", "scan + decode every event")]
    for kind, what in kinds:
        sizes = sorted(int(t.rsplit(".n", 1)[1]) for t in data if t.startswith(f"Scaling.{kind}.n"))
        previous = None
        for size in sizes:
            t = per_op_ns(data, f"Scaling.{kind}.n{size}")
            growth, status = "", ""
            if previous and t and previous[1]:
                factor = (t / previous[1]) / (size / previous[0])
                growth = f"{factor:.2f}x linear"
                status = "MET" if factor <= 1.3 else "MISSED"
            scaling_rows.append((what, f"{size:,}", fmt_time(t), growth, status))
            previous = (size, t)

    md = "--markdown" in sys.argv
    header = ("Comparison", "EventKernel", "Peer", "Peer figure", "Ratio", "Target", "Status")
    table = [header] + rows
    if md:
        def print_md(head, body, blank_before=True):
            if blank_before:
                print()
            print("| " + " | ".join(head) + " |")
            print("|" + "---|" * len(head))
            for r in body:
                print("| " + " | ".join(r) + " |")
        if rows:
            print_md(header, rows, blank_before=False)
        if ledger_rows:
            print_md(("Ledger",) + header[1:], ledger_rows)
        if so_rows:
            print_md(("Scale-out (PostgreSQL log)",) + header[1:], so_rows)
        if consumer_rows:
            print_md(("Consumers",) + header[1:], consumer_rows)
        if log_rows:
            print_md(("EventLog alone (context: the log under the repository)", "time"), log_rows)
        if scaling_rows:
            print_md(("Scaling", "activities", "time", "growth per step (target <= 1.3x linear)", "status"), scaling_rows)
        print_md(("Benchmark", "Allocations per operation (p50)"), alloc_rows)
    else:
        def print_table(table):
            widths = [max(len(r[i]) for r in table) for i in range(len(header))]
            for n, r in enumerate(table):
                print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
                if n == 0:
                    print("  ".join("-" * w for w in widths))
        if rows:
            print_table(table)
        if ledger_rows:
            if rows:
                print()
            print("Ledger (the finance domain on the generic repository; per transaction, query or open):")
            print_table([("Ledger",) + header[1:]] + ledger_rows)
        if so_rows:
            print()
            print("Scale-out (the repository on a PostgreSQL log; peers from AppendBenchmarks, same run):")
            print_table([("Scale-out",) + header[1:]] + so_rows)
        if consumer_rows:
            print()
            print("Consumers (a named consumer's run against the store's full replay of the same log, same run; lag following 64 writers):")
            print_table([("Consumers",) + header[1:]] + consumer_rows)
        if log_rows:
            print()
            print("EventLog alone (context: the log under the repository):")
            for w, t in log_rows:
                print(f"  {w.ljust(62)}  {t}")
        if scaling_rows:
            print()
            print("Scaling (growth per step against linear; target <= 1.3x):")
            for r in scaling_rows:
                print(f"  {r[0].ljust(26)} {r[1].rjust(12)}  {r[2].rjust(10)}  {r[3].ljust(14)} {r[4]}")
        print()
        print("Allocations per operation (p50; appends per activity, queries per query):")
        w = max((len(t) for t, _ in alloc_rows), default=10)
        for t, a in alloc_rows:
            print(f"  {t.ljust(w)}  {a}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
