#!/usr/bin/env bash
# Shows `go tool pprof` reading profreport's pprof export. Usage:
#
#   scripts/pprof.sh              the checked-in call-graph session (testdata/sessions/callgraph)
#   scripts/pprof.sh DIR [ARGS]   another session directory, with extra profreport arguments
#
# Needs go (`apt-get install golang-go`: pprof ships with it). Prints
# `pprof -top` (flat and cumulative time per function), `-peek` of the
# hottest function (its callers and callees) and `-traces` (first lines).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || { echo "no go on PATH (apt-get install golang-go)" >&2; exit 1; }
cargo build --quiet -p profkit-cli
tmp=$(mktemp -d /tmp/profkit-pprof.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ $# -eq 0 ]; then
    set -- testdata/sessions/callgraph --sysroot testdata/sessions/bin --search-dir testdata/sessions/bin
fi
dir=$1; shift
target/debug/profreport --session-dir "$dir" "$@" --format pprof -o "$tmp/profile.pb.gz"
echo "== profreport --format pprof: $(stat -c %s "$tmp/profile.pb.gz") bytes"
echo "== go tool pprof -top"
go tool pprof -top "$tmp/profile.pb.gz"
hot=$(go tool pprof -top -flat "$tmp/profile.pb.gz" 2>/dev/null \
    | awk '/flat%/ { body = 1; next } body && NF >= 6 { print $6; exit }')
if [ -n "$hot" ]; then
    echo "== go tool pprof -peek '^$hot\$'"
    go tool pprof -peek "^${hot}\$" "$tmp/profile.pb.gz"
fi
echo "== go tool pprof -traces (first 30 lines)"
go tool pprof -traces "$tmp/profile.pb.gz" | head -30
