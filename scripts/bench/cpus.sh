#!/usr/bin/env bash
# Issue 33, many CPUs by simulation: SimRings for N CPUs sized by
# profkit_perf::ring_plan (root's 512 MiB budget), fed at 4 kHz per CPU and
# drained by the real recorder (sync stage, event buffer, writer, session
# file in a temporary directory); each case in a process of its own, so that
# its RSS figure is its own. One line per case:
#
#   cpus N MODE: round MS ms (p99 MS), CPU% of one core, RSS +MiB, B/sample; ...
#
# Usage: scripts/bench/cpus.sh [N ...]   (CPU counts; 2 16 64 256 by default)
# Knobs: CPUS_MODES ("flat fp dwarf idle churn quiet"), PROFKIT_CPUS_SECONDS
# (simulated seconds per case, 10), PROFKIT_CPUS_RATE (Hz per CPU, 4000),
# PROFKIT_CPUS_BUDGET_MIB (locked-memory budget, 512).
# See crates/sync/benches/cpus.rs for what each figure is.
set -euo pipefail
cd "$(dirname "$0")/../.."
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(2 16 64 256)
modes=${CPUS_MODES:-flat fp dwarf idle churn quiet}
cargo bench --quiet -p profkit-sync --bench cpus --no-run 2>/dev/null
for mode in $modes; do
    for n in "${counts[@]}"; do
        PROFKIT_CPUS_CASES="$n:$mode" cargo bench --quiet -p profkit-sync --bench cpus 2>/dev/null |
            grep '^cpus '
    done
done
