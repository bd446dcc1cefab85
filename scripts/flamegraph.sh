#!/usr/bin/env bash
# Flame graphs of the broker and of the client under P2 (one producer, 64 sends in flight,
# 1 KiB, async flush): where each process spends its CPU per message.
#
#   scripts/flamegraph.sh [OUT_DIR] [SECONDS]
#
# Writes OUT_DIR/flamegraph-p2-broker.svg and OUT_DIR/flamegraph-p2-client.svg (default
# OUT_DIR: docs). Needs perf (with permission to profile: root, or
# kernel.perf_event_paranoid <= 1); installs inferno (cargo install inferno) when its tools are
# missing. Sampling: 999 Hz with DWARF call graphs, for SECONDS (default 6) of a run that has
# warmed up for 4 s.
set -euo pipefail

cd "$(dirname "$0")/.."
out=${1:-docs}
secs=${2:-6}
mkdir -p "$out"
command -v perf >/dev/null || { echo "flamegraph.sh: perf is not installed" >&2; exit 1; }
if ! command -v inferno-flamegraph >/dev/null || ! command -v inferno-collapse-perf >/dev/null; then
    cargo install inferno --no-default-features --features cli
fi
cargo build --release --bin rocketmq-bench -q
# The same build as scripts/bench.py's (with TLS), so that neither rebuilds the other's binary.
cargo build --release -p rocketmq-broker-lite --features tls --bin rocketmq-lite -q

work=$(mktemp -d)
broker=""
cleanup() {
    [ -n "$broker" ] && kill "$broker" 2>/dev/null && wait "$broker" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

ns_port=$((20000 + RANDOM % 10000))
target/release/rocketmq-lite --store-dir "$work/store" --namesrv-port "$ns_port" \
    --broker-port $((ns_port + 1)) >"$work/lite.out" 2>/dev/null &
broker=$!
# Ready once it prints its first line; settled once its start-up writes (zero-filled segments)
# have stopped: less than 1 MiB written in the last second, as scripts/bench.py waits.
for _ in $(seq 100); do [ -s "$work/lite.out" ] && break; sleep 0.1; done
grep -q ready "$work/lite.out" || { echo "flamegraph.sh: rocketmq-lite did not start" >&2; exit 1; }
written() { awk '/^write_bytes:/ {print $2}' "/proc/$broker/io"; }
last=$(written)
for _ in $(seq 120); do
    sleep 1
    now=$(written)
    [ $((now - last)) -lt 1048576 ] && break
    last=$now
done
sync

target/release/rocketmq-bench produce --namesrv "127.0.0.1:$ns_port" --inflight 64 \
    --duration $((secs + 8)) --broker-pid "$broker" --json "$work/run.json" >/dev/null 2>"$work/bench.log" &
client=$!
sleep 4
perf record -q -F 999 -g --call-graph dwarf,16384 -p "$broker" -o "$work/broker.data" -- sleep "$secs" 2>/dev/null &
profiler=$!
perf record -q -F 999 -g --call-graph dwarf,16384 -p "$client" -o "$work/client.data" -- sleep "$secs" 2>/dev/null
wait "$profiler"
wait "$client"

rev=$(git rev-parse --short HEAD)
figures=$(python3 -c "import json; d=json.load(open('$work/run.json')); print('%.0f msgs/s, broker %.2f us/msg, client %.2f us/msg' % (d['msgs_per_s'], d['broker_cpu_us_per_msg'], d['client_cpu_us_per_msg']))")
for side in broker client; do
    perf script -i "$work/$side.data" 2>/dev/null | inferno-collapse-perf >"$work/$side.folded"
    inferno-flamegraph --title "P2 $side at $rev: $figures" --width 1600 --minwidth 1.0 \
        <"$work/$side.folded" >"$out/flamegraph-p2-$side.svg"
    echo "$out/flamegraph-p2-$side.svg"
done
echo "$figures"
