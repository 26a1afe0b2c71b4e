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
    /// Fewest and most nanoseconds of the cross-core round trips measured before and after the cells.
    pub core_round_trips: Option<(f64, f64)>,
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
    /// Distinct allocators behind its `malloc`, as it reports them (none when it does not).
    pub allocators: Vec<String>,
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
            for ns in [env.core_round_trip_before_ns, env.core_round_trip_after_ns]
                .into_iter()
                .flatten()
            {
                out.core_round_trips = Some(match out.core_round_trips {
                    Some((low, high)) => (low.min(ns), high.max(ns)),
                    None => (ns, ns),
                });
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
            if let Some(allocator) = &env.allocator {
                push_unique(&mut runner.allocators, allocator.clone());
            }
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

impl EnvSummary {
    /// The cross-core round trips as a sentence for the environment section, with a warning when they moved
    /// during the run; `None` when no cell measured one.
    pub fn round_trip_text(&self) -> Option<String> {
        let (low, high) = self.core_round_trips?;
        let range = if high > 1.5 * low {
            format!("{low:.0}–{high:.0} ns")
        } else {
            format!("{low:.0}–{high:.0} ns, steady")
        };
        let mut text = format!(
            "{range} (a cache line from the first CPU to the second and back, measured before and after each cell)"
        );
        if high > 1.5 * low {
            text.push_str(
                ": the CPUs moved during the run (a virtual machine's host moves them where it likes). Every \
                 hand-off between threads costs more when the round trip is long, so compare rows whose round \
                 trips agree (the `core round trip` column).",
            );
        }
        Some(text)
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

    #[test]
    fn each_runner_lists_the_allocators_it_reported() {
        let mut results = fixtures::results();
        let env = EnvSummary::new(&results);
        assert_eq!(env.runners[0].allocators, ["the C library's malloc"]);
        let first = env.runners[0].runner.clone();
        let preloaded = "jemalloc (/usr/lib/libjemalloc.so.2)";
        results[0].env.allocator = Some(preloaded.to_owned());
        let env = EnvSummary::new(&results);
        let runner = env.runners.iter().find(|r| r.runner == first).unwrap();
        assert_eq!(runner.allocators, [preloaded, "the C library's malloc"]);
        // A runner that does not report one (another language's) lists none.
        for result in &mut results {
            result.env.allocator = None;
        }
        assert!(
            EnvSummary::new(&results)
                .runners
                .iter()
                .all(|r| r.allocators.is_empty())
        );
    }

    #[test]
    fn round_trips_are_folded_into_a_range_with_a_warning_when_they_moved() {
        let mut results = fixtures::results();
        let env = EnvSummary::new(&results);
        assert_eq!(env.core_round_trips, Some((64.5, 71.0)));
        let steady = env.round_trip_text().unwrap();
        assert!(steady.starts_with("64–71 ns, steady"), "{steady}");
        assert!(!steady.contains("moved"), "{steady}");

        results[1].env.core_round_trip_after_ns = Some(352.0);
        results[2].env.core_round_trip_before_ns = None;
        let moved = EnvSummary::new(&results).round_trip_text().unwrap();
        assert!(moved.starts_with("64–352 ns ("), "{moved}");
        assert!(moved.contains("the CPUs moved during the run"), "{moved}");

        for result in &mut results {
            result.env.core_round_trip_before_ns = None;
            result.env.core_round_trip_after_ns = None;
        }
        assert_eq!(EnvSummary::new(&results).round_trip_text(), None);
    }
}
