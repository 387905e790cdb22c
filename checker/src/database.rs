//! The run's database: a fresh SQLite file, a new database on the shared
//! PostgreSQL server, or a cluster of the run's own when the faults
//! restart the database. And the reads of it the checks need.

use anyhow::Context;
use sqlx::Row;

use crate::cluster::OwnCluster;
use crate::rows::{CheckoutPhase, Ledger, LogEvent, SimPayment, SimRefund};

pub enum RunDatabase {
    Sqlite {
        _dir: tempfile::TempDir,
        url: String,
    },
    SharedPostgres {
        admin_url: String,
        name: String,
        url: String,
    },
    OwnPostgres {
        cluster: OwnCluster,
        url: String,
    },
}

impl RunDatabase {
    pub fn sqlite() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("checker-").tempdir()?;
        let url = format!("sqlite://{}", dir.path().join("booking.db").display());
        Ok(Self::Sqlite { _dir: dir, url })
    }

    /// A new database `name` on the server `admin_url` names.
    pub async fn shared_postgres(admin_url: &str, name: &str) -> anyhow::Result<Self> {
        let admin = admin_url
            .parse::<sqlx::postgres::PgConnectOptions>()?
            .database("postgres");
        let pool = sqlx::PgPool::connect_with(admin.clone()).await?;
        sqlx::query(&format!("CREATE DATABASE \"{name}\""))
            .execute(&pool)
            .await
            .context("creating the run's database")?;
        pool.close().await;
        let url = url_with_database(admin_url, name)?;
        Ok(Self::SharedPostgres {
            admin_url: admin_url.to_owned(),
            name: name.to_owned(),
            url,
        })
    }

    pub fn own_postgres(name: &str) -> anyhow::Result<Self> {
        let cluster = OwnCluster::start(name)?;
        let url = cluster.url(name);
        Ok(Self::OwnPostgres { cluster, url })
    }

    pub fn url(&self) -> &str {
        match self {
            Self::Sqlite { url, .. }
            | Self::SharedPostgres { url, .. }
            | Self::OwnPostgres { url, .. } => url,
        }
    }

    pub fn cluster(&self) -> Option<&OwnCluster> {
        match self {
            Self::OwnPostgres { cluster, .. } => Some(cluster),
            _ => None,
        }
    }

    /// Drops a database made on the shared server (the others go with
    /// their folders).
    pub async fn remove(&self) {
        if let Self::SharedPostgres {
            admin_url, name, ..
        } = self
        {
            let dropped = async {
                let options = admin_url
                    .parse::<sqlx::postgres::PgConnectOptions>()?
                    .database("postgres");
                let pool = sqlx::PgPool::connect_with(options).await?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                    .execute(&pool)
                    .await?;
                anyhow::Ok(())
            };
            if let Err(e) = dropped.await {
                tracing::warn!(error = %e, "the run's database was not dropped");
            }
        }
    }
}

fn url_with_database(admin_url: &str, name: &str) -> anyhow::Result<String> {
    let mut url = url::Url::parse(admin_url).context("the PostgreSQL admin URL")?;
    url.set_path(name);
    Ok(url.to_string())
}

/// A connection to the run's database for the checker's reads.
pub enum Reader {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

const EVENTS: &str = "SELECT aggregate_type, aggregate_id, sequence, event_type, \
     CAST(payload AS text) AS payload, CAST(metadata AS text) AS metadata, recorded_at_us, position FROM events ORDER BY show_id, position";
const PAYMENTS: &str = "SELECT payment_id, idempotency_key, hold_id, amount_minor, currency, \
     payment_method, status FROM sim_payments ORDER BY created_at_us, payment_id";
const REFUNDS: &str = "SELECT refund_id, idempotency_key, payment_id, amount_minor \
     FROM sim_payment_refunds ORDER BY created_at_us, refund_id";
const PHASES: &str = "SELECT hold_id, phase FROM checkouts ORDER BY hold_id";

impl Reader {
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        if url.starts_with("sqlite:") {
            let options = url
                .parse::<sqlx::sqlite::SqliteConnectOptions>()?
                .read_only(true);
            let pool = sqlx::sqlite::SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await?;
            return Ok(Self::Sqlite(pool));
        }
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(std::time::Duration::from_secs(5))
            .connect(url)
            .await?;
        Ok(Self::Postgres(pool))
    }

    pub async fn close(&self) {
        match self {
            Self::Sqlite(pool) => pool.close().await,
            Self::Postgres(pool) => pool.close().await,
        }
    }

    pub async fn events(&self) -> anyhow::Result<Vec<LogEvent>> {
        macro_rules! read {
            ($pool:expr) => {{
                let rows = sqlx::query(EVENTS).fetch_all($pool).await?;
                rows.iter()
                    .map(|row| {
                        let payload: String = row.try_get("payload")?;
                        let metadata: String = row.try_get("metadata")?;
                        Ok(LogEvent {
                            aggregate_type: row.try_get("aggregate_type")?,
                            aggregate_id: row.try_get("aggregate_id")?,
                            sequence: row.try_get("sequence")?,
                            event_type: row.try_get("event_type")?,
                            payload: serde_json::from_str(&payload)?,
                            metadata: serde_json::from_str(&metadata).unwrap_or_default(),
                            recorded_at_us: row.try_get("recorded_at_us")?,
                            position: row.try_get("position")?,
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()
            }};
        }
        match self {
            Self::Sqlite(pool) => read!(pool),
            Self::Postgres(pool) => read!(pool),
        }
    }

    pub async fn ledger(&self) -> anyhow::Result<Ledger> {
        macro_rules! read {
            ($pool:expr) => {{
                let payments = sqlx::query(PAYMENTS).fetch_all($pool).await?;
                let refunds = sqlx::query(REFUNDS).fetch_all($pool).await?;
                let payments = payments
                    .iter()
                    .map(|r| {
                        Ok(SimPayment {
                            payment_id: r.try_get("payment_id")?,
                            idempotency_key: r.try_get("idempotency_key")?,
                            hold_id: r.try_get("hold_id")?,
                            amount_minor: r.try_get("amount_minor")?,
                            currency: r.try_get("currency")?,
                            payment_method: r.try_get("payment_method")?,
                            status: r.try_get("status")?,
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let refunds = refunds
                    .iter()
                    .map(|r| {
                        Ok(SimRefund {
                            refund_id: r.try_get("refund_id")?,
                            idempotency_key: r.try_get("idempotency_key")?,
                            payment_id: r.try_get("payment_id")?,
                            amount_minor: r.try_get("amount_minor")?,
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                Ok(Ledger { payments, refunds })
            }};
        }
        match self {
            Self::Sqlite(pool) => read!(pool),
            Self::Postgres(pool) => read!(pool),
        }
    }

    pub async fn phases(&self) -> anyhow::Result<Vec<CheckoutPhase>> {
        macro_rules! read {
            ($pool:expr) => {{
                let rows = sqlx::query(PHASES).fetch_all($pool).await?;
                rows.iter()
                    .map(|r| {
                        Ok(CheckoutPhase {
                            id: r.try_get("hold_id")?,
                            phase: r.try_get("phase")?,
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()
            }};
        }
        match self {
            Self::Sqlite(pool) => read!(pool),
            Self::Postgres(pool) => read!(pool),
        }
    }
}
