#!/bin/sh
# A stand-in runner for the lab's tests. It speaks the runner protocol (a cell as JSON on stdin, one result as
# JSON on stdout, `--approaches` lists what it provides) and misbehaves on purpose, by approach:
#   spawn-blocking → crashes (exit 101, a panic message on stderr)
#   per-request    → hangs (until the orchestrator's timeout kills it)
#   async-sqlite   → prints garbage and exits 0
#   anything else  → a fixed, plausible result echoing the cell (quicklite reports 5× direct-blocking)
# If the directory holding the cell's database directory has a file `mock-runner.log`, the database directory
# is appended to it, so tests can check that it was fresh, empty, and removed afterwards.
if [ "$1" = "--approaches" ]; then
    echo '["direct-blocking","spawn-blocking","per-request","async-sqlite","quicklite"]'
    exit 0
fi
cell=$(cat)
dir=$(printf '%s' "$cell" | sed -n 's/.*"dir":"\([^"]*\)".*/\1/p')
if [ ! -d "$dir" ] || [ -n "$(ls -A "$dir")" ]; then
    echo "mock-runner: database directory '$dir' missing or not empty" >&2
    exit 3
fi
touch "$dir/mock.db"
log="$(dirname "$dir")/mock-runner.log"
if [ -f "$log" ]; then
    echo "$dir" >>"$log"
fi
case "$cell" in
*'"approach":"spawn-blocking"'*)
    echo "thread 'main' panicked at src/main.rs:1:1: mock crash" >&2
    exit 101
    ;;
*'"approach":"per-request"'*)
    exec sleep 600
    ;;
*'"approach":"async-sqlite"'*)
    echo "this is not a cell result"
    exit 0
    ;;
*'"approach":"quicklite"'*) rate=50000 ;;
*) rate=10000 ;;
esac
printf '{"cell":%s,"failure":null,' "$cell"
printf '"reads":{"ops":%d,"ops_per_sec":%d.0,"avg_us":12.5,"p50_us":10.0,"p99_us":60.0,"max_us":400.0},' $((rate * 2)) "$rate"
printf '"writes":{"ops":0,"ops_per_sec":0.0,"avg_us":0.0,"p50_us":0.0,"p99_us":0.0,"max_us":0.0},'
printf '"write_completion":null,"errors":0,"error_samples":[],"wall_secs":2.0,"cpu_secs":1.5,"threads":7,"rss_bytes":12000000,'
printf '"env":{"runner":"mock-runner 0.0.0","sqlite_version":"3.54.1","compile_options":["THREADSAFE=1"],'
printf '"pragmas":{"journal_mode":"wal","synchronous":"1"},"crate_versions":{"rusqlite":"0.41.1"},'
printf '"memstatus":"off","cpu_model":"Mock CPU","cpus":2,"kernel":"6.1.0-mock","date":"2026-11-21T22:00:00Z"}}\n'
