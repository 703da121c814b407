#!/usr/bin/env bash
# Whole-tool benchmarks against perf. Usage:
#
#   scripts/bench.sh            everything below, one table after another, appended
#                               with the date and commit to docs/PERFORMANCE.md
#   scripts/bench.sh report     profreport against perf report on the same workload
#   scripts/bench.sh NAME ...   runs scripts/bench/NAME.sh (overhead, record, realsys, ...)
#   scripts/bench.sh cpus       many CPUs by simulation (2 to 256 SimRings through the
#                               real recorder): round time, CPU share, RSS, bytes/sample
#
# `report` records testdata/workloads/shares.c (`shares pinned`: both CPUs
# busy in two functions) once under `perf record` and once under
# `profctl record`, at the same event (cpu-clock) and frequency, so both
# hold about the same number of samples (~1.3 M with the defaults), then
# times
#   perf report --stdio --sort dso,sym        against  profreport -l
#   perf report --stdio --sort cpu,dso,sym    against  profreport -l --separate=cpu
# (wall time: median of BENCH_RUNS runs; peak RSS: the largest of them, from
# /usr/bin/time -v or /proc). Needs root (or perf_event_paranoid <= 0), perf
# at /usr/bin/perf (or $PERF) and a C compiler.
#
# Knobs: BENCH_FREQ (50000 Hz), BENCH_UNITS (2500 units of work per thread,
# ~30 s under sampling), BENCH_RUNS (7), BENCH_DIR (a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() {
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

# peak_rss_kb, measure
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh

bench_report() {
    local perf=${PERF:-/usr/bin/perf}
    local freq=${BENCH_FREQ:-50000} units=${BENCH_UNITS:-2500}
    command -v "$perf" >/dev/null || { echo "no perf at $perf (set PERF=...)" >&2; exit 1; }
    local max
    max=$(cat /proc/sys/kernel/perf_event_max_sample_rate 2>/dev/null || echo 0)
    if [ "$max" -lt "$freq" ]; then
        echo "perf_event_max_sample_rate is $max < $freq: lower BENCH_FREQ or raise it" >&2
        exit 1
    fi
    echo "== building (release)"
    cargo build --release --quiet -p profkit-cli
    local dir=${BENCH_DIR:-$(mktemp -d /tmp/profkit-bench.XXXXXX)}
    mkdir -p "$dir"
    cc -O1 -g -fno-omit-frame-pointer -pthread -o "$dir/shares" testdata/workloads/shares.c
    local profctl=$root/target/release/profctl profreport=$root/target/release/profreport

    echo "== recording: shares pinned $units at cpu-clock $freq Hz, under perf and under profctl"
    rm -rf "$dir/pk" "$dir/perf.data"
    local perf_log
    perf_log=$(cd "$dir" && "$perf" record -e cpu-clock -F "$freq" --no-bpf-event -o perf.data \
        -- ./shares pinned "$units" 2>&1)
    echo "$perf_log" | grep -E 'Captured' || true
    (cd "$dir" && "$profctl" record -e cpu-clock -F "$freq" --session-dir pk \
        -- ./shares pinned "$units" | head -1)
    local perf_samples profkit_samples
    perf_samples=$(echo "$perf_log" | sed -n 's/.*(\([0-9]*\) samples).*/\1/p')
    profkit_samples=$("$profreport" --session-dir "$dir/pk" --format csv 2>/dev/null \
        | awk -F, 'NR > 1 { n += $1 } END { print n }')
    echo "perf.data: $perf_samples samples, $(stat -c %s "$dir/perf.data") bytes;" \
        "session.pkl: $profkit_samples samples, $(stat -c %s "$dir/pk/session.pkl") bytes"

    echo "== timing (median of ${BENCH_RUNS:-7} runs; peak RSS is the largest)"
    local results
    results=$(
        measure perf_l "$perf" report -i "$dir/perf.data" --stdio --sort dso,sym
        measure profreport_l "$profreport" --session-dir "$dir/pk" -l
        measure perf_cpu "$perf" report -i "$dir/perf.data" --stdio --sort cpu,dso,sym
        measure profreport_cpu "$profreport" --session-dir "$dir/pk" -l --separate=cpu
    )
    echo "$results" | awk '
        { wall[$1] = $2; rss[$1] = $3 }
        END {
            printf "%-48s %10s %10s\n", "command", "wall (s)", "RSS (MiB)"
            printf "%-48s %10.4f %10.1f\n", "perf report --stdio --sort dso,sym", wall["perf_l"], rss["perf_l"]
            printf "%-48s %10.4f %10.1f\n", "profreport -l", wall["profreport_l"], rss["profreport_l"]
            printf "%-48s %10.4f %10.1f\n", "perf report --stdio --sort cpu,dso,sym", wall["perf_cpu"], rss["perf_cpu"]
            printf "%-48s %10.4f %10.1f\n", "profreport -l --separate=cpu", wall["profreport_cpu"], rss["profreport_cpu"]
            printf "\nprofreport -l:                 %.1fx faster, %.2f of the memory\n",
                wall["perf_l"] / wall["profreport_l"], rss["profreport_l"] / rss["perf_l"]
            printf "profreport -l --separate=cpu:  %.1fx faster, %.2f of the memory\n",
                wall["perf_cpu"] / wall["profreport_cpu"], rss["profreport_cpu"] / rss["perf_cpu"]
            printf "(targets: at least 10x faster, at most 0.25 of the memory)\n"
        }'
    echo "data kept in $dir"
}

bench_all() {
    local out
    out=$(mktemp)
    {
        echo "### scripts/bench.sh on $(date -u '+%F %H:%M') UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
        echo
        echo '```text'
        echo "== 1, 2. overhead (wall-time ratio of fixed work) and recording cost (CPU s per s), system-wide"
        scripts/bench/overhead.sh 1000 4000 10000
        echo "-- with -g"
        PROFKIT_BENCH_G=1 scripts/bench/overhead.sh 1000 4000 10000
        echo
        echo "== 3, 4. loss and bytes per sample, default buffers and 8 pages, with and without -g"
        scripts/bench/record.sh 10000 20000
        echo
        echo "== 5. reports on ~1 M samples"
        bench_report
        echo
        echo "== 6. sync throughput on SimRing against a plain copy of the same bytes"
        cargo bench --quiet -p profkit-sync --bench sync -- --noplot 2>&1 | grep -E 'sync:|^sync/|time:|thrpt:'
        echo
        echo "== 7. real system: a cargo build recorded system-wide with -g by both tools; reports, session size, scaling to 10 M samples"
        scripts/bench/realsys.sh
        echo '```'
    } 2>&1 | tee "$out"
    { echo; cat "$out"; } >>docs/PERFORMANCE.md
    rm -f "$out"
    echo "(appended to docs/PERFORMANCE.md)"
}

case "${1:-}" in
"") bench_all ;;
report) bench_report ;;
*)
    # Other benchmarks live in scripts/bench/NAME.sh.
    if [ -n "${1:-}" ] && [ -x "scripts/bench/$1.sh" ]; then
        name=$1
        shift
        exec "scripts/bench/$name.sh" "$@"
    fi
    usage
    ;;
esac
