#!/usr/bin/env bash
# DWARF call graphs (issue 15), profkit against perf on the same program.
#  1. testdata/workloads/qsort.c built -O2 -fomit-frame-pointer (glibc's
#     qsort from sort_once, 1 sort a round, and sort_twice, 2 a round),
#     recorded SECS seconds at FREQ Hz by `profctl record --call-graph
#     dwarf` and by `perf record --call-graph dwarf`: inclusive shares of
#     main, sort_once and sort_twice (known: 100, 33.3, 66.7), the share of
#     by_key's samples whose stack reaches main, bytes per sample (the whole
#     session directory; perf.data), report wall time and peak RSS
#     (`profreport -l --children` against `perf report --children`).
#  2. Both CPUs busy (two qsort processes) for SECS seconds: `profctl start
#     -a --call-graph dwarf` (samples, every loss, stacks cut, the daemon's
#     CPU seconds per second) and `perf record -a --call-graph dwarf`
#     (CPU seconds per second, lost samples).
# Usage: scripts/bench/dwarf.sh    Knobs: FREQ (4000), SECS (10).
# Needs root, perf at /usr/bin/perf (or $PERF) and a C compiler.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
FREQ=${FREQ:-4000}
SECS=${SECS:-10}
PERF=${PERF:-/usr/bin/perf}
work=$(mktemp -d /tmp/profkit-dwarf.XXXXXX)
trap 'rm -rf "$work"' EXIT
cargo build --release --quiet -p profkit-cli
P=$PWD/target/release/profctl
R=$PWD/target/release/profreport
cc -O2 -fomit-frame-pointer -o "$work/qsort" testdata/workloads/qsort.c
# Rounds for SECS seconds: time 20 rounds unsampled.
t0=$(date +%s.%N); "$work/qsort" 20; t1=$(date +%s.%N)
rounds=$(awk -v a="$t0" -v b="$t1" -v s="$SECS" 'BEGIN {r = int(20 * s / (b - a)); print (r < 1 ? 1 : r)}')
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{t += $1} END {print t}'; }

echo "machine: $(nproc) CPUs, $(uname -r), $(date -u +%F) commit $(git rev-parse --short HEAD 2>/dev/null || echo ?); qsort $rounds rounds (~${SECS} s), $FREQ Hz"

# 1. One program, both tools.
$P record --session-dir "$work/pk" --call-graph dwarf -F "$FREQ" -- "$work/qsort" "$rounds" 2>/dev/null
pk_bytes=$(du -sb "$work/pk" | cut -f1)
"$R" --session-dir "$work/pk" -l --children --format json >"$work/pk.json"
pk=$(python3 - "$work/pk.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
inc = {r["symbol"]: r["inclusive_percent"] for r in d["rows"]}
print(d["total_samples"], *(f'{inc.get(s, 0):.2f}' for s in ("main", "sort_once", "sort_twice")))
EOF
)
read -r pk_samples pk_main pk_once pk_twice <<<"$pk"
"$R" --session-dir "$work/pk" --format collapsed >"$work/pk.folded"
reach=$(awk '{n = $NF; $NF = ""; s = $0} s ~ /by_key *$/ {t += n; if (s ~ /(^|;)main;/) m += n}
             END {printf "%.2f", 100 * m / t}' "$work/pk.folded")
pk_rep=$(BENCH_RUNS=3 measure x "$R" --session-dir "$work/pk" -l --children | cut -d" " -f2-)

have_perf=1
command -v "$PERF" >/dev/null || have_perf=0
if [ "$have_perf" = 1 ]; then
  "$PERF" record -q --no-buildid -e cpu-clock -F "$FREQ" --call-graph dwarf -o "$work/perf.data" \
    -- "$work/qsort" "$rounds" >/dev/null 2>&1
  perf_bytes=$(stat -c %s "$work/perf.data")
  "$PERF" report -i "$work/perf.data" --children --stdio --sort sym 2>/dev/null >"$work/perf.rep"
  perf_samples=$("$PERF" report -i "$work/perf.data" --stats 2>/dev/null | awk '/SAMPLE events:/ {print $3; exit}')
  share() { awk -v s="$1" '$1 ~ /%$/ && $NF == s {sub("%", "", $1); print $1; exit}' "$work/perf.rep"; }
  perf_main=$(share main); perf_once=$(share sort_once); perf_twice=$(share sort_twice)
  perf_rep=$(BENCH_RUNS=3 measure x "$PERF" report -i "$work/perf.data" --children --stdio --sort sym | cut -d" " -f2-)
fi
printf '\n%-28s %-16s %-16s\n' "" "profkit" "perf"
printf '%-28s %-16s %-16s\n' "samples" "$pk_samples" "${perf_samples:-n/a}"
printf '%-28s %-16s %-16s\n' "main inclusive %" "$pk_main" "${perf_main:-n/a}"
printf '%-28s %-16s %-16s\n' "sort_once inclusive %" "$pk_once" "${perf_once:-n/a}"
printf '%-28s %-16s %-16s\n' "sort_twice inclusive %" "$pk_twice" "${perf_twice:-n/a}"
printf '%-28s %-16s %-16s\n' "by_key samples reaching main %" "$reach" "-"
printf '%-28s %-16s %-16s\n' "bytes (session dir / perf.data)" "$pk_bytes" "${perf_bytes:-n/a}"
printf '%-28s %-16s %-16s\n' "bytes per sample" \
  "$(awk -v a="$pk_bytes" -v b="$pk_samples" 'BEGIN {printf "%.1f", a / b}')" \
  "$( [ "$have_perf" = 1 ] && awk -v a="$perf_bytes" -v b="$perf_samples" 'BEGIN {printf "%.0f", a / b}' || echo n/a)"
printf '%-28s %-16s %-16s\n' "report s / peak RSS MiB" "$pk_rep" "${perf_rep:-n/a}"

# 2. Both CPUs busy.
"$work/qsort" 1000000 >/dev/null & b1=$!
"$work/qsort" 1000000 >/dev/null & b2=$!
$P start -a --call-graph dwarf -F "$FREQ" --session-dir "$work/pk2" >/dev/null 2>&1
dpid=$(cat "$work/pk2/daemon.pid")
c0=$(cpu_ns "$dpid"); sleep "$SECS"; c1=$(cpu_ns "$dpid")
$P stop --session-dir "$work/pk2" >/dev/null 2>&1
"$R" --session-dir "$work/pk2" --format json >"$work/pk2.json"
pk2=$(python3 - "$work/pk2.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
st = d.get("stacks") or {}
print(d["total_samples"], d["lost"]["total"], st.get("user_stacks_cut", 0), st.get("unknown", 0))
EOF
)
read -r s2 lost2 cut2 unk2 <<<"$pk2"
pk_cpu=$(awk -v a="$c0" -v b="$c1" -v s="$SECS" 'BEGIN {printf "%.4f", (b - a) / 1e9 / s}')
if [ "$have_perf" = 1 ]; then
  /usr/bin/time -o "$work/time" -f '%U %S' "$PERF" record -q --no-buildid -a -e cpu-clock -F "$FREQ" \
    --call-graph dwarf -o "$work/perf2.data" -- sleep "$SECS" >/dev/null 2>&1
  perf_cpu=$(tail -1 "$work/time" | awk -v s="$SECS" '{printf "%.4f", ($1 + $2) / s}')
  perf_lost=$("$PERF" report -i "$work/perf2.data" --stats 2>/dev/null | awk '/LOST_SAMPLES events:|LOST events:/ {t += $3} END {print t + 0}')
  perf_s2=$("$PERF" report -i "$work/perf2.data" --stats 2>/dev/null | awk '/SAMPLE events:/ {print $3; exit}')
fi
kill "$b1" "$b2"; wait "$b1" "$b2" 2>/dev/null || true
printf '\nboth CPUs busy, %s s at %s Hz, system-wide\n' "$SECS" "$FREQ"
printf '%-28s %-16s %-16s\n' "" "profkit" "perf"
printf '%-28s %-16s %-16s\n' "samples" "$s2" "${perf_s2:-n/a}"
printf '%-28s %-16s %-16s\n' "lost" "$lost2" "${perf_lost:-n/a}"
printf '%-28s %-16s %-16s\n' "user stacks cut / unknown" "$cut2 / $unk2" "-"
printf '%-28s %-16s %-16s\n' "recorder CPU s per s" "$pk_cpu" "${perf_cpu:-n/a}"
