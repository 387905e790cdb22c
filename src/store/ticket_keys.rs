//! The keys tickets' codes are signed with: each instance reads them at
//! start; the first to find none stores one, and every other takes it.

use async_trait::async_trait;

use super::sql::{Param, Pools, SqlPool};
use super::{handle, retry_read, StoreResult};

/// One stored key: its id, its secret (base64url of the seed) and when it
/// was made.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TicketKeyRow {
    pub key_id: String,
    pub secret: String,
    pub created_at_us: i64,
}

/// The signing keys. One call is one statement. Both dialects share the
/// statements: implemented once, for every backend's [`Pools`].
#[async_trait]
pub trait TicketKeysPort: Send + Sync {
    /// Every key, oldest first.
    async fn all(&self) -> StoreResult<Vec<TicketKeyRow>>;

    /// Stores `key` unless one of its id is there.
    async fn insert(&self, key: &TicketKeyRow) -> StoreResult<()>;
}

#[async_trait]
impl<B: Pools> TicketKeysPort for B {
    async fn all(&self) -> StoreResult<Vec<TicketKeyRow>> {
        read_all(self.reads()).await
    }

    async fn insert(&self, key: &TicketKeyRow) -> StoreResult<()> {
        insert(self.writes(), key).await
    }
}

handle!(
    /// The keys tickets' codes are signed with: [`TicketKeysPort`].
    TicketKeys: TicketKeysPort
);

impl TicketKeys {
    /// Every key, oldest first.
    pub async fn all(&self) -> StoreResult<Vec<TicketKeyRow>> {
        retry_read(move || self.port.all()).await
    }

    /// Stores `key` unless one of its id is there.
    pub async fn insert(&self, key: &TicketKeyRow) -> StoreResult<()> {
        self.port.insert(key).await
    }
}

/// Every key, oldest first, read on `pool`.
async fn read_all(pool: &impl SqlPool) -> StoreResult<Vec<TicketKeyRow>> {
    pool.fetch_all(
        "SELECT key_id, secret, created_at_us FROM ticket_keys ORDER BY created_at_us, key_id",
        &[],
    )
    .await
}

/// Stores `key` on `pool`, kept if no key of that id is: two instances
/// making the first key at once each store theirs, and both then sign with
/// the newest (read back).
async fn insert(pool: &impl SqlPool, key: &TicketKeyRow) -> StoreResult<()> {
    pool.execute(
        "INSERT INTO ticket_keys (key_id, secret, created_at_us) \
         VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING",
        &[
            Param::Text(&key.key_id),
            Param::Text(&key.secret),
            Param::Int(key.created_at_us),
        ],
    )
    .await?;
    Ok(())
}
