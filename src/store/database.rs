//! Which database is behind the ports ([`StoreKind`], chosen once at start
//! from `DATABASE_URL`), and the [`Database`] port for what concerns the
//! connection itself (migrations, health, hosts).

use async_trait::async_trait;
use sqlx::migrate::Migrator;

use super::sql::SqlPool;
use super::{handle, StoreResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Postgres,
    Sqlite,
}

/// The connection itself, as each backend manages it
/// (`postgres/database.rs`, `sqlite/database.rs`).
#[async_trait]
pub trait DatabasePort: Send + Sync {
    fn kind(&self) -> StoreKind;

    /// The database host in use (PostgreSQL: the one of `DATABASE_URL`'s
    /// hosts that qualifies now, `None` while none does; SQLite: the file).
    fn database_host(&self) -> Option<String>;

    /// The hosts `DATABASE_URL` names (PostgreSQL), for messages.
    fn database_hosts(&self) -> Vec<String>;

    /// Applies the migrations of this store's dialect (idempotent), then, on
    /// PostgreSQL, the current bodies of our functions.
    async fn migrate(&self) -> StoreResult<()>;

    /// Migrations this binary has that the database has not applied.
    async fn pending_migrations(&self) -> StoreResult<usize>;

    /// Does the database answer?
    async fn ping(&self) -> StoreResult<()>;

    /// Runs one statement as it is (tools and benchmarks: never with input).
    async fn execute_raw(&self, sql: &str) -> StoreResult<u64>;
}

handle!(
    /// The connection itself: migrations, health, the hosts in use
    /// ([`DatabasePort`]).
    Database: DatabasePort
);

impl Database {
    /// The database host in use (PostgreSQL: the one of `DATABASE_URL`'s
    /// hosts that qualifies now, `None` while none does; SQLite: the file).
    pub fn database_host(&self) -> Option<String> {
        self.port.database_host()
    }

    /// The hosts `DATABASE_URL` names (PostgreSQL), for messages.
    pub fn database_hosts(&self) -> Vec<String> {
        self.port.database_hosts()
    }

    pub fn kind(&self) -> StoreKind {
        self.port.kind()
    }

    /// Applies the migrations of this store's dialect (idempotent), then, on
    /// PostgreSQL, the current bodies of our functions.
    pub async fn migrate(&self) -> StoreResult<()> {
        self.port.migrate().await
    }

    /// Migrations this binary has that the database has not applied.
    pub async fn pending_migrations(&self) -> StoreResult<usize> {
        self.port.pending_migrations().await
    }

    /// Does the database answer?
    pub async fn ping(&self) -> StoreResult<()> {
        self.port.ping().await
    }

    /// Runs one statement as it is (tools and benchmarks: never with input).
    pub async fn execute_raw(&self, sql: &str) -> StoreResult<u64> {
        self.port.execute_raw(sql).await
    }
}

/// How many of `migrator`'s migrations the database on `pool` has not
/// applied.
pub(super) async fn pending(migrator: &Migrator, pool: &impl SqlPool) -> StoreResult<usize> {
    let applied: Vec<(i64,)> = pool
        .fetch_all("SELECT version FROM _sqlx_migrations WHERE success", &[])
        .await?;
    Ok(migrator
        .iter()
        .filter(|m| !applied.contains(&(m.version,)))
        .count())
}

/// Does the database on `pool` answer?
pub(super) async fn ping(pool: &impl SqlPool) -> StoreResult<()> {
    pool.execute("SELECT 1", &[]).await.map(drop)
}
