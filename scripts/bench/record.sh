#!/usr/bin/env bash
# Loss and size, profkit against perf record, system-wide with both CPUs busy:
# samples kept and lost per run, and bytes per sample of the session against
# perf.data, with default and small buffers (perf -m 8, ours --buffer-pages 8),
# with and without -g.
# Usage: scripts/bench/record.sh [FREQ...]   (default: 10000 20000)
set -euo pipefail
cd "$(dirname "$0")/../.."
read -r -a freqs <<<"${*:-10000 20000}"
SECS=${PROFKIT_BENCH_SECONDS:-5}
work=$(mktemp -d /tmp/profkit-bench.XXXXXX)
trap 'rm -rf "$work"; kill $(jobs -p) 2>/dev/null || true' EXIT
cargo build --release --quiet -p profkit-cli
cc -O1 -fno-omit-frame-pointer -pthread -o "$work/spin" testdata/workloads/spin.c
P=target/release/profctl

profkit_run() { # freq pages g -> "samples lost bytes_per_sample"
  local f=$1 pages=$2 g=$3 extra=()
  [ "$pages" != default ] && extra+=(--buffer-pages "$pages")
  [ "$g" = yes ] && extra+=(-g)
  "$work/spin" 100000000000 >/dev/null & local busy=$!
  $P start -a -F "$f" "${extra[@]}" --session-dir "$work/pk" >/dev/null
  sleep "$SECS"
  local out; out=$($P stop --session-dir "$work/pk")
  kill "$busy"; wait "$busy" 2>/dev/null || true
  # "lost" here is what the kernel or profkit dropped (ring, buffer, disk);
  # samples kept but unattributed (no mapping / no task) are shown after a +.
  local line un
  line=$(echo "$out" | head -1)
  un=$(echo "$line" | sed -nE 's/.*\(([0-9]+) of them unattributed.*/\1/p')
  echo "$line" | sed -E 's/.* ([0-9]+) samples and ([0-9]+) lost.*\(([0-9]+) bytes, ([0-9.]+) bytes\/sample\).*/\1 \2 \4/' \
    | awk -v un="${un:-0}" '{ printf "%s %s %s\n", $1, ($2 - un) "+" un, $3 }'
}

perf_run() { # freq pages g -> "samples lost bytes_per_sample"
  local f=$1 pages=$2 g=$3 extra=()
  [ "$pages" != default ] && extra+=(-m "$pages")
  [ "$g" = yes ] && extra+=(-g)
  "$work/spin" 100000000000 >/dev/null & local busy=$!
  perf record -q --no-bpf-event -a -F "$f" "${extra[@]}" -o "$work/perf.data" -- sleep "$SECS" >/dev/null 2>&1
  kill "$busy"; wait "$busy" 2>/dev/null || true
  local s l b
  s=$(perf report --stats -i "$work/perf.data" 2>/dev/null | awk '/SAMPLE events:/ {print $3; exit}')
  l=$(perf report -D -i "$work/perf.data" 2>/dev/null | awk '/PERF_RECORD_LOST / { for (i = 1; i <= NF; i++) if ($i ~ /^lost:?$/) { v = $(i+1); gsub(/[^0-9]/, "", v); t += v } } END {print t + 0}')
  b=$(stat -c %s "$work/perf.data")
  echo "$s $l $(awk -v b="$b" -v s="$s" 'BEGIN {printf "%.1f", b / (s > 0 ? s : 1)}')"
}

echo "machine: $(nproc) CPUs, $(uname -r), $(date -u +%F) commit $(git rev-parse --short HEAD 2>/dev/null || echo ?), ${SECS}s per run, both CPUs busy"
echo "(pk lost: dropped + unattributed, i.e. no mapping / no task, which perf would keep as [unknown])"
printf '%-7s %-8s %-3s | %-10s %-8s %-9s | %-10s %-8s %-9s\n' freq buffers -g "pk samples" "pk lost" "pk B/smp" "perf smp" "perf lost" "perf B/smp"
for f in "${freqs[@]}"; do
  for pages in default 8; do
    for g in no yes; do
      read -r ps pl pb < <(profkit_run "$f" "$pages" "$g")
      if command -v perf >/dev/null; then read -r fs fl fb < <(perf_run "$f" "$pages" "$g"); else fs=n/a fl=n/a fb=n/a; fi
      printf '%-7s %-8s %-3s | %-10s %-8s %-9s | %-10s %-8s %-9s\n' "$f" "$pages" "$g" "$ps" "$pl" "$pb" "$fs" "$fl" "$fb"
    done
  done
done
