//! The connection itself on SQLite: migrations, health, the hosts.

use async_trait::async_trait;

use super::SqliteBackend;
use crate::store::database::{self, DatabasePort, StoreKind};
use crate::store::sql::SqlPool;
use crate::store::StoreResult;

#[async_trait]
impl DatabasePort for SqliteBackend {
    fn kind(&self) -> StoreKind {
        StoreKind::Sqlite
    }

    fn database_host(&self) -> Option<String> {
        Some("sqlite".to_owned())
    }

    fn database_hosts(&self) -> Vec<String> {
        Vec::new()
    }

    async fn migrate(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations/sqlite")
            .run(&self.write)
            .await?;
        Ok(())
    }

    async fn pending_migrations(&self) -> StoreResult<usize> {
        database::pending(&sqlx::migrate!("./migrations/sqlite"), &self.read).await
    }

    async fn ping(&self) -> StoreResult<()> {
        database::ping(&self.read).await
    }

    async fn execute_raw(&self, sql: &str) -> StoreResult<u64> {
        self.write.execute(sql, &[]).await
    }
}
