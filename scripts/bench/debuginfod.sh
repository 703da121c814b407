#!/usr/bin/env bash
# Debug files from a debuginfod server, on a real program nobody here wrote:
# a copy of pyenv's Python 3.12 (BENCH_PYTHON, its prefix) whose python3.12,
# libpython3.12.so and lib-dynload modules are stripped, their debug files
# split off (objcopy --only-keep-debug) and served by elfutils' debuginfod
# on 127.0.0.1. A Python workload (json, decimal, hashlib, re, zlib) is
# recorded once with `profctl record`, then timed (median of BENCH_RUNS):
#
#   profreport -l, cold          a new DEBUGINFOD_CACHE_PATH each run: every
#                                debug file fetched, in parallel
#   profreport -l, warm          the cache from before: no request
#   profreport -l --debug-dir    the same debug files under a local
#                                .build-id directory, no debuginfod
#   debuginfod-find, one by one  elfutils' own client fetching the same
#                                debug files one after another (as gdb does)
#
# then the client alone on every one of the copy's debug files (a new cache
# each run): `fetch_many` (8 at once), the same client one after another
# (`--one-by-one`), and debuginfod-find one after another.
#
# and the share named: samples in python's binaries with a name, without a
# server, through it, and through the local debug files (equal when right).
# perf 6.1 as Debian builds it has no debuginfod support
# (`perf version --build-options`: debuginfod [ OFF ]).
#
# Needs root (recording), debuginfod and debuginfod-find (Debian's debuginfod
# and elfutils packages), objcopy/strip, and a Python at BENCH_PYTHON.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh

py=${BENCH_PYTHON:-/root/.pyenv/versions/3.12.1}
for t in debuginfod debuginfod-find objcopy strip; do
    command -v "$t" >/dev/null || { echo "no $t (apt-get install debuginfod elfutils binutils)" >&2; exit 1; }
done
[ -x "$py/bin/python3.12" ] || { echo "no Python 3.12 at $py (set BENCH_PYTHON)" >&2; exit 1; }

echo "== building (release)"
cargo build --release --quiet -p profkit-cli
profctl=$root/target/release/profctl profreport=$root/target/release/profreport
dir=${BENCH_DIR:-$(mktemp -d /tmp/profkit-debuginfod.XXXXXX)}
mkdir -p "$dir"
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; true; }
trap cleanup EXIT

echo "== splitting and stripping a copy of $py"
rm -rf "$dir/py" "$dir/srv" "$dir/debug"
cp -a "$py" "$dir/py"
mkdir -p "$dir/srv" "$dir/debug"
n=0
while IFS= read -r f; do
    id=$(readelf -n "$f" 2>/dev/null | awk '/Build ID/ { print $3 }')
    [ -n "$id" ] || continue
    objcopy --only-keep-debug "$f" "$dir/srv/$n.debug"
    mkdir -p "$dir/debug/.build-id/${id:0:2}"
    cp "$dir/srv/$n.debug" "$dir/debug/.build-id/${id:0:2}/${id:2}.debug"
    strip --strip-all "$f"
    echo "$id" >>"$dir/ids"
    n=$((n + 1))
done < <(find "$dir/py/bin/python3.12" "$dir/py/lib/libpython3.12.so.1.0" \
    "$dir/py/lib/python3.12/lib-dynload" -name '*.so' -o -name python3.12 -o -name 'libpython3.12.so.1.0')
sort -u -o "$dir/ids" "$dir/ids"
echo "   $n files, $(du -sh "$dir/srv" | cut -f1) of debug files"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rm -f "$dir/db.sqlite"*
debuginfod -p "$port" -d "$dir/db.sqlite" -F "$dir/srv" >"$dir/debuginfod.log" 2>&1 &
server_pid=$!
url=http://127.0.0.1:$port
first=$(head -1 "$dir/ids")
for _ in $(seq 300); do
    curl -sf -o /dev/null "$url/buildid/$first/debuginfo" 2>/dev/null && break
    sleep 0.2
done

echo "== recording the stripped Python"
rm -rf "$dir/s"
(cd "$dir" && LD_LIBRARY_PATH="$dir/py/lib" PYTHONHOME="$dir/py" "$profctl" record -F 4000 --session-dir s -- \
    "$dir/py/bin/python3.12" -c '
import json, decimal, hashlib, re, zlib
d = decimal.Decimal(1)
for i in range(60000):
    s = json.dumps({"k": i, "v": [i] * 20})
    json.loads(s)
    d = d * decimal.Decimal("1.000001")
    hashlib.sha256(s.encode()).hexdigest()
    re.findall(r"[0-9]+", s)
    zlib.compress(s.encode())
' | head -1)

# Samples in the copy's files (python3.12, libpython, the lib-dynload
# modules), and of them those with a name (JSON -l).
named() { # URLS CACHE [ARGS...]
    local urls=$1 cache=$2
    shift 2
    DEBUGINFOD_URLS=$urls DEBUGINFOD_CACHE_PATH=$cache \
        "$profreport" --session-dir "$dir/s" --format json -l "$@" 2>/dev/null | python3 -c "
import json, sys
v = json.load(sys.stdin)
ours = lambda i: i == 'python3.12' or i == 'libpython3.12.so.1.0' or '.cpython-312-' in i
rows = [r for r in v['rows'] if ours(r.get('image') or '')]
t = sum(r['samples'] for r in rows)
n = sum(r['samples'] for r in rows if (r.get('symbol') or '(no symbols)') != '(no symbols)')
print(f'{n} of {t} samples named ({100 * n / max(t, 1):.1f} %)')"
}
echo "== what is named"
rm -rf "$dir"/c-*
echo "   no server:          $(named "" "$dir/c-none")"
echo "   through debuginfod: $(named "$url" "$dir/c-named")"
echo "   local debug files:  $(named "" "$dir/c-none" --debug-dir "$dir/debug")"
fetched=$(DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$dir/c-count" "$profreport" --session-dir "$dir/s" -l 2>&1 >/dev/null | grep -o 'debuginfod: fetched [^;]*' || true)
echo "   cold report says:  $fetched"
# The build-ids the report fetched: what elfutils' client fetches below.
for f in "$dir"/c-count/*/debuginfo; do
    [ -s "$f" ] && basename "$(dirname "$f")"
done >"$dir/fetched-ids"

echo "== timing (median of ${BENCH_RUNS:-7})"
cold() { rm -rf "$dir/c-cold"; DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$dir/c-cold" "$profreport" --session-dir "$dir/s" -l; }
warm() { DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$dir/c-named" "$profreport" --session-dir "$dir/s" -l; }
local_dbg() { DEBUGINFOD_URLS= DEBUGINFOD_CACHE_PATH="$dir/c-none" "$profreport" --session-dir "$dir/s" -l --debug-dir "$dir/debug"; }
one_by_one() {
    rm -rf "$dir/c-find"
    while read -r id; do
        DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$dir/c-find" debuginfod-find debuginfo "$id" >/dev/null || true
    done <"$dir/fetched-ids"
}
export -f cold warm local_dbg one_by_one
export dir url profreport
printf '%-40s %10s %10s\n' case median_s max_rss_mib
for c in cold warm local_dbg one_by_one; do
    measure "$c" bash -c "$c" | awk '{ printf "%-40s %10s %10s\n", $1, $2, $3 }'
done
echo "   (cold: the whole report, fetching $(wc -l <"$dir/fetched-ids") debug files in parallel; one_by_one: only those fetches, by debuginfod-find)"

echo "== all $(wc -l <"$dir/ids") debug files of the copy, a new cache each time (median of ${BENCH_RUNS:-7})"
cargo build --release --quiet -p profkit-debuginfod --example fetch
fetch=$root/target/release/examples/fetch
all_parallel() { rm -rf "$dir/c-all"; DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$dir/c-all" "$fetch" <"$dir/ids"; }
all_one_by_one() { rm -rf "$dir/c-all"; DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$dir/c-all" "$fetch" --one-by-one <"$dir/ids"; }
all_find() {
    rm -rf "$dir/c-all"
    while read -r id; do
        DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$dir/c-all" debuginfod-find debuginfo "$id" >/dev/null || true
    done <"$dir/ids"
}
export -f all_parallel all_one_by_one all_find
export fetch
all_parallel | sed 's/^/   fetch_many: /'
for c in all_parallel all_one_by_one all_find; do
    measure "$c" bash -c "$c" | awk '{ printf "%-40s %10s %10s\n", $1, $2, $3 }'
done
