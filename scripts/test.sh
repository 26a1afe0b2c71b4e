#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need beyond the Rust toolchain, then `cargo test --workspace`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
cargo test --workspace "$@"
# Encryption at rest: the same library built with SQLCipher (a SQLite of its own, so a build of its own).
cargo test -p quicklite --features sqlcipher --test encryption
# Model checks of the hand-written concurrency (the request queue, a pooled database's roles) under loom.
cargo test -p quicklite --features model-check --lib -- model_
