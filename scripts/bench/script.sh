#!/usr/bin/env bash
# `profreport --format script` and `--format jsonl` against `perf script`
# on the same workload, ~1 M samples with call stacks. Usage:
#
#   scripts/bench/script.sh            (or: scripts/bench.sh script)
#
# Two copies of testdata/workloads/callgraph.c keep both CPUs busy while
# `perf record -a -g` and `profctl record -a -g` record the machine at the
# same time, at the same event (cpu-clock) and frequency, for BENCH_SECS
# seconds, so both hold about the same samples. Then times (median of
# BENCH_RUNS runs, peak RSS the largest, /usr/bin/time -v or /proc):
#
#   perf script -F comm,pid,tid,cpu,time,event,ip,sym,dso     (perf.data)
#   profreport --format script                                 (the session)
#   profreport --format jsonl                                  (the session)
#   profreport --import perf.data --format script              (import included)
#
# Needs root (or perf_event_paranoid <= 0), perf at /usr/bin/perf (or
# $PERF) and a C compiler for the workload. Knobs: BENCH_FREQ (20000 Hz),
# BENCH_SECS (25), BENCH_RUNS (3), BENCH_DIR (a temporary directory, kept).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh

perf=${PERF:-/usr/bin/perf}
freq=${BENCH_FREQ:-20000} secs=${BENCH_SECS:-25}
export BENCH_RUNS=${BENCH_RUNS:-3}
command -v "$perf" >/dev/null || { echo "no perf at $perf (set PERF=...)" >&2; exit 1; }
max=$(cat /proc/sys/kernel/perf_event_max_sample_rate 2>/dev/null || echo 0)
if [ "$max" -lt "$freq" ]; then
    echo "perf_event_max_sample_rate is $max < $freq: lower BENCH_FREQ or raise it" >&2
    exit 1
fi
echo "== building (release)"
cargo build --release --quiet -p profkit-cli
dir=${BENCH_DIR:-$(mktemp -d /tmp/profkit-script-bench.XXXXXX)}
mkdir -p "$dir"
cc -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -o "$dir/callgraph" \
    testdata/workloads/callgraph.c
profctl=$root/target/release/profctl profreport=$root/target/release/profreport

echo "== recording: 2 x callgraph, cpu-clock $freq Hz -a -g, $secs s, perf and profctl at once"
rm -rf "$dir/pk" "$dir/perf.data"
"$dir/callgraph" 100000 >/dev/null &
w1=$!
"$dir/callgraph" 100000 >/dev/null &
w2=$!
trap 'kill $w1 $w2 2>/dev/null || true' EXIT
(cd "$dir" && "$perf" record -q -e cpu-clock -F "$freq" -a -g --no-bpf-event -o perf.data \
    -- sleep "$secs" 2>&1 | grep -v '^$' || true) &
p=$!
(cd "$dir" && "$profctl" record -a -g -e cpu-clock -F "$freq" --session-dir pk \
    -- sleep "$secs" >/dev/null)
wait "$p"
kill $w1 $w2 2>/dev/null || true
trap - EXIT
perf_samples=$("$perf" script -i "$dir/perf.data" -F time 2>/dev/null | wc -l)
profkit_samples=$("$profreport" --session-dir "$dir/pk" --format csv 2>/dev/null \
    | awk -F, 'NR > 1 { n += $1 } END { print n }')
echo "perf.data: $perf_samples samples, $(stat -c %s "$dir/perf.data") bytes;" \
    "session.pkl: $profkit_samples samples, $(stat -c %s "$dir/pk/session.pkl") bytes"

echo "== timing (median of $BENCH_RUNS runs; peak RSS is the largest)"
results=$(
    measure perf_script "$perf" script -i "$dir/perf.data" -F comm,pid,tid,cpu,time,event,ip,sym,dso
    measure pk_script "$profreport" --session-dir "$dir/pk" --format script --no-progress
    measure pk_jsonl "$profreport" --session-dir "$dir/pk" --format jsonl --no-progress
    measure pk_import "$profreport" --import "$dir/perf.data" --format script --no-progress
)
echo "$results" | awk -v ps="$perf_samples" -v ks="$profkit_samples" '
    { wall[$1] = $2; rss[$1] = $3 }
    END {
        printf "%-58s %10s %10s %12s\n", "command", "wall (s)", "RSS (MiB)", "samples/s"
        printf "%-58s %10.3f %10.1f %12.0f\n", "perf script -F comm,pid,tid,cpu,time,event,ip,sym,dso",
            wall["perf_script"], rss["perf_script"], ps / wall["perf_script"]
        printf "%-58s %10.3f %10.1f %12.0f\n", "profreport --format script", wall["pk_script"],
            rss["pk_script"], ks / wall["pk_script"]
        printf "%-58s %10.3f %10.1f %12.0f\n", "profreport --format jsonl", wall["pk_jsonl"],
            rss["pk_jsonl"], ks / wall["pk_jsonl"]
        printf "%-58s %10.3f %10.1f %12.0f\n", "profreport --import perf.data --format script",
            wall["pk_import"], rss["pk_import"], ps / wall["pk_import"]
        printf "\nper sample, script: %.1fx perf script'"'"'s speed; jsonl: %.1fx; import + script: %.1fx\n",
            (ks / wall["pk_script"]) / (ps / wall["perf_script"]),
            (ks / wall["pk_jsonl"]) / (ps / wall["perf_script"]),
            wall["perf_script"] / wall["pk_import"]
        printf "(target: at least 10x, in constant memory)\n"
    }'
echo "data kept in $dir"
