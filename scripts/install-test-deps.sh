#!/usr/bin/env bash
# Installs what the test suite needs beyond the Rust toolchain, from Debian's packages:
# Chromium renders the lab's HTML report headlessly (crates/lab/tests/html_render.rs).
# Idempotent: does nothing when the tools are already there.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    echo "install-test-deps: chromium already installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# fonts-dejavu-core gives the screenshot readable glyphs on minimal images.
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core
command -v chromium
