'use strict';
// The cell a runner receives: crates/lab-core/src/cell.rs (`Cell`, `MultiDb`), read as serde reads it —
// unknown fields refused, every required field present and of its type, `Option` fields absent or null —
// and written back as serde writes it, so `result.cell` is the cell exactly as the Rust runners echo it.

/** A cell that cannot be read: the runner says why on standard error and exits 2. */
class CellError extends Error {}

const U32_MAX = 4294967295;

// Field kinds. `u64` fields are safe integers here (2^53): no duration, row count or map size comes near;
// `seed` alone is read from the JSON text as a BigInt so any u64 seed gives the Rust runners' streams.
const str = (v) => typeof v === 'string';
const bool = (v) => typeof v === 'boolean';
const u64 = (v) => Number.isSafeInteger(v) && v >= 0;
const u32 = (v) => Number.isInteger(v) && v >= 0 && v <= U32_MAX;

const EXPECTED = {
  str: 'a string',
  bool: 'a boolean',
  u64: 'a non-negative integer (u64)',
  u32: 'a non-negative integer below 2^32 (u32)',
};
const CHECK = { str, bool, u64, u32 };

// [name, kind, presence]: `required`, `option` (absent or null → null), or a default value.
const CELL_FIELDS = [
  ['workload', 'str', 'required'],
  ['approach', 'str', 'required'],
  ['duration_ms', 'u64', 'required'],
  ['warmup_ms', 'u64', 'required'],
  ['concurrency', 'u32', 'required'],
  ['worker_threads', 'u32', 'required'],
  ['profile', 'str', 'required'],
  ['synchronous', 'str', 'option'],
  ['memstatus', 'bool', 'required'],
  ['mmap_size', 'u64', 'option'],
  ['mutex', 'str', 'required'],
  ['rows', 'u64', 'required'],
  ['multi_db', 'multi_db', 'option'],
  ['dir', 'str', 'required'],
  ['seed', 'seed', 'required'],
  ['repetition', 'u32', { default: 0 }],
  ['build_profile', 'str', { default: 'tuned' }],
  ['postgres_url', 'str', 'option'],
];

const MULTI_DB_FIELDS = [
  ['num_databases', 'u32', 'required'],
  ['readers', 'u32', 'required'],
  ['write_delay_ms', 'u64', 'required'],
  ['write_mode', 'write_mode', { default: 'blocking' }],
  ['total_readers', 'u32', 'option'],
];

function describe(value) {
  const text = JSON.stringify(value);
  return text === undefined ? String(value) : text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// Reads `obj` against `fields`; `where` prefixes messages (`multi_db.`).
function readStruct(obj, fields, where, extra) {
  const names = fields.map(([name]) => name);
  for (const key of Object.keys(obj)) {
    if (!names.includes(key)) {
      throw new CellError(
        `unknown field \`${where}${key}\`, expected one of ${names.map((n) => `\`${n}\``).join(', ')}`,
      );
    }
  }
  const out = {};
  for (const [name, kind, presence] of fields) {
    const present = Object.prototype.hasOwnProperty.call(obj, name);
    const value = present ? obj[name] : undefined;
    if (!present || (value === null && presence === 'option')) {
      if (presence === 'required') throw new CellError(`missing field \`${where}${name}\``);
      out[name] = presence === 'option' ? null : presence.default;
      continue;
    }
    out[name] = readValue(name, kind, value, where, extra);
  }
  return out;
}

function readValue(name, kind, value, where, extra) {
  const bad = (expected) =>
    new CellError(`field \`${where}${name}\`: expected ${expected}, got ${describe(value)}`);
  switch (kind) {
    case 'multi_db':
      if (!isObject(value)) throw bad('an object (num_databases, readers, write_delay_ms, ...) or null');
      return readStruct(value, MULTI_DB_FIELDS, 'multi_db.', extra);
    case 'write_mode':
      if (value !== 'blocking' && value !== 'paced') throw bad('`blocking` or `paced`');
      return value;
    case 'seed': {
      if (!Number.isInteger(value) || value < 0) throw bad('a non-negative integer (u64)');
      // JSON numbers past 2^53 lose digits in JSON.parse: take the seed's digits from the text itself.
      const digits = extra.seedDigits;
      if (digits !== null && Number(BigInt(digits)) === value) {
        const seed = BigInt(digits);
        if (seed > 0xffffffffffffffffn) throw bad('a u64 (at most 18446744073709551615)');
        return seed;
      }
      if (!u64(value)) throw bad('a u64 written as plain digits');
      return BigInt(value);
    }
    default:
      if (!CHECK[kind](value)) throw bad(EXPECTED[kind]);
      return value;
  }
}

/** Parses a cell from the JSON text on standard input; throws CellError with serde-like messages. */
function parseCell(text) {
  let raw;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new CellError(`not JSON: ${e.message}${text.trim() === '' ? ' (standard input was empty)' : ''}`);
  }
  if (!isObject(raw)) throw new CellError(`expected a JSON object (a cell), got ${describe(raw)}`);
  const seedMatch = /"seed"\s*:\s*(\d+)\s*[,}]/.exec(text);
  return readStruct(raw, CELL_FIELDS, '', { seedDigits: seedMatch ? seedMatch[1] : null });
}

/** The cell as serde writes it: every field in declaration order, `repetition` only when not 0,
 * `postgres_url` only when set. */
function cellForOutput(cell) {
  const out = {};
  for (const [name] of CELL_FIELDS) {
    if (name === 'repetition' && cell.repetition === 0) continue;
    if (name === 'postgres_url' && cell.postgres_url === null) continue;
    out[name] = cell[name];
  }
  return out;
}

/** JSON text of `value`, BigInts written as plain integers (the cell's `seed`). */
function toJson(value) {
  const marker = '\u0000bigint:';
  return JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? `${marker}${v}` : v)).replace(
    /"\\u0000bigint:(\d+)"/g,
    '$1',
  );
}

module.exports = { CellError, parseCell, cellForOutput, toJson };
