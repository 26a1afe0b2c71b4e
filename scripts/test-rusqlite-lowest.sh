#!/usr/bin/env bash
# The library with the lowest rusqlite it accepts (scripts/test-rusqlite-newest.sh tests the newest). For the run the
# workspace holds the library alone (the lab's runners depend on crates that need a newer one) and the manifest pins
# the lowest version; the files are put back afterwards. The build shares the target directory (the crates that did
# not change are not built again). Arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
LOWEST_RUSQLITE=0.40.2
files=(Cargo.toml Cargo.lock)
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
sed -i -E "s/^rusqlite = \{ version = \"[^\"]+\"/rusqlite = { version = \"=$LOWEST_RUSQLITE\"/" Cargo.toml
cargo update --quiet -p rusqlite
# The pin took: what follows builds the lowest version.
[ "$(cargo tree -p quicklite --depth 1 -e normal | grep -cE " rusqlite v$LOWEST_RUSQLITE$")" = 1 ]
cargo test -p quicklite "$@"
# A service whose other crates are on rusqlite 0.40 (tokio-rusqlite, rusqlite_migration) adds quicklite.
CARGO_TARGET_DIR="$PWD/target" cargo run --manifest-path checks/rusqlite040-service/Cargo.toml
