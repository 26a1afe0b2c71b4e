//! What the modules of a crate use of each other, read from its source: every path into the crate a file names
//! outside its unit tests — `crate::x`, `super::x`, `self::x` and a child module's `x::` — resolved to the module it
//! reaches. Comments, strings and the unit tests at the bottom of a file (`#[cfg(test)] mod tests {`) are left out.
//!
//! Shared by the crates' import tests: lab-core's `tests/layers.rs` declares it as a module, the lab's and the
//! command line's `tests/import_circles.rs` include it by path.

#![allow(dead_code)] // Each test uses a part of it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One path into the crate that a file names.
#[derive(Debug)]
pub struct Use {
    /// Its line, from 1.
    pub line: usize,
    /// The longest prefix of the path that is a known module; `None` when no prefix is (an item of the root).
    pub target: Option<String>,
    /// Whether the path starts at the crate's root (`crate::…`, or `super::` climbing to it).
    pub from_root: bool,
    /// The path's segments after its start (`crate::`, `super::`, …).
    pub segments: Vec<String>,
}

/// The modules defined under `src` (every `.rs` file but the root), each with its file, in the order of their files.
pub fn modules(src: &Path) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .filter_map(|file| {
            let module = module_of(file.strip_prefix(src).unwrap())?;
            Some((module, file))
        })
        .collect()
}

/// The paths into the crate that `text`, the file that defines `module`, names; `known` tells which paths are
/// modules.
pub fn uses(module: &str, text: &str, known: &dyn Fn(&str) -> bool) -> Vec<Use> {
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
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].join("::"))
                .find(|candidate| known(candidate));
            found.push(Use {
                line,
                target,
                from_root: base.is_empty(),
                segments,
            });
        }
    }
    found
}

/// The first circle of modules under `src` that use each other, directly or through others (`a → b → a`); `None`
/// when there is none. A module's uses of its ancestors and descendants do not count: a parent declares and
/// re-exports its children, which may use what it defines (a trait in `export/mod.rs`, its exporters in its
/// children), and the two are read as one.
pub fn circle(src: &Path) -> Option<Vec<String>> {
    let modules = modules(src);
    let names: BTreeSet<String> = modules.iter().map(|(m, _)| m.clone()).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        for used in uses(module, &text, &|m| names.contains(m)) {
            if let Some(target) = used.target
                && !related(module, &target)
            {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    circle_in(&edges)
}

/// Whether one of `a` and `b` is the other or contains it (`doctor` and `doctor::rules`).
fn related(a: &str, b: &str) -> bool {
    let within = |inner: &str, outer: &str| {
        inner == outer
            || inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with("::"))
    };
    within(a, b) || within(b, a)
}

/// The first circle in a graph of modules, found depth first: its modules, the first one again at the end.
pub fn circle_in(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, edges, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
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
