#!/usr/bin/env bash
# The reliability suite in one command: SIGKILL rounds, power cuts and injected I/O errors (a test VFS), a full
# disk, overload behind a slow writer, the hostile-input fuzz loops (QUICKLITE_FUZZ_ITERATIONS, default here
# 20000), then a soak of SOAK_SECONDS (default 300) printing throughput and resident memory over time.
#   scripts/reliability.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export QUICKLITE_FUZZ_ITERATIONS="${QUICKLITE_FUZZ_ITERATIONS:-20000}"
cargo test --release -p quicklite \
    --test crash --test power_loss --test disk_full --test overload --test hostile -- --nocapture
exec scripts/soak.sh "${SOAK_SECONDS:-300}" 10
