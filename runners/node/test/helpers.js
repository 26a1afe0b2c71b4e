'use strict';
// Runs the runner-node program as the lab does: a cell on standard input, the result on standard output.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const RUNNER = path.join(__dirname, '..', 'runner-node');

const made = [];
process.on('exit', () => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh directory for one cell's databases, removed when the test process exits. */
function cellDir(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `runner-node-${name}-`));
  made.push(dir);
  return dir;
}

/** A cell like the lab's example, with `overrides`. */
function sampleCell(overrides = {}) {
  return {
    workload: 'point-read',
    approach: 'node-better-sqlite3',
    duration_ms: 300,
    warmup_ms: 100,
    concurrency: 4,
    worker_threads: 2,
    profile: 'server',
    synchronous: null,
    memstatus: false,
    mutex: 'nomutex',
    rows: 1000,
    multi_db: null,
    dir: '/nonexistent',
    seed: 1,
    build_profile: 'tuned',
    ...overrides,
  };
}

/** Runs the runner with `input` (a string, or a cell object written as JSON) and `args`; never waits more
 * than `timeoutMs`, so a hanging runner fails the test instead of stalling it. */
function run(input, args = [], timeoutMs = 30_000) {
  const text = typeof input === 'string' ? input : JSON.stringify(input);
  const child = spawnSync(RUNNER, args, { input: text, timeout: timeoutMs, encoding: 'utf8' });
  if (child.error) throw child.error;
  return { status: child.status, signal: child.signal, stdout: child.stdout, stderr: child.stderr };
}

/** Runs a cell and parses its one result, checking the protocol (exit 0, one JSON line). */
function runCell(cell) {
  const out = run(cell);
  if (out.status !== 0) {
    throw new Error(`runner exited with ${out.status} (signal ${out.signal}); stderr:\n${out.stderr}`);
  }
  const lines = out.stdout.trim().split('\n');
  if (lines.length !== 1) throw new Error(`expected one line of JSON, got:\n${out.stdout}`);
  return { result: JSON.parse(lines[0]), stderr: out.stderr };
}

/** The approaches the runner lists here. */
function approaches() {
  return JSON.parse(run('', ['--approaches']).stdout);
}

module.exports = { RUNNER, cellDir, sampleCell, run, runCell, approaches };
