//! A PostgreSQL cluster of a test's own: `initdb` into a temporary folder and
//! `pg_ctl` on a free port of 127.0.0.1, run as the `postgres` user
//! (PostgreSQL's tools refuse root), stopped and removed when dropped. For
//! tests that stop, break or move a database: never the shared server that
//! the other tests use while they run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian puts PostgreSQL 15's server binaries.
pub(crate) const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

pub struct OwnCluster {
    dir: tempfile::TempDir,
    pub port: u16,
    /// The server options `start` was given, for a restart on the same port.
    options: String,
}

/// Why a cluster could not be had. Under `CI=true` that is a failure (the
/// machine is meant to have the binaries); elsewhere the test is skipped
/// with this message.
pub fn unavailable(reason: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        !ci,
        "an own PostgreSQL cluster is needed under CI=true: {reason}"
    );
    println!("SKIPPED: no PostgreSQL cluster of the test's own: {reason}");
}

pub(crate) fn tool(name: &str) -> PathBuf {
    Path::new(PG_BIN).join(name)
}

pub(crate) fn run(command: &mut Command) -> Result<String, String> {
    let output = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{command:?}: {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Runs `statements` through psql on `url`, one session.
pub fn psql(url: &str, statements: &[&str]) -> Result<String, String> {
    let mut command = Command::new(tool("psql"));
    command.args(["-q", "-v", "ON_ERROR_STOP=1", url]);
    for statement in statements {
        command.args(["-c", statement]);
    }
    run(&mut command)
}

/// `command` run as the `postgres` user.
pub(crate) fn as_postgres(program: &Path) -> Command {
    let mut command = Command::new("runuser");
    command.args(["-u", "postgres", "--"]).arg(program);
    command
}

impl OwnCluster {
    /// A new, running cluster, or why there is none.
    pub fn start() -> Result<Self, String> {
        if !tool("initdb").exists() || !tool("pg_ctl").exists() {
            return Err(format!("{PG_BIN}/initdb or pg_ctl is missing"));
        }
        let uid: u32 = run(Command::new("id").args(["-u", "postgres"]))?
            .trim()
            .parse()
            .map_err(|e| format!("the uid of postgres: {e}"))?;
        let dir = tempfile::Builder::new()
            .prefix("booking-cluster-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        std::os::unix::fs::chown(dir.path(), Some(uid), None).map_err(|e| e.to_string())?;
        let data = dir.path().join("data");
        run(as_postgres(&tool("initdb"))
            .args(["-A", "trust", "-U", "postgres", "-D"])
            .arg(&data))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            dir.path().display()
        );
        let cluster = Self { dir, port, options };
        cluster.start_again()?;
        Ok(cluster)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Stops the server as an operator's fast shutdown does (`pg_ctl stop
    /// -m fast`: sessions are terminated with 57P01), and waits until it is down.
    pub fn stop(&self) -> Result<(), String> {
        run(as_postgres(&tool("pg_ctl"))
            .args(["-w", "-t", "60", "-D"])
            .arg(self.data())
            .args(["-m", "fast", "stop"]))
        .map(drop)
    }

    /// Starts the server again on the same port and data directory; returns
    /// once it accepts connections (`pg_ctl -w`).
    pub fn start_again(&self) -> Result<(), String> {
        run(as_postgres(&tool("pg_ctl"))
            .args(["-w", "-t", "60", "-D"])
            .arg(self.data())
            .args(["-l"])
            .arg(self.dir.path().join("log"))
            .args(["-o", &self.options, "start"]))
        .map(drop)
    }

    /// Creates an empty database `name` in this cluster.
    pub fn create_database(&self, name: &str) -> Result<(), String> {
        run(Command::new(tool("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .arg(name))
        .map(drop)
    }

    /// The URL of database `name` in this cluster.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Copies database `from_url` into a new database `name` of this
    /// cluster, as an operator moving it would: `pg_dump | psql`.
    pub fn restore_from(&self, from_url: &str, name: &str) -> Result<(), String> {
        self.create_database(name)?;
        let dump = run(Command::new(tool("pg_dump")).args(["--no-owner", from_url]))?;
        let mut psql = Command::new(tool("psql"))
            .args(["-q", "-v", "ON_ERROR_STOP=1", &self.url(name)])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        {
            use std::io::Write;
            let stdin = psql.stdin.as_mut().ok_or("psql has no stdin")?;
            stdin
                .write_all(dump.as_bytes())
                .map_err(|e| e.to_string())?;
        }
        let output = psql.wait_with_output().map_err(|e| e.to_string())?;
        if !output.status.success() {
            return Err(format!(
                "psql restore: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(())
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = as_postgres(&tool("pg_ctl"))
            .args(["-D"])
            .arg(self.data())
            .args(["-m", "immediate", "stop"])
            .output();
    }
}
