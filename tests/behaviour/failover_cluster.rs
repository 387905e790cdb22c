//! A pg_auto_failover cluster of a test's own: one monitor and two data
//! nodes (a primary and its standby) on free ports of 127.0.0.1, all in one
//! temporary folder, run as the `postgres` user (`pg_autoctl` refuses root).
//! For tests of what the service does when its database fails over: a
//! planned switchover, a crashed primary, all hosts gone. Everything it
//! started is killed and removed when it is dropped, also when a test panics.
//!
//! Needs Debian's `pg-auto-failover-cli` (`pg_autoctl`, 2.0) and
//! `postgresql-15-auto-failover` (the monitor's extension). What the code
//! below relies on was found by hand with those versions:
//!
//! - `pg_autoctl create monitor|postgres` initialises, registers and stops
//!   again; `pg_autoctl run` is the long-running service. Between the two we
//!   can edit `postgresql.conf` and the keeper's settings before anything
//!   runs with them. (`create ... --run` exists, but leaves no such moment.)
//! - The second node's `create` blocks until the first node's keeper runs
//!   (it waits for a primary to copy with `pg_basebackup`), so the first
//!   node's `run` is started before the second node is created. The node
//!   registered first becomes the primary: after `start`, node 0.
//! - Each `pg_autoctl run` restarts its Postgres at once when it stops, so a
//!   crash is a SIGKILL of the keeper's process group (its postmaster is in
//!   that group) and not `pg_ctl stop`: that waits 60 s for a server the
//!   keeper has already started again, and fails.
//! - Postgres's children (backends, walsenders, and the monitor's health
//!   check worker, which outlives a killed postmaster for good) each run in
//!   a session of their own, so killing the group leaves them behind. All of
//!   them have their working directory in a data directory of ours (the
//!   keepers have theirs in the temporary folder), which is how they are
//!   found and killed.
//! - pg_auto_failover puts synchronous replication on as soon as the standby
//!   is `secondary` (`synchronous_standby_names = 'ANY 1
//!   (pgautofailover_standby_N)'`, formation `number_sync_standbys = 0`):
//!   while the standby is down, commits on the primary wait until the
//!   monitor has noticed and switched the primary to `wait_primary` (5.7 s
//!   measured with the settings below).
//!
//! Timings measured on a 2-core machine: `start` 10-15 s; a planned
//! failover takes writes on the other node after 1.5 s, and
//! `perform_failover` returns after 2.5-3.3 s; a crashed primary's standby
//! takes writes 16 s after the kill (5 s unhealthy timeout, 10 s demote
//! timeout, 1 s of keeper loops).
//!
//! Every method blocks (polls of 200 ms, commands of seconds): from an async
//! test whose service runs on the same runtime, call them through
//! `tokio::task::spawn_blocking`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::cluster::{as_postgres, run, tool, PG_BIN};

/// pg_auto_failover's formation; the nodes are its group 0.
const FORMATION: &str = "default";

/// How often a wait asks again.
const POLL: Duration = Duration::from_millis(200);

/// The first line of what `start` appends to each `postgresql.conf`: it
/// marks a file that already has it (the standby's is a copy of the
/// primary's, made by `pg_basebackup`).
const MARKER: &str =
    "# Settings of a test's own failover cluster (tests/behaviour/failover_cluster.rs)";

/// For every server of the cluster. pg_auto_failover sizes shared_buffers
/// to a quarter of the machine's memory (6 GB here), for each of three
/// servers on one test machine. fsync is off because tests kill processes,
/// never the machine: the page cache survives every crash they make.
const SERVER_SETTINGS: &str = "shared_buffers = '32MB'\nfsync = off\n";

/// The monitor's failure detection, shortened for tests (defaults in
/// parentheses) while keeping pg_auto_failover's order: an isolated old
/// primary stops taking writes well before its standby starts to.
///
/// - A node is unhealthy once its keeper has not reported for 5 s
///   (`node_considered_unhealthy_timeout`, 20 s) and the monitor's own
///   health check of it fails. Keepers report every second: 5 s is five
///   missed reports, not a slow one.
/// - Health checks every 1 s (`health_check_period`, 5 s), connect timeout
///   2 s (`health_check_timeout`, 5 s), a failed one retried
///   `health_check_max_retries` (2, kept) times 0.5 s apart
///   (`health_check_retry_delay`, 2 s): a dead node's check fails within
///   about 2 s, inside the 5 s above. 2 s to connect, not 1 s, so that a
///   busy machine does not fail a healthy node's check.
/// - Then the monitor waits up to 10 s (`primary_demote_timeout`, 30 s) for
///   the old primary to report itself demoted before the standby is
///   promoted. A dead primary never reports, so a crash costs the full
///   10 s; a planned failover, where it reports, does not wait.
///
/// `startup_grace_period` (10 s from the monitor's start without failover)
/// is left alone: the monitor starts about 5 s into `start`, so it only
/// delays a crash made in the first seconds after `start` returns.
const MONITOR_SETTINGS: &str = "\
pgautofailover.node_considered_unhealthy_timeout = 5000
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 2000
pgautofailover.health_check_retry_delay = 500
pgautofailover.primary_demote_timeout = 10000
";

/// The keepers' `timeout.network_partition_timeout` (20 s), in seconds: a
/// primary that reaches neither the monitor nor its standby for this long
/// stops its Postgres. It stops at most 5 s after it lost the monitor,
/// while the monitor gives the standby writes no sooner than 5 s
/// (unhealthy) + 10 s (demote timeout) after the primary's last report: the
/// old primary is down about 10 s before the new one takes writes. It must
/// stay below `primary_demote_timeout`, as pg_auto_failover's defaults do.
const NETWORK_PARTITION_TIMEOUT_S: &str = "5";

/// Where each node stands according to the monitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// The state the node's keeper last reported (`primary`, `secondary`,
    /// `wait_primary`, `catchingup`, `draining`, `demoted`, ...).
    pub reported: String,
    /// The state the monitor wants it in.
    pub assigned: String,
    /// The monitor's last health check: 1 good, 0 bad, -1 not yet known.
    pub health: i32,
}

pub struct FailoverCluster {
    /// Held for its Drop, which removes the folder (after ours).
    _dir: tempfile::TempDir,
    /// The folder with its symbolic links resolved, as `/proc/*/cwd` and
    /// `postmaster.pid` name it; every path given to pg_autoctl is under it.
    root: PathBuf,
    autoctl: PathBuf,
    database: String,
    pub monitor_port: u16,
    pub ports: [u16; 2],
    /// `pg_autoctl run` of the monitor and of each node, each the leader of
    /// a process group of its own; `None` once killed. The keepers are
    /// behind a lock so that a test can share the cluster (`Arc`) with the
    /// blocking task that kills a node.
    monitor: Option<Child>,
    keepers: Mutex<[Option<Child>; 2]>,
}

impl FailoverCluster {
    /// A running cluster whose node 0 is the primary and node 1 its
    /// streaming standby, with an empty database `database` (a plain
    /// identifier) that takes writes through `url()`; or why there is none.
    pub fn start(database: &str) -> Result<Self, String> {
        let autoctl = find_pg_autoctl()?;
        let extension = Path::new(PG_BIN).join("../lib/pgautofailover.so");
        if !extension.exists() {
            return Err(format!(
                "{} is missing (package postgresql-15-auto-failover)",
                extension.display()
            ));
        }
        let uid: u32 = run(Command::new("id").args(["-u", "postgres"]))?
            .trim()
            .parse()
            .map_err(|e| format!("the uid of postgres: {e}"))?;
        let dir = tempfile::Builder::new()
            .prefix("booking-failover-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let root = dir.path().canonicalize().map_err(|e| e.to_string())?;
        // pg_autoctl keeps its pid files in $XDG_RUNTIME_DIR only if that
        // exists; otherwise in /tmp/pg_autoctl, outside our folder.
        std::fs::create_dir(root.join("run")).map_err(|e| e.to_string())?;
        for path in [root.clone(), root.join("run")] {
            std::os::unix::fs::chown(&path, Some(uid), None).map_err(|e| e.to_string())?;
        }
        let [monitor_port, port0, port1] = free_ports()?;
        // From here on, a failed step leaves the cleaning to Drop.
        let mut cluster = Self {
            _dir: dir,
            root,
            autoctl,
            database: database.to_owned(),
            monitor_port,
            ports: [port0, port1],
            monitor: None,
            keepers: Mutex::new([None, None]),
        };
        cluster.create_monitor()?;
        cluster.monitor = Some(cluster.spawn_run("monitor")?);
        cluster.wait_for_monitor(Duration::from_secs(30))?;
        for node in 0..2 {
            cluster.create_node(node)?;
            let keeper = cluster.spawn_run(&node_name(node))?;
            cluster.keepers()[node] = Some(keeper);
        }
        cluster.wait_for_primary_and_secondary(Duration::from_secs(60))?;
        // A temporary table needs a server that takes writes, and leaves
        // nothing behind.
        query(
            &cluster.url(),
            "CREATE TEMPORARY TABLE failover_cluster_probe (x int)",
        )?;
        Ok(cluster)
    }

    /// The URL the service is given: both nodes, node 0 first, and libpq's
    /// `target_session_attrs=read-write` to pick whichever takes writes.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{}?target_session_attrs=read-write",
            self.ports[0], self.ports[1], self.database
        )
    }

    /// The URL of node 0 or 1 alone, whatever its role.
    pub fn node_url(&self, node: usize) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{}",
            self.ports[node], self.database
        )
    }

    /// The monitor's database, as the keepers reach it.
    pub fn monitor_url(&self) -> String {
        format!(
            "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable",
            self.monitor_port
        )
    }

    /// Both nodes as the monitor sees them now, by node index.
    pub fn states(&self) -> Result<[NodeState; 2], String> {
        let rows = query(
            &format!("{}&connect_timeout=5", self.monitor_url()),
            &format!(
                "SELECT nodeport, reportedstate, goalstate, health \
                 FROM pgautofailover.node WHERE formationid = '{FORMATION}' ORDER BY nodeid"
            ),
        )?;
        let mut found: [Option<NodeState>; 2] = [None, None];
        for row in rows.lines().filter(|row| !row.is_empty()) {
            let fields: Vec<&str> = row.split('|').collect();
            let [port, reported, assigned, health] = fields[..] else {
                return Err(format!("the monitor's node table: {row:?}"));
            };
            let port: u16 = port
                .parse()
                .map_err(|e| format!("the monitor's node table: {row:?}: {e}"))?;
            let node = self
                .ports
                .iter()
                .position(|p| *p == port)
                .ok_or_else(|| format!("the monitor knows a node on port {port}"))?;
            found[node] = Some(NodeState {
                reported: reported.to_owned(),
                assigned: assigned.to_owned(),
                health: health.parse().unwrap_or(-1),
            });
        }
        if let [Some(first), Some(second)] = &found {
            return Ok([first.clone(), second.clone()]);
        }
        Err(format!(
            "the monitor does not know both nodes yet: {found:?}"
        ))
    }

    /// Which node takes writes now, as the monitor says: the one that has
    /// reached its assigned `primary`, `wait_primary` (a primary whose
    /// standby is not in sync) or `single`. An error while a failover is
    /// under way. A crashed primary is still named for the 5 s or so the
    /// monitor takes to notice; then an error until its standby is promoted.
    pub fn primary(&self) -> Result<usize, String> {
        let states = self.states()?;
        let writers: Vec<usize> = (0..2)
            .filter(|&node| {
                let state = &states[node];
                state.reported == state.assigned
                    && matches!(
                        state.reported.as_str(),
                        "primary" | "wait_primary" | "single"
                    )
            })
            .collect();
        match writers[..] {
            [node] => Ok(node),
            _ => Err(format!("no single primary now: {states:?}")),
        }
    }

    /// Polls the monitor until one node is `primary` and the other
    /// `secondary`, both as assigned (a standby in sync again); returns the
    /// primary's index.
    pub fn wait_for_primary_and_secondary(&self, within: Duration) -> Result<usize, String> {
        let started = Instant::now();
        loop {
            let last = match self.states() {
                Ok(states) => {
                    let is = |node: usize, state: &str| {
                        states[node].reported == state && states[node].assigned == state
                    };
                    if is(0, "primary") && is(1, "secondary") {
                        return Ok(0);
                    }
                    if is(1, "primary") && is(0, "secondary") {
                        return Ok(1);
                    }
                    format!("{states:?}")
                }
                Err(e) => e,
            };
            if started.elapsed() >= within {
                return Err(format!(
                    "no primary and secondary within {within:?}: {last}\n{}\n{}\n{}",
                    self.log_tail("monitor"),
                    self.log_tail(&node_name(0)),
                    self.log_tail(&node_name(1))
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// A planned failover (`pg_autoctl perform failover`): the primary
    /// drains and is demoted, the standby is promoted. Returns once the
    /// monitor reports the new primary as `primary`, which is after the old
    /// one is its `secondary` again (2.5-3.3 s measured); the new one took
    /// writes, as `wait_primary`, from 1.5 s on.
    ///
    /// pg_autoctl 2.0 logs a harmless "invalid input syntax for type
    /// integer" ERROR here (`get_nodes` with an empty group), with or
    /// without `--group 0`; the command succeeds. Its output is in
    /// `failover.log` in the cluster's folder.
    pub fn perform_failover(&self) -> Result<(), String> {
        let mut command = self.autoctl();
        command
            .args(["perform", "failover", "--pgdata"])
            .arg(self.root.join("monitor"))
            .args(["--formation", FORMATION, "--group", "0", "--wait", "60"]);
        self.run_for(command, "failover", Duration::from_secs(90))
    }

    /// Crashes the current primary (as the monitor says): its keeper and
    /// postmaster are SIGKILLed, then whatever of its Postgres is left.
    /// Returns the index killed, once its port refuses connections. The
    /// standby takes writes about 16 s later.
    pub fn kill_primary(&self) -> Result<usize, String> {
        let node = self.primary()?;
        self.kill_node(node)?;
        Ok(node)
    }

    /// Crashes node 0 or 1 whatever its role: SIGKILL of its keeper's
    /// process group (the keeper would start a stopped Postgres again at
    /// once, and its postmaster is in that group), then of the postmaster's
    /// children, which each have a session of their own, so that open
    /// sessions break now as with a machine that is gone. Returns once the
    /// node's port refuses connections.
    pub fn kill_node(&self, node: usize) -> Result<(), String> {
        let keeper = self.keepers()[node].take();
        if let Some(mut keeper) = keeper {
            kill_group(&mut keeper);
        }
        let pgdata = self.root.join(node_name(node));
        if !kill_processes_under(&pgdata, Duration::from_secs(10)) {
            return Err(format!(
                "processes of {} outlived SIGKILL",
                pgdata.display()
            ));
        }
        wait_until_refused(self.ports[node], Duration::from_secs(10))
    }

    /// The nodes' keepers. A panic while the lock was held leaves nothing
    /// half done in it, so a poisoned lock is taken as it is.
    fn keepers(&self) -> MutexGuard<'_, [Option<Child>; 2]> {
        self.keepers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `pg_autoctl` as the `postgres` user, with its configuration
    /// (`$XDG_CONFIG_HOME`), state (`$XDG_DATA_HOME`) and pid files
    /// (`$XDG_RUNTIME_DIR`) in our folder instead of the postgres user's
    /// home, and its working directory there too (see Drop).
    fn autoctl(&self) -> Command {
        let mut command = as_postgres(&self.autoctl);
        command
            .current_dir(&self.root)
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("XDG_DATA_HOME", self.root.join("share"))
            .env("XDG_RUNTIME_DIR", self.root.join("run"));
        // pg_autoctl takes these as defaults for options; ours are explicit.
        for name in ["PGDATA", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE"] {
            command.env_remove(name);
        }
        command
    }

    /// The monitor, created and stopped again, with its settings in place.
    fn create_monitor(&self) -> Result<(), String> {
        let pgdata = self.root.join("monitor");
        let mut command = self.autoctl();
        command
            .args(["create", "monitor", "--pgctl"])
            .arg(tool("pg_ctl"))
            .arg("--pgdata")
            .arg(&pgdata)
            .args(["--pgport", &self.monitor_port.to_string()])
            .args(["--hostname", "127.0.0.1", "--auth", "trust"])
            // Plain TCP: `--no-ssl` alone leaves sslmode=prefer in the URLs
            // pg_autoctl hands out.
            .args(["--no-ssl", "--ssl-mode", "disable"]);
        self.run_for(command, "create-monitor", Duration::from_secs(120))?;
        // The monitor listens on '*' unless told; nothing here needs more
        // than 127.0.0.1. It takes effect when `run` starts Postgres.
        run(self
            .autoctl()
            .args(["config", "set", "--pgdata"])
            .arg(&pgdata)
            .args(["postgresql.listen_addresses", "127.0.0.1"]))?;
        append_settings(&pgdata, &format!("{SERVER_SETTINGS}{MONITOR_SETTINGS}"))
    }

    /// A data node registered with the monitor, stopped again, with its
    /// settings in place. Node 1's `create` copies node 0 and so waits for
    /// node 0's keeper to run.
    fn create_node(&self, node: usize) -> Result<(), String> {
        let name = node_name(node);
        let pgdata = self.root.join(&name);
        let mut command = self.autoctl();
        command
            .args(["create", "postgres", "--pgctl"])
            .arg(tool("pg_ctl"))
            .arg("--pgdata")
            .arg(&pgdata)
            .args(["--pgport", &self.ports[node].to_string()])
            .args(["--hostname", "127.0.0.1", "--listen", "127.0.0.1"])
            .args(["--name", &name, "--formation", FORMATION])
            .args(["--monitor", &self.monitor_url()])
            // trust for the nodes' entries in pg_hba.conf, as initdb's own
            // lines are: `postgres` reaches every database on 127.0.0.1.
            .args(["--auth", "trust", "--no-ssl", "--ssl-mode", "disable"])
            .args(["--dbname", &self.database]);
        self.run_for(command, &format!("create-{name}"), Duration::from_secs(120))?;
        run(self
            .autoctl()
            .args(["config", "set", "--pgdata"])
            .arg(&pgdata)
            .args([
                "timeout.network_partition_timeout",
                NETWORK_PARTITION_TIMEOUT_S,
            ]))?;
        append_settings(&pgdata, SERVER_SETTINGS)
    }

    /// `pg_autoctl run` for `name` (monitor, node0, node1), the leader of a
    /// process group of its own, its output in `<name>.log`.
    fn spawn_run(&self, name: &str) -> Result<Child, String> {
        let log = self.log_file(name)?;
        let errors = log.try_clone().map_err(|e| e.to_string())?;
        self.autoctl()
            .arg("run")
            .arg("--pgdata")
            .arg(self.root.join(name))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(errors)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("pg_autoctl run --pgdata {name}: {e}"))
    }

    /// Runs `command` in a process group of its own, its output in
    /// `<log>.log`; kills the group if it has not finished `within`.
    fn run_for(&self, mut command: Command, log: &str, within: Duration) -> Result<(), String> {
        let file = self.log_file(log)?;
        let errors = file.try_clone().map_err(|e| e.to_string())?;
        let described = format!("{command:?}");
        let mut child = command
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(errors)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("{described}: {e}"))?;
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    return Err(format!("{described}: {status}\n{}", self.log_tail(log)))
                }
                Ok(None) if started.elapsed() >= within => {
                    kill_group(&mut child);
                    return Err(format!(
                        "{described}: not done after {within:?}, killed\n{}",
                        self.log_tail(log)
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => {
                    kill_group(&mut child);
                    return Err(format!("{described}: {e}"));
                }
            }
        }
    }

    /// Polls until the monitor's database answers (`pg_autoctl run` starts
    /// its Postgres again after `create` stopped it).
    fn wait_for_monitor(&self, within: Duration) -> Result<(), String> {
        let started = Instant::now();
        let url = format!("{}&connect_timeout=5", self.monitor_url());
        loop {
            match query(&url, "SELECT 1") {
                Ok(_) => return Ok(()),
                Err(e) if started.elapsed() >= within => {
                    return Err(format!(
                        "the monitor does not answer after {within:?}: {e}\n{}",
                        self.log_tail("monitor")
                    ))
                }
                Err(_) => std::thread::sleep(POLL),
            }
        }
    }

    fn log_file(&self, name: &str) -> Result<File, String> {
        let path = self.root.join(format!("{name}.log"));
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The last lines of `<name>.log`, for an error message.
    fn log_tail(&self, name: &str) -> String {
        let path = self.root.join(format!("{name}.log"));
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(15)..].join("\n");
                format!("--- {}:\n{tail}", path.display())
            }
            Err(e) => format!("--- {}: {e}", path.display()),
        }
    }
}

impl Drop for FailoverCluster {
    /// Kills everything and removes what a killed postmaster leaves outside
    /// the folder. No `pg_ctl stop`: the keepers start a stopped server
    /// again, and once they are killed, with their postmasters in their
    /// groups, there is no server left for it to stop.
    fn drop(&mut self) {
        let keepers = self
            .keepers
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        let children = keepers.iter_mut().chain([&mut self.monitor]);
        for child in children {
            if let Some(mut child) = child.take() {
                kill_group(&mut child);
            }
        }
        kill_processes_under(&self.root, Duration::from_secs(10));
        for name in ["monitor", "node0", "node1"] {
            remove_postmaster_leftovers(&self.root.join(name));
        }
    }
}

/// `node0` or `node1`: the node's data directory and its name in the monitor.
fn node_name(node: usize) -> String {
    format!("node{node}")
}

/// `pg_autoctl` on PATH (Debian puts it in /usr/bin), or why not.
fn find_pg_autoctl() -> Result<PathBuf, String> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(|paths| std::env::split_paths(paths))
        .chain([PathBuf::from("/usr/bin"), PathBuf::from(PG_BIN)])
        .map(|dir| dir.join("pg_autoctl"))
        .find(|path| path.is_file())
        .ok_or_else(|| "pg_autoctl is missing (package pg-auto-failover-cli)".to_owned())
}

/// Three distinct free ports of 127.0.0.1: all bound at once, then freed.
fn free_ports() -> Result<[u16; 3], String> {
    let bind = || TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string());
    let listeners = [bind()?, bind()?, bind()?];
    let mut ports = [0; 3];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr().map_err(|e| e.to_string())?.port();
    }
    Ok(ports)
}

/// Appends `settings` under MARKER to `pgdata`'s postgresql.conf, unless it
/// is there already. The end of postgresql.conf wins over pg_auto_failover's
/// `include 'postgresql-auto-failover.conf'`, which is its first line.
fn append_settings(pgdata: &Path, settings: &str) -> Result<(), String> {
    let path = pgdata.join("postgresql.conf");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if text.contains(MARKER) {
        return Ok(());
    }
    OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut file| write!(file, "\n{MARKER}\n{settings}"))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// One statement through psql, unaligned, `|` between fields, no psqlrc.
fn query(url: &str, sql: &str) -> Result<String, String> {
    run(Command::new(tool("psql")).args([
        "-AtX",
        "-F",
        "|",
        "-v",
        "ON_ERROR_STOP=1",
        "-d",
        url,
        "-c",
        sql,
    ]))
}

/// SIGKILL to `child`'s process group (it was spawned as the group's
/// leader), then reaps it. Its other members are adopted and reaped by init.
fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
}

/// The processes whose working directory is `dir` or under it: Postgres
/// chdirs into its data directory, and our keepers run in our folder.
fn processes_under(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()))
        })
        // A zombie's cwd cannot be read: it is gone but for its reaping.
        .filter(|entry| {
            std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
        })
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect()
}

/// SIGKILLs every process under `dir` until there is none; false if some
/// are still there after `within`.
fn kill_processes_under(dir: &Path, within: Duration) -> bool {
    let started = Instant::now();
    loop {
        let pids = processes_under(dir);
        if pids.is_empty() {
            return true;
        }
        if started.elapsed() >= within {
            return false;
        }
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(&pids)
            .stderr(Stdio::null())
            .status();
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls until nothing accepts connections on `port` of 127.0.0.1.
fn wait_until_refused(port: u16, within: Duration) -> Result<(), String> {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let started = Instant::now();
    while TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_ok() {
        if started.elapsed() >= within {
            return Err(format!(
                "port {port} still accepts connections after {within:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// What a SIGKILLed postmaster of `pgdata` leaves outside it, as its
/// `postmaster.pid` names it: its System V shared memory segment (line 7,
/// key and id) and its socket and lock file in the socket directory (line
/// 5, /var/run/postgresql on Debian; line 4 is the port). Called once no
/// process of it is left. The lock is removed only if it names `pgdata`.
fn remove_postmaster_leftovers(pgdata: &Path) {
    let Ok(text) = std::fs::read_to_string(pgdata.join("postmaster.pid")) else {
        return;
    };
    let lines: Vec<&str> = text.lines().collect();
    if lines.get(1).map(Path::new) != Some(pgdata) {
        return;
    }
    if let Some(id) = lines.get(6).and_then(|line| line.split_whitespace().nth(1)) {
        let _ = Command::new("ipcrm")
            .args(["-m", id])
            .stderr(Stdio::null())
            .status();
    }
    let (Some(port), Some(socket_dir)) = (lines.get(3), lines.get(4)) else {
        return;
    };
    if socket_dir.is_empty() {
        return;
    }
    let socket = Path::new(socket_dir).join(format!(".s.PGSQL.{port}"));
    let lock = Path::new(socket_dir).join(format!(".s.PGSQL.{port}.lock"));
    let ours = std::fs::read_to_string(&lock)
        .is_ok_and(|text| text.lines().nth(1).map(Path::new) == Some(pgdata));
    if ours {
        let _ = std::fs::remove_file(&socket);
        let _ = std::fs::remove_file(&lock);
    }
}
