#!/bin/bash
# The daemon's memory over a long system-wide recording with process,
# exec and thread churn: VmRSS at the given minutes (default 1 5 10).
# Usage: scripts/bench/rss.sh [MINUTES...]; prints "minute RSS_KiB
# session_dir_KiB". START_ARGS adds to the start command (e.g.
# START_ARGS="--rotate 5m --keep 3"); NICE=19 runs the churn niced, so other
# work on the machine keeps its share.
set -u
B=${PROFKIT_BIN:-target/release}
S=${SESSION:-/var/tmp/rss-s}
MINUTES=${*:-1 5 10}
last=0; for m in $MINUTES; do last=$m; done
rm -rf "$S"
N="nice -n ${NICE:-0}"
# shellcheck disable=SC2086
"$B/profctl" start -a -F 4000 ${START_ARGS:-} --session-dir "$S" >/dev/null
pid=$(cat "$S/daemon.pid")
end=$((SECONDS + last * 60 + 5))
# Churn: short processes (fork+exec), a fork loop, short-lived threads.
($N bash -c "while [ \$SECONDS -lt $((last * 60 + 5)) ]; do /bin/true; done") &
($N python3 -c "
import os,time
end=time.time()+$last*60+5
while time.time()<end:
    p=os.fork()
    if p==0: os._exit(0)
    os.waitpid(p,0)
") &
($N python3 -c "
import threading,time
end=time.time()+$last*60+5
while time.time()<end:
    ts=[threading.Thread(target=lambda: sum(range(1000))) for _ in range(50)]
    [t.start() for t in ts]; [t.join() for t in ts]
") &
t0=$SECONDS
for m in $MINUTES; do
    while [ $((SECONDS - t0)) -lt $((m * 60)) ]; do sleep 1; done
    echo "$m $(awk '/VmRSS/ {print $2}' /proc/$pid/status) $(du -sk "$S" | cut -f1)"
done
wait
"$B/profctl" stop --session-dir "$S" | head -1
