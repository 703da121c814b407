#!/usr/bin/env bash
# Re-records the small sessions profreport's golden tests read
# (testdata/sessions/), then regenerates the expected outputs
# (testdata/golden/). Needs perf_event_open (root, or
# kernel.perf_event_paranoid <= 0) and two CPUs.
#
#   testdata/sessions/bin/shares      the workload binary (testdata/workloads/shares.c)
#   testdata/sessions/ratio/          `shares ratio 150`: f_a 2/3, f_b 1/3 of the time
#   testdata/sessions/pinned/         `shares pinned 60`: f_cpu0 on CPU 0, f_cpu1 on CPU 1
#   testdata/sessions/torn/           ratio cut in the middle of a chunk (a killed recorder)
#   testdata/sessions/corrupt/        ratio with one byte of a chunk flipped
#   testdata/sessions/bin/callgraph   the call-graph workload (testdata/workloads/callgraph.c)
#   testdata/sessions/callgraph/      `callgraph 60` recorded with -g: main → a → c, main → b → c
#
# Each session directory holds session.pkl and a kallsyms trimmed to the
# kernel symbols its samples hit (the full file is 5 MB). The workload is
# built in a temporary directory that is deleted afterwards, so the
# recorded path never exists and reports find the binary by build-id in
# testdata/sessions/bin (--search-dir), everywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cargo build --quiet -p profkit-cli
profctl=$root/target/debug/profctl
profreport=$root/target/debug/profreport
tmp=$(mktemp -d /tmp/profkit-golden.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -O1 -g -fno-omit-frame-pointer -pthread -o "$tmp/shares" testdata/workloads/shares.c
mkdir -p "$tmp/w" testdata/sessions/bin
cc -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -o "$tmp/w/callgraph" testdata/workloads/callgraph.c
cp "$tmp/shares" "$tmp/w/callgraph" testdata/sessions/bin/

record() { # NAME [-g] ARGS...   (./shares ARGS, or with -g ./w/callgraph ARGS)
    local name=$1; shift
    local dir=testdata/sessions/$name
    local flags=() cmd=./shares rows=(-l)
    if [ "${1:-}" = -g ]; then
        # --children: callers' kernel symbols are kept too.
        flags=(-g); cmd=./w/callgraph; rows=(-l --children); shift
    fi
    for attempt in 1 2 3 4 5; do
        rm -rf "$dir" "$tmp/$name"
        (cd "$tmp" && "$profctl" record "${flags[@]}" -F 1000 --sync-interval 100 --session-dir "$tmp/$name" -- "$cmd" "$@" >/dev/null)
        # A vDSO sample would be named after this machine's vDSO: record again.
        if ! "$profreport" --session-dir "$tmp/$name" --kallsyms /proc/kallsyms 2>/dev/null | grep -q '\[vdso\]'; then
            break
        fi
        echo "== $name: vDSO samples, recording again ($attempt)"
    done
    mkdir -p "$dir"
    cp "$tmp/$name/session.pkl" "$dir/session.pkl"
    # Trim kallsyms to the symbols hit (every alias at their addresses), plus _text and _etext.
    "$profreport" --session-dir "$dir" --kallsyms /proc/kallsyms "${rows[@]}" -w --format csv 2>/dev/null \
        | awk -F, 'NR > 1 && $10 != "" { sub(/^0x/, "", $10); printf "%016s\n", $10 }' \
        | tr ' ' 0 | sort -u >"$tmp/keep"
    awk 'NR == FNR { keep[$1] = 1; next } ($1 in keep) || $3 == "_text" || $3 == "_etext"' \
        "$tmp/keep" /proc/kallsyms >"$dir/kallsyms"
    # The trimmed file must name every sample as the full one does.
    diff <("$profreport" --session-dir "$dir" --kallsyms /proc/kallsyms "${rows[@]}" 2>/dev/null) \
         <("$profreport" --session-dir "$dir" "${rows[@]}" 2>/dev/null) >/dev/null \
        || { echo "trimmed kallsyms of $name names samples differently" >&2; exit 1; }
    echo "== $name: $(stat -c %s "$dir/session.pkl") bytes, $(wc -l <"$dir/kallsyms") kallsyms lines"
}

record ratio ratio 150
record pinned pinned 60
record callgraph -g 60

size=$(stat -c %s testdata/sessions/ratio/session.pkl)
mkdir -p testdata/sessions/torn testdata/sessions/corrupt
head -c $((size * 8 / 10)) testdata/sessions/ratio/session.pkl >testdata/sessions/torn/session.pkl
cp testdata/sessions/ratio/session.pkl testdata/sessions/corrupt/session.pkl
at=$((size * 6 / 10))
byte=$(od -An -tu1 -j "$at" -N1 testdata/sessions/corrupt/session.pkl | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 255)))" \
    | dd of=testdata/sessions/corrupt/session.pkl bs=1 seek="$at" conv=notrunc status=none
cp testdata/sessions/ratio/kallsyms testdata/sessions/torn/kallsyms
cp testdata/sessions/ratio/kallsyms testdata/sessions/corrupt/kallsyms

echo "== regenerating testdata/golden"
PROFKIT_BLESS=1 cargo test --quiet -p profkit-cli --test profreport golden
