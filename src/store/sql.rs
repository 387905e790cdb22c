//! SQL that both dialects agree on, run on either backend's pool: what lets
//! a port be implemented once for both backends where their SQL is the same
//! (`$n` parameters work in both), over the pools each backend names
//! ([`Pools`]); where a dialect differs, the backend implements the port
//! itself, or answers the one piece that differs.

use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::FromRow;

use super::{StoreError, StoreResult};

/// The pools a backend runs the statements both dialects share on: what a
/// port implemented once for every backend (`impl<B: Pools> HoldsPort for
/// B`) asks of it. A backend whose dialect needs its own statement for a
/// port implements that port itself, in its own folder, instead.
pub trait Pools: Send + Sync + 'static {
    type Pool: SqlPool + Send + Sync;

    /// Where reads run (PostgreSQL: the command pool; SQLite: the read
    /// pool).
    fn reads(&self) -> &Self::Pool;

    /// Where writes run (SQLite: the one writer).
    fn writes(&self) -> &Self::Pool;

    /// Where public queries run (PostgreSQL: a pool of their own,
    /// `QUERY_POOL_CONNECTIONS`; SQLite: the read pool).
    fn queries(&self) -> &Self::Pool;
}

/// A query's parameter, of a type both dialects bind the same way.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    Text(&'a str),
    Int(i64),
    /// Text or NULL.
    MaybeText(Option<&'a str>),
    /// An integer or NULL.
    MaybeInt(Option<i64>),
    /// A 32-bit integer (PostgreSQL's `integer`) or NULL.
    MaybeInt4(Option<i32>),
}

/// A row type both dialects decode (a tuple of columns, or a `FromRow`).
pub trait Row: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin {}

impl<T> Row for T where T: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin
{}

/// A pool one dialect-neutral statement runs on.
#[async_trait]
pub trait SqlPool: Sync {
    /// A transaction on this pool.
    type Tx: SqlTx;

    /// Begins a transaction.
    async fn begin_tx(&self) -> StoreResult<Self::Tx>;

    /// The first row, if any.
    async fn fetch_optional<T: Row>(
        &self,
        sql: &str,
        params: &[Param<'_>],
    ) -> StoreResult<Option<T>>;

    /// Every row.
    async fn fetch_all<T: Row>(&self, sql: &str, params: &[Param<'_>]) -> StoreResult<Vec<T>>;

    /// Runs a statement; how many rows it changed.
    async fn execute(&self, sql: &str, params: &[Param<'_>]) -> StoreResult<u64>;

    /// An expression making one JSON object (as text) of a row's
    /// `columns`, keyed by their names: how a read model's row leaves the
    /// database whole, in this dialect.
    fn row_object(&self, columns: &[&str]) -> String {
        let pairs = columns
            .iter()
            .map(|c| format!("'{c}', {c}"))
            .collect::<Vec<_>>()
            .join(", ");
        Self::json_object(&pairs)
    }

    /// This dialect's JSON object (as text) of `'key', value` pairs.
    fn json_object(pairs: &str) -> String;
}

/// A transaction dialect-neutral statements run in: nothing is written
/// unless it is committed.
#[async_trait]
pub trait SqlTx: Send {
    /// Runs a statement; how many rows it changed.
    async fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> StoreResult<u64>;

    async fn commit(self) -> StoreResult<()>;

    async fn rollback(self) -> StoreResult<()>;
}

/// Binds `$params` to `$query` in order.
macro_rules! bind_all {
    ($query:expr, $params:expr) => {{
        let mut query = $query;
        for param in $params {
            query = match *param {
                Param::Text(text) => query.bind(text),
                Param::Int(int) => query.bind(int),
                Param::MaybeText(text) => query.bind(text),
                Param::MaybeInt(int) => query.bind(int),
                Param::MaybeInt4(int) => query.bind(int),
            };
        }
        query
    }};
}

/// One body for both dialects' pools and transactions: they differ in their
/// types and in how they make a JSON object (`$json_object`, of `pairs`),
/// not here.
macro_rules! sql_pool {
    ($db:ty, $json_object:literal) => {
        #[async_trait]
        impl SqlPool for sqlx::Pool<$db> {
            type Tx = sqlx::Transaction<'static, $db>;

            async fn begin_tx(&self) -> StoreResult<Self::Tx> {
                self.begin().await.map_err(StoreError::classify)
            }

            fn json_object(pairs: &str) -> String {
                format!($json_object, pairs = pairs)
            }

            async fn fetch_optional<T: Row>(
                &self,
                sql: &str,
                params: &[Param<'_>],
            ) -> StoreResult<Option<T>> {
                bind_all!(sqlx::query_as::<_, T>(sql), params)
                    .fetch_optional(self)
                    .await
                    .map_err(StoreError::classify)
            }

            async fn fetch_all<T: Row>(
                &self,
                sql: &str,
                params: &[Param<'_>],
            ) -> StoreResult<Vec<T>> {
                bind_all!(sqlx::query_as::<_, T>(sql), params)
                    .fetch_all(self)
                    .await
                    .map_err(StoreError::classify)
            }

            async fn execute(&self, sql: &str, params: &[Param<'_>]) -> StoreResult<u64> {
                Ok(bind_all!(sqlx::query(sql), params)
                    .execute(self)
                    .await
                    .map_err(StoreError::classify)?
                    .rows_affected())
            }
        }

        #[async_trait]
        impl SqlTx for sqlx::Transaction<'static, $db> {
            async fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> StoreResult<u64> {
                Ok(bind_all!(sqlx::query(sql), params)
                    .execute(&mut **self)
                    .await
                    .map_err(StoreError::classify)?
                    .rows_affected())
            }

            async fn commit(self) -> StoreResult<()> {
                sqlx::Transaction::commit(self)
                    .await
                    .map_err(StoreError::classify)
            }

            async fn rollback(self) -> StoreResult<()> {
                sqlx::Transaction::rollback(self)
                    .await
                    .map_err(StoreError::classify)
            }
        }
    };
}

sql_pool!(sqlx::Postgres, "jsonb_build_object({pairs})::text");
sql_pool!(sqlx::Sqlite, "json_object({pairs})");
