#!/usr/bin/env bash
# Installs what the test suite needs beyond the Rust toolchain, from Debian's packages:
# Chromium renders the lab's HTML report headlessly (crates/cli/tests/html_render.rs), and PostgreSQL's server
# binaries run the `postgres` approach's end-to-end test (crates/runner/tests/runner.rs, through
# scripts/postgres.sh, which starts a throwaway server of its own); OpenSSL's headers build SQLCipher for the
# encryption tests, whose Python checks that another program cannot read an encrypted file. Go and Node build the
# lab's runners in those languages (runners/go, runners/node: their build.sh scripts fetch the Go modules and npm
# packages they pin); Debian's are installed only when none is on the PATH. libclang runs bindgen for the
# trailbase-sqlite runner (runners/trailbase), whose rusqlite generates its SQLite bindings at build time.
# Idempotent: does nothing when the tools are already there.
set -euo pipefail

packages=()
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    # fonts-dejavu-core gives the screenshot readable glyphs on minimal images.
    packages+=(chromium fonts-dejavu-core)
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    packages+=(postgresql)
fi
if ! dpkg -s libssl-dev >/dev/null 2>&1; then
    packages+=(libssl-dev pkg-config)
fi
if ! dpkg -s libclang-dev >/dev/null 2>&1; then
    packages+=(libclang-dev)
fi
if ! command -v python3 >/dev/null 2>&1; then
    packages+=(python3)
fi
if ! command -v go >/dev/null 2>&1; then
    # Debian's Go is older than runners/go/go.mod asks for; with GOTOOLCHAIN=auto (the default) it fetches the
    # toolchain the module names from the Go module proxy.
    packages+=(golang-go)
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    packages+=(nodejs npm)
fi
if [ "${#packages[@]}" -eq 0 ]; then
    echo "install-test-deps: chromium, postgresql, libssl-dev, libclang-dev, python3, go and node already installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}"
command -v chromium || command -v chromium-browser
ls /usr/lib/postgresql/*/bin/initdb
