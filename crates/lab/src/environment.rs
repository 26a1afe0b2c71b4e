//! The environment section of the reports: the machine, each runner's SQLite, and the PRAGMAs per profile.
//!
//! Every cell carries its own [`Environment`](quicklite_lab_core::Environment); this folds them into what a
//! reader needs once per report, keeping every distinct value so a difference between runners stays visible.

use std::collections::BTreeMap;

use quicklite_lab_core::CellResult;

/// The environment of a whole run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnvSummary {
    /// Distinct CPU models with their logical CPU counts (`Model (2 CPUs)`).
    pub cpus: Vec<String>,
    /// Distinct kernel releases.
    pub kernels: Vec<String>,
    /// Earliest and latest cell start, RFC 3339.
    pub dates: Option<(String, String)>,
    /// One entry per runner program.
    pub runners: Vec<RunnerEnv>,
    /// One entry per PRAGMA profile.
    pub profiles: Vec<ProfilePragmas>,
    /// Distinct `(approach, report)` pairs: how each approach's runner says memory statistics were set.
    pub memstatus: Vec<(String, String)>,
}

/// What one runner program linked and used.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunnerEnv {
    /// Program and version.
    pub runner: String,
    /// Approaches it measured.
    pub approaches: Vec<String>,
    /// Distinct `sqlite_version()` values (one, unless something is very wrong).
    pub sqlite_versions: Vec<String>,
    /// `PRAGMA compile_options`.
    pub compile_options: Vec<String>,
    /// Crate versions under test.
    pub crate_versions: BTreeMap<String, String>,
    /// Distinct open-file limits it ran with (`RLIMIT_NOFILE`, after raising the soft limit to the hard one).
    pub open_files_limits: Vec<u64>,
}

/// The PRAGMAs read back under one profile, grouped by approaches that agree.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfilePragmas {
    /// Profile name.
    pub profile: String,
    /// `(approaches, pragmas)`: approaches with identical PRAGMAs share a group.
    pub groups: Vec<(Vec<String>, BTreeMap<String, String>)>,
}

impl EnvSummary {
    /// Folds the environments of all results that have one (failed cells may not).
    pub fn new(results: &[CellResult]) -> Self {
        let mut out = Self::default();
        let mut dates: Vec<&str> = Vec::new();
        for result in results {
            let env = &result.env;
            if env.runner.is_empty() && env.sqlite_version.is_empty() {
                continue;
            }
            if !env.cpu_model.is_empty() {
                push_unique(
                    &mut out.cpus,
                    format!("{} ({} CPUs)", env.cpu_model, env.cpus),
                );
            }
            if !env.kernel.is_empty() {
                push_unique(&mut out.kernels, env.kernel.clone());
            }
            if !env.date.is_empty() {
                dates.push(&env.date);
            }
            let approach = &result.cell.approach;
            // The same program built under another SQLite build profile links another SQLite: its own entry.
            let name = if result.cell.build_profile == quicklite_lab_core::DEFAULT_BUILD_PROFILE {
                env.runner.clone()
            } else {
                format!("{} · build {}", env.runner, result.cell.build_profile)
            };
            let runner = match out.runners.iter_mut().position(|r| r.runner == name) {
                Some(i) => &mut out.runners[i],
                None => {
                    out.runners.push(RunnerEnv {
                        runner: name,
                        ..RunnerEnv::default()
                    });
                    let last = out.runners.len() - 1;
                    &mut out.runners[last]
                }
            };
            push_unique(&mut runner.approaches, approach.clone());
            push_unique(&mut runner.sqlite_versions, env.sqlite_version.clone());
            for option in &env.compile_options {
                push_unique(&mut runner.compile_options, option.clone());
            }
            runner.crate_versions.extend(env.crate_versions.clone());
            if let Some(limit) = env.open_files_limit
                && !runner.open_files_limits.contains(&limit)
            {
                runner.open_files_limits.push(limit);
            }
            let memstatus = (approach.clone(), env.memstatus.clone());
            if !env.memstatus.is_empty() && !out.memstatus.contains(&memstatus) {
                out.memstatus.push(memstatus);
            }
            add_pragmas(
                &mut out.profiles,
                &result.cell.profile,
                approach,
                &env.pragmas,
            );
        }
        dates.sort_unstable();
        if let (Some(first), Some(last)) = (dates.first(), dates.last()) {
            out.dates = Some(((*first).to_owned(), (*last).to_owned()));
        }
        out
    }
}

impl RunnerEnv {
    /// The open-file limits as text: `20000`, `1024, 20000`, or empty when no result reported one.
    pub fn open_files_text(&self) -> String {
        self.open_files_limits
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn add_pragmas(
    profiles: &mut Vec<ProfilePragmas>,
    profile: &str,
    approach: &str,
    pragmas: &BTreeMap<String, String>,
) {
    if pragmas.is_empty() {
        return;
    }
    let entry = match profiles.iter().position(|p| p.profile == profile) {
        Some(i) => &mut profiles[i],
        None => {
            profiles.push(ProfilePragmas {
                profile: profile.to_owned(),
                groups: Vec::new(),
            });
            let last = profiles.len() - 1;
            &mut profiles[last]
        }
    };
    // An approach already listed under other PRAGMAs (e.g. a synchronous override) joins each group it matches.
    match entry.groups.iter_mut().find(|(_, p)| p == pragmas) {
        Some((approaches, _)) => push_unique(approaches, approach.to_owned()),
        None => entry
            .groups
            .push((vec![approach.to_owned()], pragmas.clone())),
    }
}

fn push_unique(list: &mut Vec<String>, value: String) {
    if !list.contains(&value) {
        list.push(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn runners_and_profiles_are_folded_once() {
        let env = EnvSummary::new(&fixtures::results());
        assert_eq!(env.runners.len(), 2);
        assert_eq!(env.runners[0].open_files_limits, [1_024]);
        assert_eq!(env.cpus, ["Test CPU @ 3.0GHz (2 CPUs)"]);
        // `server` everywhere, and `sqlite-default` for one ORM cell.
        let profiles: Vec<&str> = env.profiles.iter().map(|p| p.profile.as_str()).collect();
        assert_eq!(profiles, ["server", "sqlite-default"]);
        assert_eq!(env.profiles[0].groups.len(), 1);
    }
}
