//! The connection itself on PostgreSQL: migrations, health, the hosts.

use async_trait::async_trait;

use super::PgBackend;
use crate::store::database::{self, DatabasePort, StoreKind};
use crate::store::sql::SqlPool;
use crate::store::StoreResult;

#[async_trait]
impl DatabasePort for PgBackend {
    fn kind(&self) -> StoreKind {
        StoreKind::Postgres
    }

    fn database_host(&self) -> Option<String> {
        self.primary.host().map(str::to_owned)
    }

    fn database_hosts(&self) -> Vec<String> {
        self.primary
            .labels()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    async fn migrate(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
            .await?;
        super::append::install_functions(&self.pool).await?;
        if super::citus::is_citus(&self.pool).await? {
            super::citus::distribute(&self.pool).await?;
        }
        Ok(())
    }

    async fn pending_migrations(&self) -> StoreResult<usize> {
        database::pending(&sqlx::migrate!("./migrations/postgres"), &self.pool).await
    }

    async fn ping(&self) -> StoreResult<()> {
        database::ping(&self.pool).await
    }

    async fn execute_raw(&self, sql: &str) -> StoreResult<u64> {
        self.pool.execute(sql, &[]).await
    }
}
