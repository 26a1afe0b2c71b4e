#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need beyond the Rust toolchain, then `cargo test --workspace`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
cargo test --workspace "$@"
