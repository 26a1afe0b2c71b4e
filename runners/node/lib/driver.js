'use strict';
// The driver: the warm-up, the measured window and the client loops of driver/closed_loop.rs and
// driver/queue.rs, for synchronous approaches on Node's one JavaScript thread.
//
// The cell's `concurrency` clients are logical: each keeps its own random stream (seeded as the Rust
// client task of the same number) and issues its next operation as soon as the previous one returned, but
// one thread runs them, in turn (round robin), so they never overlap — as `concurrency` concurrent requests
// of a Node service on one synchronous connection are served. An operation's latency runs from the moment
// its client was ready (its previous operation returned) to its completion: the wait for the thread, while
// the other clients' operations run, counts, as it does for a Rust task waiting for a worker thread
// (client_loop.rs). With one client that wait is nil and the latency is the call itself.
//
// Operations *completing* inside the window count; the window is fixed before the first operation
// (`warmup_ms`, then `duration_ms`), and `wall_secs` is its length. The loop cannot be interrupted by a
// timer, so the window's edges are noticed between operations: CPU time is sampled at the first operation
// boundary at or past each edge (one operation late at most, microseconds), and the loop ends at the first
// boundary past the window's end — the operations the Rust clients would still start then complete after
// the window and would not count.

const { Rng } = require('./rng');
const { Latencies, Errors, emptyOpStats } = require('./stats');
const { processSample } = require('./environment');
const W = require('./workload');

const now = process.hrtime.bigint;

/** lab-core's `IDLE_WINDOW`: how long the connection sits open and idle after the measured window while the
 * process's CPU time is sampled, in milliseconds. */
const IDLE_WINDOW_MS = 500;

/** The names of the queue's operations, in report order. */
const QUEUE_OPERATIONS = ['publish', 'claim', 'ack', 'cycle'];

/**
 * Runs `turn(client, started)` for each client in turn until the window closes; `turn` runs one operation
 * (or queue cycle) of `client`, records it if it completed inside the window, and returns its completion
 * time. Returns the window and the process samples at its edges.
 */
function runWindow(cell, turn) {
  const clients = cell.concurrency;
  const start = now();
  const measureStart = start + BigInt(cell.warmup_ms) * 1_000_000n;
  const end = measureStart + BigInt(cell.duration_ms) * 1_000_000n;
  const window = { measureStart, end };
  const readyAt = new Array(clients).fill(start);
  let last = start;
  let cpuStart = null;
  let memoryStart = null;
  let stopped = false;
  while (!stopped) {
    for (let client = 0; client < clients; client++) {
      if (cpuStart === null && last >= measureStart) {
        cpuStart = process.cpuUsage();
        memoryStart = process.memoryUsage();
      }
      if (last >= end) {
        stopped = true;
        break;
      }
      last = turn(client, readyAt[client], window);
      readyAt[client] = last;
    }
  }
  if (cpuStart === null) {
    cpuStart = process.cpuUsage();
    memoryStart = process.memoryUsage();
  }
  const cpu = process.cpuUsage(cpuStart);
  const sample = processSample();
  const memoryEnd = process.memoryUsage();
  const mib = (bytes) => `${(bytes / 1048576).toFixed(1)} MiB`;
  const delta = (key) => `${key} ${mib(memoryEnd[key])} (${memoryEnd[key] >= memoryStart[key] ? '+' : '-'}${mib(Math.abs(memoryEnd[key] - memoryStart[key]))})`;
  process.stderr.write(
    `runner-node: memory at the end of the window (change over it): ${['rss', 'heapUsed', 'heapTotal', 'external', 'arrayBuffers'].map(delta).join(', ')}\n`,
  );
  return {
    wallSecs: Number(end - measureStart) / 1e9,
    cpuSecs: (cpu.user + cpu.system) / 1e6,
    threads: sample.threads,
    rssBytes: sample.rss_bytes,
  };
}

const counts = (window, done) => done >= window.measureStart && done < window.end;

/** `point-read` and `insert` (closed_loop.rs): single-row operations back to back. */
function driveClosedLoop(cell, workload, ops) {
  const rngs = [];
  for (let client = 0; client < cell.concurrency; client++) rngs.push(Rng.derive(cell.seed, client));
  const latencies = new Latencies();
  const errors = new Errors();
  const rows = Math.max(cell.rows, 1);
  let turn;
  if (workload === 'point-read') {
    const pointRead = ops.pointRead;
    turn = (client, started, window) => {
      let error = null;
      try {
        pointRead(rngs[client].between(1, rows));
      } catch (e) {
        error = e;
      }
      const done = now();
      if (counts(window, done)) {
        if (error === null) latencies.record(Number(done - started));
        else errors.record(error);
      }
      return done;
    };
  } else {
    const insert = ops.insert;
    turn = (client, started, window) => {
      let error = null;
      try {
        insert(W.randomItem(rngs[client]));
      } catch (e) {
        error = e;
      }
      const done = now();
      if (counts(window, done)) {
        if (error === null) latencies.record(Number(done - started));
        else errors.record(error);
      }
      return done;
    };
  }
  const edges = runWindow(cell, turn);
  const stats = latencies.opStats(edges.wallSecs);
  return measurement(edges, errors, {
    reads: workload === 'point-read' ? stats : emptyOpStats(),
    writes: workload === 'point-read' ? emptyOpStats() : stats,
  });
}

/** `queue` (queue.rs): every client publishes a job, claims the oldest unclaimed one and acknowledges it,
 * over and over, as worker `client + 1`; each operation and the whole cycle are timed. */
function driveQueue(cell, ops) {
  const payloads = [];
  for (let client = 0; client < cell.concurrency; client++) {
    payloads.push(Rng.derive(cell.seed, client).text(W.JOB_PAYLOAD_LEN));
  }
  const named = QUEUE_OPERATIONS.map(() => new Latencies());
  const [publishes, claims, acks, cycles] = named;
  const errors = new Errors();
  const { publish, claim, ack } = ops;
  const turn = (client, started, window) => {
    const owner = client + 1;
    const t0 = now();
    try {
      publish(payloads[client], Date.now());
      const t1 = now();
      const id = claim(owner, Date.now());
      if (id === undefined) throw new Error('claim found no unclaimed job');
      const t2 = now();
      ack(id, owner);
      const t3 = now();
      if (counts(window, t3)) {
        publishes.record(Number(t1 - t0));
        claims.record(Number(t2 - t1));
        acks.record(Number(t3 - t2));
        cycles.record(Number(t3 - started));
      }
      return t3;
    } catch (e) {
      const done = now();
      if (counts(window, done)) errors.record(e);
      return done;
    }
  };
  const edges = runWindow(cell, turn);
  return measurement(edges, errors, {
    reads: emptyOpStats(),
    writes: emptyOpStats(),
    // Allocation counts are the Rust global allocator's; a Node runner has none to report.
    operations: QUEUE_OPERATIONS.map((name, i) => ({
      name,
      stats: named[i].opStats(edges.wallSecs),
      allocs_per_op: null,
      alloc_bytes_per_op: null,
    })),
  });
}

/** `Measurement::operations_completed`: the queue's cycles, otherwise reads plus writes. */
function operationsCompleted(parts) {
  const cycle = (parts.operations || []).find((op) => op.name === 'cycle');
  return cycle ? cycle.stats.ops : parts.reads.ops + parts.writes.ops;
}

/** lab-core's `measure_idle`: the thread sleeps `ms` (the event loop has nothing to do: every approach here is
 * synchronous) and the process's CPU time over it is returned, as `IdleCpu`. */
function measureIdle(ms) {
  const cpuStart = process.cpuUsage();
  const start = now();
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  const cpu = process.cpuUsage(cpuStart);
  return { secs: Number(now() - start) / 1e9, cpu_secs: (cpu.user + cpu.system) / 1e6 };
}

function measurement(edges, errors, parts) {
  const ops = operationsCompleted(parts);
  return {
    reads: parts.reads,
    writes: parts.writes,
    write_completion: null,
    errors: errors.count,
    error_samples: errors.samples,
    wall_secs: edges.wallSecs,
    cpu_secs: edges.cpuSecs,
    threads: edges.threads,
    rss_bytes: edges.rssBytes,
    open_databases: 1,
    database_opens: 1,
    operations: parts.operations || [],
    window_allocations: null,
    window_alloc_bytes: null,
    cpu_per_op_us: ops > 0 ? (edges.cpuSecs * 1e6) / ops : null,
    idle_cpu: null,
  };
}

/** Runs the cell's workload on `ops` (the approach's prepared operations). */
function drive(cell, workload, ops) {
  const m = workload === 'queue' ? driveQueue(cell, ops) : driveClosedLoop(cell, workload, ops);
  // The caller closes the connection after this returns: it stays open through the idle window.
  m.idle_cpu = measureIdle(IDLE_WINDOW_MS);
  return m;
}

module.exports = { drive, QUEUE_OPERATIONS, IDLE_WINDOW_MS };
