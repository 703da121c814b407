#!/usr/bin/env bash
# Builds profkit in release mode, profiles a bundled CPU-bound workload
# (testdata/workloads/spin.c: two threads in two hot functions) with
# `profctl record`, and prints the summary and the report.
# Needs root, or kernel.perf_event_paranoid <= 2 for user-space-only sampling.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${PROFKIT_DEMO_DIR:-target/demo}"
mkdir -p "$out"
echo "== building (release)"
cargo build --release --quiet -p profkit-cli
cc -O1 -g -fno-omit-frame-pointer -pthread -o "$out/spin" testdata/workloads/spin.c
echo "== profctl record -F 4000 -- spin"
target/release/profctl record -F 4000 --session-dir "$out/profkit_data" -- "$out/spin" "${1:-1000000000}"
echo "== profreport -l"
target/release/profreport -l --session-dir "$out/profkit_data"
echo "== profreport --separate=cpu"
target/release/profreport --separate=cpu --session-dir "$out/profkit_data"
# Call graphs through code without frame pointers: glibc's qsort called
# from two callers (1 : 2), unwound with DWARF CFI at sync time.
cc -O2 -fomit-frame-pointer -o "$out/qsort" testdata/workloads/qsort.c
echo "== profctl record --call-graph dwarf -- qsort"
target/release/profctl record --call-graph dwarf --session-dir "$out/profkit_dwarf" -- "$out/qsort" 80
echo "== profreport -l --children -t 1"
target/release/profreport -l --children -t 1 --session-dir "$out/profkit_dwarf"
