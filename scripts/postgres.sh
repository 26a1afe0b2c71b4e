#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback for the lab's `--with-postgres` (seed 003 compared SQLite with a local
# PostgreSQL). Installs Debian's `postgresql` package when its binaries are missing.
#   scripts/postgres.sh start DIR PORT   initdb in DIR (owned by the postgres user), start on 127.0.0.1:PORT,
#                                        create database `lab`, print its URL on standard output
#   scripts/postgres.sh stop DIR         stop the server and remove DIR
# Everything but the URL goes to standard error.
set -euo pipefail

find_bin() {
    local dir
    for dir in /usr/lib/postgresql/*/bin; do
        if [ -x "$dir/initdb" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

as_postgres() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

install() {
    if find_bin >/dev/null; then
        return 0
    fi
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        sudo="sudo"
    fi
    echo "postgres.sh: installing PostgreSQL from Debian's packages" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >&2
    $sudo apt-get install -y -qq --no-install-recommends postgresql >&2
    # The package starts a cluster of its own on port 5432; the lab uses its own, so that one is left alone.
}

cmd="${1:-}"
case "$cmd" in
start)
    dir="${2:?usage: postgres.sh start DIR PORT}"
    port="${3:?usage: postgres.sh start DIR PORT}"
    install
    bin="$(find_bin)"
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres "$dir"
    fi
    as_postgres "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >&2
    as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir" start >&2
    as_postgres "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -q -c "CREATE DATABASE lab" >&2
    echo "postgres://postgres@127.0.0.1:$port/lab"
    ;;
stop)
    dir="${2:?usage: postgres.sh stop DIR}"
    bin="$(find_bin)"
    if [ -d "$dir/data" ]; then
        as_postgres "$bin/pg_ctl" -D "$dir/data" -w -m fast stop >&2 || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: postgres.sh start DIR PORT | stop DIR" >&2
    exit 2
    ;;
esac
