#!/usr/bin/env bash
# Writes/s and latency with writes acknowledged at their local commit and once object storage holds them
# (crates/quicklite/examples/replicated_acks.rs), at 1 and 64 tasks: Litestream replicating to moto's S3 server on
# loopback, optionally behind a proxy that delays each request by DELAY_MS (the docs/lab.md results log gives the
# figures). Usage: scripts/bench-replicated-acks.sh [delay-ms] [seconds] [runs]
set -euo pipefail
cd "$(dirname "$0")/.."
delay_ms=${1:-0}
seconds=${2:-5}
runs=${3:-1}
litestream=$(bash scripts/install-litestream.sh)
cargo build --release -p quicklite --example replicated_acks
example=target/release/examples/replicated_acks
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
s3_port=$(free_port)
python3 -m moto.server -H 127.0.0.1 -p "$s3_port" >/dev/null 2>&1 & pids+=($!)
until curl -s -o /dev/null -X PUT "http://127.0.0.1:$s3_port/quicklite"; do sleep 0.2; done
endpoint="http://127.0.0.1:$s3_port"
if [ "$delay_ms" -gt 0 ]; then
    # Each request (and each chunk of it) reaches the S3 server DELAY_MS after Litestream sent it.
    proxy_port=$(free_port)
    python3 - "$proxy_port" "$s3_port" "$delay_ms" <<'PY' & pids+=($!)
import asyncio, sys
listen, target, delay = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) / 1000
async def pipe(reader, writer, wait):
    try:
        while data := await reader.read(65536):
            if wait:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()
async def serve(client_r, client_w):
    server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
    await asyncio.gather(pipe(client_r, server_w, delay), pipe(server_r, client_w, 0), return_exceptions=True)
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()
asyncio.run(main())
PY
    sleep 0.5
    endpoint="http://127.0.0.1:$proxy_port"
fi
for run in $(seq 1 "$runs"); do
    for tasks in 1 64; do
        for mode in committed replicated; do
            dir="$work/$run-$tasks-$mode"
            mkdir -p "$dir"
            python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA journal_mode=WAL'); c.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT)'); c.commit()" "$dir/db.db"
            cat > "$dir/litestream.yml" <<YML
socket:
  enabled: true
  path: $dir/litestream.sock
dbs:
  - path: $dir/db.db
    monitor-interval: 100ms
    replica:
      type: s3
      bucket: quicklite
      path: bench/$run-$tasks-$mode
      endpoint: $endpoint
      region: us-east-1
      force-path-style: true
      access-key-id: test
      secret-access-key: test
      sync-interval: 100ms
YML
            env -u AWS_CA_BUNDLE "$litestream" replicate -config "$dir/litestream.yml" >/dev/null 2>&1 & ls_pid=$!
            pids+=($ls_pid)
            until [ -S "$dir/litestream.sock" ]; do sleep 0.1; done
            echo "run=$run delay_ms=$delay_ms $("$example" "$dir/db.db" "$dir/litestream.sock" "$mode" "$tasks" "$seconds")"
            kill -9 "$ls_pid" 2>/dev/null || true
        done
    done
done
