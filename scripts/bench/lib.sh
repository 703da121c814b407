# shellcheck shell=bash
# Helpers shared by scripts/bench.sh and scripts/bench/*.sh; source it, do not
# run it (it is not executable, so `scripts/bench.sh lib` does not pick it up).
#
#   peak_rss_kb CMD...     runs CMD once, prints "WALL_NS RSS_KB"
#   measure LABEL CMD...   runs CMD once to warm the page cache, then
#                          BENCH_RUNS times (7 unless set); prints
#                          "LABEL MEDIAN_WALL_S MAX_RSS_MIB". If the warm-up
#                          run fails, prints the command and the end of its
#                          stderr and returns 1.

peak_rss_kb() { # CMD... ; prints "WALL_NS RSS_KB", output of CMD to /dev/null
    local start end rss
    if [ -x /usr/bin/time ]; then
        local f
        f=$(mktemp)
        start=$(date +%s%N)
        /usr/bin/time -v -o "$f" "$@" >/dev/null 2>&1
        end=$(date +%s%N)
        rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$f")
        rm -f "$f"
    else
        # No GNU time: poll VmHWM of the process while it runs.
        start=$(date +%s%N)
        "$@" >/dev/null 2>&1 &
        local pid=$! hwm=0 v
        while kill -0 "$pid" 2>/dev/null; do
            v=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
            [ -n "$v" ] && [ "$v" -gt "$hwm" ] && hwm=$v
            sleep 0.001
        done
        wait "$pid"
        end=$(date +%s%N)
        rss=$hwm
    fi
    echo "$((end - start)) $rss"
}

# BENCH_BETWEEN: a command run (untimed) before each run, warm-up included.
measure() { # LABEL CMD... ; prints "LABEL MEDIAN_S MAX_RSS_MIB"
    local label=$1; shift
    local runs=${BENCH_RUNS:-7} walls=() rss_max=0 out w r err rc=0
    err=$(mktemp)
    [ -z "${BENCH_BETWEEN:-}" ] || $BENCH_BETWEEN
    "$@" >/dev/null 2>"$err" || rc=$? # warm the page cache
    if [ "$rc" -ne 0 ]; then
        echo "measure $label: failed (exit $rc): $*" >&2
        tail -5 "$err" >&2
        rm -f "$err"
        return 1
    fi
    rm -f "$err"
    for _ in $(seq "$runs"); do
        [ -z "${BENCH_BETWEEN:-}" ] || $BENCH_BETWEEN
        out=$(peak_rss_kb "$@")
        w=${out% *}; r=${out#* }
        walls+=("$w")
        [ "$r" -gt "$rss_max" ] && rss_max=$r
    done
    local median
    median=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
    awk -v l="$label" -v w="$median" -v r="$rss_max" \
        'BEGIN { printf "%s %.4f %.1f\n", l, w / 1e9, r / 1024 }'
}
