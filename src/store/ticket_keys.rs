//! The keys tickets' codes are signed with: each instance reads them at
//! start; the first to find none stores one, and every other takes it.

use super::{on_store, retry_read, StoreError, StoreResult, TicketKeys};

/// One stored key: its id, its secret (base64url of the seed) and when it
/// was made.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TicketKeyRow {
    pub key_id: String,
    pub secret: String,
    pub created_at_us: i64,
}

const SELECT_KEYS: &str =
    "SELECT key_id, secret, created_at_us FROM ticket_keys ORDER BY created_at_us, key_id";

/// Kept if no key of that id is: two instances making the first key at once
/// each store theirs, and both then sign with the newest (read back).
const INSERT_KEY: &str = "INSERT INTO ticket_keys (key_id, secret, created_at_us) \
     VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING";

impl TicketKeys {
    /// Every key, oldest first.
    pub async fn all(&self) -> StoreResult<Vec<TicketKeyRow>> {
        retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_as(SELECT_KEYS)
                    .fetch_all(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await
    }

    /// Stores `key` unless one of its id is there.
    pub async fn insert(&self, key: &TicketKeyRow) -> StoreResult<()> {
        on_store!(self, write pool => {
            sqlx::query(INSERT_KEY)
                .bind(&key.key_id)
                .bind(&key.secret)
                .bind(key.created_at_us)
                .execute(pool)
                .await
                .map_err(StoreError::classify)?;
            Ok(())
        })
    }
}
