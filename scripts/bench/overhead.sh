#!/usr/bin/env bash
# Recording cost, profkit against perf record, on this machine:
#  1. the daemon's CPU time per second of recording (both CPUs busy), and
#     perf record's CPU time for the same recording;
#  2. the slowdown of a fixed-work CPU-bound program (testdata/workloads/spin.c,
#     one thread per CPU) under `profctl start` and under `perf record -a`,
#     against no profiler.
# Usage: scripts/bench/overhead.sh [FREQ...]   (default: 1000 4000 10000)
# PROFKIT_BENCH_G=1 adds -g to both tools.
# Prints a table; needs root (system-wide sampling) and perf for the comparison.
set -euo pipefail
cd "$(dirname "$0")/../.."
read -r -a freqs <<<"${*:-1000 4000 10000}"
G=()
[ "${PROFKIT_BENCH_G:-0}" = 1 ] && G=(-g)
work=$(mktemp -d /tmp/profkit-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cargo build --release --quiet -p profkit-cli
cc -O1 -pthread -o "$work/spin" testdata/workloads/spin.c
P=target/release/profctl
SECS=${PROFKIT_BENCH_SECONDS:-5}
N=${PROFKIT_BENCH_WORK:-2000000000}

# CPU time of a process in ns, all threads (schedstat: ns on CPU).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{t += $1} END {print t}'; }
now() { date +%s.%N; }
runs=${PROFKIT_BENCH_RUNS:-3}
# Median wall time of the fixed-work program over $runs runs.
timed() {
  local t=()
  for _ in $(seq "$runs"); do
    local a b; a=$(now); "$work/spin" "$N" >/dev/null; b=$(now)
    t+=("$(echo "$b - $a" | awk '{print $1 - $3}')")
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

echo "machine: $(nproc) CPUs, $(uname -r), $(date -u +%F) commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
base=$(timed)
echo "fixed work without profiler: ${base}s (median of $runs)${G:+, with -g}"
printf '%-8s %-22s %-22s %-14s %-14s\n' "freq" "profkit CPU s per s" "perf rec CPU s per s" "profkit slow" "perf slow"
for f in "${freqs[@]}"; do
  # 1. recording cost with both CPUs busy for $SECS seconds.
  "$work/spin" 100000000000 >/dev/null & busy=$!
  $P start -a -F "$f" "${G[@]}" --session-dir "$work/pk" >/dev/null
  dpid=$(cat "$work/pk/daemon.pid")
  t0=$(cpu_ns "$dpid"); sleep "$SECS"; t1=$(cpu_ns "$dpid")
  $P stop --session-dir "$work/pk" >/dev/null
  pk_cpu=$(awk -v a="$t0" -v b="$t1" -v s="$SECS" 'BEGIN {printf "%.4f", (b - a) / 1e9 / s}')
  perf_cpu=n/a
  if command -v perf >/dev/null; then
    /usr/bin/time -o "$work/time" -f '%U %S' perf record -q --no-bpf-event -a -F "$f" "${G[@]}" -o "$work/perf.data" -- sleep "$SECS" >/dev/null 2>&1
    perf_cpu=$(tail -1 "$work/time" | awk -v s="$SECS" '{printf "%.4f", ($1 + $2) / s}')
  fi
  kill "$busy"; wait "$busy" 2>/dev/null || true
  # 2. slowdown of the fixed work.
  $P start -a -F "$f" "${G[@]}" --session-dir "$work/pk" >/dev/null
  pk_t=$(timed)
  $P stop --session-dir "$work/pk" >/dev/null
  perf_t=n/a
  if command -v perf >/dev/null; then
    perf record -q --no-bpf-event -a -F "$f" "${G[@]}" -o "$work/perf.data" -- sleep 10000 >/dev/null 2>&1 & pr=$!
    sleep 1
    perf_t=$(timed)
    kill -INT "$pr"; wait "$pr" 2>/dev/null || true
  fi
  pk_slow=$(awk -v a="$pk_t" -v b="$base" 'BEGIN {printf "%.3fx", a / b}')
  perf_slow=$( [ "$perf_t" = n/a ] && echo n/a || awk -v a="$perf_t" -v b="$base" 'BEGIN {printf "%.3fx", a / b}')
  printf '%-8s %-22s %-22s %-14s %-14s\n' "$f" "$pk_cpu" "$perf_cpu" "$pk_slow" "$perf_slow"
done
