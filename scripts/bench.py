#!/usr/bin/env python3
"""Runs the performance workloads of ../shared/reference/performance.md against rocketmq-lite.

Each run starts a fresh rocketmq-lite (a separate process, so that broker and client CPU are
measured apart), brackets the benchmark with a limit probe (../shared/tools/probes, compiled with
gcc when available), and records rocketmq-bench's JSON summary. Every workload runs three times;
the table of medians and ratios to the probes goes to target/bench/results.md.

    scripts/bench.py                 # all workloads, 3 runs each
    scripts/bench.py P2 E1 --runs 1  # some workloads, once
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "target", "bench")
PROBES_SRC = os.environ.get("PROBES_DIR", os.path.join(ROOT, "..", "shared", "tools", "probes"))
PROBES = os.path.join(ROOT, "target", "probes")
# Our own probe: a paced 1 KiB ping-pong (what a wake-up round trip costs at E1's rate).
OWN_PROBES_SRC = os.path.join(ROOT, "scripts", "probes")
# BENCH_BIN and BENCH_LITE: other builds of rocketmq-bench (the client) and rocketmq-lite to
# measure (e.g. an older commit's, alternating before/after); BENCH_LITE_ARGS: more arguments for
# rocketmq-lite (e.g. "-c some-broker.conf").
BENCH = os.environ.get("BENCH_BIN", os.path.join(ROOT, "target", "release", "rocketmq-bench"))
LITE = os.environ.get("BENCH_LITE", os.path.join(ROOT, "target", "release", "rocketmq-lite"))

# id: (flush mode, rocketmq-bench arguments, probe, description)
WORKLOADS = {
    "P1": ("ASYNC_FLUSH", ["produce", "--inflight", "1"], "rtt1", "1 producer, 1 in flight, 1 KiB, async flush"),
    "P1s": ("SYNC_FLUSH", ["produce", "--inflight", "1"], "fsync4k", "same, sync flush"),
    "P2": ("ASYNC_FLUSH", ["produce", "--inflight", "64"], "rtt4", "unbatched 1 KiB, 64 in flight, async flush"),
    "P2b": ("ASYNC_FLUSH", ["produce", "--inflight", "64", "--auto-batch"], "rtt4",
            "P2 with automatic batching (send_async, 10 ms linger, 32 KiB batches)"),
    "P2c": ("ASYNC_FLUSH", ["produce", "--inflight", "64", "--client-threads", "1"], "rtt4",
            "P2 with the client's runtime on one worker thread (the broker has the other core)"),
    "P2bc": ("ASYNC_FLUSH", ["produce", "--inflight", "64", "--auto-batch", "--client-threads", "1"], "rtt4",
             "P2b with the client's runtime on one worker thread"),
    "P3": ("SYNC_FLUSH", ["produce", "--inflight", "64"], "fsync64k", "P2 with sync flush"),
    "P2a": ("ASYNC_FLUSH", ["produce", "--inflight", "64", "--access-key", "benchAdmin1", "--secret-key", "benchSecret1"],
            "rtt4", "P2 with ACL on (every request signed and checked)"),
    "P2t": ("ASYNC_FLUSH", ["produce", "--inflight", "64", "--tls"], "rtt4",
            "P2 with TLS on (tls.server.mode=enforcing; every connection encrypted)"),
    "P4": ("ASYNC_FLUSH", ["produce", "--batch", "64", "--inflight", "8"], "rtt4", "batches of 64 x 1 KiB, 8 in flight"),
    "P4w": ("ASYNC_FLUSH", ["produce", "--batch", "64", "--inflight", "8"], "rtt4",
            "P4 into pages touched before (6 GiB segments, zero-filled before timing)"),
    "C1": ("ASYNC_FLUSH", ["consume", "--backlog", "1000000", "--pull-batch", "32", "--consume-batch", "32"], "memcpy",
           "consume a 1M backlog in page cache, pull batch 32"),
    "C1s": ("ASYNC_FLUSH", ["consume", "--backlog", "1000000", "--pull-batch", "32", "--consume-batch", "32",
                            "--sql", "bench_n = 0"], "memcpy",
            "C1 with a SQL92 selector that selects 10 % (msgs/s: backlog filtered per second)"),
    "E1": ("ASYNC_FLUSH", ["e2e", "--rate", "10000", "--inflight", "64"], "paced",
           "send -> push listener at 10k msgs/s, 1 KiB"),
    "Q1": ("ASYNC_FLUSH", ["produce", "--inflight", "64", "--topics", "1000", "--queues", "8"], "rtt4",
           "P2 over 1,000 topics x 8 queues"),
    "M1": ("ASYNC_FLUSH", ["produce", "--inflight", "64"], "rtt4", "broker RSS idle and under P2; start-up time"),
    "R1": ("ASYNC_FLUSH", ["produce", "--inflight", "64"], "rtt4",
           "P2 against a SYNC_MASTER + slave (one process: broker CPU is both)"),
    "R1s": ("SYNC_FLUSH", ["produce", "--inflight", "64"], "fsync64k",
            "P3 against a SYNC_MASTER + slave (one process: broker CPU is both)"),
    "R2": ("SYNC_FLUSH", ["produce", "--inflight", "64"], "fsync64k",
           "P3 against a 3-node DLedger group (one process: broker CPU is all three)"),
}

# F1 is not a load: scripts/bench.py F1 runs the multi-process DLedger crash test in release
# mode (leaders SIGKILLed under load) and reports its failover times.
F1_KILLS = 8


# Broker arguments of some workloads. P4w: on this VM the first write to a guest page that has
# never been used costs ~2 µs per KiB (the host backs it then); a long-running broker reuses
# pages it freed. A segment larger than the run, zero-filled before timing, shows P4 without it.
BROKER_ARGS = {"P4w": ["--segment-size", str(6 << 30)],
               "R1": ["--slaves", "1", "--sync-master"],
               "R1s": ["--slaves", "1", "--sync-master"],
               "R2": ["--dledger", "3"]}


# Store directories whose small files wait for the end of the whole benchmark to be removed.
# The file system here is ext4 without a journal: allocating an inode skips every free one whose
# deletion is under 60 s old (360 s while its inode-table block is dirty; kernel
# `recently_deleted`), one buffer lookup each. Removing a Q1 store (~17,000 directories and
# consume-queue files) right before the next run made each run's broker slower than the last
# (11 -> 25 µs/msg over six runs). Commit-log segments are removed at once (disk space).
TRASH = []


def remove_store(store):
    for root, dirs, _ in os.walk(store):
        if "commitlog" in dirs:
            shutil.rmtree(os.path.join(root, "commitlog"), ignore_errors=True)
            dirs.remove("commitlog")
    TRASH.append(store)


def empty_trash():
    while TRASH:
        shutil.rmtree(TRASH.pop(), ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build():
    subprocess.run(["cargo", "build", "--release", "--bin", "rocketmq-bench"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "-p", "rocketmq-broker-lite", "--features", "tls",
                    "--bin", "rocketmq-lite"], cwd=ROOT, check=True)
    build_probes()


def build_probes(only_missing=False):
    """Compiles the limit probes (with --no-build only those not compiled yet, so that A/B runs
    of given binaries still report their ratios)."""
    os.makedirs(PROBES, exist_ok=True)
    if not shutil.which("gcc") or not os.path.isdir(PROBES_SRC):
        print("no gcc or no probes: ratios will be n/a", file=sys.stderr)
        return
    for name, extra, src_dir in (("pingpong", ["-lpthread"], PROBES_SRC), ("fsyncbench", [], PROBES_SRC),
                                 ("memcpybench", [], PROBES_SRC),
                                 ("paced_pingpong", ["-lpthread"], OWN_PROBES_SRC)):
        src = os.path.join(src_dir, name + ".c")
        if only_missing and os.path.exists(os.path.join(PROBES, name)):
            continue
        if os.path.exists(src):
            subprocess.run(["gcc", "-O2", "-o", os.path.join(PROBES, name), src] + extra, check=True)


def probe(kind, store_dir):
    """One probe measurement: round trips/s, durable MB/s or memcpy GB/s."""
    exe = lambda n: os.path.join(PROBES, n)  # noqa: E731
    try:
        if kind in ("rtt1", "rtt4"):
            if not os.path.exists(exe("pingpong")):
                return None
            conns = "1" if kind == "rtt1" else "4"
            out = subprocess.run([exe("pingpong"), str(free_port()), conns, "1024", "2"], capture_output=True,
                                 text=True, timeout=30).stdout
            return float(out.split("roundtrips/s=")[1].split()[0])
        if kind.startswith("fsync"):
            if not os.path.exists(exe("fsyncbench")):
                return None
            bs = "4096" if kind == "fsync4k" else "65536"
            path = os.path.join(store_dir, "probe.dat")
            out = subprocess.run([exe("fsyncbench"), path, bs, "2000", "prealloc"], capture_output=True, text=True,
                                 timeout=60).stdout
            if os.path.exists(path):
                os.remove(path)
            # Report flushes/s (the commit rate the disk allows).
            m = re.search(r"ops/s=([0-9.]+)", out)
            return float(m.group(1)) if m else None
        if kind == "paced":
            # CPU µs per 1 KiB round trip at 10k/s: the cost of waking both ends, E1's floor.
            if not os.path.exists(exe("paced_pingpong")):
                return None
            out = subprocess.run([exe("paced_pingpong"), str(free_port()), "10000", "2"], capture_output=True,
                                 text=True, timeout=30).stdout
            m = re.search(r"cpu_us_per_rt=([0-9.]+)", out)
            return float(m.group(1)) if m else None
        if kind == "memcpy":
            if not os.path.exists(exe("memcpybench")):
                return None
            out = subprocess.run([exe("memcpybench"), "256"], capture_output=True, text=True, timeout=30).stdout
            m = re.search(r"best=([0-9.]+)", out)
            return float(m.group(1)) if m else None
    except (subprocess.SubprocessError, IndexError, ValueError):
        return None
    return None


def broker_port():
    """A free port whose neighbour two below (the broker's VIP channel) is free too."""
    while True:
        port = free_port()
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port - 2))
            return port
        except OSError:
            continue


def start_lite(flush, extra=()):
    store = tempfile.mkdtemp(prefix="rmq-bench-")
    ns, broker = free_port(), broker_port()
    t0 = time.time()
    proc = subprocess.Popen([LITE, "--store-dir", store, "--namesrv-port", str(ns), "--broker-port", str(broker),
                             "--flush-disk-type", flush] + list(extra), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    startup_ms = (time.time() - t0) * 1000
    if "ready" not in line:
        proc.kill()
        proc.wait()
        shutil.rmtree(store, ignore_errors=True)
        raise SystemExit("rocketmq-lite did not start: %r" % line)
    return proc, store, "127.0.0.1:%d" % ns, startup_ms


def wait_settled(pid, limit=120.0):
    """Waits until the broker has done its start-up writes (zero-filling its first segments: 2 GiB
    a store, 6 GiB for R2's three) and the kernel has written them back, so that the timed
    seconds measure a running broker, not one still warming up. Settled: the process dirtied
    less than 1 MiB of pages in the last second (/proc/PID/io write_bytes; an idle broker writes
    a few KiB a second); then os.sync(). Returns the seconds it took."""
    def written():
        try:
            with open("/proc/%d/io" % pid) as f:
                for line in f:
                    if line.startswith("write_bytes:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None
    t0 = time.time()
    last = written()
    while time.time() - t0 < limit:
        time.sleep(1.0)
        now = written()
        if now is None or last is None or now - last < (1 << 20):
            break
        last = now
    os.sync()
    return time.time() - t0


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return None


ACL_RULES = """accounts:
  - accessKey: benchAdmin1
    secretKey: benchSecret1
    admin: true
"""


def acl_args():
    """rocketmq-lite arguments turning ACL on with one admin account (P2a)."""
    d = os.path.join(OUT, "acl")
    os.makedirs(d, exist_ok=True)
    rules, conf = os.path.join(d, "plain_acl.yml"), os.path.join(d, "broker-acl.conf")
    with open(rules, "w") as f:
        f.write(ACL_RULES)
    with open(conf, "w") as f:
        f.write("aclEnable=true\nrocketmq.acl.plain.file=%s\n" % rules)
    return ["-c", conf]


def tls_args():
    """rocketmq-lite arguments turning TLS on (enforcing) with a self-signed certificate (P2t)."""
    d = os.path.join(OUT, "tls")
    os.makedirs(d, exist_ok=True)
    cert, key, conf = (os.path.join(d, n) for n in ("server.pem", "server.key", "broker-tls.conf"))
    if not (os.path.exists(cert) and os.path.exists(key)):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", key, "-out", cert, "-days", "30", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(conf, "w") as f:
        f.write("tls.server.mode=enforcing\ntls.server.certPath=%s\ntls.server.keyPath=%s\n" % (cert, key))
    return ["-c", conf]


def filter_args():
    """rocketmq-lite arguments turning SQL92 property filters on (C1s)."""
    d = os.path.join(OUT, "filter")
    os.makedirs(d, exist_ok=True)
    conf = os.path.join(d, "broker-filter.conf")
    with open(conf, "w") as f:
        f.write("enablePropertyFilter=true\n")
    return ["-c", conf]


def run_once(wid, duration):
    flush, args, probe_kind, _ = WORKLOADS[wid]
    extra = (acl_args() if wid == "P2a" else tls_args() if wid == "P2t" else filter_args() if wid == "C1s"
             else BROKER_ARGS.get(wid, ()))
    extra = list(extra) + os.environ.get("BENCH_LITE_ARGS", "").split()
    proc, store, ns, startup_ms = start_lite(flush, extra)
    try:
        time.sleep(0.5)
        idle_rss = rss_mib(proc.pid)
        settle_s = wait_settled(proc.pid)
        before = probe(probe_kind, store)
        out_json = os.path.join(OUT, "%s-%d.json" % (wid, int(time.time() * 1000)))
        cmd = [BENCH] + args + ["--namesrv", ns, "--broker-pid", str(proc.pid), "--duration", str(duration),
                                "--json", out_json, "--label", wid]
        # The program's progress lines and first errors, kept beside the JSON summary.
        with open(out_json[:-len(".json")] + ".log", "w") as log:
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=log, timeout=600)
        after = probe(probe_kind, store)
        with open(out_json) as f:
            summary = json.load(f)
        summary["probe_before"] = before
        summary["probe_after"] = after
        summary["startup_ms"] = round(startup_ms, 1)
        summary["settle_s"] = round(settle_s, 1)
        summary["broker_idle_rss_mib"] = idle_rss
        return summary
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        remove_store(store)
        # Write back what this run left dirty (consume queues, index, checkpoints) now, not in
        # the next run's measured seconds (an E1 run after C1 once stalled 29 ms in its first
        # second while the previous runs' data went to disk).
        os.sync()


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=0):
    if v is None:
        return "n/a"
    if digits == 0:
        return "{:,.0f}".format(v)
    return "{:,.{}f}".format(v, digits)


def row(wid, runs):
    _, _, kind, desc = WORKLOADS[wid]
    tput = med([r["msgs_per_s"] for r in runs])
    lat = lambda q: med([(r.get("latency_us") or {}).get(q) for r in runs])  # noqa: E731
    probes = [p for r in runs for p in (r["probe_before"], r["probe_after"])]
    probe_med = med(probes)
    unit = {"rtt1": "rt/s", "rtt4": "rt/s", "fsync4k": "flush/s", "fsync64k": "flush/s", "memcpy": "GB/s",
            "paced": "µs CPU/rt at 10k/s"}[kind]
    ratio = "n/a"
    if probe_med and tput and kind in ("rtt1", "rtt4"):
        ratio = "%.0f %%" % (100.0 * tput / probe_med)
    if probe_med and kind == "paced":
        # Our CPU per message in paced round trips' worth of CPU.
        cpu = [(r.get("broker_cpu_us_per_msg") or 0) + (r.get("client_cpu_us_per_msg") or 0) for r in runs]
        ratio = "%.1f round trips of CPU" % (med(cpu) / probe_med)
    spread = "n/a"
    pairs = [(r["probe_before"], r["probe_after"]) for r in runs if r["probe_before"] and r["probe_after"]]
    if pairs:
        spread = "%.0f %%" % (100.0 * max(abs(a - b) / max(a, b) for a, b in pairs))
    return ("| {} | {} | {} | {} / {} / {} / {} | {} | {} | {} | {} {} | {} | {} |".format(
        wid, desc, fmt(tput), fmt(lat("p50")), fmt(lat("p99")), fmt(lat("p99.9")), fmt(lat("max")),
        fmt(med([r.get("broker_cpu_us_per_msg") for r in runs]), 2),
        fmt(med([r.get("client_cpu_us_per_msg") for r in runs]), 2),
        fmt(med([r.get("fsync_per_ack") for r in runs]), 3),
        fmt(probe_med), unit, ratio, spread))


def run_f1():
    """Failover: SIGKILL of a DLedger leader under load to the first acknowledged send on the
    new leader (3 mqbroker processes, release build)."""
    env = dict(os.environ, DLEDGER_CRASH_KILLS=str(F1_KILLS))
    out = subprocess.run(["cargo", "test", "--release", "-q", "-p", "rocketmq-broker-lite", "--test", "dledger_crash",
                          "--", "--nocapture"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    m = re.search(r"failover times \(SIGKILL to the next acknowledgement\): \[(.*)\]", out.stderr + out.stdout)
    if out.returncode != 0 or not m:
        raise SystemExit("F1 failed:\n%s" % (out.stderr[-2000:]))
    e = re.search(r"election times \(SIGKILL to a node saying it leads\): \[(.*)\]", out.stderr + out.stdout)
    if e:
        el = sorted(durations(e.group(1)))
        if el:
            print("F1 elections (SIGKILL to a node saying it leads): median %.2f s, max %.2f s" % (
                statistics.median(el), el[-1]), file=sys.stderr)
    return durations(m.group(1))


def durations(text):
    """Rust `Duration` debug texts (`1.5s`, `830.2ms`, `Some(1.5s)`) as seconds."""
    out = []
    for t in text.split(","):
        t = t.strip()
        if t.startswith("Some(") and t.endswith(")"):
            t = t[5:-1]
        if t and t != "None":
            out.append(float(t[:-2]) / 1000 if t.endswith("ms") else float(t[:-1]))
    return out


def run_all(a, results):
    for wid in a.workloads:
        if wid == "F1":
            times = run_f1()
            results["F1"] = times
            print("F1: %d failovers, %s s" % (len(times), ", ".join("%.2f" % t for t in times)), file=sys.stderr)
            continue
        if wid not in WORKLOADS:
            raise SystemExit("unknown workload %s (%s)" % (wid, ", ".join(WORKLOADS)))
        results[wid] = []
        for i in range(a.runs):
            try:
                r = run_once(wid, a.duration)
            except (subprocess.SubprocessError, SystemExit, OSError) as e:
                # A failed run is reported and left out of the medians; the set goes on.
                print("%s run %d failed: %s" % (wid, i + 1, e), file=sys.stderr)
                continue
            results[wid].append(r)
            lat = r.get("latency_us") or {}
            print("%s run %d: %s msgs/s p50 %s p99 %s µs; broker %s µs/msg; probe %s -> %s" % (
                wid, i + 1, r["msgs_per_s"], lat.get("p50"), lat.get("p99"), r.get("broker_cpu_us_per_msg"),
                r["probe_before"], r["probe_after"]), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if not a.no_build:
        build()
    else:
        build_probes(only_missing=True)
    results = {}
    try:
        run_all(a, results)
    finally:
        empty_trash()
    lines = [
        "| id | workload | msgs/s | latency µs p50 / p99 / p99.9 / max | broker CPU µs/msg | client CPU µs/msg |"
        " fsync/ack | probe (median) | ratio | probe drift |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for wid, runs in results.items():
        if runs and wid != "F1":
            lines.append(row(wid, runs))
    extra = []
    if results.get("F1"):
        t = sorted(results["F1"])
        extra.append("F1: %d leaders killed; SIGKILL to the next acknowledged send: median %.2f s, max %.2f s" % (
            len(t), statistics.median(t), t[-1]))
    for r, single in (("R1", "P2"), ("R1s", "P3"), ("R2", "P3"), ("P2a", "P2"), ("P2t", "P2"), ("C1s", "C1")):
        if r in results and single in results:
            a, b = med([x["msgs_per_s"] for x in results[r]]), med([x["msgs_per_s"] for x in results[single]])
            extra.append("%s vs %s: %.0f %%" % (r, single, 100 * a / b))
    if "Q1" in results and "P2" in results:
        q1, p2 = med([r["msgs_per_s"] for r in results["Q1"]]), med([r["msgs_per_s"] for r in results["P2"]])
        if q1 and p2:
            extra.append("Q1 vs P2 throughput: %.0f %% (drop %.0f %%)" % (100 * q1 / p2, 100 - 100 * q1 / p2))
    if "M1" in results:
        m = results["M1"]
        extra.append("M1: broker RSS idle %s MiB, peak under P2 %s MiB; start-up to serving %s ms" % (
            fmt(med([r["broker_idle_rss_mib"] for r in m]), 1), fmt(med([r["broker_peak_rss_mib"] for r in m]), 1),
            fmt(med([r["startup_ms"] for r in m]), 1)))
    text = "\n".join(lines + [""] + extra) + "\n"
    with open(os.path.join(OUT, "results.md"), "w") as f:
        f.write(text)
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
