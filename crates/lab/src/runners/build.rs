//! Building the runner programs: `cargo build --release` for the Rust runners (with a build profile's flags, into
//! its own target directory), the `build.sh` of the runners in other languages, and where the last build put them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{RunnerSpec, Script, query_approaches};
use crate::build_profiles::BuildProfile;
use crate::error::{LabError, Result};

fn cargo() -> PathBuf {
    // Under `cargo run`, CARGO names the cargo that is running us: use the same toolchain.
    std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from)
}

fn manifest(root: &Path, spec: &RunnerSpec) -> Result<PathBuf> {
    let path = root.join(spec.manifest.unwrap_or("Cargo.toml"));
    if !path.is_file() {
        return Err(LabError::Runner {
            runner: spec.bin.to_owned(),
            reason: format!("its workspace {} is missing", path.display()),
        });
    }
    Ok(path)
}

/// The target directory cargo uses for the workspace at `root` (`CARGO_TARGET_DIR`, relative to the root, or
/// `<workspace>/target`).
fn target_root(root: &Path, manifest: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root.join(dir),
        None => manifest.parent().unwrap_or(root).join("target"),
    }
}

/// The main workspace's target directory, under which the build profiles' directories live.
fn workspace_target(root: &Path) -> PathBuf {
    target_root(root, &root.join("Cargo.toml"))
}

/// The `cargo build --release` command for one runner, with a build profile's flags and target directory.
fn build_command(
    root: &Path,
    manifest: &Path,
    spec: &RunnerSpec,
    profile: Option<(&BuildProfile, &str)>,
) -> Command {
    let mut command = Command::new(cargo());
    if let Some((profile, flags)) = profile {
        // An environment variable wins over `.cargo/config.toml`'s [env] (cargo does not override one that is
        // set, even to nothing), so `default` builds with rusqlite's flags untouched. Every profile except the
        // workspace's own gets a target directory of its own under the workspace's, shared by the runner
        // workspaces: switching profiles then never rebuilds another profile's SQLite.
        command.env("LIBSQLITE3_FLAGS", flags).env(
            "CARGO_TARGET_DIR",
            profile.target_dir(&workspace_target(root)),
        );
    }
    command
        // Cargo reads `.cargo/config.toml` from the working directory upwards, not from the manifest: building
        // from the runner's own workspace directory gives it the same configuration as `cd runners/x && cargo build`.
        .current_dir(manifest.parent().unwrap_or(root))
        .args([
            "build",
            "--release",
            "--message-format=json-render-diagnostics",
        ])
        .arg("--manifest-path")
        .arg(manifest);
    if spec.manifest.is_none() {
        // The main workspace has many packages; build only the runner's.
        command.args(["-p", spec.bin]);
    }
    if let Some((profile, _)) = profile
        && !profile.features.is_empty()
    {
        command.arg("--features").arg(profile.features.join(","));
    }
    command
        .args(["--bin", spec.bin])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // Human-readable compiler output goes straight to our stderr.
        .stderr(Stdio::inherit());
    command
}

/// `cargo build --release` for one runner (with a build profile's flags, if given); returns the executable cargo
/// reports.
pub(super) fn build(
    root: &Path,
    spec: &RunnerSpec,
    profile: Option<(&BuildProfile, &str)>,
) -> Result<PathBuf> {
    let fail = |reason: String| LabError::Runner {
        runner: spec.bin.to_owned(),
        reason,
    };
    let manifest = manifest(root, spec)?;
    match profile {
        Some((profile, flags)) => eprintln!(
            "Building {} (release, build profile {}: LIBSQLITE3_FLAGS=\"{flags}\") …",
            spec.bin, profile.name
        ),
        None => eprintln!("Building {} (release) …", spec.bin),
    }
    let mut command = build_command(root, &manifest, spec, profile);
    let mut child = command
        .spawn()
        .map_err(|e| fail(format!("cannot start cargo: {e}")))?;
    let mut executable = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if let Some(path) = artifact_executable(&line, spec.bin) {
                executable = Some(path);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| fail(format!("waiting for cargo: {e}")))?;
    if !status.success() {
        return Err(fail(format!(
            "`cargo build --release` failed ({status}); its output is above"
        )));
    }
    executable.ok_or_else(|| fail("cargo built no executable by that name".to_owned()))
}

/// A runner in another language: built by its script when `build` is set (its output goes to our stderr), then
/// asked for its approaches. The error is the reason its cells will fail with.
pub(super) fn script_runner(
    root: &Path,
    spec: &RunnerSpec,
    script: Script,
    build: bool,
) -> std::result::Result<(PathBuf, Vec<String>), String> {
    let dir = root.join(script.dir);
    let program = dir.join(script.program);
    let build_script = format!("{}/build.sh", script.dir);
    if build {
        eprintln!("Building {} (bash {build_script}) …", spec.bin);
        let output = Command::new("bash")
            .arg(&build_script)
            .current_dir(root)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot start bash {build_script}: {e}"))?;
        // Everything the script printed goes to stderr: stdout is the summary's.
        eprint!("{}", String::from_utf8_lossy(&output.stdout));
        let stderr = String::from_utf8_lossy(&output.stderr);
        eprint!("{stderr}");
        if !output.status.success() {
            let last = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message");
            return Err(format!(
                "`bash {build_script}` failed ({}): {}",
                output.status,
                last.trim()
            ));
        }
    }
    if !program.is_file() {
        return Err(format!(
            "not built at {} (run `bash {build_script}`, or drop --no-build)",
            program.display()
        ));
    }
    let provided = query_approaches(&program).map_err(|e| e.to_string())?;
    Ok((program, provided))
}

/// The `executable` of a `compiler-artifact` message for `bin`, if `line` is one.
fn artifact_executable(line: &str, bin: &str) -> Option<PathBuf> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    if message.get("reason")?.as_str()? != "compiler-artifact" {
        return None;
    }
    if message.get("target")?.get("name")?.as_str()? != bin {
        return None;
    }
    message.get("executable")?.as_str().map(PathBuf::from)
}

/// Where the last `cargo build --release` put a runner (honouring `CARGO_TARGET_DIR`), for the workspace build
/// or a build profile.
pub(super) fn prebuilt(
    root: &Path,
    spec: &RunnerSpec,
    profile: Option<&BuildProfile>,
) -> Result<PathBuf> {
    let manifest = manifest(root, spec)?;
    let target = match profile {
        Some(profile) => profile.target_dir(&workspace_target(root)),
        None => target_root(root, &manifest),
    };
    let path = target.join("release").join(spec.bin);
    if !path.is_file() {
        let how = match spec.manifest {
            Some(m) => format!("cargo build --release --manifest-path {m}"),
            None => format!("cargo build --release -p {}", spec.bin),
        };
        return Err(LabError::Runner {
            runner: spec.bin.to_owned(),
            reason: format!(
                "not built at {} (run `{how}`, or drop --no-build)",
                path.display()
            ),
        });
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::build_profiles;
    use crate::runners::RUNNERS;

    #[test]
    fn a_profile_build_sets_its_flags_and_its_own_target_directory() {
        let root = Path::new("/repo");
        let peer = &RUNNERS[1];
        let profile = build_profiles::find("default").unwrap();
        let manifest = root.join(peer.manifest.unwrap());
        let command = build_command(root, &manifest, peer, Some((&profile, "")));
        let envs: BTreeMap<String, String> = command
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(envs.get("LIBSQLITE3_FLAGS").map(String::as_str), Some(""));
        let target = PathBuf::from(&envs["CARGO_TARGET_DIR"]);
        assert!(
            target.ends_with("lab-profiles/default"),
            "{}",
            target.display()
        );
        let args: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "build",
                "--release",
                "--message-format=json-render-diagnostics",
                "--manifest-path",
                "/repo/runners/rusqlite040/Cargo.toml",
                "--bin",
                "runner-rusqlite040"
            ]
        );
        assert_eq!(
            command.get_current_dir(),
            Some(Path::new("/repo/runners/rusqlite040"))
        );

        // The workspace's own build: no flag, no target directory of its own, only the runner's package.
        let main = &RUNNERS[0];
        let command = build_command(root, &root.join("Cargo.toml"), main, None);
        assert_eq!(command.get_envs().count(), 0);
        let args: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.ends_with(&[
            "-p".to_owned(),
            "quicklite-runner".to_owned(),
            "--bin".to_owned(),
            "quicklite-runner".to_owned()
        ]));
    }

    #[test]
    fn the_executable_comes_from_cargo_s_artifact_message() {
        let line = r#"{"reason":"compiler-artifact","target":{"name":"runner-sqlx","kind":["bin"]},"executable":"/t/release/runner-sqlx"}"#;
        assert_eq!(
            artifact_executable(line, "runner-sqlx"),
            Some(PathBuf::from("/t/release/runner-sqlx"))
        );
        assert_eq!(artifact_executable(line, "quicklite-runner"), None);
        assert_eq!(artifact_executable("not json", "runner-sqlx"), None);
    }
}
