#!/usr/bin/env bash
# Soak: a mixed read/update/append workload on one database for SECONDS (default 600), printing throughput,
# resident memory, WAL and file size every INTERVAL seconds (default 10), then a first-vs-last summary.
#   scripts/soak.sh [SECONDS] [INTERVAL]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --release -p quicklite --example soak -- "${1:-600}" "${2:-10}"
