//! `--with-postgres`: a throwaway PostgreSQL server on loopback for the run, started and stopped by
//! `scripts/postgres.sh` (which installs Debian's package when it is missing).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// A running server; dropping it stops the server and removes its files.
pub struct Server {
    /// `postgres://postgres@127.0.0.1:PORT/lab`.
    pub url: String,
    /// The script that started it.
    script: PathBuf,
    /// Its data directory's parent.
    dir: PathBuf,
}

impl Server {
    /// Starts a server with the repository's script, on a free loopback port.
    pub fn start(root: &Path) -> anyhow::Result<Self> {
        let script = root.join("scripts/postgres.sh");
        if !script.is_file() {
            bail!("cannot start PostgreSQL: {} is missing", script.display());
        }
        // A free port: bound, read, released (the server binds it a moment later).
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("cannot find a free loopback port")?
            .port();
        let dir = std::env::temp_dir().join(format!("quicklite-postgres-{}", std::process::id()));
        eprintln!("Starting PostgreSQL on 127.0.0.1:{port} …");
        let output = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(&dir)
            .arg(port.to_string())
            .stderr(std::process::Stdio::inherit())
            .output()
            .with_context(|| format!("cannot run {}", script.display()))?;
        let server = Self {
            url: String::from_utf8_lossy(&output.stdout).trim().to_owned(),
            script,
            dir,
        };
        if !output.status.success() || !server.url.starts_with("postgres://") {
            bail!(
                "scripts/postgres.sh start failed ({}); its output is above",
                output.status
            );
        }
        Ok(server)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        eprintln!("Stopping PostgreSQL …");
        let stopped = Command::new("bash")
            .arg(&self.script)
            .arg("stop")
            .arg(&self.dir)
            .status();
        if !matches!(stopped, Ok(status) if status.success()) {
            eprintln!(
                "could not stop the PostgreSQL server in {} ({stopped:?})",
                self.dir.display()
            );
        }
    }
}
