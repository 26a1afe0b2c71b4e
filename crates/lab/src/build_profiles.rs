//! SQLite build profiles: the `LIBSQLITE3_FLAGS` a runner is compiled with, listed in one file
//! (`crates/lab/build-profiles.txt`, compiled into the lab).
//!
//! A library cannot set its dependents' build flags (docs/design.md), so the lab measures what they are worth: each
//! profile's runners are built with its flags into a target directory of their own and the cells name the
//! profile they ran under. `tuned` is the workspace's own build and needs no extra compile.

use std::path::{Path, PathBuf};

use crate::error::{LabError, Result};

/// The profile list shipped with the lab.
pub const PROFILES_FILE: &str = include_str!("../build-profiles.txt");

/// What stands for the workspace's own `LIBSQLITE3_FLAGS` in the profile list.
const WORKSPACE: &str = "@workspace";

/// One build profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildProfile {
    /// Its name, as in cells and on the command line.
    pub name: String,
    /// The flags as written in the list (`@workspace` not yet expanded).
    pub flags: String,
    /// Cargo features of the runner the profile builds with (`+name` in the list): only runners that declare
    /// them measure the profile.
    pub features: Vec<String>,
}

impl BuildProfile {
    /// Whether this is the workspace's own build (flags exactly `@workspace`): built and found like any
    /// `cargo build --release`, in the usual target directory.
    pub fn is_workspace_build(&self) -> bool {
        self.flags.trim() == WORKSPACE && self.features.is_empty()
    }

    /// The `LIBSQLITE3_FLAGS` to build with, `@workspace` replaced by `workspace_flags`.
    pub fn expanded_flags(&self, workspace_flags: &str) -> String {
        self.flags
            .split_whitespace()
            .map(|token| {
                if token == WORKSPACE {
                    workspace_flags
                } else {
                    token
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Where this profile's runners are built: `<target>/lab-profiles/<name>`.
    pub fn target_dir(&self, target: &Path) -> PathBuf {
        target.join("lab-profiles").join(&self.name)
    }
}

/// Parses a profile list: `name: flags` per line; blank lines and `#` comments are skipped.
pub fn parse(text: &str) -> Result<Vec<BuildProfile>> {
    let mut out: Vec<BuildProfile> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |reason: String| LabError::InvalidOption {
            option: "build profile list",
            reason: format!("line {}: {reason}", index + 1),
        };
        let (name, flags) = line
            .split_once(':')
            .ok_or_else(|| bad(format!("`{line}` is not `name: flags`")))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(bad(format!(
                "profile name `{name}` must be letters, digits, `-` or `_`"
            )));
        }
        let mut features = Vec::new();
        let mut sqlite_flags = Vec::new();
        for token in flags.split_whitespace() {
            if let Some(feature) = token.strip_prefix('+') {
                if feature.is_empty() {
                    return Err(bad(
                        "`+` must be followed by a cargo feature name".to_owned()
                    ));
                }
                features.push(feature.to_owned());
                continue;
            }
            sqlite_flags.push(token);
            let known = token == WORKSPACE
                || token.starts_with("-DSQLITE_")
                || token.starts_with("-USQLITE_")
                || token.starts_with("SQLITE_");
            if !known {
                return Err(bad(format!(
                    "`{token}` is not a flag libsqlite3-sys understands (SQLITE_X=v, -DSQLITE_X, -USQLITE_X or \
                     {WORKSPACE}) nor a runner feature (+name)"
                )));
            }
        }
        if out.iter().any(|p| p.name == name) {
            return Err(bad(format!("profile `{name}` is listed twice")));
        }
        out.push(BuildProfile {
            name: name.to_owned(),
            flags: sqlite_flags.join(" "),
            features,
        });
    }
    Ok(out)
}

/// The profiles shipped with the lab.
pub fn shipped() -> Vec<BuildProfile> {
    // The shipped list is parsed by a test; a broken edit fails there, not here.
    parse(PROFILES_FILE).unwrap_or_default()
}

/// The profile called `name`, or an error listing the known ones.
pub fn find(name: &str) -> Result<BuildProfile> {
    let profiles = shipped();
    profiles
        .iter()
        .find(|p| p.name == name)
        .cloned()
        .ok_or_else(|| LabError::InvalidOption {
            option: "--build-profiles",
            reason: format!(
                "unknown profile `{name}` (valid: {}; the list is crates/lab/build-profiles.txt)",
                profiles
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

/// The `LIBSQLITE3_FLAGS` value of a `.cargo/config.toml` (`LIBSQLITE3_FLAGS = "…"` under `[env]`), if any.
pub fn workspace_flags(config_toml: &str) -> Option<String> {
    config_toml.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        if key.trim() != "LIBSQLITE3_FLAGS" {
            return None;
        }
        let value = value.trim();
        let value = value.strip_prefix('"')?.strip_suffix('"')?;
        Some(value.to_owned())
    })
}

/// The workspace's `LIBSQLITE3_FLAGS`, read from `<root>/.cargo/config.toml`.
pub fn read_workspace_flags(root: &Path) -> Result<String> {
    let path = root.join(".cargo/config.toml");
    let text = std::fs::read_to_string(&path).map_err(|source| LabError::Io {
        action: "reading",
        path: path.clone(),
        source,
    })?;
    workspace_flags(&text).ok_or_else(|| LabError::InvalidOption {
        option: "build profile list",
        reason: format!("{} sets no LIBSQLITE3_FLAGS for @workspace", path.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_list_parses_with_default_tuned_and_threadsafe2() {
        let profiles = parse(PROFILES_FILE).unwrap();
        let names: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["default", "tuned", "threadsafe2", "sqlcipher"]);
        assert_eq!(
            profiles[0].flags, "",
            "default leaves rusqlite's flags alone"
        );
        assert!(profiles[1].is_workspace_build());
        assert!(!profiles[2].is_workspace_build());
        assert_eq!(
            profiles[2].expanded_flags("-DSQLITE_DQS=0"),
            "-DSQLITE_DQS=0 -USQLITE_THREADSAFE -DSQLITE_THREADSAFE=2"
        );
        assert_eq!(
            profiles[2].target_dir(Path::new("/t")),
            PathBuf::from("/t/lab-profiles/threadsafe2")
        );
        // The workspace's flags with a runner feature: a build of its own, not the workspace's.
        assert_eq!(profiles[3].flags, "@workspace");
        assert_eq!(profiles[3].features, ["sqlcipher"]);
        assert!(!profiles[3].is_workspace_build());
    }

    #[test]
    fn tuned_is_the_workspace_s_own_flags() {
        let config = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../.cargo/config.toml"
        ))
        .unwrap();
        let flags = workspace_flags(&config).unwrap();
        assert!(flags.contains("-DSQLITE_DEFAULT_MEMSTATUS=0"), "{flags}");
        assert_eq!(find("tuned").unwrap().expanded_flags(&flags), flags);
    }

    #[test]
    fn bad_lists_are_refused_with_the_line() {
        for (text, expected) in [
            (
                "fast -DSQLITE_X",
                "line 1: `fast -DSQLITE_X` is not `name: flags`",
            ),
            ("# c\n\nfast: -O3", "line 3: `-O3` is not a flag"),
            ("enc: @workspace +", "line 1: `+` must be followed"),
            ("a b: SQLITE_X=1", "profile name `a b`"),
            ("x:\nx: SQLITE_Y=1", "line 2: profile `x` is listed twice"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
        let err = find("fastest").unwrap_err().to_string();
        assert!(
            err.contains("unknown profile `fastest` (valid: default, tuned, threadsafe2"),
            "{err}"
        );
        assert_eq!(workspace_flags("[env]\nOTHER = \"x\"\n"), None);
    }
}
