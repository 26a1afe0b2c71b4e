'use strict';
// A short real cell per approach × workload: 300 ms after 100 ms warm-up, 4 clients, 1,000 rows.

const test = require('node:test');
const assert = require('node:assert/strict');

const { runCell, sampleCell, approaches, cellDir } = require('./helpers');

const APPROACHES = approaches();

test('node-sqlite is listed when it can run, and said to be missing otherwise', () => {
  if (APPROACHES.includes('node-sqlite')) return;
  const { result } = runCell(sampleCell({ approach: 'node-sqlite', dir: cellDir('no-sqlite') }));
  assert.match(result.failure, /needs a Node with node:sqlite/);
});

for (const approach of APPROACHES) {
  const cell = (workload) =>
    sampleCell({ workload, approach, duration_ms: 300, warmup_ms: 100, concurrency: 4, rows: 1000, dir: cellDir(workload) });

  const checkEnvironment = (result) => {
    assert.equal(result.env.runner, 'runner-node 0.1.0');
    assert.match(result.env.sqlite_version, /^3\.\d+\.\d+$/);
    assert.ok(result.env.compile_options.some((o) => o.startsWith('THREADSAFE=')));
    assert.match(result.env.crate_versions.node, /^v\d+\.\d+\.\d+$/);
    if (approach === 'node-better-sqlite3') assert.match(result.env.crate_versions['better-sqlite3'], /^12\.\d+\.\d+$/);
    assert.match(result.env.memstatus, /^(on|off) \(requested off: /);
    assert.equal(result.env.pragmas.busy_timeout, '5000');
    assert.equal(result.wall_secs, 0.3);
    assert.ok(result.cpu_secs > 0);
    // The process's own CPU accounting: some CPU for every operation, and an idle window after the measured one.
    assert.ok(result.cpu_per_op_us > 0, String(result.cpu_per_op_us));
    assert.ok(result.idle_cpu.secs > 0 && result.idle_cpu.cpu_secs >= 0, JSON.stringify(result.idle_cpu));
  };

  test(`${approach}: point-read`, () => {
    const { result } = runCell(cell('point-read'));
    assert.equal(result.failure, null);
    assert.equal(result.errors, 0, result.error_samples.join('; '));
    assert.ok(result.reads.ops > 0);
    assert.equal(result.writes.ops, 0);
    assert.ok(Math.abs(result.reads.ops_per_sec - result.reads.ops / 0.3) < 1e-6);
    const r = result.reads;
    assert.ok(r.p50_us > 0 && r.p50_us <= r.p99_us && r.p99_us <= r.max_us, JSON.stringify(r));
    assert.deepEqual(result.operations, []);
    checkEnvironment(result);
  });

  test(`${approach}: insert`, () => {
    const { result } = runCell(cell('insert'));
    assert.equal(result.failure, null);
    assert.equal(result.errors, 0, result.error_samples.join('; '));
    assert.ok(result.writes.ops > 0);
    assert.equal(result.reads.ops, 0);
    checkEnvironment(result);
  });

  test(`${approach}: queue has publish, claim, ack and cycle`, () => {
    const { result } = runCell(cell('queue'));
    assert.equal(result.failure, null);
    assert.equal(result.errors, 0, result.error_samples.join('; '));
    assert.deepEqual(
      result.operations.map((o) => o.name),
      ['publish', 'claim', 'ack', 'cycle'],
    );
    const cycles = result.operations[3].stats.ops;
    assert.ok(cycles > 0);
    // A cycle counts with its three operations.
    for (const op of result.operations) {
      assert.equal(op.stats.ops, cycles, op.name);
      assert.equal(op.allocs_per_op, null);
      assert.equal(op.alloc_bytes_per_op, null);
    }
    // The cycle is at least its three operations.
    const [publish, claim, ack, cycle] = result.operations.map((o) => o.stats);
    assert.ok(cycle.avg_us >= publish.avg_us + claim.avg_us + ack.avg_us - 1e-9);
    assert.equal(result.reads.ops + result.writes.ops, 0);
    assert.equal(result.window_allocations, null);
    checkEnvironment(result);
  });
}
