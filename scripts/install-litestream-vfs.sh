#!/usr/bin/env bash
# Litestream's VFS, the SQLite extension a read replica reads object storage through (crates/quicklite/tests/
# replica.rs): built from the same Litestream module as scripts/install-litestream.sh, as Litestream's Makefile builds
# it (`make vfs-linux-amd64`: a Go c-archive linked into a shared library with its C entry point), into
# target/tools/litestream-vfs/ (kept there for later runs). Litestream publishes the extension as npm, PyPI and gem
# packages too; building it from the Go module proxy needs no other registry and pins the exact version the
# replication tests run. Prints the path of the shared library.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v0.5.18
dir="$PWD/target/tools/litestream-vfs/$version"
library="$dir/litestream-vfs.so"
if [ ! -f "$library" ]; then
    for tool in go gcc; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "install-litestream-vfs: $tool is needed (scripts/install-test-deps.sh installs it)" >&2
            exit 1
        fi
    done
    echo "install-litestream-vfs: building Litestream's VFS $version from the Go module proxy (a few minutes)" >&2
    module=$(go mod download -json "github.com/benbjohnson/litestream@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
    build=$(mktemp -d)
    trap 'rm -rf "$build"' EXIT
    cp -r "$module/." "$build"
    chmod -R u+w "$build"
    (
        cd "$build"
        CGO_ENABLED=1 go build -trimpath -ldflags "-s -w" -tags vfs,SQLITE3VFS_LOADABLE_EXT \
            -o litestream-vfs.a -buildmode=c-archive ./cmd/litestream-vfs
        cp litestream-vfs.h src/litestream-vfs.h
        gcc -DSQLITE3VFS_LOADABLE_EXT -O2 -fPIC -shared -o litestream-vfs.so src/litestream-vfs.c litestream-vfs.a \
            -lpthread -ldl -lm
    )
    mkdir -p "$dir"
    mv "$build/litestream-vfs.so" "$library"
fi
echo "$library"
