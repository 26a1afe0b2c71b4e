//! The layers of lab-core: a module may use its own layer and the ones below, never a higher one.
//!
//! The driver, its client tasks and the `http` workload once imported each other in a circle, so none of them could
//! be read, changed or tested without the others. This test keeps the modules in layers: it reads every file under
//! `src/` and checks each path into the crate outside the file's unit tests — `crate::x`, `super::x`, `self::x`
//! and a child module's `x::` — against [`MODULES`]. `lib.rs` is the root: it declares and re-exports everything.
//! Inside the crate, items are named through the module that defines them (`crate::cell::Cell`, not the root's
//! re-export `crate::Cell`), so that every path shows the layer it reaches. The layers let the modules of one layer
//! use each other, so a second test checks that no two modules use each other, directly or through others (the
//! approaches' names and their runner programs once did). The reading of the paths is `imports/`, which the lab's
//! and the command line's tests share.

mod imports;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

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
    ("think", Primitives),                // `held-tx`'s awaited think, as long as a blocking one
    ("cell", Vocabulary),                 // the cell a runner is asked to measure
    ("data", Vocabulary),                 // seeded rows, new rows, ledger blocks and jobs
    ("knobs", Vocabulary),                // the cell's SQLite settings, parsed once
    ("machine", Vocabulary),              // the machine fields of a result
    ("orm", Vocabulary),                  // the `orm` suite's operations and seed
    ("result", Vocabulary),               // what a runner reports for one cell
    ("workload", Vocabulary),             // the workloads: names, schema, seed data
    ("approach_name", Vocabulary),        // the approaches by name, and what the lab knows of each
    ("runner_program", Vocabulary),       // the runner programs, and what building each needs
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
    ("driver::held_tx", Workloads),       // `held-tx`: transactions thinking between statements, then the log checked
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
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    // Every file but lib.rs, the root.
    for (module, file) in imports::modules(&src) {
        let relative = file.strip_prefix(&src).unwrap();
        if !layers.contains_key(module.as_str()) {
            problems.push(format!(
                "src/{}: module `{module}` has no layer: add it to MODULES in tests/layers.rs",
                relative.display()
            ));
            continue;
        }
        seen.push(module.clone());
        let text = std::fs::read_to_string(&file).unwrap();
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

#[test]
fn no_two_modules_use_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if let Some(circle) = imports::circle(&src) {
        panic!("modules that use each other: {}", circle.join(" -> "));
    }
}

#[test]
fn two_modules_of_one_layer_that_use_each_other_are_a_circle() {
    // The circle lab-core once had: each module's uses, as the checker reads them from its code.
    let sources = [
        (
            "approach_name",
            "use crate::runner_program::RunnerProgram;\n",
        ),
        (
            "runner_program",
            "fn f() { crate::approach_name::ApproachName::ALL; }\n",
        ),
    ];
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in sources {
        let known = |m: &str| MODULES.iter().any(|(name, _)| *name == m);
        let targets = imports::uses(module, text, &known)
            .into_iter()
            .filter_map(|used| used.target);
        edges.entry(module.to_owned()).or_default().extend(targets);
    }
    assert_eq!(
        imports::circle_in(&edges),
        Some(vec![
            "approach_name".to_owned(),
            "runner_program".to_owned(),
            "approach_name".to_owned()
        ])
    );
    edges.remove("runner_program");
    assert_eq!(imports::circle_in(&edges), None);
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

/// The paths of `text` (the file `file`, defining `module`) that reach a higher layer or name no module.
fn violations(file: &str, module: &str, text: &str, layers: &BTreeMap<&str, Layer>) -> Vec<String> {
    let own = layers[module];
    let mut found = Vec::new();
    for used in imports::uses(module, text, &|m| layers.contains_key(m)) {
        let line = used.line;
        match used.target {
            Some(target) if layers[target.as_str()] > own => found.push(format!(
                "{file}:{line}: `{module}` (layer {own:?}) uses `{target}` (layer {:?}), a higher layer",
                layers[target.as_str()]
            )),
            Some(_) => {}
            None if used.from_root => found.push(format!(
                "{file}:{line}: `crate::{}` names no module of the layer table: use the path of the module \
                 that defines it",
                used.segments.join("::")
            )),
            None => {}
        }
    }
    found
}
