#!/usr/bin/env bash
# A load generator for the lab's `http` workload built on wrk, to check the built-in one against a tool users know
# (docs/lab.md, "A second opinion on http"). Reads the lab's load spec (JSON) on standard input, runs wrk for the
# warm-up (not counted) and then for the measured window, with the spec's connections and the same random item
# ids, and prints the lab's load report (JSON) on standard output:
#
#   QUICKLITE_LAB_HTTP_LOAD=$PWD/scripts/http-load-wrk.sh quicklite bench --workloads http ...
#
# wrk counts whole seconds: the warm-up and the window are rounded up to them.
set -euo pipefail
command -v wrk >/dev/null || { echo "http-load-wrk: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
spec="$(cat)"
field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$spec" "$1"; }
addr="$(field addr)"
connections="$(field connections)"
warmup_s=$(( ($(field warmup_ms) + 999) / 1000 ))
duration_s=$(( ($(field duration_ms) + 999) / 1000 ))
rows="$(field rows)"
seed="$(field seed)"
threads=$(( connections < 2 ? connections : 2 ))

script="$(mktemp --suffix .lua)"
trap 'rm -f "$script"' EXIT
cat >"$script" <<LUA
math.randomseed($seed)
request = function()
  return wrk.format("GET", "/items/" .. math.random(1, $rows))
end
done = function(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.status + e.timeout
  local ok = summary.requests - errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    '{"requests":{"ops":%d,"ops_per_sec":%.3f,"avg_us":%.3f,"p50_us":%.3f,"p99_us":%.3f,"max_us":%.3f},"errors":%d,"error_samples":[]}\n',
    ok, ok / secs, latency.mean, latency:percentile(50), latency:percentile(99), latency.max, errors))
end
LUA
if [ "$warmup_s" -gt 0 ]; then
    wrk -t"$threads" -c"$connections" -d"${warmup_s}s" -s "$script" "http://$addr/" >/dev/null
fi
wrk -t"$threads" -c"$connections" -d"${duration_s}s" --timeout 10s -s "$script" "http://$addr/" | tail -n 1
