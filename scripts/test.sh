#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need beyond the Rust toolchain, builds the Go and Node runners
# and Litestream, then `cargo test --workspace` (every test binary, even after one failed) and the runners' own tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
# The lab's runners in other languages, built first so that the lab's tests can run them (and must: see
# crates/cli/tests/other_languages.rs).
bash runners/go/build.sh
bash runners/node/build.sh
# Litestream and an S3 server on loopback, for the replication tests (which must run: see
# crates/quicklite/tests/litestream.rs and replica.rs).
QUICKLITE_LITESTREAM=$(bash scripts/install-litestream.sh)
# Litestream's VFS, for the read replica's test (crates/quicklite/tests/replica.rs).
QUICKLITE_LITESTREAM_VFS=$(bash scripts/install-litestream-vfs.sh)
export QUICKLITE_LITESTREAM QUICKLITE_LITESTREAM_VFS QUICKLITE_LITESTREAM_REQUIRED=1
QUICKLITE_OTHER_LANGUAGE_RUNNERS=required cargo test --workspace --no-fail-fast "$@"
# Their own protocol and workload tests.
(cd runners/go && go test ./...)
(cd runners/node && npm test)
# The lowest rusqlite the library accepts (Cargo.lock holds the highest), and a service on it with other crates;
# and, in the same build, features being additive: the library with every feature but SQLCipher at once (rusqlite's,
# passed through, build a SQLite of their own). The whole suite.
features=$(awk '/^\[features\]/{on=1; next} /^\[/{on=0} on && /^[a-z_]+ = \[/{print $1}' crates/quicklite/Cargo.toml \
    | grep -vx -e default -e sqlcipher | paste -sd, -)
bash scripts/test-rusqlite-lowest.sh --features "$features"
# The newest rusqlite the library accepts, which Cargo.lock cannot hold (the lab's async-sqlite stops at 0.41), and a
# project on it that adds quicklite with its default features.
bash scripts/test-rusqlite-newest.sh
# Encryption at rest: the same library built with SQLCipher (a SQLite of its own, so a build of its own).
cargo test -p quicklite --features sqlcipher --test encryption
# Model checks of the hand-written concurrency (the request queue, a pooled database's claims and its closing and
# reopening, the pool's permits under its caps) under loom: a build of its own, with loom's primitives in place of std's (src/sync.rs). Every
# interleaving with up to five preemptions (as tokio bounds its own models in CI): seconds instead of minutes; without
# LOOM_MAX_PREEMPTIONS, loom explores them all.
LOOM_MAX_PREEMPTIONS=5 RUSTFLAGS="--cfg quicklite_loom" cargo test -p quicklite --lib --target-dir target/loom -- model_
