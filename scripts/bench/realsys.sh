#!/usr/bin/env bash
# The real-system case: profkit against perf on a real, messy workload, a
# `cargo build --release` of a scratch crate with a few dependencies from the
# local registry cache (rustc, librustc_driver, libLLVM, cc, the linker),
# recorded system-wide with call graphs by both tools at once
# (profctl start -a -g -F 4000, perf record -a -g -e cpu-clock -F 4000),
# and again without -g (a flat recording).
#  1. reports: profreport -l of the flat recording (without symbol indexes,
#     cold: an empty index cache each run, the background builder a cold
#     report starts (profreport --build-index), warm) against perf report --sort
#     dso,sym -g none; -c and --format flamegraph of the -g one against
#     perf report -g (median wall of BENCH_RUNS runs, largest peak RSS),
#     ratios beside issue 32's targets; with BENCH_PROFILE=1 also where
#     profreport -l spends its time, profiled by profkit (folded stacks);
#  2. session size: the whole session directory per sample (kallsyms copy and
#     all), against perf.data, and for two recordings without -g of both CPUs
#     busy (shares pinned) for 8 s and BENCH_LONG_SECONDS;
#  3. scaling: profreport -l against perf report --sort dso,sym on ~10 k,
#     100 k, 1 M and 10 M samples of `shares pinned` (per-process recordings),
#     and against the decode of its log (the report by binary, no symbols).
# Usage: scripts/bench/realsys.sh   (or scripts/bench.sh realsys)
# Needs root, perf (PERF, default perf on PATH), a C compiler, and the scratch
# crate's dependencies in ~/.cargo/registry (cargo runs --offline).
# Knobs: BENCH_RUNS (5), BENCH_LONG_SECONDS (60), BENCH_SHORT_SECONDS (8),
#   BENCH_SCALE (sizes as LABEL:FREQ:SECONDS, default
#   "10k:1000:5 100k:10000:5 1M:50000:10 10M:50000:100"),
#   BENCH_10M (single: one 10 M recording per tool; merge: profreport --merge
#   of 10 copies of the 1M session, perf skipped; skip), BENCH_PERF_10M (1;
#   0 skips perf at 10M), BENCH_KEEP (1 keeps the temporary directory).
# About 8 minutes on an idle 2-CPU VM; BENCH_RUNS=3 BENCH_LONG_SECONDS=20 BENCH_10M=merge
# takes about 5.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
export BENCH_RUNS=${BENCH_RUNS:-5}
PERF=${PERF:-$(command -v perf || echo /usr/bin/perf)}
LONG=${BENCH_LONG_SECONDS:-60}
SHORT=${BENCH_SHORT_SECONDS:-8}
read -r -a SCALE <<<"${BENCH_SCALE:-10k:1000:5 100k:10000:5 1M:50000:10 10M:50000:100}"
MODE_10M=${BENCH_10M:-single}
PERF_10M=${BENCH_PERF_10M:-1}
t_start=$(date +%s)

step="setting up"
work=$(mktemp -d /tmp/profkit-realsys.XXXXXX)
# Every report's symbol indexes (and the builders they start) in here.
export XDG_CACHE_HOME=$work/xdg-cache
perf_pid="" busy_pid="" pk_open=""
cleanup() {
    local rc=$?
    set +e
    if [ "$rc" -ne 0 ]; then
        echo "realsys.sh: FAILED (exit $rc) while $step" >&2
    fi
    [ -n "$pk_open" ] && "$P" stop --session-dir "$pk_open" >/dev/null 2>&1
    if [ -n "$perf_pid" ]; then kill -INT "$perf_pid" 2>/dev/null; wait "$perf_pid" 2>/dev/null; fi
    if [ -n "$busy_pid" ]; then kill "$busy_pid" 2>/dev/null; wait "$busy_pid" 2>/dev/null; fi
    if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "data kept in $work" >&2; else rm -rf "$work"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "realsys.sh: line $LINENO: \`$BASH_COMMAND\` failed" >&2' ERR
die() { echo "realsys.sh: $*" >&2; exit 1; }

command -v "$PERF" >/dev/null || die "no perf at $PERF (set PERF=...)"
[ "$(id -u)" = 0 ] || [ "$(cat /proc/sys/kernel/perf_event_paranoid)" -le -1 ] ||
    die "needs root (or perf_event_paranoid = -1) for system-wide sampling"

step="building profkit (cargo build --release -p profkit-cli)"
cargo build --release --quiet --offline -p profkit-cli
bin=${CARGO_TARGET_DIR:-$root/target}/release
P=$bin/profctl
R=$bin/profreport
step="building testdata/workloads/shares.c"
cc -O1 -g -fno-omit-frame-pointer -pthread -o "$work/shares" testdata/workloads/shares.c

# Samples and lost of a `profctl stop` or `profctl record` summary.
pk_summary_samples() { sed -nE 's/.* ([0-9]+) samples and ([0-9]+) lost.*/\1 \2/p' | head -1; }
# Samples in one or more sessions, as profreport reads them (args: --session-dir D or --merge D...).
pk_report_samples() { "$R" "$@" --format csv 2>/dev/null | awk -F, 'NR > 1 { n += $1 } END { print n + 0 }'; }
perf_samples() { # perf.data -> "samples lost": SAMPLE events, and the samples PERF_RECORD_LOST records count
    local n l
    read -r n l <<<"$("$PERF" report --stats -i "$1" 2>/dev/null |
        awk '/SAMPLE events:/ && !s { s = $3 } /[^_]LOST events:/ && !l { l = $3 } END { print s + 0, l + 0 }')"
    if [ "$l" -gt 0 ]; then # only then read the whole dump for the counts
        l=$("$PERF" report -D -i "$1" 2>/dev/null | awk '/PERF_RECORD_LOST / {
            for (i = 1; i <= NF; i++) if ($i ~ /^lost:?$/) { v = $(i + 1); gsub(/[^0-9]/, "", v); t += v } }
            END { print t + 0 }')
    fi
    echo "$n $l"
}
bytes() { du -sb "$1" | cut -f1; }
differ() { # A B -> a note when the counts differ by more than 10 %
    awk -v a="$1" -v b="$2" 'BEGIN { if (a < 0.9 * b || b < 0.9 * a)
        print "; counts differ by > 10 %: CPU taken by other load while one of them recorded?" }'
}
per() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

declare -A W M # median wall (s) and peak RSS (MiB) by label
bench() { # LABEL CMD...
    local out l w m
    out=$(measure "$@")
    read -r l w m <<<"$out"
    W[$l]=$w
    M[$l]=$m
}
row() { printf '%-58s %10s %10s\n' "$1" "$2" "$3"; }
verdict() { # PK_LABEL PERF_LABEL MIN_SPEEDUP MAX_RSS_FRACTION (like 1/4)
    awk -v kw="${W[$1]}" -v pw="${W[$2]}" -v km="${M[$1]}" -v pm="${M[$2]}" -v sp="$3" -v frt="$4" 'BEGIN {
        split(frt, q, "/"); fr = q[1] / q[2]
        s = kw > 0 ? pw / kw : 1e9; f = pm > 0 ? km / pm : 1e9
        printf "%7.1fx faster (target >= %dx: %s), RSS %.2f of perf'\''s (target <= %s: %s)\n",
            s, sp, (s >= sp ? "ok" : "MISSED"), f, frt, (f <= fr ? "ok" : "MISSED") }'
}

echo "machine: $(nproc) CPUs, $(uname -r), $(date -u '+%F %H:%M') UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo ?), $("$PERF" --version), load average $(cut -d' ' -f1-3 /proc/loadavg)"

# ---------------------------------------------------------------- 1. reports
step="making the scratch crate"
crate=$work/crate
mkdir -p "$crate/src"
cat >"$crate/Cargo.toml" <<'EOF'
[package]
name = "realsys-bench"
version = "0.1.0"
edition = "2021"

[dependencies]
anyhow = "1"
clap = { version = "4", features = ["derive"] }
regex = "1"
serde = { version = "1", features = ["derive"] }
serde_json = "1"

[workspace]
EOF
cat >"$crate/src/main.rs" <<'EOF'
use clap::Parser;
use serde::{Deserialize, Serialize};

#[derive(Parser)]
struct Args {
    #[arg(default_value = "a1 b22 c333")]
    text: String,
}

#[derive(Serialize, Deserialize, Debug)]
struct Hit {
    word: String,
    digits: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let re = regex::Regex::new(r"([a-z]+)(\d+)")?;
    let hits: Vec<Hit> = re
        .captures_iter(&args.text)
        .map(|c| Hit { word: c[1].to_string(), digits: c[2].len() })
        .collect();
    let json = serde_json::to_string(&hits)?;
    let back: Vec<Hit> = serde_json::from_str(&json)?;
    println!("{json} {}", back.len());
    Ok(())
}
EOF
step="resolving the scratch crate's dependencies offline (from ~/.cargo/registry)"
(cd "$crate" && cargo generate-lockfile --offline --quiet && cargo fetch --offline --quiet)
ncrates=$(grep -c '^name = ' "$crate/Cargo.lock")

# record_build NAME FLAGS...: the scratch crate built (cargo build --release)
# under `profctl start -a FLAGS` and `perf record -a FLAGS` at once, into
# $work/NAME/pk and $work/NAME/perf.data; sets pk_n pk_lost perf_n perf_lost
# build_s and pk_stop.
record_build() {
    local name=$1 rec b0 b1 rc
    shift
    rec=$work/$name
    mkdir -p "$rec"
    step="recording the scratch build with profctl and perf ($name: $*)"
    "$P" start -a "$@" -F 4000 --session-dir "$rec/pk" >/dev/null
    pk_open=$rec/pk
    "$PERF" record -a "$@" -e cpu-clock -F 4000 --no-buildid --no-bpf-event -o "$rec/perf.data" \
        >"$rec/perf.log" 2>&1 &
    perf_pid=$!
    for _ in $(seq 100); do # perf is live once it has written its header
        [ -s "$rec/perf.data" ] && break
        kill -0 "$perf_pid" 2>/dev/null || { cat "$rec/perf.log" >&2; die "perf record exited early"; }
        sleep 0.1
    done
    sleep 0.5
    step="building the scratch crate under both profilers ($name, cargo build --release --offline)"
    b0=$(date +%s%N)
    (cd "$crate" && CARGO_TARGET_DIR="$rec/target" cargo build --release --offline --quiet)
    b1=$(date +%s%N)
    build_s=$(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    step="stopping profctl"
    pk_stop=$("$P" stop --session-dir "$rec/pk" 2>&1) || { echo "$pk_stop" >&2; die "profctl stop failed"; }
    pk_open=""
    step="stopping perf record"
    kill -INT "$perf_pid"
    rc=0
    wait "$perf_pid" || rc=$?
    perf_pid=""
    if { [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ]; } || ! grep -q 'Captured and wrote' "$rec/perf.log"; then
        cat "$rec/perf.log" >&2
        die "perf record failed (exit $rc)"
    fi
    rm -rf "$rec/target"
    step="counting samples"
    read -r pk_n pk_lost <<<"$(echo "$pk_stop" | pk_summary_samples)"
    read -r perf_n perf_lost <<<"$(perf_samples "$rec/perf.data")"
    [ "${pk_n:-0}" -gt 0 ] || { echo "$pk_stop" >&2; die "no profkit sample count in profctl stop's summary"; }
    [ "$perf_n" -gt 0 ] || die "perf.data holds no samples"
    echo "$name: the build took $build_s s wall under both profilers, system-wide, ${*:-flat}, cpu-clock 4000 Hz;" \
        "profkit $pk_n samples ($pk_lost lost), perf $perf_n samples ($perf_lost lost)$(differ "$pk_n" "$perf_n")"
    echo "$pk_stop" | grep -i 'warning' || true
}

echo
echo "-- reports: cargo build --release of a scratch crate ($ncrates crates: anyhow, clap, regex, serde, serde_json and their deps)"
record_build flat
record_build rec -g
rec=$work/rec
step="timing the reports"
flat=$work/flat
cache=$work/xdg-cache
# Symbol indexes (issue 32): cold runs each start from an empty cache (the
# background builder the run before started waited for and the cache
# removed, untimed: BENCH_BETWEEN); the builder's own run (--build-index,
# from an empty cache) is timed apart: it is what a cold report leaves to
# the background. Warm runs find every binary's index; --no-cache reads
# every symbol table as every report did before issue 32.
builders_done() { while pgrep -f -- '--build-index' >/dev/null; do sleep 0.1; done; }
empty_cache() { builders_done; rm -rf "$cache"; }
bench pk_l_none env XDG_CACHE_HOME="$cache" "$R" --session-dir "$flat/pk" -l --no-cache
BENCH_BETWEEN=empty_cache bench pk_l_cold env XDG_CACHE_HOME="$cache" "$R" --session-dir "$flat/pk" -l
BENCH_BETWEEN=empty_cache bench pk_build env XDG_CACHE_HOME="$cache" "$R" --session-dir "$flat/pk" -l --build-index
# The builder runs wrote some 100 MB of entries each: their writeback (to
# this VM's disk) is not what a warm report costs, so it ends first.
builders_done
sync
BENCH_BETWEEN=builders_done bench pk_l env XDG_CACHE_HOME="$cache" "$R" --session-dir "$flat/pk" -l
bench perf_l "$PERF" report -i "$flat/perf.data" --stdio --sort dso,sym -g none
BENCH_BETWEEN=builders_done bench pk_c env XDG_CACHE_HOME="$cache" "$R" --session-dir "$rec/pk" -c
bench pk_c_none env XDG_CACHE_HOME="$cache" "$R" --session-dir "$rec/pk" -c --no-cache
BENCH_BETWEEN=builders_done bench pk_fg env XDG_CACHE_HOME="$cache" "$R" --session-dir "$rec/pk" --format flamegraph
bench perf_g "$PERF" report -i "$rec/perf.data" --stdio -g
# Through the indexes, the same bytes as without them (issue 32's evidence on
# a real build): -l of the flat recording, -c and folded stacks of the -g one.
step="comparing reports through the indexes with reports without them"
builders_done
for args in "$flat/pk -l" "$rec/pk -c" "$rec/pk --format collapsed"; do
    read -r -a a <<<"$args"
    if ! cmp -s <(XDG_CACHE_HOME=$cache "$R" --session-dir "${a[@]}" 2>&1) \
        <(XDG_CACHE_HOME=$cache "$R" --session-dir "${a[@]}" --no-cache 2>&1); then
        die "profreport --session-dir $args differs through the symbol indexes"
    fi
    echo "through the indexes, byte for byte as without them: profreport --session-dir ${args#"$work"/}"
done
echo "(wall: median of $BENCH_RUNS runs after a warm-up run; RSS: the largest)"
row command "wall (s)" "RSS (MiB)"
row "flat: profreport -l --no-cache (symbol tables read)" "${W[pk_l_none]}" "${M[pk_l_none]}"
row "flat: profreport -l, cold (empty index cache)" "${W[pk_l_cold]}" "${M[pk_l_cold]}"
row "flat: its background builder (--build-index)" "${W[pk_build]}" "${M[pk_build]}"
row "flat: profreport -l, warm (every index made)" "${W[pk_l]}" "${M[pk_l]}"
row "flat: perf report --stdio --sort dso,sym -g none" "${W[perf_l]}" "${M[perf_l]}"
row "-g: profreport -c, warm" "${W[pk_c]}" "${M[pk_c]}"
row "-g: profreport -c --no-cache" "${W[pk_c_none]}" "${M[pk_c_none]}"
row "-g: profreport --format flamegraph, warm" "${W[pk_fg]}" "${M[pk_fg]}"
row "-g: perf report --stdio -g" "${W[perf_g]}" "${M[perf_g]}"
echo "ratios (perf wall / profkit wall, profkit RSS / perf RSS):"
printf '%-44s %s\n' "profreport -l cold vs perf -g none" "$(verdict pk_l_cold perf_l 10 1/4)"
printf '%-44s %s\n' "profreport -l warm vs perf -g none" "$(verdict pk_l perf_l 20 1/8)"
printf '%-44s %s\n' "profreport -c warm vs perf report -g" "$(verdict pk_c perf_g 40 1/3)"
printf '%-44s %s\n' "profreport flamegraph warm vs perf report -g" "$(verdict pk_fg perf_g 40 1/3)"
if [ -n "${BENCH_PROFILE:-}" ]; then
    # Where profreport -l spends its time, by profkit itself (DWARF stacks,
    # folded; the heaviest 25 lines), without and with the indexes.
    for mode in none warm; do
        step="profiling profreport -l ($mode)"
        extra=()
        [ "$mode" = none ] && extra=(--no-cache)
        (cd "$work" && XDG_CACHE_HOME=$cache "$P" record --call-graph dwarf -F 4000 --session-dir "prof-$mode" -- \
            "$R" --session-dir "$flat/pk" -l "${extra[@]}" >/dev/null 2>&1)
        echo "profile of profreport -l ($mode): the heaviest folded stacks"
        # awk reads to the end: no SIGPIPE for sort under pipefail.
        "$R" --session-dir "$work/prof-$mode" --format collapsed 2>/dev/null |
            awk '{ n = $NF; $NF = ""; s[$0] += n } END { for (k in s) print s[k], k }' |
            sort -n -r | awk 'NR <= 25 { print "    " $0 }'
    done
fi

# ---------------------------------------------------------------- 2. session size
step="session size"
echo
echo "-- session size: whole session directory (du -sb: session.pkl, kallsyms copy, logs, maps...) per sample"
echo "realsys session files: $(cd "$rec/pk" && find . -type f -printf '%P %s, ' | sed 's/, $//')"
size_row() { printf '%-40s %9s %11s %9s %15s %13s %s\n' "$@"; }
size_row recording samples "dir bytes" "B/sample" "session.pkl B/s" "perf.data B/s"
size_row "cargo build, -g, 4000 Hz, -a" "$pk_n" "$(bytes "$rec/pk")" "$(per "$(bytes "$rec/pk")" "$pk_n")" \
    "$(per "$(stat -c %s "$rec/pk/session.pkl")" "$pk_n")" "$(per "$(stat -c %s "$rec/perf.data")" "$perf_n")"
for size_spec in "$SHORT:7" "$LONG:3"; do
    IFS=: read -r secs goal <<<"$size_spec"
    step="recording ${secs} s without -g (shares pinned on both CPUs)"
    d=$work/size$secs
    "$work/shares" pinned 1000000000 >/dev/null &
    busy_pid=$!
    "$P" start -a -F 4000 --session-dir "$d" >/dev/null
    pk_open=$d
    sleep "$secs"
    out=$("$P" stop --session-dir "$d" 2>&1) || { echo "$out" >&2; die "profctl stop failed"; }
    pk_open=""
    kill "$busy_pid"
    wait "$busy_pid" 2>/dev/null || true
    busy_pid=""
    read -r n _ <<<"$(echo "$out" | pk_summary_samples)"
    [ "${n:-0}" -gt 0 ] || { echo "$out" >&2; die "no samples in the ${secs} s recording"; }
    bps=$(per "$(bytes "$d")" "$n")
    ok=$(awk -v b="$bps" -v g="$goal" 'BEGIN { print b <= g ? "ok" : "MISSED" }')
    size_row "${secs} s, no -g, 4000 Hz, -a, both CPUs busy" "$n" "$(bytes "$d")" "$bps" \
        "$(per "$(stat -c %s "$d/session.pkl")" "$n")" "-" "(target dir <= $goal B/sample: $ok)"
    rm -rf "$d"
done

# ---------------------------------------------------------------- 3. scaling
step="scaling"
echo
echo "-- scaling: profreport -l against perf report --stdio --sort dso,sym, per-process recordings of shares pinned"
max_rate=$(cat /proc/sys/kernel/perf_event_max_sample_rate 2>/dev/null || echo 100000)
srow() { printf '%-6s %-28s %10s %10s %10s %10s %8s %8s %s\n' "$@"; }
srow size "samples pk / perf" "pk s" "pk MiB" "perf s" "perf MiB" "x faster" "RSS frac" "how"
prev_pk="" prev_label="" decode_rows=()
for spec in "${SCALE[@]}"; do
    IFS=: read -r label freq secs <<<"$spec"
    s=$work/scale-$label
    mkdir -p "$s"
    how="-F $freq, ${secs} s"
    if [ "$freq" -gt "$max_rate" ]; then
        secs=$(( (secs * freq + max_rate - 1) / max_rate ))
        freq=$max_rate
        how="-F $freq (perf_event_max_sample_rate), ${secs} s"
    fi
    pk_args=(--session-dir "$s/pk")
    do_perf=1
    if [ "$label" = 10M ] && [ "$MODE_10M" = skip ]; then
        srow "$label" "skipped (BENCH_10M=skip)"
        continue
    elif [ "$label" = 10M ] && [ "$MODE_10M" = merge ]; then
        [ -n "$prev_pk" ] || die "BENCH_10M=merge needs a smaller size before 10M"
        pk_args=(--merge)
        for i in $(seq 10); do
            cp -r "$prev_pk" "$s/pk$i"
            pk_args+=("$s/pk$i")
        done
        how="profreport --merge of 10 copies of the $prev_label session; perf skipped"
        do_perf=0
    else
        step="recording $label samples with profctl record ($how)"
        rc=0
        "$P" record -e cpu-clock -F "$freq" --session-dir "$s/pk" \
            -- timeout "$secs" "$work/shares" pinned 1000000000 >"$s/pk.log" 2>&1 || rc=$?
        [ "$rc" = 124 ] || { cat "$s/pk.log" >&2; die "profctl record exited $rc (expected 124 from timeout)"; }
        prev_pk=$s/pk
        prev_label=$label
    fi
    [ "$label" = 10M ] && [ "$PERF_10M" = 0 ] && do_perf=0 && how="$how; perf skipped (BENCH_PERF_10M=0)"
    if [ "$do_perf" = 1 ]; then
        step="recording $label samples with perf record ($how)"
        rc=0
        "$PERF" record -e cpu-clock -F "$freq" --no-buildid --no-bpf-event -o "$s/perf.data" \
            -- timeout "$secs" "$work/shares" pinned 1000000000 >"$s/perf.log" 2>&1 || rc=$?
        [ "$rc" = 124 ] || { cat "$s/perf.log" >&2; die "perf record exited $rc (expected 124 from timeout)"; }
    fi
    step="timing the reports at $label samples"
    kn=$(pk_report_samples "${pk_args[@]}")
    BENCH_BETWEEN=builders_done bench "pk_$label" "$R" "${pk_args[@]}" -l
    # The log's decode: the same report by binary only (no symbols).
    bench "pkimg_$label" "$R" "${pk_args[@]}"
    decode_rows+=("$(printf '%-6s profreport -l %7ss, by binary (the decode) %7ss: -l takes %sx the decode' \
        "$label" "${W[pk_$label]}" "${W[pkimg_$label]}" "$(per "${W[pk_$label]}" "${W[pkimg_$label]}")")")
    if [ "$do_perf" = 1 ]; then
        read -r pn _ <<<"$(perf_samples "$s/perf.data")"
        bench "perf_$label" "$PERF" report -i "$s/perf.data" --stdio --sort dso,sym
        how="$how$(differ "$kn" "$pn")"
        srow "$label" "$kn / $pn" "${W[pk_$label]}" "${M[pk_$label]}" "${W[perf_$label]}" "${M[perf_$label]}" \
            "$(per "${W[perf_$label]}" "${W[pk_$label]}")" "$(per "${M[pk_$label]}" "${M[perf_$label]}")" "$how"
        rm -f "$s/perf.data"
    else
        srow "$label" "$kn / -" "${W[pk_$label]}" "${M[pk_$label]}" - - - - "$how"
    fi
done
echo "(targets as for -l above: at least 10x faster, at most 0.25 of the RSS)"
echo "a report against the decode of its log (issue 32: at 10 M samples, -l within 2x of the decode plus the"
echo "symbol lookups of the binaries it names; here shares, libc, ld.so and the kernel: a few lookups):"
for r in "${decode_rows[@]}"; do echo "  $r"; done
echo "realsys.sh took $(( $(date +%s) - t_start )) s; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
