#!/bin/bash
# 45 s system-wide: a cargo build, a shell loop of /bin/true, a python fork loop,
# and 20 short node processes in their own pid and mount namespaces.
# Usage: BUILD_DIR=/path/to/a/clean/clone scripts/bench/churn.sh; then count
# "unattributed" in the stop line and JS:* rows in profreport -l.
B=${PROFKIT_BIN:-target/release}
S=${SESSION:-/tmp/churn-s}
# Outside /tmp: each namespace mounts its own tmpfs there.
HOT_JS=$(mktemp -p /var/tmp --suffix=.js)
echo "function hotLoopAlpha(n){let x=0;for(let i=0;i<n;i++){x=(x*31+i)%1000003;}return x;} const end=Date.now()+200;let s=0;while(Date.now()<end){s+=hotLoopAlpha(200000);}" > "$HOT_JS"
rm -rf $S
$B/profctl start -a -F 4000 --session-dir $S >/dev/null 2>&1
(cd "${BUILD_DIR:?a clean clone of a Rust project to build}" && timeout 45 cargo build --release -q >/dev/null 2>&1) &
(end=$((SECONDS+45)); while [ $SECONDS -lt $end ]; do /bin/true; done) &
(timeout 45 python3 -c '
import os,time
end=time.time()+44
while time.time()<end:
    p=os.fork()
    if p==0: os._exit(0)
    os.waitpid(p,0)
' ) &
# node writes isolate-*-v8.log files into its working directory.
(cd /var/tmp && for i in $(seq 20); do unshare -p -f -m --mount-proc sh -c "mount -t tmpfs tmpfs /tmp && exec node --perf-basic-prof "$HOT_JS"" >/dev/null 2>&1; sleep 1.5; done) &
wait
$B/profctl stop --session-dir $S
