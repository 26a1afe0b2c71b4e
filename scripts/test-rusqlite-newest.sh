#!/usr/bin/env bash
# The library with the newest rusqlite it accepts, which Cargo.lock cannot hold: the lab's async-sqlite 0.7 and the
# library's refinery 0.10 (a dev-dependency, tests/migrations.rs) stop at rusqlite 0.41. For the run the workspace
# holds the library alone, pinned to the newest, without refinery (its test is left out: it runs on the other
# versions); the files are put back afterwards. Then a project on that rusqlite adds quicklite with its default
# features (checks/rusqlite043-service). Both build in the same target directory, where the project reuses the
# library and the bundled SQLite the tests built (same versions and features): it compiles only itself.
# Arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
NEWEST_RUSQLITE=0.43.0
files=(Cargo.toml Cargo.lock crates/quicklite/Cargo.toml)
saved=$(mktemp -d)
for file in "${files[@]}"; do
    mkdir -p "$saved/$(dirname "$file")"
    cp "$file" "$saved/$file"
done
restore() {
    for file in "${files[@]}"; do
        cp "$saved/$file" "$file"
    done
    rm -rf "$saved"
}
trap restore EXIT
sed -i -E 's|^members = .*|members = ["crates/quicklite"]|' Cargo.toml
sed -i -E "s/^rusqlite = \{ version = \"[^\"]+\"/rusqlite = { version = \"=$NEWEST_RUSQLITE\"/" Cargo.toml
sed -i -E '/^refinery = /d' crates/quicklite/Cargo.toml
cargo update --quiet -p rusqlite
# The pin took: what follows builds the newest version.
[ "$(cargo tree -p quicklite --depth 1 -e normal | grep -cE " rusqlite v$NEWEST_RUSQLITE$")" = 1 ]
tests=()
for file in crates/quicklite/tests/*.rs; do
    name=$(basename "$file" .rs)
    [ "$name" = migrations ] || tests+=(--test "$name")
done
cargo test -p quicklite --lib --examples "${tests[@]}" "$@"
cargo test -p quicklite --doc "$@"
# A project on the newest rusqlite adds quicklite (with serde and prometheus, its default features).
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}" cargo run --manifest-path checks/rusqlite043-service/Cargo.toml
