#!/usr/bin/env bash
# Litestream and an S3-compatible server for the Litestream tests (crates/quicklite/tests/litestream.rs): Litestream
# built from the Go module proxy into target/tools/litestream (kept there for later runs), and moto's server from
# PyPI unless Python already has it. Prints the path of the litestream program.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v0.5.18
dir=target/tools/litestream
if [ ! -x "$dir/litestream" ] || ! "$dir/litestream" version 2>/dev/null | grep -qx "$version"; then
    if ! command -v go >/dev/null 2>&1; then
        echo "install-litestream: Go is needed to build Litestream (scripts/install-test-deps.sh installs it)" >&2
        exit 1
    fi
    echo "install-litestream: building Litestream $version from the Go module proxy (a few minutes)" >&2
    mkdir -p "$dir"
    GOBIN="$PWD/$dir" go install "github.com/benbjohnson/litestream/cmd/litestream@$version"
fi
if ! python3 -c 'import moto.server' >/dev/null 2>&1; then
    echo "install-litestream: installing moto's S3 server from PyPI" >&2
    python3 -m pip install --quiet 'moto[server]'
fi
echo "$PWD/$dir/litestream"
