#!/usr/bin/env bash
# A fleet store (ClickHouse, Debian's clickhouse-server 18.16) started here
# on 127.0.0.1 with its own data directory, and:
#
#   export cost    `shares pinned` (both CPUs busy) recorded with -g at 4 kHz
#                  for BENCH_SECONDS (60) in one part: `profctl export`'s
#                  time, rows and bytes sent; the bytes per sample the store
#                  keeps (system.parts, after OPTIMIZE ... FINAL); the same
#                  for a real program: CPython's own tests (BENCH_PYTHON,
#                  pyenv's 3.12), system-wide, for BENCH_SECONDS
#   fleet scale    the same workload recorded BENCH_SECONDS in 1-second
#                  parts, exported under BENCH_HOSTS (17) host names (about
#                  1,000 parts), then timed (median of BENCH_RUNS, peak RSS):
#                    profreport --from URL -l                    (every host)
#                    profreport --from URL --host h1 --format flamegraph
#                    profreport --from URL -c, -l --children (every host)
#                    profreport --from URL --host h1 --format pprof
#                  and -c of the CPython part, from the store and locally
#                  against the same reports of BENCH_HOSTS local copies of
#                  the session (`--merge`)
#
# Needs root (recording), /usr/sbin/clickhouse-server, a C compiler.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh

secs=${BENCH_SECONDS:-60} hosts=${BENCH_HOSTS:-17}
[ -x /usr/sbin/clickhouse-server ] || { echo "no clickhouse-server (apt-get install clickhouse-server)" >&2; exit 1; }
echo "== building (release)"
cargo build --release --quiet -p profkit-cli
profctl=$root/target/release/profctl profreport=$root/target/release/profreport
dir=${BENCH_DIR:-$(mktemp -d /tmp/profkit-fleet.XXXXXX)}
mkdir -p "$dir"
cc -O1 -g -fno-omit-frame-pointer -pthread -o "$dir/shares" testdata/workloads/shares.c

# The server.
ch=$dir/ch
rm -rf "$ch"
mkdir -p "$ch/data" "$ch/tmp" "$ch/log" "$ch/user_files"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
tcp=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$ch/config.xml" <<EOF
<yandex><logger><level>warning</level><log>$ch/log/server.log</log><errorlog>$ch/log/err.log</errorlog><console>0</console></logger>
<http_port>$port</http_port><tcp_port>$tcp</tcp_port><listen_host>127.0.0.1</listen_host>
<path>$ch/data/</path><tmp_path>$ch/tmp/</tmp_path><user_files_path>$ch/user_files/</user_files_path>
<users_config>users.xml</users_config><default_profile>default</default_profile>
<default_database>default</default_database><mark_cache_size>5368709</mark_cache_size></yandex>
EOF
cat >"$ch/users.xml" <<'EOF'
<yandex><profiles><default></default></profiles><users><default><password></password>
<networks><ip>::1</ip><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
<quotas><default></default></quotas></yandex>
EOF
(cd "$ch" && /usr/sbin/clickhouse-server --config-file="$ch/config.xml" </dev/null >/dev/null 2>&1 &)
trap 'pkill -f "config-file=$ch/config.xml" || true' EXIT
sql() { curl -sf "http://127.0.0.1:$port/" --data-binary "$1"; }
for _ in $(seq 100); do sql "SELECT 1" >/dev/null 2>&1 && break; sleep 0.2; done
units=$((secs * 420))  # shares pinned: ~420 units a second per thread here

echo "== export cost: ${secs} s of shares pinned, -g, 4 kHz, one part"
rm -rf "$dir/one"
(cd "$dir" && "$profctl" record -g -F 4000 --session-dir one -- ./shares pinned "$units" | head -1)
t0=$(date +%s%N)
out=$("$profctl" export --session-dir "$dir/one" "clickhouse://127.0.0.1:$port/cost" --host cost-1)
t1=$(date +%s%N)
echo "   $out"
echo "   export took $(( (t1 - t0) / 1000000 )) ms"
sql "OPTIMIZE TABLE cost.profkit_samples FINAL" >/dev/null
stored=$(sql "SELECT sum(bytes) FROM system.parts WHERE database = 'cost' AND table = 'profkit_samples' AND active")
samples=$(sql "SELECT sum(samples) FROM cost.profkit_samples")
rows=$(sql "SELECT count() FROM cost.profkit_samples")
awk -v b="$stored" -v s="$samples" -v r="$rows" 'BEGIN { printf "   stored: %d bytes for %d samples in %d rows: %.2f bytes/sample\n", b, s, r, b / s }'
session_bytes=$(stat -c %s "$dir/one/session.pkl")
awk -v b="$session_bytes" -v s="$samples" 'BEGIN { printf "   (the session file: %d bytes, %.2f bytes/sample)\n", b, b / s }'

py=${BENCH_PYTHON:-/root/.pyenv/versions/3.12.1/bin/python3.12}
if [ -x "$py" ]; then
    echo "== export cost, a real program: ${secs} s of CPython's own tests (-j2), system-wide, -g, 4 kHz"
    rm -rf "$dir/real"
    (cd "$dir" && "$profctl" record -a -g -F 4000 --session-dir real -- bash -c "
        end=\$((SECONDS + $secs))
        while [ \$SECONDS -lt \$end ]; do
            '$py' -m test -j2 test_json test_decimal test_re test_statistics test_fractions >/dev/null 2>&1
        done" | head -1)
    t0=$(date +%s%N)
    out=$("$profctl" export --session-dir "$dir/real" "clickhouse://127.0.0.1:$port/real" --host real-1)
    t1=$(date +%s%N)
    echo "   $out"
    echo "   export took $(( (t1 - t0) / 1000000 )) ms"
    sql "OPTIMIZE TABLE real.profkit_samples FINAL" >/dev/null
    stored=$(sql "SELECT sum(bytes) FROM system.parts WHERE database = 'real' AND table = 'profkit_samples' AND active")
    samples=$(sql "SELECT sum(samples) FROM real.profkit_samples")
    rows=$(sql "SELECT count() FROM real.profkit_samples")
    awk -v b="$stored" -v s="$samples" -v r="$rows" 'BEGIN { printf "   stored: %d bytes for %d samples in %d rows: %.2f bytes/sample\n", b, s, r, b / s }'
    session_bytes=$(stat -c %s "$dir/real/session.pkl")
    awk -v b="$session_bytes" -v s="$samples" 'BEGIN { printf "   (the session file: %d bytes, %.2f bytes/sample)\n", b, b / s }'
fi

echo "== fleet scale: ${secs} s in 1-second parts, exported under $hosts host names"
rm -rf "$dir/parts"
(cd "$dir" && "$profctl" record -g -F 4000 --rotate 1s --session-dir parts -- ./shares pinned "$units" | head -1)
n=$(ls "$dir/parts"/session*.pkl | wc -l)
url="clickhouse://127.0.0.1:$port/fleet"
t0=$(date +%s%N)
for h in $(seq "$hosts"); do
    "$profctl" export --session-dir "$dir/parts" "$url" --host "h$h" >/dev/null
done
t1=$(date +%s%N)
echo "   $n parts x $hosts hosts = $(sql "SELECT count() FROM fleet.profkit_parts") parts in the store, exported in $(( (t1 - t0) / 1000000 )) ms"
merge=()
for h in $(seq "$hosts"); do
    rm -rf "$dir/copy$h"
    cp -a "$dir/parts" "$dir/copy$h"
    merge+=("$dir/copy$h")
done
printf '%-44s %10s %10s\n' case median_s max_rss_mib
measure "from: -l, every host" "$profreport" --from "$url" -l | awk '{ printf "%-44s %10s %10s\n", "fleet -l, all hosts", $(NF-1), $NF }'
measure "from: flamegraph, one host" "$profreport" --from "$url" --host h1 --format flamegraph | awk '{ printf "%-44s %10s %10s\n", "fleet flamegraph, one host", $(NF-1), $NF }'
measure "from: -c, every host" "$profreport" --from "$url" -c -t 0.5 | awk '{ printf "%-44s %10s %10s\n", "fleet -c (call graph), all hosts", $(NF-1), $NF }'
measure "from: --children, every host" "$profreport" --from "$url" -l --children | awk '{ printf "%-44s %10s %10s\n", "fleet -l --children, all hosts", $(NF-1), $NF }'
measure "from: pprof, one host" "$profreport" --from "$url" --host h1 --format pprof -o "$dir/h1.pb.gz" | awk '{ printf "%-44s %10s %10s\n", "fleet pprof, one host", $(NF-1), $NF }'
if [ -x "$py" ]; then
    measure "from: -c, CPython" "$profreport" --from "clickhouse://127.0.0.1:$port/real" -c -t 0.5 | awk '{ printf "%-44s %10s %10s\n", "fleet -c, the CPython part (deep stacks)", $(NF-1), $NF }'
    measure "local: -c, CPython" "$profreport" --session-dir "$dir/real" -c -t 0.5 | awk '{ printf "%-44s %10s %10s\n", "local -c, the CPython session", $(NF-1), $NF }'
fi
measure "merge: -l" "$profreport" -l --merge "${merge[@]}" | awk '{ printf "%-44s %10s %10s\n", "--merge of the copies, -l", $(NF-1), $NF }'
measure "local: flamegraph" "$profreport" --session-dir "$dir/parts" --format flamegraph | awk '{ printf "%-44s %10s %10s\n", "local flamegraph, one session", $(NF-1), $NF }'
