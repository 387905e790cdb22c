//! A PostgreSQL cluster of the run's own, for runs whose faults restart the
//! database: `initdb` into a temporary folder and `pg_ctl` on a free port
//! of 127.0.0.1, as the `postgres` user (the tools refuse root). The
//! shared server is never restarted. Stopped and removed when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, Context};

/// Where Debian puts PostgreSQL 15's server binaries.
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

pub struct OwnCluster {
    dir: tempfile::TempDir,
    pub port: u16,
    options: String,
}

fn tool(name: &str) -> PathBuf {
    Path::new(PG_BIN).join(name)
}

fn run(command: &mut Command) -> anyhow::Result<String> {
    let output = command.output().with_context(|| format!("{command:?}"))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    Err(anyhow!(
        "{command:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    ))
}

fn as_postgres(program: &Path) -> Command {
    let mut command = Command::new("runuser");
    command.args(["-u", "postgres", "--"]).arg(program);
    command
}

/// How the server is stopped: `fast` ends sessions cleanly (57P01),
/// `immediate` is a crash (recovery from the WAL at the next start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    Fast,
    Immediate,
}

impl OwnCluster {
    /// A new, running cluster with database `name`.
    pub fn start(name: &str) -> anyhow::Result<Self> {
        let uid: u32 = run(Command::new("id").args(["-u", "postgres"]))?
            .trim()
            .parse()
            .context("the uid of postgres")?;
        let dir = tempfile::Builder::new()
            .prefix("checker-cluster-")
            .tempdir()?;
        std::os::unix::fs::chown(dir.path(), Some(uid), None)?;
        run(as_postgres(&tool("initdb"))
            .args(["-A", "trust", "-U", "postgres", "-D"])
            .arg(dir.path().join("data")))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            dir.path().display()
        );
        let cluster = Self { dir, port, options };
        cluster.start_again()?;
        run(Command::new(tool("createdb"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
            .arg(name))?;
        Ok(cluster)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn stop(&self, mode: StopMode) -> anyhow::Result<()> {
        let mode = match mode {
            StopMode::Fast => "fast",
            StopMode::Immediate => "immediate",
        };
        run(as_postgres(&tool("pg_ctl"))
            .args(["-w", "-t", "60", "-D"])
            .arg(self.data())
            .args(["-m", mode, "stop"]))
        .map(drop)
    }

    /// Starts the server on the same port; returns once it accepts
    /// connections (`pg_ctl -w`).
    pub fn start_again(&self) -> anyhow::Result<()> {
        run(as_postgres(&tool("pg_ctl"))
            .args(["-w", "-t", "60", "-D"])
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .args(["-o", &self.options, "start"]))
        .map(drop)
    }

    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
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
