'use strict';
// The runner protocol: --approaches, malformed cells (exit 2, a message, no hang), failed cells (exit 0 with
// `failure`), and the result's shape (result.rs field names).

const test = require('node:test');
const assert = require('node:assert/strict');

const { run, runCell, sampleCell, approaches, cellDir } = require('./helpers');

test('--approaches prints a JSON array of approach names', () => {
  const out = run('', ['--approaches']);
  assert.equal(out.status, 0, out.stderr);
  const names = JSON.parse(out.stdout);
  assert.ok(Array.isArray(names));
  assert.ok(names.includes('node-better-sqlite3'), out.stdout);
  for (const name of names) assert.ok(['node-better-sqlite3', 'node-sqlite'].includes(name), name);
  // node-sqlite is listed only where a Node with node:sqlite can run it.
  let hasSqlite = true;
  try {
    require('node:sqlite');
  } catch {
    hasSqlite = false;
  }
  if (hasSqlite) assert.ok(names.includes('node-sqlite'));
});

test('an unknown argument is a usage error', () => {
  const out = run('', ['--frobnicate']);
  assert.equal(out.status, 2);
  assert.match(out.stderr, /usage: runner-node/);
  assert.equal(out.stdout, '');
});

const malformed = [
  ['bad JSON', '{"workload": "point-read",', /not a valid cell \(JSON\): not JSON/],
  ['empty input', '', /standard input was empty/],
  ['not an object', '[1, 2]', /expected a JSON object/],
  ['an unknown field', { ...sampleCell(), frobnicate: true }, /unknown field `frobnicate`/],
  ['an unknown multi_db field', sampleCell({ multi_db: { num_databases: 1, readers: 1, write_delay_ms: 1, x: 1 } }), /unknown field `multi_db.x`/],
  ['a missing field', (({ seed, ...rest }) => rest)(sampleCell()), /missing field `seed`/],
  ['a mistyped field', sampleCell({ duration_ms: '300' }), /field `duration_ms`: expected a non-negative integer/],
  ['a negative count', sampleCell({ concurrency: -1 }), /field `concurrency`/],
];

for (const [what, input, message] of malformed) {
  test(`a cell with ${what} exits 2 with a clear message`, () => {
    const out = run(input, [], 10_000);
    assert.equal(out.signal, null, 'the runner hung and was killed');
    assert.equal(out.status, 2, out.stderr);
    assert.equal(out.stdout, '', 'no result is printed for an unreadable cell');
    assert.match(out.stderr, /^runner-node 0\.1\.0: standard input is not a valid cell \(JSON\): /);
    assert.match(out.stderr, message);
  });
}

test('optional fields may be absent or null, and the cell is echoed as serde writes it', () => {
  const dir = cellDir('echo');
  const cell = sampleCell({ dir, duration_ms: 50, warmup_ms: 10, concurrency: 1, rows: 10 });
  delete cell.synchronous;
  delete cell.multi_db;
  delete cell.build_profile;
  cell.seed = '18446744073709551615'; // written as digits below: past 2^53
  const text = JSON.stringify({ ...cell, repetition: 2, mmap_size: 0 }).replace(
    '"18446744073709551615"',
    '18446744073709551615',
  );
  const out = run(text);
  assert.equal(out.status, 0, out.stderr);
  const echoed = out.stdout.trim();
  assert.match(echoed, /"seed":18446744073709551615,/);
  const result = JSON.parse(echoed);
  assert.equal(result.failure, null);
  assert.deepEqual(Object.keys(result.cell), [
    'workload', 'approach', 'duration_ms', 'warmup_ms', 'concurrency', 'worker_threads', 'profile',
    'synchronous', 'memstatus', 'mmap_size', 'mutex', 'rows', 'multi_db', 'dir', 'seed', 'repetition',
    'build_profile',
  ]);
  assert.equal(result.cell.synchronous, null);
  assert.equal(result.cell.build_profile, 'tuned');
  assert.equal(result.cell.repetition, 2);
  assert.equal(result.env.pragmas.mmap_size, '0');
});

test('an unknown approach is a failed result, exit 0', () => {
  const { result } = runCell(sampleCell({ approach: 'node-nope' }));
  assert.match(result.failure, /^unknown approach `node-nope` for runner-node 0\.1\.0 \(supported: node-better-sqlite3/);
  assert.equal(result.cell.approach, 'node-nope');
  assert.equal(result.reads.ops, 0);
  assert.equal(result.env.runner, 'runner-node 0.1.0');
});

for (const workload of ['mixed', 'write-read', 'multi-db', 'http', 'orm', 'point-reads']) {
  test(`workload ${workload} is a failed result naming the supported ones`, () => {
    for (const approach of approaches()) {
      const { result } = runCell(sampleCell({ workload, approach, dir: cellDir('unsupported') }));
      assert.equal(
        result.failure,
        `workload \`${workload}\` is not supported by runner-node 0.1.0 (supported: point-read, insert, queue)`,
      );
    }
  });
}

test('bad knob values are failed results with the Rust runners\' messages', () => {
  const cases = [
    [{ profile: 'desktop' }, 'unknown profile `desktop` (expected `server` or `sqlite-default`)'],
    [{ synchronous: 'sometimes' }, 'unknown synchronous `sometimes` (expected off, normal, full or extra)'],
    [{ mutex: 'sometimes' }, 'unknown mutex mode `sometimes` (expected `nomutex` or `fullmutex`)'],
    [{ rows: 0 }, 'point-read needs rows to read (rows = 0)'],
    [{ concurrency: 0 }, 'concurrency must be at least 1'],
  ];
  for (const [overrides, failure] of cases) {
    const { result } = runCell(sampleCell({ ...overrides, dir: cellDir('knobs') }));
    assert.equal(result.failure, failure);
  }
});

test('a result has every field of result.rs, in its order', () => {
  const { result } = runCell(sampleCell({ dir: cellDir('shape'), duration_ms: 100, warmup_ms: 20, rows: 50 }));
  assert.deepEqual(Object.keys(result), [
    'cell', 'failure', 'reads', 'writes', 'write_completion', 'errors', 'error_samples', 'wall_secs', 'cpu_secs',
    'threads', 'rss_bytes', 'open_databases', 'database_opens', 'operations', 'window_allocations',
    'window_alloc_bytes', 'cpu_per_op_us', 'idle_cpu', 'env',
  ]);
  assert.deepEqual(Object.keys(result.reads), ['ops', 'ops_per_sec', 'avg_us', 'p50_us', 'p99_us', 'max_us']);
  assert.deepEqual(Object.keys(result.env), [
    'runner', 'sqlite_version', 'compile_options', 'pragmas', 'crate_versions', 'memstatus', 'cpu_model', 'cpus',
    'open_files_limit', 'core_round_trip_before_ns', 'core_round_trip_after_ns', 'kernel', 'date',
  ]);
  assert.match(result.env.date, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.ok(result.env.cpus >= 1);
  assert.ok(result.threads >= 1 && result.rss_bytes > 0);
  assert.equal(result.wall_secs, 0.1);
  assert.deepEqual(Object.keys(result.env.pragmas).sort(), [
    'busy_timeout', 'cache_size', 'foreign_keys', 'journal_mode', 'journal_size_limit', 'mmap_size', 'synchronous',
    'temp_store',
  ]);
  assert.equal(result.env.pragmas.journal_mode, 'wal');
  assert.equal(result.env.pragmas.synchronous, '1');
});
