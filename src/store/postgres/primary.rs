//! Following the primary of a PostgreSQL cluster (API.md, "Database
//! failover").
//!
//! sqlx connects to one host (launchbadge/sqlx#179) and silently ignores
//! `target_session_attrs`. `DATABASE_URL` may name several hosts as libpq
//! does (`postgres://h1:5432,h2:5433/db?target_session_attrs=read-write`):
//! [`Hosts`] parses it into one set of connect options per host, and
//! [`Primary::watch`], a task of the store's, keeps both pools pointed at
//! the host that qualifies (for `read-write`, the one that accepts writes):
//!
//! - it asks the host in use, on a connection of its own, whether it still
//!   qualifies every [`PRIMARY_CHECK_INTERVAL`], and at once when anything
//!   in the process lost a connection or had a write refused as read-only;
//! - when it no longer does, it tries the hosts in turn (libpq's order), with
//!   a backoff of [`MIN_BACKOFF`] doubling to [`MAX_BACKOFF`] while none does,
//!   so nothing loops hot; the first that qualifies becomes the pools'
//!   connect options (`Pool::set_connect_options`) and every connection
//!   opened before the switch is dropped at its next acquire;
//! - every new pooled connection checks that it is writable before use
//!   (`after_connect`): a pool never hands out a connection to a standby,
//!   and while the pools still point at a demoted host a request waits for
//!   the switch or answers 503 `busy`, never writes there.
//!
//! Commands do not wait for a primary that is not there: [`Store::append`]
//! answers 503 at once while none is known (see `crate::store::Store::append`).

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection, PgPool};
use tokio::sync::watch;

use crate::store::error::{since_epoch_us, wait_for_connection_trouble, StoreError};

/// How often the host in use is asked whether it still accepts writes. A
/// planned switchover leaves the old primary up and read-only: this bounds
/// how long the pools keep pointing at it when no write has noticed yet.
pub const PRIMARY_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// A host that does not answer a probe (connect and one query) within this
/// is passed over: a machine that died answers nothing, and its TCP
/// timeouts are minutes.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The first pause between two rounds over the hosts while none
/// qualifies; it doubles up to [`MAX_BACKOFF`]. A promotion takes seconds
/// (a crash: tens of seconds, the failover manager's timeouts): the cap is
/// how late after it the service may notice (measured: the first hold
/// 1.8 s after the new primary took writes with a 2 s cap), and it keeps
/// a long outage at one connection attempt per host a second.
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// libpq's `target_session_attrs`, as far as a service that writes can use
/// it: `any` takes the first host that answers, `read-write` (and its
/// synonym here, `primary`) the first that accepts writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAttrs {
    Any,
    ReadWrite,
}

impl SessionAttrs {
    fn parse(value: &str) -> Result<Self, StoreError> {
        match value {
            "any" => Ok(Self::Any),
            "read-write" | "primary" => Ok(Self::ReadWrite),
            other => Err(StoreError::BadUrl(format!(
                "target_session_attrs={other}: the service writes, so it takes any, read-write or primary"
            ))),
        }
    }
}

/// One host of the URL: how to name it in logs and metrics (`host:port` as
/// written, never the password), and the options to connect to it alone.
#[derive(Debug, Clone)]
pub struct Host {
    pub label: String,
    options: PgConnectOptions,
}

/// The hosts a `DATABASE_URL` names, in its order, and which one to use.
#[derive(Debug, Clone)]
pub struct Hosts {
    hosts: Vec<Host>,
    attrs: SessionAttrs,
}

impl Hosts {
    /// Parses libpq's multi-host URL: `scheme://[user[:password]@]host[:port][,host[:port]...][/db][?params]`.
    /// `target_session_attrs` is taken out of the parameters (sqlx would
    /// ignore it); without it, `PGTARGETSESSIONATTRS` decides, and without
    /// that, `any`, as in libpq. Every other parameter applies to every host.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        let bad = |why: String| StoreError::BadUrl(why);
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("a PostgreSQL URL starts with postgres://".into()))?;
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (user, host_list) = match authority.rsplit_once('@') {
            Some((user, hosts)) => (format!("{user}@"), hosts),
            None => (String::new(), authority),
        };
        let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
        let mut attrs = None;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            match pair.split_once('=') {
                Some(("target_session_attrs", value)) => attrs = Some(SessionAttrs::parse(value)?),
                _ => kept.push(pair),
            }
        }
        let attrs = match (attrs, std::env::var("PGTARGETSESSIONATTRS")) {
            (Some(attrs), _) => attrs,
            (None, Ok(value)) => SessionAttrs::parse(&value)?,
            (None, Err(_)) => SessionAttrs::Any,
        };
        let query = if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        };
        let hosts = host_list
            .split(',')
            .map(|host| {
                if host.is_empty() && host_list.contains(',') {
                    return Err(bad(format!("an empty host in {host_list:?}")));
                }
                let single = format!("{scheme}://{user}{host}{path}{query}");
                let options = PgConnectOptions::from_str(&single)
                    .map_err(|e| bad(format!("host {host:?}: {e}")))?;
                let label = if host.is_empty() {
                    "(default host)".to_owned()
                } else {
                    host.to_owned()
                };
                Ok(Host { label, options })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { hosts, attrs })
    }

    pub fn labels(&self) -> Vec<&str> {
        self.hosts.iter().map(|h| h.label.as_str()).collect()
    }

    /// The first host that qualifies, tried in the URL's order, with a
    /// connection to it kept for the watcher; or why none does.
    async fn find(&self) -> Result<(usize, PgConnection), Unqualified> {
        let mut why = Vec::new();
        let mut misconfigured = false;
        for (index, host) in self.hosts.iter().enumerate() {
            match probe(&host.options, self.attrs).await {
                Ok(conn) => return Ok((index, conn)),
                Err(reason) => {
                    misconfigured |= reason.misconfigured;
                    why.push(format!("{}: {}", host.label, reason.why));
                }
            }
        }
        Err(Unqualified {
            why: why.join("; "),
            misconfigured,
        })
    }
}

/// Why no host (or one host) qualifies.
#[derive(Debug)]
struct Unqualified {
    why: String,
    /// A host answered that the URL itself is wrong (no such database,
    /// credentials refused), or its certificate cannot be read: waiting
    /// will not help.
    misconfigured: bool,
}

/// SQLSTATEs of a server that answered, and refused what the URL asks:
/// invalid_catalog_name (no such database) and class 28 (invalid
/// authorization: no such role, a wrong password).
fn misconfigured(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|code| code == "3D000" || code.starts_with("28")),
        _ => false,
    }
}

/// What an operator needs to hear when a host's TLS certificate is refused:
/// waiting will not help, and the cause is not where one looks first. Citus
/// turns `ssl` on with a self-signed X.509 v1 certificate, which the TLS
/// library refuses to read even in `sslmode=prefer` (the default), where
/// libpq does not look at it (so psql connects and the service does not).
const CERTIFICATE_REFUSED: &str = "the server's TLS certificate was refused: \
    sslmode=prefer (the default) still reads it, and an X.509 v1 certificate (as Citus \
    makes one) is never accepted; on a private network add ?sslmode=disable to \
    DATABASE_URL, or give the server an X.509 v3 certificate";

/// Why a connection failed, and whether waiting could help.
fn unqualified(err: &sqlx::Error) -> Unqualified {
    let why = err.to_string();
    if why.contains("invalid peer certificate") {
        return Unqualified {
            why: format!("{why} ({CERTIFICATE_REFUSED})"),
            misconfigured: true,
        };
    }
    Unqualified {
        misconfigured: misconfigured(err),
        why,
    }
}

/// Connects to one host and checks that it qualifies, within [`PROBE_TIMEOUT`].
async fn probe(
    options: &PgConnectOptions,
    attrs: SessionAttrs,
) -> Result<PgConnection, Unqualified> {
    let failed = |e: sqlx::Error| unqualified(&e);
    let probed = async {
        let mut conn = options.connect().await.map_err(failed)?;
        match qualifies(&mut conn, attrs).await {
            Ok(true) => Ok(conn),
            Ok(false) => {
                let _ = conn.close().await;
                Err(Unqualified {
                    why: "read-only (a standby, or a primary being demoted)".to_owned(),
                    misconfigured: false,
                })
            }
            Err(e) => Err(failed(e)),
        }
    };
    tokio::time::timeout(PROBE_TIMEOUT, probed)
        .await
        .unwrap_or_else(|_| {
            Err(Unqualified {
                why: format!("no answer within {PROBE_TIMEOUT:?}"),
                misconfigured: false,
            })
        })
}

/// Whether a connection's server is one `attrs` accepts: libpq asks
/// `SHOW transaction_read_only` for `read-write`, and so do we.
pub(super) async fn qualifies(
    conn: &mut PgConnection,
    attrs: SessionAttrs,
) -> Result<bool, sqlx::Error> {
    match attrs {
        SessionAttrs::Any => sqlx::query("SELECT 1")
            .execute(&mut *conn)
            .await
            .map(|_| true),
        SessionAttrs::ReadWrite => {
            let read_only: String = sqlx::query_scalar("SHOW transaction_read_only")
                .fetch_one(&mut *conn)
                .await?;
            Ok(read_only == "off")
        }
    }
}

/// Which host the store uses now, and since when.
pub struct Primary {
    hosts: Hosts,
    /// The host the pools connect to, `None` while none qualifies.
    current: watch::Sender<Option<usize>>,
    /// When the pools last moved to another host, in microseconds since
    /// the process's epoch (0: never): connections older than this are
    /// dropped at their next acquire.
    switched_at_us: AtomicU64,
}

impl Primary {
    /// Finds the host to start on, or says why there is none.
    pub async fn find(hosts: Hosts) -> Result<(Arc<Self>, PgConnection), StoreError> {
        let (index, conn) = hosts.find().await.map_err(|none| {
            let why = format!("no host of DATABASE_URL qualifies: {}", none.why);
            if none.misconfigured {
                StoreError::BadUrl(why)
            } else {
                StoreError::Unavailable(why)
            }
        })?;
        metrics::gauge!("db_primary_reachable").set(1.0);
        let primary = Arc::new(Self {
            hosts,
            current: watch::Sender::new(Some(index)),
            switched_at_us: AtomicU64::new(0),
        });
        Ok((primary, conn))
    }

    /// The options of the host in use now (or last).
    pub fn options(&self) -> PgConnectOptions {
        let index = self.current.borrow().unwrap_or(0);
        self.hosts.hosts[index].options.clone()
    }

    pub fn attrs(&self) -> SessionAttrs {
        self.hosts.attrs
    }

    /// The host in use, if one qualifies now.
    pub fn host(&self) -> Option<&str> {
        let index = (*self.current.borrow())?;
        Some(self.hosts.hosts[index].label.as_str())
    }

    pub fn labels(&self) -> Vec<&str> {
        self.hosts.labels()
    }

    /// Changes whenever the host in use changes or is lost.
    pub fn changes(&self) -> watch::Receiver<Option<usize>> {
        self.current.subscribe()
    }

    /// Waits up to `within` for a host that qualifies; whether there is one.
    pub async fn wait(&self, within: Duration) -> bool {
        let mut changes = self.current.subscribe();
        let found = tokio::time::timeout(within, changes.wait_for(Option::is_some))
            .await
            .is_ok_and(|found| found.is_ok());
        found
    }

    /// Whether a pooled connection of this age was opened before the pools
    /// last moved to another host (and so may be on the old one).
    pub fn opened_before_switch(&self, age: Duration) -> bool {
        let switched = self.switched_at_us.load(Ordering::Relaxed);
        switched > 0 && since_epoch_us().saturating_sub(age.as_micros() as u64) < switched
    }

    /// Keeps `pools` on the host that qualifies, for as long as the store
    /// lives (the store aborts it when dropped). `conn` is the watcher's
    /// connection to the host found at the start.
    pub async fn watch(self: Arc<Self>, pools: Vec<PgPool>, conn: PgConnection) {
        let mut watch = Watch {
            conn: Some(conn),
            in_use: self.current.borrow().unwrap_or(0),
            backoff: MIN_BACKOFF,
            lost_at: None,
            counted_until: Instant::now(),
        };
        loop {
            if self.current.borrow().is_some() {
                if self.still_qualifies(&mut watch.conn).await {
                    tokio::select! {
                        () = tokio::time::sleep(PRIMARY_CHECK_INTERVAL) => {}
                        () = wait_for_connection_trouble() => {}
                    }
                    continue;
                }
                self.lose(&mut watch);
            }
            match self.hosts.find().await {
                Ok((index, found)) => self.settle_on(&mut watch, &pools, index, found),
                Err(none) => {
                    tracing::warn!(
                        why = none.why,
                        backoff = ?watch.backoff,
                        "no database host accepts writes; trying again"
                    );
                    tokio::time::sleep(watch.backoff).await;
                    watch.backoff = (watch.backoff * 2).min(MAX_BACKOFF);
                    watch.count_time_without_primary();
                }
            }
        }
    }

    /// Does the host in use still qualify (asked on the watcher's own
    /// connection, within `PROBE_TIMEOUT`)?
    async fn still_qualifies(&self, conn: &mut Option<PgConnection>) -> bool {
        match conn.as_mut() {
            Some(c) => matches!(
                tokio::time::timeout(PROBE_TIMEOUT, qualifies(c, self.hosts.attrs)).await,
                Ok(Ok(true))
            ),
            None => false,
        }
    }

    /// The host in use stopped qualifying: no host is in use until one is
    /// found (appends answer `Unavailable` at once meanwhile).
    fn lose(&self, watch: &mut Watch) {
        watch.conn = None;
        self.current.send_replace(None);
        let now = Instant::now();
        watch.lost_at = Some(now);
        watch.counted_until = now;
        metrics::gauge!("db_primary_reachable").set(0.0);
        tracing::warn!(
            host = self.hosts.hosts[watch.in_use].label,
            "the database host in use no longer accepts writes; looking for the primary"
        );
    }

    /// Host `index` qualifies: the pools move to it if it is another one.
    fn settle_on(&self, watch: &mut Watch, pools: &[PgPool], index: usize, found: PgConnection) {
        if index != watch.in_use {
            for pool in pools {
                pool.set_connect_options(self.hosts.hosts[index].options.clone());
            }
            self.switched_at_us
                .store(since_epoch_us(), Ordering::Relaxed);
            metrics::counter!("db_primary_switches_total").increment(1);
            watch.in_use = index;
        }
        watch.conn = Some(found);
        self.current.send_replace(Some(index));
        let now = watch.count_time_without_primary();
        metrics::gauge!("db_primary_reachable").set(1.0);
        if let Some(lost) = watch.lost_at.take() {
            tracing::warn!(
                host = self.hosts.hosts[index].label,
                without_primary = ?(now - lost),
                "the database host in use accepts writes"
            );
        }
        watch.backoff = MIN_BACKOFF;
    }
}

/// What the watcher knows between its checks.
struct Watch {
    /// Its own connection to the host in use (none while none qualifies).
    conn: Option<PgConnection>,
    /// The index of the host the pools point at.
    in_use: usize,
    /// How long to wait before looking for a primary again.
    backoff: Duration,
    /// When the last host in use was lost, until one is found.
    lost_at: Option<Instant>,
    /// Up to when `db_seconds_without_primary_total` has counted.
    counted_until: Instant,
}

impl Watch {
    /// Adds the time since the last count to the seconds without a
    /// primary; returns now.
    fn count_time_without_primary(&mut self) -> Instant {
        let now = Instant::now();
        metrics::gauge!("db_seconds_without_primary_total")
            .increment((now - self.counted_until).as_secs_f64());
        self.counted_until = now;
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_certificate_is_a_misconfiguration_and_says_what_to_do() {
        // As the TLS library reported a Citus node's certificate.
        let refused = sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "invalid peer certificate: Other(OtherError(UnsupportedCertVersion))",
        ));
        let why = unqualified(&refused);
        assert!(why.misconfigured);
        assert!(why.why.contains("UnsupportedCertVersion"), "{}", why.why);
        assert!(why.why.contains("sslmode=disable"), "{}", why.why);
        let down = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(
            !unqualified(&down).misconfigured,
            "a host down is waited for"
        );
    }

    fn hosts(url: &str) -> Hosts {
        Hosts::parse(url).expect("a good URL")
    }

    #[test]
    fn a_multi_host_url_gives_one_set_of_options_per_host_in_order() {
        let parsed = hosts(
            "postgres://app:s3cret@db1:5432,db2:5433/booking?target_session_attrs=read-write&sslmode=disable",
        );
        assert_eq!(parsed.labels(), ["db1:5432", "db2:5433"]);
        assert_eq!(parsed.attrs, SessionAttrs::ReadWrite);
        let ports: Vec<u16> = parsed.hosts.iter().map(|h| h.options.get_port()).collect();
        assert_eq!(ports, [5432, 5433]);
        for host in &parsed.hosts {
            assert_eq!(host.options.get_username(), "app");
            assert_eq!(host.options.get_database(), Some("booking"));
        }
        assert!(!parsed.labels().concat().contains("s3cret"));
    }

    #[test]
    fn one_host_without_attributes_is_any_as_in_libpq() {
        let parsed = hosts("postgres://postgres@127.0.0.1:5432/booking");
        assert_eq!(parsed.labels(), ["127.0.0.1:5432"]);
        if std::env::var("PGTARGETSESSIONATTRS").is_err() {
            assert_eq!(parsed.attrs, SessionAttrs::Any);
        }
        assert_eq!(
            hosts("postgres://h1,h2/db?target_session_attrs=any").attrs,
            SessionAttrs::Any
        );
        assert_eq!(
            hosts("postgresql://h1/db?target_session_attrs=primary").attrs,
            SessionAttrs::ReadWrite
        );
    }

    #[test]
    fn attributes_a_writer_cannot_use_and_empty_hosts_are_bad_urls() {
        for url in [
            "postgres://h1,h2/db?target_session_attrs=standby",
            "postgres://h1,h2/db?target_session_attrs=read-only",
            "postgres://h1,,h2/db",
            "h1,h2/db",
        ] {
            assert!(
                matches!(Hosts::parse(url), Err(StoreError::BadUrl(_))),
                "{url}"
            );
        }
    }
}
