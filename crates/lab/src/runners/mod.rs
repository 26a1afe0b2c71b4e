//! Which program measures which approach ([`Runners`]), found among the programs given or the lab's own runners
//! (built by [`build()`] when asked).
//!
//! The Rust approaches live in four runner programs because cargo allows one `links = "sqlite3"` crate per
//! workspace: the main workspace's `quicklite-runner` (rusqlite 0.41), and three peer workspaces under `runners/`
//! for the crates that pin other SQLite bindings (see docs/design.md, "Lab architecture"); Turso, which links no
//! SQLite but brings an engine of its own to compile, has a fourth. The drivers of other
//! languages (Go, Node) have runners of their own under `runners/`, each built by its `build.sh`; when a toolchain
//! is missing, their cells fail with the reason and the run goes on. Every runner answers `--approaches` with the
//! JSON array of approaches it supports, which is checked before anything runs.
//!
//! Each build profile ([`crate::build_profiles`]) other than the workspace's own gets its runners built with the
//! profile's `LIBSQLITE3_FLAGS` into `<target>/lab-profiles/<profile>`; cargo's own caching makes the second run
//! free.

mod build;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use quicklite_lab_core::{ApproachName, RunnerProgram};

use crate::build_profiles;
use crate::error::{LabError, Result};
use build::{build, prebuilt, script_runner};

/// A runner program the lab knows how to build.
#[derive(Debug, Clone, Copy)]
struct RunnerSpec {
    /// Binary (and target) name.
    bin: &'static str,
    /// Manifest of its own workspace, relative to the repository root; `None` for the main workspace (and for a
    /// runner built by a script).
    manifest: Option<&'static str>,
    /// How a runner in another language is built; `None` for a Rust runner, which cargo builds.
    script: Option<Script>,
    /// The program it is: the approaches it provides are those whose [`ApproachName::runner`] it is.
    program: RunnerProgram,
    /// Cargo features it declares for build profiles (`+name` in the profile list).
    features: &'static [&'static str],
}

const RUNNERS: &[RunnerSpec] = &[
    RunnerSpec {
        bin: "quicklite-runner",
        manifest: None,
        script: None,
        program: RunnerProgram::Quicklite,
        features: &["sqlcipher"],
    },
    RunnerSpec {
        bin: "runner-rusqlite040",
        manifest: Some("runners/rusqlite040/Cargo.toml"),
        script: None,
        program: RunnerProgram::Rusqlite040,
        features: &[],
    },
    RunnerSpec {
        bin: "runner-sqlx",
        manifest: Some("runners/sqlx/Cargo.toml"),
        script: None,
        program: RunnerProgram::Sqlx,
        features: &[],
    },
    RunnerSpec {
        bin: "runner-trailbase",
        manifest: Some("runners/trailbase/Cargo.toml"),
        script: None,
        program: RunnerProgram::Trailbase,
        features: &[],
    },
    RunnerSpec {
        bin: "runner-turso",
        manifest: Some("runners/turso/Cargo.toml"),
        script: None,
        program: RunnerProgram::Turso,
        features: &[],
    },
    RunnerSpec {
        bin: "runner-go",
        manifest: None,
        script: Some(Script {
            dir: "runners/go",
            program: "target/runner-go",
        }),
        program: RunnerProgram::Go,
        features: &[],
    },
    RunnerSpec {
        bin: "runner-node",
        manifest: None,
        script: Some(Script {
            dir: "runners/node",
            program: "runner-node",
        }),
        program: RunnerProgram::Node,
        features: &[],
    },
];

/// A runner in another language: `bash <dir>/build.sh` (run from the repository root) builds it, or fails
/// saying which toolchain is missing, and leaves the program at `<dir>/<program>`.
#[derive(Debug, Clone, Copy)]
struct Script {
    /// Its directory, relative to the repository root.
    dir: &'static str,
    /// The program, relative to `dir`.
    program: &'static str,
}

/// How to find runner programs.
#[derive(Debug, Clone, Default)]
pub struct RunnerSetup {
    /// Programs to use as they are; each is asked `--approaches`, and what it names it provides, first come
    /// first served, for every build profile (their results still record their own compile options). By default,
    /// none: the lab's own runners are used.
    pub programs: Vec<PathBuf>,
    /// Build the lab's runners in release mode before running (`cargo build --release`). By default, `false`
    /// here; the CLI turns it on unless `--no-build` is given. Without it, the last release build is used.
    pub build: bool,
    /// The repository root. By default, found from the working directory or from where the lab was compiled.
    pub repo_root: Option<PathBuf>,
}

/// (Approach, build profile) → runner program.
#[derive(Debug, Clone, Default)]
pub struct Runners {
    /// The workspace build's programs, by approach.
    programs: BTreeMap<ApproachName, PathBuf>,
    /// Other build profiles' programs, by (approach, profile).
    profiled: BTreeMap<(ApproachName, String), PathBuf>,
    /// Programs given as they are, by approach: they serve every profile.
    given: BTreeMap<ApproachName, PathBuf>,
    /// Approaches whose runner could not be built or does not provide them here, with the reason: their cells
    /// fail saying so (a toolchain of another language may be missing on this machine).
    unavailable: BTreeMap<ApproachName, String>,
}

impl Runners {
    /// Finds (and, if asked, builds) a runner for every approach in `approaches` under every build profile in
    /// `profiles`. Build output goes to this process's stderr, never to stdout where the summary goes.
    pub fn resolve_profiles(
        approaches: &[ApproachName],
        profiles: &[String],
        setup: &RunnerSetup,
    ) -> Result<Self> {
        let mut workspace_build = false;
        for name in profiles {
            workspace_build |= build_profiles::find(name)?.is_workspace_build();
        }
        // The workspace's own runners are built (or looked for) only when a profile uses them.
        let mut runners = if workspace_build {
            Self::resolve(approaches, setup)?
        } else {
            Self::resolve(&[], setup)?
        };
        for name in profiles {
            let profile = build_profiles::find(name)?;
            if profile.is_workspace_build() {
                continue;
            }
            let missing: Vec<ApproachName> = approaches
                .iter()
                .filter(|a| !runners.given.contains_key(*a))
                .copied()
                .collect();
            if missing.is_empty() {
                continue;
            }
            let root = match &setup.repo_root {
                Some(root) => root.clone(),
                None => find_repo_root()?,
            };
            let flags = profile.expanded_flags(&build_profiles::read_workspace_flags(&root)?);
            // Runners in other languages link their own SQLite: they measure the workspace's profile only.
            for spec in RUNNERS.iter().filter(|s| s.script.is_none()) {
                let wanted: Vec<ApproachName> = missing
                    .iter()
                    .copied()
                    .filter(|a| a.runner() == spec.program)
                    .collect();
                // A runner without the profile's features does not measure it: its cells fail, naming why.
                let lacking: Vec<&String> = profile
                    .features
                    .iter()
                    .filter(|f| !spec.features.contains(&f.as_str()))
                    .collect();
                if wanted.is_empty() || !lacking.is_empty() {
                    continue;
                }
                let program = if setup.build {
                    build(&root, spec, Some((&profile, &flags)))?
                } else {
                    prebuilt(&root, spec, Some(&profile))?
                };
                for approach in wanted {
                    runners
                        .profiled
                        .insert((approach, profile.name.clone()), program.clone());
                }
            }
        }
        Ok(runners)
    }

    /// Finds (and, if asked, builds) a runner for every approach in `approaches`, for the workspace's own build
    /// profile. Build output goes to this process's stderr, never to stdout where the summary goes.
    pub fn resolve(approaches: &[ApproachName], setup: &RunnerSetup) -> Result<Self> {
        let mut programs = BTreeMap::new();
        for program in &setup.programs {
            // A name the lab does not know cannot be asked for: it is left out.
            for approach in query_approaches(program)?
                .iter()
                .filter_map(|name| name.parse::<ApproachName>().ok())
            {
                programs.entry(approach).or_insert_with(|| program.clone());
            }
        }
        let missing: Vec<ApproachName> = approaches
            .iter()
            .copied()
            .filter(|a| !programs.contains_key(a))
            .collect();
        let given = programs.clone();
        if missing.is_empty() {
            return Ok(Self {
                programs,
                given,
                ..Self::default()
            });
        }
        let mut unavailable = BTreeMap::new();
        let root = match &setup.repo_root {
            Some(root) => root.clone(),
            None => find_repo_root()?,
        };
        for spec in RUNNERS {
            let wanted: Vec<ApproachName> = missing
                .iter()
                .copied()
                .filter(|a| a.runner() == spec.program)
                .collect();
            if wanted.is_empty() {
                continue;
            }
            if let Some(script) = spec.script {
                match script_runner(&root, spec, script, setup.build) {
                    Ok((program, provided)) => {
                        for approach in wanted {
                            if provided.iter().any(|name| *name == approach) {
                                programs.insert(approach, program.clone());
                            } else {
                                unavailable.insert(
                                    approach,
                                    format!(
                                        "{} does not provide it on this machine (it provides: {})",
                                        spec.bin,
                                        provided.join(", ")
                                    ),
                                );
                            }
                        }
                    }
                    Err(reason) => {
                        eprintln!("{}: {reason}; its cells will fail saying so", spec.bin);
                        for approach in wanted {
                            unavailable.insert(approach, reason.clone());
                        }
                    }
                }
                continue;
            }
            let program = if setup.build {
                build(&root, spec, None)
            } else {
                prebuilt(&root, spec, None)
            };
            let program = match program {
                Ok(program) => program,
                // A runner that needs more than the Rust toolchain (libclang) fails its own cells, not the run.
                Err(e) if spec.program.needs_more_than_rust() => {
                    let reason = format!(
                        "{e} (its build needs more than the Rust toolchain; scripts/install-test-deps.sh installs it)"
                    );
                    eprintln!("{}: {reason}; its cells will fail saying so", spec.bin);
                    for approach in wanted {
                        unavailable.insert(approach, reason.clone());
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let provided = query_approaches(&program)?;
            for approach in wanted {
                if !provided.iter().any(|name| *name == approach) {
                    return Err(LabError::NoRunner {
                        approach: approach.to_string(),
                        hint: format!(" ({} provides only: {})", spec.bin, provided.join(", ")),
                    });
                }
                programs.insert(approach, program.clone());
            }
        }
        for approach in approaches {
            if !programs.contains_key(approach) && !unavailable.contains_key(approach) {
                return Err(LabError::NoRunner {
                    approach: approach.to_string(),
                    hint: String::new(),
                });
            }
        }
        Ok(Self {
            programs,
            given,
            profiled: BTreeMap::new(),
            unavailable,
        })
    }

    /// Why `approach` has no runner on this machine, if its runner could not be built or does not provide it.
    pub fn unavailable(&self, approach: ApproachName) -> Option<&str> {
        self.unavailable.get(&approach).map(String::as_str)
    }

    /// The program that measures `approach` under `build_profile`.
    pub fn program(&self, approach: ApproachName, build_profile: &str) -> Option<&Path> {
        if let Some(program) = self.given.get(&approach) {
            return Some(program);
        }
        let workspace = build_profiles::find(build_profile).is_ok_and(|p| p.is_workspace_build());
        if workspace {
            return self.programs.get(&approach).map(PathBuf::as_path);
        }
        self.profiled
            .get(&(approach, build_profile.to_owned()))
            .map(PathBuf::as_path)
    }
}

/// Runs `program --approaches` and parses its JSON array.
pub fn query_approaches(program: &Path) -> Result<Vec<String>> {
    let fail = |reason: String| LabError::Runner {
        runner: program.display().to_string(),
        reason,
    };
    let output = Command::new(program)
        .arg("--approaches")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| fail(format!("cannot start it: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(fail(format!(
            "`--approaches` exited with {}: {}",
            output.status,
            stderr.trim()
        )));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        fail(format!(
            "`--approaches` did not print a JSON array of names: {e}"
        ))
    })
}

/// Looks upwards from the working directory for the repository, then at the source location this crate was
/// compiled from (so `cargo run` from anywhere inside a clone works, and so does the installed binary on the
/// machine that built it).
pub fn find_repo_root() -> Result<PathBuf> {
    let is_root = |dir: &Path| {
        dir.join("crates/lab-core/Cargo.toml").is_file() && dir.join("Cargo.toml").is_file()
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    if let Some(root) = cwd.ancestors().find(|d| is_root(d)) {
        return Ok(root.to_owned());
    }
    let compiled = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if is_root(&compiled) {
        return Ok(compiled.canonicalize().unwrap_or(compiled));
    }
    Err(LabError::RepoRootNotFound { cwd, compiled })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_approach_has_exactly_one_runner() {
        for approach in ApproachName::ALL {
            let owners = RUNNERS
                .iter()
                .filter(|s| s.program == approach.runner())
                .count();
            assert_eq!(owners, 1, "{approach}");
        }
    }

    #[test]
    fn a_run_of_another_profile_alone_looks_only_for_that_profile_s_runners() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("Cargo.toml"), "").unwrap();
        std::fs::create_dir_all(root.path().join(".cargo")).unwrap();
        std::fs::write(
            root.path().join(".cargo/config.toml"),
            "[env]\nLIBSQLITE3_FLAGS = \"-DSQLITE_DQS=0\"\n",
        )
        .unwrap();
        let setup = RunnerSetup {
            build: false,
            repo_root: Some(root.path().to_owned()),
            ..RunnerSetup::default()
        };
        let outcome =
            Runners::resolve_profiles(&[ApproachName::Quicklite], &["default".to_owned()], &setup);
        // Not the workspace build's target/release: the default profile's own directory, found (when
        // CARGO_TARGET_DIR points at a target where it was built) or named as missing.
        let looked_at = match outcome {
            Ok(runners) => {
                assert_eq!(runners.program(ApproachName::Quicklite, "tuned"), None);
                runners
                    .program(ApproachName::Quicklite, "default")
                    .unwrap()
                    .display()
                    .to_string()
            }
            Err(err) => err.to_string(),
        };
        assert!(
            looked_at.contains("lab-profiles/default/release/quicklite-runner"),
            "{looked_at}"
        );
    }

    #[test]
    fn a_runner_in_another_language_that_cannot_be_built_fails_its_cells_not_the_run() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let go = root.path().join("runners/go");
        let node = root.path().join("runners/node");
        std::fs::create_dir_all(&go).unwrap();
        std::fs::create_dir_all(&node).unwrap();
        // No toolchain for Go on this imaginary machine.
        std::fs::write(
            go.join("build.sh"),
            "echo 'building' ; echo 'runner-go: go is not installed (apt-get install golang)' >&2; exit 1\n",
        )
        .unwrap();
        // Node builds, and its node has no node:sqlite.
        std::fs::write(
            node.join("built"),
            "#!/bin/sh\necho '[\"node-better-sqlite3\"]'\n",
        )
        .unwrap();
        std::fs::write(
            node.join("build.sh"),
            "cp runners/node/built runners/node/runner-node && chmod +x runners/node/runner-node\n",
        )
        .unwrap();
        let setup = RunnerSetup {
            build: true,
            repo_root: Some(root.path().to_owned()),
            ..RunnerSetup::default()
        };
        let wanted = [
            ApproachName::GoMattn,
            ApproachName::NodeBetterSqlite3,
            ApproachName::NodeSqlite,
        ];
        let runners = Runners::resolve(&wanted, &setup).unwrap();
        assert_eq!(runners.program(ApproachName::GoMattn, "tuned"), None);
        let reason = runners.unavailable(ApproachName::GoMattn).unwrap();
        assert!(
            reason.contains("bash runners/go/build.sh` failed")
                && reason.contains("go is not installed"),
            "{reason}"
        );
        assert_eq!(
            runners.program(ApproachName::NodeBetterSqlite3, "tuned"),
            Some(node.join("runner-node").as_path())
        );
        assert!(
            runners
                .program(ApproachName::NodeBetterSqlite3, "default")
                .is_none()
        );
        assert_eq!(
            runners.unavailable(ApproachName::NodeSqlite),
            Some(
                "runner-node does not provide it on this machine (it provides: node-better-sqlite3)"
            )
        );
        let mode = std::fs::metadata(node.join("runner-node"))
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(mode & 0o111, 0);
        // Without a build, a missing program says how to build it.
        let unbuilt = Runners::resolve(
            &wanted[..1],
            &RunnerSetup {
                build: false,
                ..setup
            },
        )
        .unwrap();
        assert!(
            unbuilt
                .unavailable(ApproachName::GoMattn)
                .unwrap()
                .contains("run `bash runners/go/build.sh`, or drop --no-build"),
        );
    }

    #[test]
    fn a_runner_that_needs_more_than_rust_fails_its_own_cells_not_the_run() {
        // trailbase-sqlite's runner is not built here; any other missing runner stops the run.
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("runners/trailbase");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[package]\n").unwrap();
        let setup = RunnerSetup {
            build: false,
            repo_root: Some(root.path().to_owned()),
            ..RunnerSetup::default()
        };
        let runners = Runners::resolve(&[ApproachName::TrailbaseSqlite], &setup).unwrap();
        let reason = runners.unavailable(ApproachName::TrailbaseSqlite).unwrap();
        assert!(
            reason.contains("not built at") && reason.contains("install-test-deps"),
            "{reason}"
        );
        let err = Runners::resolve(&[ApproachName::Sqlx], &setup).unwrap_err();
        assert!(err.to_string().contains("runner-sqlx"), "{err}");
    }
}
