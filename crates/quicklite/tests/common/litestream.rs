//! Litestream and an S3-compatible server (moto) on loopback, for the tests that replicate through them.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The bucket every replica goes to (each database under a path of its own).
pub const BUCKET: &str = "quicklite";

/// The programs a test needs.
pub struct Tools {
    pub litestream: PathBuf,
    /// Litestream's VFS, when the test asked for it.
    pub vfs: Option<PathBuf>,
}

impl Tools {
    /// `litestream` (`QUICKLITE_LITESTREAM`, or where `scripts/install-litestream.sh` builds it), moto's server,
    /// and with `vfs` Litestream's VFS (`QUICKLITE_LITESTREAM_VFS`, or where `scripts/install-litestream-vfs.sh`
    /// builds it). Missing, the test is skipped (`None`), unless `QUICKLITE_LITESTREAM_REQUIRED` is set (as
    /// `scripts/test.sh` sets it): then it fails.
    pub fn require(vfs: bool) -> Option<Tools> {
        match Tools::find(vfs) {
            Ok(tools) => Some(tools),
            Err(missing) if std::env::var_os("QUICKLITE_LITESTREAM_REQUIRED").is_some() => {
                panic!("QUICKLITE_LITESTREAM_REQUIRED is set, but {missing}")
            }
            Err(missing) => {
                eprintln!("skipped: {missing}");
                None
            }
        }
    }

    fn find(vfs: bool) -> Result<Tools, String> {
        let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools");
        let litestream = std::env::var_os("QUICKLITE_LITESTREAM")
            .map(PathBuf::from)
            .unwrap_or_else(|| tools.join("litestream/litestream"));
        if !litestream.is_file() {
            return Err(format!(
                "no litestream at {} (run scripts/install-litestream.sh, or set QUICKLITE_LITESTREAM)",
                litestream.display()
            ));
        }
        let vfs = match vfs {
            false => None,
            true => {
                let path = std::env::var_os("QUICKLITE_LITESTREAM_VFS")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| tools.join("litestream-vfs/v0.5.18/litestream-vfs.so"));
                if !path.is_file() {
                    return Err(format!(
                        "no Litestream VFS at {} (run scripts/install-litestream-vfs.sh, or set \
                         QUICKLITE_LITESTREAM_VFS)",
                        path.display()
                    ));
                }
                Some(path)
            }
        };
        let moto = Command::new("python3")
            .args(["-c", "import moto.server"])
            .output()
            .map_err(|e| format!("python3: {e}"))?;
        if !moto.status.success() {
            return Err("no moto server (pip install 'moto[server]')".into());
        }
        Ok(Tools { litestream, vfs })
    }

    /// `litestream`, with what it needs here: Litestream 0.5.18 fails to set up its S3 client when `AWS_CA_BUNDLE`
    /// is set ("unable to add custom RootCAs HTTPClient"), and the server on loopback needs no certificate.
    pub fn litestream(&self) -> Command {
        let mut command = Command::new(&self.litestream);
        command.env_remove("AWS_CA_BUNDLE");
        command
    }

    /// `litestream replicate` with the configuration at `config`, its output dropped.
    pub fn replicate(&self, config: &Path) -> Process {
        Process(
            self.litestream()
                .arg("replicate")
                .arg("-config")
                .arg(config)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
}

/// A child process killed (SIGKILL) when dropped, so that a failing test leaves nothing running.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid`: `STOP` to the S3 server makes object storage stop answering
/// (connections are still accepted, by the kernel), `CONT` brings it back.
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// A free port on loopback.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts moto's S3 server on loopback and creates [`BUCKET`]; returns it and its endpoint.
pub fn start_s3() -> (Process, String) {
    start_s3_logging(None)
}

/// [`start_s3`], with the server's log of requests (one line each: method, path and query, status) appended to
/// `log` if given.
pub fn start_s3_logging(log: Option<&Path>) -> (Process, String) {
    let port = free_port();
    let stderr = match log {
        Some(log) => std::process::Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap(),
        ),
        None => std::process::Stdio::null(),
    };
    let server = Process(
        Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("python3 -m moto.server"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut response = String::new();
    loop {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            // S3's CreateBucket: `PUT /<bucket>` (moto does not check signatures). A server still starting may
            // accept the connection and reset it: then it is tried again, until the deadline.
            response.clear();
            let sent = write!(
                stream,
                "PUT /{BUCKET} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            if sent.is_ok() && stream.read_to_string(&mut response).is_ok() && !response.is_empty()
            {
                break;
            }
        }
        assert!(Instant::now() < deadline, "moto's server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    (server, format!("http://127.0.0.1:{port}"))
}

/// One database's entry in Litestream's configuration: replicated to [`BUCKET`] under `name`, synced every 100 ms.
pub fn config_entry(db: &Path, name: &str, endpoint: &str) -> String {
    format!(
        "  - path: {db}\n    monitor-interval: 100ms\n    replica:\n      type: s3\n      bucket: {BUCKET}\n      \
         path: {name}\n      endpoint: {endpoint}\n      region: us-east-1\n      force-path-style: true\n      \
         access-key-id: test\n      secret-access-key: test\n      sync-interval: 100ms\n",
        db = db.display(),
    )
}

/// Waits (up to a minute) until Litestream, started with its control socket at `socket`, has opened it.
pub fn until_listening(socket: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "Litestream opened no control socket at {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The URL Litestream's VFS reads the replica of `name` from.
pub fn replica_url(name: &str, endpoint: &str) -> String {
    format!("s3://{BUCKET}/{name}?endpoint={endpoint}&region=us-east-1&force-path-style=true")
}
