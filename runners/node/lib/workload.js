'use strict';
// Schema, statements, seed data and knobs of the workloads this runner runs, copied from the Rust spec:
// crates/lab-core/src/sql.rs (SQL text, verbatim), data.rs (seed rows, new rows), workload.rs (names, files,
// checks) and knobs.rs (PRAGMA profiles and overrides).

const path = require('node:path');

const { Rng, MASK64 } = require('./rng');

// --- sql.rs ---------------------------------------------------------------------------------------------

const ITEMS_SCHEMA = `CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    value INTEGER NOT NULL,
    payload TEXT NOT NULL
);`;
const SEED_ITEM = 'INSERT INTO items (id, name, value, payload) VALUES (?1, ?2, ?3, ?4)';
const POINT_READ = 'SELECT id, name, value, payload FROM items WHERE id = ?1';
const INSERT_ITEM = 'INSERT INTO items (name, value, payload) VALUES (?1, ?2, ?3)';

const QUEUE_SCHEMA = `CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    payload TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    claimed_by INTEGER,
    claimed_at INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_unclaimed ON jobs (claimed_by, id);`;
const PUBLISH = 'INSERT INTO jobs (payload, created_at) VALUES (?1, ?2)';
const CLAIM = `UPDATE jobs SET claimed_by = ?1, claimed_at = ?2
WHERE id = (SELECT id FROM jobs WHERE claimed_by IS NULL ORDER BY id LIMIT 1)
RETURNING id, payload`;
const ACK = 'DELETE FROM jobs WHERE id = ?1 AND claimed_by = ?2';
const SEED_JOB = 'INSERT INTO jobs (id, payload, created_at) VALUES (?1, ?2, ?3)';

// --- data.rs --------------------------------------------------------------------------------------------

/** Length of an item's payload. */
const PAYLOAD_LEN = 100;
/** Length of a job's payload. */
const JOB_PAYLOAD_LEN = 100;

/** `NewItem::random`: name, value, payload, drawn in that order. */
function randomItem(rng) {
  const name = `item-${rng.text(12)}`;
  const value = rng.between(0, 1_000_000);
  const payload = rng.text(PAYLOAD_LEN);
  return { name, value, payload };
}

/** `item_seed`: rows 1..=rows of `items`, as [sql, params]. */
function* itemSeed(rows, seed) {
  const rng = Rng.derive(seed, MASK64);
  for (let id = 1; id <= rows; id++) {
    const value = rng.between(0, 1_000_000);
    yield [SEED_ITEM, [id, `item-${id}`, value, rng.text(PAYLOAD_LEN)]];
  }
}

/** `job_seed`: the backlog, jobs 1..=rows, all unclaimed. */
function* jobSeed(rows, seed) {
  const rng = Rng.derive(seed, MASK64 - 1n);
  for (let id = 1; id <= rows; id++) {
    yield [SEED_JOB, [id, rng.text(JOB_PAYLOAD_LEN), id]];
  }
}

// --- workload.rs ----------------------------------------------------------------------------------------

/** Every workload the lab knows, in its report order. */
const ALL_WORKLOADS = ['point-read', 'insert', 'mixed', 'write-read', 'multi-db', 'queue', 'http', 'orm'];
/** The ones this runner runs. */
const SUPPORTED_WORKLOADS = ['point-read', 'insert', 'queue'];

/** Checks that `cell` names a workload this runner runs, with the settings it needs (`Workload::of_cell`). */
function workloadOf(cell, runnerName) {
  const workload = cell.workload;
  if (!SUPPORTED_WORKLOADS.includes(workload)) {
    throw new Error(
      `workload \`${workload}\` is not supported by ${runnerName} (supported: ${SUPPORTED_WORKLOADS.join(', ')})`,
    );
  }
  if (workload === 'point-read' && cell.rows === 0) {
    throw new Error(`${workload} needs rows to read (rows = 0)`);
  }
  if (cell.concurrency === 0) throw new Error('concurrency must be at least 1');
  return workload;
}

/** `<dir>/<name>.db` of the cell's one database. */
function databasePath(cell, workload) {
  return path.join(cell.dir, `${workload === 'queue' ? 'queue' : 'items'}.db`);
}

function schema(workload) {
  return workload === 'queue' ? QUEUE_SCHEMA : ITEMS_SCHEMA;
}

/** The rows seeded before the warm-up, in one transaction: the items, or the queue's backlog. */
function seedRows(cell, workload) {
  return workload === 'queue' ? jobSeed(cell.rows, cell.seed) : itemSeed(cell.rows, cell.seed);
}

// --- knobs.rs -------------------------------------------------------------------------------------------

/** The `server` profile, in order; `file` PRAGMAs are stored in the database and set once, when seeding. */
const SERVER_PRAGMAS = [
  { name: 'journal_mode', value: 'WAL', file: true },
  { name: 'synchronous', value: 'NORMAL' },
  { name: 'busy_timeout', value: '5000' },
  { name: 'foreign_keys', value: 'ON' },
  { name: 'cache_size', value: '-32000' },
  { name: 'mmap_size', value: '268435456' },
  { name: 'temp_store', value: 'MEMORY' },
  { name: 'journal_size_limit', value: '67108864' },
];

/** The PRAGMAs read back into `env.pragmas`. */
const REPORTED_PRAGMAS = [
  'journal_mode',
  'synchronous',
  'busy_timeout',
  'foreign_keys',
  'cache_size',
  'mmap_size',
  'temp_store',
  'journal_size_limit',
];

/** `Knobs::from_cell`: the cell's SQLite settings, validated with the Rust runners' messages. */
function knobsOf(cell) {
  let synchronous = null;
  if (cell.synchronous !== null) {
    synchronous = cell.synchronous.toUpperCase();
    if (!['OFF', 'NORMAL', 'FULL', 'EXTRA'].includes(synchronous)) {
      throw new Error(`unknown synchronous \`${cell.synchronous}\` (expected off, normal, full or extra)`);
    }
  }
  if (cell.profile !== 'server' && cell.profile !== 'sqlite-default') {
    throw new Error(`unknown profile \`${cell.profile}\` (expected \`server\` or \`sqlite-default\`)`);
  }
  if (cell.mutex !== 'nomutex' && cell.mutex !== 'fullmutex') {
    throw new Error(`unknown mutex mode \`${cell.mutex}\` (expected \`nomutex\` or \`fullmutex\`)`);
  }
  return {
    profile: cell.profile,
    synchronous,
    mmapSize: cell.mmap_size,
    memstatus: cell.memstatus,
    mutex: cell.mutex,
  };
}

/** `Knobs::pragmas`: the profile's PRAGMAs, then the overrides (each replacing the profile's value). */
function pragmas(knobs) {
  let out = knobs.profile === 'server' ? SERVER_PRAGMAS.map((p) => ({ ...p })) : [];
  const set = (name, value) => {
    out = out.filter((p) => p.name !== name);
    out.push({ name, value });
  };
  if (knobs.synchronous !== null) set('synchronous', knobs.synchronous);
  if (knobs.mmapSize !== null) set('mmap_size', String(knobs.mmapSize));
  return out;
}

/** `Knobs::connection_pragmas`: all but the file-level ones. */
function connectionPragmas(knobs) {
  return pragmas(knobs).filter((p) => !p.file);
}

const pragmaSql = (p) => `PRAGMA ${p.name} = ${p.value}`;

module.exports = {
  POINT_READ,
  INSERT_ITEM,
  PUBLISH,
  CLAIM,
  ACK,
  SEED_ITEM,
  SEED_JOB,
  JOB_PAYLOAD_LEN,
  ALL_WORKLOADS,
  SUPPORTED_WORKLOADS,
  REPORTED_PRAGMAS,
  randomItem,
  itemSeed,
  jobSeed,
  workloadOf,
  databasePath,
  schema,
  seedRows,
  knobsOf,
  pragmas,
  connectionPragmas,
  pragmaSql,
};
