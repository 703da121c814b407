#!/usr/bin/env bash
# The whole test gate: formatting, lints, every test in the workspace.
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Tools the tests use that a fresh Debian machine may lack (the service
# test: strace and systemd-analyze; the speedscope schema test: npm; the
# debuginfod tests: elfutils' server, and openssl for their https server;
# the fleet tests: Debian's ClickHouse, started by the tests themselves).
need=()
command -v debuginfod >/dev/null || need+=(debuginfod)
command -v openssl >/dev/null || need+=(openssl)
[ -x /usr/sbin/clickhouse-server ] || need+=(clickhouse-server)
command -v strace >/dev/null || need+=(strace)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v npm >/dev/null || need+=(npm)
if [ "${#need[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Reports in the tests ask no debuginfod server the machine is configured
# with (Debian's libdebuginfod-common sets DEBUGINFOD_URLS in login shells)
# and read no cache of the user's; the debuginfod tests set their own.
export DEBUGINFOD_URLS=
export DEBUGINFOD_CACHE_PATH="$PWD/${CARGO_TARGET_DIR:-target}/tmp/debuginfod-none"
# The reports' symbol indexes (issue 32) go to a fresh directory of this
# run, shared by every test (reports at once share it as users' do), not
# to the user's ~/.cache.
export XDG_CACHE_HOME="$PWD/${CARGO_TARGET_DIR:-target}/tmp/xdg-cache"
rm -rf "$XDG_CACHE_HOME"
mkdir -p -m 0700 "$XDG_CACHE_HOME"

# speedscope's npm package, whose dist/release/file-format-schema.json the
# viewers test validates `--format speedscope` against: fetched once into
# target/tmp (never into the repository); the test fetches it itself when
# run alone. Keep the version in step with SPEEDSCOPE in
# cli/tests/profreport/viewers.rs.
speedscope=1.25.0
ss_dir="${CARGO_TARGET_DIR:-target}/tmp/speedscope-$speedscope"
if [ ! -f "$ss_dir/package/dist/release/file-format-schema.json" ] && command -v npm >/dev/null; then
    echo "== fetching speedscope@$speedscope (its file-format schema) into $ss_dir"
    mkdir -p "$ss_dir"
    (cd "$ss_dir" && npm pack --silent "speedscope@$speedscope" >/dev/null && tar xzf "speedscope-$speedscope.tgz")
fi

# The kernel lowers kernel.perf_event_max_sample_rate by itself when
# sampling interrupts take long on a loaded machine ("perf: interrupt took
# too long"), and the value stays until reboot: a machine that ran a heavy
# load before would throttle the 4 kHz live tests. Back to the kernel's
# default (100000) for the run, as root.
if [ "$(id -u)" = 0 ] && [ -w /proc/sys/kernel/perf_event_max_sample_rate ]; then
    rate=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
    if [ "$rate" -lt 100000 ]; then
        echo "== kernel.perf_event_max_sample_rate was $rate (lowered under load): set to 100000"
        echo 100000 > /proc/sys/kernel/perf_event_max_sample_rate
    fi
fi

echo "== cargo fmt --check"
cargo fmt --all --check

echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== fuzz targets build (run them with cargo +nightly fuzz run TARGET)"
cargo build --quiet --locked --manifest-path fuzz/Cargo.toml

echo "== cargo test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --locked 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
sum() { awk -v k="$1" '/^test result:/ { for (i = 1; i <= NF; i++) if ($i ~ "^" k) { v = $(i-1); gsub(/[^0-9]/, "", v); t += v } } END { print t + 0 }' "$log"; }
passed=$(sum passed); failed=$(sum failed); ignored=$(sum ignored)
echo
echo "summary: $passed passed, $failed failed, $ignored skipped"
exit "$status"
