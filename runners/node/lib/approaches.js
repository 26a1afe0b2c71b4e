'use strict';
// The two approaches: one synchronous connection each, statements prepared once, as their users write it.
//
// - `node-better-sqlite3`: better-sqlite3 (its own bundled SQLite, compiled by node-gyp on install).
// - `node-sqlite`: Node's built-in `node:sqlite` (`DatabaseSync`, the SQLite compiled into Node).
//
// Both bind the lab's SQL verbatim. Its parameters are numbered (`?1`): node:sqlite binds positional
// arguments to them by number; better-sqlite3 reads `?1` as a parameter *named* `1`, so it is given
// `{ 1: value, ... }` (an array or positional arguments are refused: "Too many parameter values").

const W = require('./workload');

/** The message of a point read that finds no row (rusqlite's `QueryReturnedNoRows`). */
const NO_ROW = 'Query returned no rows';

const APPROACHES = ['node-better-sqlite3', 'node-sqlite'];

// --- better-sqlite3 -------------------------------------------------------------------------------------

function loadBetterSqlite3() {
  try {
    return require('better-sqlite3');
  } catch (e) {
    throw new Error(
      `cannot load better-sqlite3 under Node ${process.version} (build it with runners/node/build.sh, ` +
        `using this Node): ${e.message.split('\n')[0]}`,
    );
  }
}

/** `{1: a, 2: b, ...}` for better-sqlite3's binding of numbered parameters. */
function numbered(params) {
  const out = {};
  for (let i = 0; i < params.length; i++) out[i + 1] = params[i];
  return out;
}

class BetterSqlite3Connection {
  constructor(path) {
    const Database = loadBetterSqlite3();
    // Its defaults: created if missing, read-write, a 5 s busy timeout (read back into the results).
    this.db = new Database(path);
    this.library = 'better-sqlite3';
  }

  static versions() {
    return { 'better-sqlite3': require('better-sqlite3/package.json').version, node: process.version };
  }

  exec(sql) {
    this.db.exec(sql);
  }

  /** The first column of every row of `sql` (PRAGMAs, `sqlite_version()`). */
  column(sql) {
    return this.db
      .prepare(sql)
      .raw(true)
      .all()
      .map((row) => row[0]);
  }

  /** A statement run once per seeded row, params as an array. */
  seeder(sql) {
    const stmt = this.db.prepare(sql);
    return (params) => stmt.run(numbered(params));
  }

  /** The workload's operations on prepared statements. */
  operations(workload) {
    const db = this.db;
    if (workload === 'queue') {
      const publish = db.prepare(W.PUBLISH);
      const claim = db.prepare(W.CLAIM);
      const ack = db.prepare(W.ACK);
      return {
        publish(payload, createdAt) {
          publish.run({ 1: payload, 2: createdAt });
        },
        claim(owner, nowMs) {
          const row = claim.get({ 1: owner, 2: nowMs });
          if (row === undefined) return undefined;
          // The payload is read too, as a worker would (rows are materialized whole anyway).
          const { id, payload } = row;
          return typeof payload === 'string' ? id : undefined;
        },
        ack(id, owner) {
          const { changes } = ack.run({ 1: id, 2: owner });
          if (changes !== 1) throw new Error(`Query changed ${changes} rows`);
        },
      };
    }
    if (workload === 'insert') {
      const insert = db.prepare(W.INSERT_ITEM);
      return {
        insert(item) {
          insert.run({ 1: item.name, 2: item.value, 3: item.payload });
        },
      };
    }
    const pointRead = db.prepare(W.POINT_READ);
    return {
      pointRead(id) {
        const row = pointRead.get({ 1: id });
        if (row === undefined) throw new Error(NO_ROW);
      },
    };
  }

  close() {
    this.db.close();
  }
}

// --- node:sqlite ----------------------------------------------------------------------------------------

/** `node:sqlite`'s module if this Node has it unflagged (22.13+ / 23.4+), else null. */
function nodeSqliteModule() {
  try {
    return require('node:sqlite');
  } catch {
    return null;
  }
}

class NodeSqliteConnection {
  constructor(path) {
    const sqlite = nodeSqliteModule();
    if (sqlite === null) throw new Error(`this Node (${process.version}) has no node:sqlite`);
    // Its defaults: created if missing, read-write, foreign keys on, no busy timeout (read back too).
    this.db = new sqlite.DatabaseSync(path);
    this.library = 'node:sqlite';
  }

  static versions() {
    return { node: process.version };
  }

  exec(sql) {
    this.db.exec(sql);
  }

  column(sql) {
    return this.db
      .prepare(sql)
      .all()
      .map((row) => Object.values(row)[0]);
  }

  seeder(sql) {
    const stmt = this.db.prepare(sql);
    return (params) => stmt.run(...params);
  }

  operations(workload) {
    const db = this.db;
    if (workload === 'queue') {
      const publish = db.prepare(W.PUBLISH);
      const claim = db.prepare(W.CLAIM);
      const ack = db.prepare(W.ACK);
      return {
        publish(payload, createdAt) {
          publish.run(payload, createdAt);
        },
        claim(owner, nowMs) {
          const row = claim.get(owner, nowMs);
          if (row === undefined) return undefined;
          // The payload is read too, as a worker would (rows are materialized whole anyway).
          const { id, payload } = row;
          return typeof payload === 'string' ? id : undefined;
        },
        ack(id, owner) {
          const { changes } = ack.run(id, owner);
          if (Number(changes) !== 1) throw new Error(`Query changed ${changes} rows`);
        },
      };
    }
    if (workload === 'insert') {
      const insert = db.prepare(W.INSERT_ITEM);
      return {
        insert(item) {
          insert.run(item.name, item.value, item.payload);
        },
      };
    }
    const pointRead = db.prepare(W.POINT_READ);
    return {
      pointRead(id) {
        const row = pointRead.get(id);
        if (row === undefined) throw new Error(NO_ROW);
      },
    };
  }

  close() {
    this.db.close();
  }
}

// --- shared ---------------------------------------------------------------------------------------------

function connectionClass(approach) {
  switch (approach) {
    case 'node-better-sqlite3':
      return BetterSqlite3Connection;
    case 'node-sqlite':
      return NodeSqliteConnection;
    default:
      throw new Error(`approach \`${approach}\` is listed but not wired up`);
  }
}

/** Opens `path` for `approach` and sets the PRAGMAs given (`exec` steps each to its end: some answer a row). */
function open(approach, path, pragmas) {
  const Connection = connectionClass(approach);
  const conn = new Connection(path);
  for (const pragma of pragmas) {
    const sql = W.pragmaSql(pragma);
    try {
      conn.exec(sql);
    } catch (e) {
      conn.close();
      throw new Error(`cannot set \`${sql}\`: ${e.message}`);
    }
  }
  return conn;
}

/** Creates the cell's directory and database, sets the profile's PRAGMAs (`journal_mode` included, which the
 * file keeps), creates the schema and seeds it in one transaction; closes it, folding the WAL back. */
function seedDatabase(approach, cell, workload, knobs) {
  const fs = require('node:fs');
  try {
    fs.mkdirSync(cell.dir, { recursive: true });
  } catch (e) {
    throw new Error(`cannot create the cell directory ${cell.dir}: ${e.message}`);
  }
  const path = W.databasePath(cell, workload);
  const conn = open(approach, path, W.pragmas(knobs));
  try {
    conn.exec(W.schema(workload));
    conn.exec('BEGIN');
    const seeders = new Map();
    for (const [sql, params] of W.seedRows(cell, workload)) {
      let seed = seeders.get(sql);
      if (seed === undefined) {
        seed = conn.seeder(sql);
        seeders.set(sql, seed);
      }
      seed(params);
    }
    conn.exec('COMMIT');
  } catch (e) {
    throw new Error(`cannot seed ${path}: ${e.message}`);
  } finally {
    conn.close();
  }
}

/** Whether SQLite memory statistics are on, as far as this library lets anyone know: neither better-sqlite3
 * nor node:sqlite exposes `sqlite3_config`, so the state is the build's `SQLITE_DEFAULT_MEMSTATUS`. */
function memstatusOutcome(library, requestedOn, compileOptions) {
  const option = compileOptions.find((o) => o.startsWith('DEFAULT_MEMSTATUS='));
  const on = option === undefined ? true : option !== 'DEFAULT_MEMSTATUS=0';
  const requested = requestedOn ? 'on' : 'off';
  const build = option === undefined ? "SQLite's default, on (no DEFAULT_MEMSTATUS compile option)" : option;
  const note = on === requestedOn ? '' : '; the request was not applied';
  return `${on ? 'on' : 'off'} (requested ${requested}: ${library} offers no sqlite3_config(SQLITE_CONFIG_MEMSTATUS), so it is the build's: ${build}${note})`;
}

/** The threading mode a connection of this build gets without open flags: `nomutex` or `fullmutex`. */
function effectiveMutex(compileOptions) {
  const option = compileOptions.find((o) => o.startsWith('THREADSAFE='));
  return option === 'THREADSAFE=1' ? 'fullmutex' : 'nomutex';
}

/** Fills the SQLite fields of `env` from `conn` (`describe` of the Rust runners). */
function describe(conn, Connection, knobs, env) {
  env.sqlite_version = String(conn.column('SELECT sqlite_version()')[0]);
  env.compile_options = conn.column('PRAGMA compile_options').map(String);
  const pragmas = {};
  for (const name of W.REPORTED_PRAGMAS) {
    const value = conn.column(`PRAGMA ${name}`)[0];
    pragmas[name] = value === null || value === undefined ? 'null' : String(value);
  }
  env.pragmas = pragmas;
  env.crate_versions = Connection.versions();
  env.memstatus = memstatusOutcome(conn.library, knobs.memstatus, env.compile_options);
}

module.exports = {
  APPROACHES,
  NO_ROW,
  nodeSqliteModule,
  connectionClass,
  open,
  seedDatabase,
  describe,
  memstatusOutcome,
  effectiveMutex,
};
