//! The request a command runs for: who asked, under which request id and
//! idempotency key. Every event a command appends carries it as metadata.

use domain::ids::{BuyerId, IdempotencyKey};

use crate::auth::{Actor, Role};
use crate::store::StoreError;

/// Who asked, and under which request: stamped on every event as metadata.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub actor: Actor,
    pub request_id: String,
    pub idempotency_key: Option<IdempotencyKey>,
}

impl RequestContext {
    /// The service acting on its own (`actor`: `system:recovery`, ...),
    /// under a request id of its own.
    pub fn system(actor: &str) -> Result<Self, StoreError> {
        Ok(Self {
            actor: Actor {
                id: BuyerId::parse(actor)
                    .map_err(|e| StoreError::Corrupt(format!("{actor}: {e}")))?,
                role: Role::Admin,
            },
            request_id: uuid::Uuid::new_v4().to_string(),
            idempotency_key: None,
        })
    }

    pub fn metadata(&self) -> String {
        let mut meta = serde_json::Map::new();
        meta.insert("actor".into(), self.actor.id.as_str().into());
        meta.insert("role".into(), self.actor.role.as_str().into());
        meta.insert("request_id".into(), self.request_id.clone().into());
        if let Some(key) = &self.idempotency_key {
            meta.insert("idempotency_key".into(), key.as_str().into());
        }
        serde_json::Value::Object(meta).to_string()
    }
}
