'use strict';
// The machine behind a number (machine.rs) and samples of this process (process.rs): CPU model and count,
// kernel, date, open-file limit, threads and resident memory.

const fs = require('node:fs');
const os = require('node:os');

function readText(file) {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

/** CPU model name from /proc/cpuinfo (`model name` on x86, `Model` / `Hardware` / `cpu model` elsewhere). */
function cpuModel() {
  const info = readText('/proc/cpuinfo');
  if (info !== null) {
    for (const key of ['model name', 'Model', 'Hardware', 'cpu model']) {
      for (const line of info.split('\n')) {
        const colon = line.indexOf(':');
        if (colon < 0) continue;
        const value = line.slice(colon + 1).trim();
        if (line.slice(0, colon).trim() === key && value !== '') return value;
      }
    }
  }
  const cpus = os.cpus();
  return cpus.length > 0 && cpus[0].model ? cpus[0].model : 'unknown';
}

/** `time` as RFC 3339 in UTC with second precision, e.g. `2026-11-21T23:05:00Z`. */
function rfc3339(date) {
  return `${date.toISOString().slice(0, 19)}Z`;
}

/** The soft open-file limit (`RLIMIT_NOFILE`), which the runner-node wrapper raised to the hard limit. */
function openFilesLimit() {
  const limits = readText('/proc/self/limits');
  const match = limits && /^Max open files\s+(\d+|unlimited)/m.exec(limits);
  if (!match) return null;
  return match[1] === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(match[1]);
}

/** `Environment::for_machine`: the machine fields filled, the SQLite ones left for the approach. */
function environmentForMachine(runner) {
  return {
    runner,
    sqlite_version: '',
    compile_options: [],
    pragmas: {},
    crate_versions: {},
    memstatus: '',
    cpu_model: cpuModel(),
    cpus: typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length,
    open_files_limit: openFilesLimit(),
    // The Rust runners measure a cache line's round trip between two cores (round_trip.rs) with two spinning
    // threads; a Node runner has no such threads, so it leaves these empty.
    core_round_trip_before_ns: null,
    core_round_trip_after_ns: null,
    kernel: (readText('/proc/sys/kernel/osrelease') || os.release() || 'unknown').trim(),
    date: rfc3339(new Date()),
  };
}

/** Threads and resident memory of this process, from /proc/self/status. */
function processSample() {
  const status = readText('/proc/self/status');
  const field = (name) => {
    const match = status && new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status);
    return match ? Number(match[1]) : null;
  };
  const rssKb = field('VmRSS');
  return { threads: field('Threads'), rss_bytes: rssKb === null ? null : rssKb * 1024 };
}

module.exports = { environmentForMachine, processSample, rfc3339, cpuModel };
