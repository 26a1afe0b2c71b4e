//! The library's modules form layers, each importing only from the layers below it, and no two modules import
//! each other (directly or through others). This test reads `src/**` and fails on an import that goes up a layer
//! or closes a cycle. docs/design.md describes the layers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every top-level module of the library and its layer; a module may import from its own layer and the ones
/// with a smaller number.
const LAYERS: &[(&str, u8, &str)] = &[
    (
        "changes",
        0,
        "what each commit changed, told to subscribers",
    ),
    ("config", 0, "validated settings, QueueFull, Checkpointing"),
    ("control", 0, "Litestream's control socket"),
    ("cost", 0, "what each read's call site has cost lately"),
    ("de", 0, "rows deserialized into the caller's types (serde)"),
    ("error", 0, "the error type"),
    (
        "feed",
        0,
        "the change feed: its tables, triggers, cursor and retention",
    ),
    ("metrics", 0, "counters, histograms, snapshots"),
    ("permits", 0, "a budget of permits under a cap"),
    ("profile", 0, "PRAGMA profiles"),
    ("replica", 0, "read replicas: Litestream's VFS, positions"),
    ("setup", 0, "process-wide SQLite set-up"),
    ("sync", 0, "atomics, swapped for loom's in model checks"),
    ("util", 0, "lock, companion-file and thread helpers"),
    (
        "wal_frames",
        0,
        "the WAL's frame count, by a no-op checkpoint",
    ),
    (
        "wal_reset_bug",
        0,
        "which SQLite versions have the WAL-reset bug",
    ),
    ("queue", 1, "the bounded request queue"),
    ("inbox", 1, "a consumer's end of a queue"),
    ("reply", 1, "answers and relays"),
    (
        "gate",
        1,
        "answers held until object storage has their commits",
    ),
    ("request", 1, "requests and jobs"),
    (
        "engine",
        2,
        "SQLite work over connections: open, group, write, read, checkpoint",
    ),
    (
        "sched",
        3,
        "who runs the engine: a database's own threads, a registry's pool",
    ),
    ("backup", 4, "API: copies of a live database"),
    ("builder", 4, "API: options of a Database"),
    ("database", 4, "API: the Database handle"),
    (
        "litestream",
        4,
        "API: Litestream's types: its control socket, replicas, restores",
    ),
    ("prometheus", 4, "API: metrics for Prometheus"),
    ("registry", 4, "API: many databases on one pool"),
];

/// A module path relative to the crate root, e.g. `["engine", "write"]`; the root is `[]`.
type Module = Vec<String>;

struct Source {
    file: PathBuf,
    module: Module,
    /// The code, without comments and without the test modules at the bottom.
    code: String,
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&root, &mut files);
    files
        .into_iter()
        .map(|file| {
            let relative = file.strip_prefix(&root).unwrap().with_extension("");
            let mut module: Module = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            let text = std::fs::read_to_string(&file).unwrap();
            Source {
                file,
                module,
                code: code_of(&text),
            }
        })
        .collect()
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The code of a file: comments removed, and everything from a top-level `#[cfg(test)]` or
/// `#[cfg(all(test, …))]` module on (tests may reach anywhere).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let is_test_attr = line.starts_with("#[cfg(test)]") || line.starts_with("#[cfg(all(test");
        if is_test_attr && lines.peek().is_some_and(|next| next.starts_with("mod ")) {
            break;
        }
        let code = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Every path a file names: the paths of its `use` declarations (braces expanded) and the `crate::` paths in its
/// code, each as written (`crate::…`, `super::…`, `self::…` or a child module's name).
fn paths_named(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = find_use(rest) {
        let after = &rest[at..];
        let end = after.find(';').unwrap_or(after.len());
        let tree = normalize(&after[..end]);
        expand("", &tree, &mut paths);
        rest = &after[end..];
    }
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let tail = &rest[at..];
        let len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        paths.push(tail[..len].trim_end_matches(':').to_string());
        rest = &tail[len..];
    }
    paths
}

/// The start of the next `use` tree (just after `use `) in `code`.
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let at = from + at;
        let before = code[..at].trim_end_matches([' ', '\t']);
        let starts_item = before.is_empty()
            || before.ends_with('\n')
            || before.ends_with('}')
            || before.ends_with(';')
            || before.ends_with("pub")
            || before.ends_with(')');
        if starts_item {
            return Some(at + 4);
        }
        from = at + 4;
    }
    None
}

/// Expands a use tree such as `crate::a::{b,c::{d,self}}` into full paths.
fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let join = |tail: &str| {
        if prefix.is_empty() {
            tail.to_string()
        } else if tail == "self" {
            prefix.to_string()
        } else {
            format!("{prefix}::{tail}")
        }
    };
    match tree.find('{') {
        None => {
            let path = tree.split(" as ").next().unwrap_or(tree);
            out.push(join(path.trim().trim_end_matches("::*")));
        }
        Some(open) => {
            let head = tree[..open].trim_end_matches("::");
            let inner = &tree[open + 1..tree.rfind('}').unwrap()];
            let head = join(head);
            for part in split_top_level(inner) {
                let part = part.trim();
                if !part.is_empty() {
                    expand(&head, part, out);
                }
            }
        }
    }
}

/// A use tree on one line, with no spaces but those around `as`.
fn normalize(tree: &str) -> String {
    let words: Vec<&str> = tree.split_whitespace().collect();
    let mut out = String::new();
    for (i, word) in words.iter().enumerate() {
        let spaced = *word == "as" || words.get(i.wrapping_sub(1)) == Some(&"as");
        if spaced {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

fn split_top_level(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut parts) = (0, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// The module a path named in `from` resolves to (the longest prefix that is a module of the crate), or `None`
/// for another crate. Names the crate root re-exports resolve to the module they come from.
fn resolve(
    path: &str,
    from: &Source,
    modules: &BTreeSet<Module>,
    reexports: &BTreeMap<String, Module>,
) -> Option<Module> {
    let mut segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: Module = match segments.first().copied() {
        Some("crate") => {
            segments.remove(0);
            Vec::new()
        }
        Some("super") => {
            let mut base = from.module.clone();
            while segments.first() == Some(&"super") {
                segments.remove(0);
                base.pop();
            }
            base
        }
        Some("self") => {
            segments.remove(0);
            from.module.clone()
        }
        Some(first) => {
            let mut child = from.module.clone();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            from.module.clone()
        }
        None => return None,
    };
    if base.is_empty()
        && let Some(first) = segments.first()
        && let Some(module) = reexports.get(*first)
    {
        return Some(module.clone());
    }
    let mut found = None;
    for segment in segments {
        base.push(segment.to_string());
        if modules.contains(&base) {
            found = Some(base.clone());
        } else {
            break;
        }
    }
    found.filter(|m| !m.is_empty())
}

/// The crate root's re-exports: `pub use config::{Checkpointing, QueueFull};` maps each name to `config`.
fn reexports(root: &Source, modules: &BTreeSet<Module>) -> BTreeMap<String, Module> {
    let mut out = BTreeMap::new();
    for path in paths_named(&root.code) {
        let segments: Vec<&str> = path.split("::").collect();
        let Some((name, module)) = segments.split_last() else {
            continue;
        };
        let module: Module = module.iter().map(|s| s.to_string()).collect();
        if modules.contains(&module) {
            out.insert(name.to_string(), module);
        }
    }
    out
}

fn layer(module: &Module) -> (u8, &'static str) {
    let top = module.first().map(String::as_str).unwrap_or("");
    LAYERS
        .iter()
        .find(|(name, _, _)| *name == top)
        .map(|(name, layer, _)| (*layer, *name))
        .unwrap_or_else(|| panic!("module `{top}` is not in the layer table of tests/layers.rs"))
}

/// Every import between two modules of the crate: (from, to, the file and line that names it).
fn imports() -> Vec<(Module, Module, String)> {
    let sources = sources();
    let modules: BTreeSet<Module> = sources.iter().map(|s| s.module.clone()).collect();
    let root = sources.iter().find(|s| s.module.is_empty()).unwrap();
    let reexports = reexports(root, &modules);
    let mut out = Vec::new();
    for source in sources.iter().filter(|s| !s.module.is_empty()) {
        for path in paths_named(&source.code) {
            let Some(to) = resolve(&path, source, &modules, &reexports) else {
                continue;
            };
            if to != source.module {
                let line = source
                    .code
                    .lines()
                    .position(|l| l.contains(path.rsplit("::").next().unwrap_or(&path)))
                    .map_or(0, |i| i + 1);
                let file = source
                    .file
                    .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                    .unwrap_or(&source.file);
                let place = format!("{}:{line} ({path})", file.display());
                out.push((source.module.clone(), to, place));
            }
        }
    }
    out
}

#[test]
fn no_module_imports_from_a_higher_layer() {
    let mut violations = BTreeSet::new();
    for (from, to, place) in imports() {
        let (from_layer, from_top) = layer(&from);
        let (to_layer, to_top) = layer(&to);
        if to_layer > from_layer {
            violations.insert(format!(
                "{place}: `{}` (layer {from_layer}, {from_top}) imports `{}` (layer {to_layer}, {to_top})",
                from.join("::"),
                to.join("::")
            ));
        }
    }
    assert!(
        violations.is_empty(),
        "imports that go up a layer:\n{}",
        violations.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn no_modules_import_each_other() {
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, to, _) in imports() {
        edges.entry(from).or_default().insert(to);
    }
    // Depth-first search for a cycle, reporting the first one found.
    fn visit(
        node: &Module,
        edges: &BTreeMap<Module, BTreeSet<Module>>,
        path: &mut Vec<Module>,
        done: &mut BTreeSet<Module>,
    ) -> Option<Vec<Module>> {
        if let Some(at) = path.iter().position(|m| m == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.clone());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        if let Some(cycle) = visit(node, &edges, &mut Vec::new(), &mut done) {
            let cycle: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            panic!("modules that import each other: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_checker_sees_imports_in_every_form() {
    let code = code_of(
        "use crate::a::{b, c::{self, D}};\nuse crate::k::Task as T;\npub(crate) use child::X;\nfn f() { crate::e::g(); } // crate::h\n\
         #[cfg(test)]\nmod tests { use crate::z; }\n",
    );
    let paths = paths_named(&code);
    for expected in [
        "crate::a::b",
        "crate::a::c",
        "crate::a::c::D",
        "crate::k::Task",
        "child::X",
        "crate::e::g",
    ] {
        assert!(
            paths.iter().any(|p| p == expected),
            "{expected} in {paths:?}"
        );
    }
    assert!(
        !paths.iter().any(|p| p == "crate::h" || p == "crate::z"),
        "comments and tests are skipped: {paths:?}"
    );
    // A leaf naming the API layer is caught.
    let leaf = Source {
        file: PathBuf::from("src/util.rs"),
        module: vec!["util".into()],
        code: code_of("use crate::database::Database;"),
    };
    let modules: BTreeSet<Module> = [vec!["util".to_string()], vec!["database".to_string()]]
        .into_iter()
        .collect();
    let to = resolve(
        &paths_named(&leaf.code)[0],
        &leaf,
        &modules,
        &BTreeMap::new(),
    )
    .unwrap();
    assert!(layer(&to).0 > layer(&leaf.module).0);
}
