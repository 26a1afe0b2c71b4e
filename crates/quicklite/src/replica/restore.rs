//! Tenants restored from their replicas with the `litestream` program, and told apart from a copy written elsewhere.

use std::path::{Path, PathBuf};

use super::{Position, state};

/// Where a [`Registry`](crate::Registry) finds a tenant it does not have on local disk: restored from the replica
/// Litestream keeps of it, before its first open. Given to
/// [`RegistryBuilder::restore_missing`](crate::RegistryBuilder::restore_missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    program: PathBuf,
    url: String,
}

impl Restore {
    /// Restores with the `litestream` program at `program` from the replica at `url`, a Litestream replica URL in
    /// which `{name}` stands for the tenant's name (`s3://bucket/tenants/{name}`, with `?endpoint=…` for an
    /// S3-compatible server). The program finds credentials as Litestream does (`AWS_ACCESS_KEY_ID`, …).
    pub fn litestream(program: impl Into<PathBuf>, url: impl Into<String>) -> Restore {
        Restore {
            program: program.into(),
            url: url.into(),
        }
    }

    /// Checks the URL names the tenant somewhere.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.url.contains("{name}") {
            Ok(())
        } else {
            Err(format!(
                "the restore URL {} does not say where a tenant's name goes ({{name}})",
                self.url
            ))
        }
    }

    /// The last transaction the replica of tenant `name` holds; `None` if it has none. Asks `litestream ltx`.
    pub(crate) fn replica_position(&self, name: &str) -> Result<Option<Position>, String> {
        let url = self.url.replace("{name}", name);
        let out = self.run("ltx", &["-json", "-level", "all"], &url)?;
        let files: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("`litestream ltx` of {url} answered what is not its JSON: {e}"))?;
        files
            .iter()
            .map(|file| {
                file.get("max_txid")
                    .and_then(serde_json::Value::as_str)
                    .and_then(|txid| u64::from_str_radix(txid, 16).ok())
                    .map(Position)
                    .ok_or_else(|| {
                        format!("`litestream ltx` of {url}: a file without its max_txid: {file}")
                    })
            })
            .try_fold(None, |max, position| Ok(max.max(Some(position?))))
    }

    /// Restores tenant `name` into the new file `into`; `false` if the replica has no such database (`into` is then
    /// not created). Blocks until `litestream restore` exits.
    pub(crate) fn restore(&self, name: &str, into: &Path) -> Result<bool, String> {
        let url = self.url.replace("{name}", name);
        self.run(
            "restore",
            &[
                "-if-replica-exists".as_ref(),
                "-o".as_ref(),
                into.as_os_str(),
            ],
            &url,
        )?;
        Ok(into.exists())
    }

    /// Whether the replica of tenant `name` as of transaction `at` holds other pages than the transactions
    /// Litestream recorded on this machine for the file `db`, up to `at`, wrote: another machine wrote transactions
    /// under the same numbers. `false` if Litestream keeps none of them here any more (the replica compacted them:
    /// they were this machine's). Restores the replica as of `at` beside `db` to compare, then removes it; blocks.
    pub(crate) fn diverged(&self, name: &str, db: &Path, at: Position) -> Result<bool, String> {
        let Some(written) = state::written(db, at, state::KEPT_PAGES_MAX_BYTES)? else {
            return Ok(false);
        };
        let dir = db.parent().unwrap_or(Path::new("."));
        let scratch = tempfile::Builder::new()
            .prefix(".comparing-")
            .tempdir_in(dir)
            .map_err(|e| format!("a directory to compare in, in {}: {e}", dir.display()))?;
        let replica = scratch.path().join("replica.db");
        let url = self.url.replace("{name}", name);
        self.run(
            "restore",
            &[
                "-txid".as_ref(),
                at.to_string().as_ref(),
                "-o".as_ref(),
                replica.as_os_str(),
            ],
            &url,
        )?;
        written
            .differs_from(&replica)
            .map_err(|e| format!("{name} restored as of {at}: {e}"))
    }

    /// Runs `litestream <command> <args…> <url>` and returns what it printed; an error names the command, the URL
    /// and what Litestream said.
    fn run<A: AsRef<std::ffi::OsStr>>(
        &self,
        command: &str,
        args: &[A],
        url: &str,
    ) -> Result<std::process::Output, String> {
        let out = std::process::Command::new(&self.program)
            .arg(command)
            .args(args)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("could not run {}: {e}", self.program.display()))?;
        if !out.status.success() {
            return Err(format!(
                "`litestream {command}` of {url} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(out)
    }
}
