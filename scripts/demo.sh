#!/usr/bin/env bash
# Builds profkit in release mode and profiles a bundled CPU-bound workload
# system-wide, then prints what was captured (samples and losses per CPU,
# busiest binaries). Needs root (or kernel.perf_event_paranoid <= 0).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${PROFKIT_DEMO_DIR:-target/demo}"
mkdir -p "$out"
echo "== building (release)"
cargo build --release --quiet -p profkit-sync --example capture
cc -O1 -g -fno-omit-frame-pointer -pthread -o "$out/spin" testdata/workloads/spin.c
echo "== recording the whole system at 4 kHz while testdata/workloads/spin.c runs"
target/release/examples/capture -F 4000 "$out/session.pkl" -- "$out/spin" "${1:-300000000}"
