#!/bin/sh
# Builds runners/go/target/runner-go. All output goes to standard error; safe to run again.
set -eu
cd "$(dirname "$0")"
if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: \`go\` is not on PATH: install Go 1.26 or newer (https://go.dev/dl/) to build runner-go" >&2
    exit 1
fi
if ! command -v "${CC:-gcc}" >/dev/null 2>&1; then
    echo "build.sh: no C compiler (${CC:-gcc}): go-mattn (github.com/mattn/go-sqlite3) needs cgo" >&2
    exit 1
fi
mkdir -p target
echo "build.sh: $(go version); building target/runner-go (cgo on; the first build compiles SQLite twice and takes minutes)" >&2
CGO_ENABLED=1 go build -o target/runner-go . >&2
echo "build.sh: built $(pwd)/target/runner-go" >&2
