//! The layers of lab-core: a module may use its own layer and the ones below, never a higher one.
//!
//! The driver, its client tasks and the `http` workload once imported each other in a circle, so none of them could
//! be read, changed or tested without the others. This test keeps the modules in layers: it reads every file under
//! `src/` and checks each path into the crate outside the file's unit tests — `crate::x`, `super::x`, `self::x`
//! and a child module's `x::` — against [`MODULES`]. `lib.rs` is the root: it declares and re-exports everything.
//! Inside the crate, items are named through the module that defines them (`crate::cell::Cell`, not the root's
//! re-export `crate::Cell`), so that every path shows the layer it reaches.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    /// Tools with no knowledge of cells or workloads.
    Primitives,
    /// What a cell is, what it holds and what it reports.
    Vocabulary,
    /// How a cell is measured: statistics, the timekeeper, the load generator.
    Instruments,
    /// The contract between the driver and the runners: the approach and what driving it yields.
    Contract,
    /// What every workload driven by client tasks shares.
    ClientTasks,
    /// One driver per workload.
    Workloads,
    /// The driver's one entry point.
    Driver,
    /// A runner's `main` and its end-to-end checks.
    Runner,
    /// Helpers of the unit tests.
    Tests,
}

use Layer::*;

/// Every module under `src/` but the root, with its layer.
#[rustfmt::skip]
const MODULES: &[(&str, Layer)] = &[
    ("alloc", Primitives),                // the counting allocator: heap allocations per operation
    ("pacing", Primitives),               // the schedule of the paced `multi-db` writers
    ("process", Primitives),              // CPU time, threads, memory and open files of the runner process
    ("rng", Primitives),                  // seeded random numbers, the same in every runner
    ("round_trip", Primitives),           // the cross-core round trip, measured around every cell
    ("sql", Primitives),                  // the statements every runner executes verbatim
    ("cell", Vocabulary),                 // the cell a runner is asked to measure
    ("data", Vocabulary),                 // seeded rows, new rows, ledger blocks and jobs
    ("knobs", Vocabulary),                // the cell's SQLite settings, parsed once
    ("machine", Vocabulary),              // the machine fields of a result
    ("orm", Vocabulary),                  // the `orm` suite's operations and seed
    ("result", Vocabulary),               // what a runner reports for one cell
    ("workload", Vocabulary),             // the workloads: names, schema, seed data
    ("approach_name", Vocabulary),        // the approaches by name, and what the lab knows of each
    ("runner_program", Vocabulary),       // which runner program measures an approach
    ("custom", Vocabulary),               // custom workloads: the user's schema, rows and transactions
    ("http_load", Instruments),           // the `http` load generator, in a process of its own
    ("stats", Instruments),               // counters and histograms of the client tasks
    ("timekeeper", Instruments),          // the window's OS thread and its samples of the process
    ("ticker", Instruments),              // the 1 ms ticker on the runtime: how late it wakes a task
    ("idle", Instruments),                // the idle window after the measured one: CPU of an open, quiet approach
    ("approach", Contract),               // the trait an approach implements
    ("measurement", Contract),            // what driving a cell measured
    ("driver::client_loop", ClientTasks), // how a client task times one operation
    ("driver::window", ClientTasks),      // the measured window and what every windowed workload reports
    ("driver::closed_loop", Workloads),   // `point-read`, `insert`, `mixed`
    ("driver::open_loop::arrivals", ClientTasks), // when each open-loop request is due
    ("driver::open_loop::in_flight", ClientTasks), // the bound on open-loop requests in flight
    ("driver::open_loop::dispatcher", ClientTasks), // the schedule's thread: send when due, or drop
    ("driver::open_loop::request", ClientTasks), // one open-loop request: its operation, its task
    ("driver::open_loop", Workloads),     // `point-read`, `insert`, `mixed` at a fixed rate
    ("driver::http", Workloads),          // `http`: the service under the load generator
    ("driver::multi_db", Workloads),      // `multi-db`: writers and readers over many databases
    ("driver::orm", Workloads),           // `orm`: the suite, one operation at a time
    ("driver::throughput", Workloads),    // `throughput`: transactions of many rows, checked at the end
    ("driver::long_read", Workloads),     // `long-read`: a call site's reads, one in N long, beside a writer
    ("driver::ceiling", Workloads),       // the ceiling: the same statements on plain threads
    ("driver::queue", Workloads),         // `queue`: publish, claim, ack cycles and the allocation probe
    ("driver::custom", Workloads),        // custom workloads: weighted transactions, each timed by name
    ("driver", Driver),                   // `drive`: a cell to its workload's driver
    ("runner_main", Runner),              // the whole `main` of a runner
    ("runner_testing", Runner),           // the runners' end-to-end checks
    ("test_support", Tests),              // the unit tests' sample cell and fake approaches
];

#[test]
fn no_module_uses_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers = table();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let Some(module) = module_of(relative) else {
            continue; // lib.rs, the root
        };
        if !layers.contains_key(module.as_str()) {
            problems.push(format!(
                "src/{}: module `{module}` has no layer: add it to MODULES in tests/layers.rs",
                relative.display()
            ));
            continue;
        }
        seen.push(module.clone());
        let text = std::fs::read_to_string(file).unwrap();
        problems.extend(violations(
            &format!("src/{}", relative.display()),
            &module,
            &text,
            &layers,
        ));
    }
    for (module, _) in MODULES {
        if !seen.iter().any(|m| m == module) {
            problems.push(format!(
                "MODULES names `{module}`, which has no file under src/"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

/// The table's modules, for the checker's own tests.
fn table() -> BTreeMap<&'static str, Layer> {
    MODULES.iter().copied().collect()
}

#[test]
fn a_path_into_a_higher_layer_is_reported_with_its_file_line_and_layers() {
    let text = "//! A window.\n\nuse crate::stats::StatsSink;\nuse crate::{\n    cell::Cell,\n    driver::drive,\n};\n";
    let found = violations("src/driver/window.rs", "driver::window", text, &table());
    assert_eq!(
        found,
        [
            "src/driver/window.rs:6: `driver::window` (layer ClientTasks) uses `driver` (layer Driver), a higher layer"
        ]
    );
}

#[test]
fn super_self_and_child_paths_are_resolved() {
    let layers = table();
    // A workload reaching into its parent, the driver's entry point.
    let found = violations(
        "src/driver/queue.rs",
        "driver::queue",
        "fn f() { super::drive(); }\n",
        &layers,
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("uses `driver` (layer Driver)"),
        "{found:?}"
    );
    // A sibling of the same layer, and the parent using its children: allowed.
    let sibling = "use super::window::Window;\n";
    assert!(violations("src/driver/queue.rs", "driver::queue", sibling, &layers).is_empty());
    let parent =
        "mod queue;\npub use queue::QUEUE_PROBE_CYCLES;\nfn f() { self::queue::drive(); }\n";
    assert!(violations("src/driver/mod.rs", "driver", parent, &layers).is_empty());
}

#[test]
fn comments_strings_and_unit_tests_are_not_paths() {
    let text = "/// See [`crate::driver::drive`].\nconst S: &str = \"crate::driver\"; // crate::driver\n\
                #[cfg(test)]\nmod tests {\n    use crate::driver::drive;\n}\n";
    assert!(violations("src/cell.rs", "cell", text, &table()).is_empty());
}

#[test]
fn a_root_re_export_is_reported_since_it_hides_the_layer() {
    let found = violations("src/knobs.rs", "knobs", "use crate::Cell;\n", &table());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("src/knobs.rs:1: `crate::Cell` names no module"),
        "{found:?}"
    );
}

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
}

/// The module a file under `src/` defines (`driver/queue.rs` → `driver::queue`, `driver/mod.rs` → `driver`);
/// `None` for the root.
fn module_of(relative: &Path) -> Option<String> {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    (parts != ["lib"]).then(|| parts.join("::"))
}

/// The paths of `text` (the file `file`, defining `module`) that reach a higher layer or name no module.
fn violations(file: &str, module: &str, text: &str, layers: &BTreeMap<&str, Layer>) -> Vec<String> {
    let own = layers[module];
    let tokens = tokens(&without_unit_tests(&code_only(text)));
    let children: Vec<&str> = tokens
        .windows(3)
        .filter(|w| w[0].text == "mod" && w[2].text == ";")
        .map(|w| w[1].text.as_str())
        .collect();
    let mut found = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let starts_path = tokens.get(i + 1).is_some_and(|t| t.text == "::")
            && (i == 0 || tokens[i - 1].text != "::");
        if !starts_path {
            continue;
        }
        let mut base: Vec<&str> = module.split("::").collect();
        let mut next = i;
        match token.text.as_str() {
            "crate" => base.clear(),
            "self" => {}
            "super" => {
                // `super::super::…` climbs once per `super`.
                base.pop();
                while tokens.get(next + 2).is_some_and(|t| t.text == "super")
                    && tokens.get(next + 3).is_some_and(|t| t.text == "::")
                {
                    base.pop();
                    next += 2;
                }
            }
            name if children.contains(&name) => base.push(name),
            _ => continue,
        }
        for (line, segments) in leaves(&tokens, next + 2) {
            let mut path: Vec<&str> = base.clone();
            path.extend(segments.iter().map(String::as_str));
            let reached = (1..=path.len())
                .rev()
                .map(|n| path[..n].join("::"))
                .find(|candidate| layers.contains_key(candidate.as_str()));
            match reached {
                Some(target) if layers[target.as_str()] > own => found.push(format!(
                    "{file}:{line}: `{module}` (layer {own:?}) uses `{target}` (layer {:?}), a higher layer",
                    layers[target.as_str()]
                )),
                Some(_) => {}
                None if base.is_empty() => found.push(format!(
                    "{file}:{line}: `crate::{}` names no module of the layer table: use the path of the module \
                     that defines it",
                    segments.join("::")
                )),
                None => {}
            }
        }
    }
    found
}

/// A token of the code, with its line.
#[derive(Debug)]
struct Token {
    /// The identifier, `::` or punctuation character.
    text: String,
    /// Its line, from 1.
    line: usize,
}

/// The leaf paths of a path's tail starting at token `i` (after `base::`): `a::b` is one, `{a::b, c::{self, d}}`
/// three; each with the line of its first segment. Stops at the first token that does not continue the path.
fn leaves(tokens: &[Token], i: usize) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    walk(tokens, i, Vec::new(), &mut out);
    out
}

/// Reads one path tail from token `i` with the segments before it in `prefix`; returns the index after it.
fn walk(
    tokens: &[Token],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(usize, Vec<String>)>,
) -> usize {
    let line = tokens.get(i).map_or(0, |t| t.line);
    loop {
        match tokens.get(i).map(|t| t.text.as_str()) {
            Some("{") => {
                i += 1;
                while tokens.get(i).is_some_and(|t| t.text != "}") {
                    i = walk(tokens, i, prefix.clone(), out);
                    if tokens.get(i).is_some_and(|t| t.text == ",") {
                        i += 1;
                    }
                }
                return i + 1;
            }
            Some(segment) if segment == "*" || is_ident(segment) => {
                if segment != "self" && segment != "*" {
                    prefix.push(segment.to_owned());
                }
                i += 1;
                if tokens.get(i).is_some_and(|t| t.text == "::") {
                    i += 1;
                    continue;
                }
                // `x as y`: the alias is not a segment.
                if tokens.get(i).is_some_and(|t| t.text == "as") {
                    i += 2;
                }
                out.push((line, prefix));
                return i;
            }
            _ => {
                out.push((line, prefix));
                return i;
            }
        }
    }
}

/// Whether `text` is an identifier (or a keyword), i.e. may be a path segment.
fn is_ident(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// `text` split into identifiers, `::` and single punctuation characters, with their lines.
fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let start = i;
            if c.is_alphanumeric() || c == '_' {
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            } else if c == ':' && chars.get(i + 1) == Some(&':') {
                i += 2;
            } else {
                i += 1;
                if c.is_whitespace() {
                    continue;
                }
            }
            out.push(Token {
                text: chars[start..i].iter().collect(),
                line: n + 1,
            });
        }
    }
    out
}

/// `text` with comments and the contents of string and character literals blanked out, lines kept.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        match (chars[i], chars.get(i + 1).copied()) {
            ('/', Some('/')) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ('/', Some('*')) => {
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    out.push(blank(chars[i]));
                    i += 1;
                }
                i += 2;
            }
            ('r', Some('"' | '#'))
                if i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') =>
            {
                // A raw string: r"…", r#"…"#.
                let mut hashes = 0;
                i += 1;
                while chars.get(i) == Some(&'#') {
                    hashes += 1;
                    i += 1;
                }
                if chars.get(i) != Some(&'"') {
                    out.push('r');
                    out.extend(std::iter::repeat_n('#', hashes));
                    continue;
                }
                i += 1;
                let closes = |at: usize| {
                    chars[at] == '"' && (1..=hashes).all(|h| chars.get(at + h) == Some(&'#'))
                };
                while i < chars.len() && !closes(i) {
                    out.push(blank(chars[i]));
                    i += 1;
                }
                i += 1 + hashes;
                out.push_str("\"\"");
            }
            ('"', _) => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        out.push(' ');
                        i += 1;
                    }
                    out.push(blank(chars[i]));
                    i += 1;
                }
                i += 1;
                out.push_str("\"\"");
            }
            ('\'', Some(next)) if next == '\\' || chars.get(i + 2) == Some(&'\'') => {
                // A character literal (a lifetime has no closing quote).
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("' '");
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// `code` up to its unit tests (`#[cfg(test)]` followed by `mod tests {`), which may use any module.
fn without_unit_tests(code: &str) -> String {
    let lines: Vec<&str> = code.lines().collect();
    let end = (0..lines.len())
        .find(|&n| {
            lines[n].trim() == "#[cfg(test)]"
                && lines[n + 1..]
                    .iter()
                    .find(|l| !l.trim().is_empty())
                    .is_some_and(|l| {
                        l.trim_start().starts_with("mod ") && l.trim_end().ends_with('{')
                    })
        })
        .unwrap_or(lines.len());
    lines[..end].join("\n")
}
