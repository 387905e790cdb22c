//! The request a command runs for: who asked, under which request id and
//! idempotency key. Every event a command appends carries it as metadata.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use domain::ids::{BuyerId, IdempotencyKey};

use crate::auth::Actor;
use crate::store::StoreError;

/// Who asked, and under which request: stamped on every event as metadata.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub actor: Actor,
    /// The admin who acts for `actor` (the box office selling to a
    /// walk-in buyer): recorded on every event beside the actor.
    pub sold_by: Option<BuyerId>,
    /// The request id the client sent (`X-Request-Id`), recorded on the
    /// events: the integrator's own trace id is what an audit is asked
    /// about. One the service makes up for a request without one is
    /// answered in the response's header and named in the request's log
    /// span, not stored with every event (54 of a hold's 1,301 WAL bytes,
    /// BENCHMARKS.md, issue #37).
    pub request_id: Option<String>,
    pub idempotency_key: Option<IdempotencyKey>,
    /// Set once the command has begun the write that is its outcome: from
    /// then on the request timer lets it finish (`http::timeout`).
    pub outcome: OutcomeMark,
}

/// Whether a request's command has begun writing its outcome: a hold, a
/// release, an extension, a join, anything the buyer could not find again
/// by asking again if the answer were cut off. (A checkout's steps are not
/// marked: recovery finishes a cut checkout from its stream, and the
/// purchase asked again answers what it came to.) Shared between the
/// request timer, which sets up one per request, and the command.
#[derive(Debug, Clone, Default)]
pub struct OutcomeMark(Arc<AtomicBool>);

impl OutcomeMark {
    pub fn begin(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn begun(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl RequestContext {
    /// The service acting on its own (`actor`: `system:recovery`, ...):
    /// no client's request, so no request id.
    pub fn system(actor: &str) -> Result<Self, StoreError> {
        Ok(Self {
            actor: Actor::admin(
                BuyerId::parse(actor).map_err(|e| StoreError::Corrupt(format!("{actor}: {e}")))?,
            ),
            sold_by: None,
            request_id: None,
            idempotency_key: None,
            outcome: OutcomeMark::default(),
        })
    }

    pub fn metadata(&self) -> String {
        let mut meta = serde_json::Map::new();
        meta.insert("actor".into(), self.actor.id.as_str().into());
        meta.insert("role".into(), self.actor.role.as_str().into());
        if let Some(seller) = &self.sold_by {
            meta.insert("sold_by".into(), seller.as_str().into());
        }
        if let Some(request_id) = &self.request_id {
            meta.insert("request_id".into(), request_id.as_str().into());
        }
        if let Some(key) = &self.idempotency_key {
            meta.insert("idempotency_key".into(), key.as_str().into());
        }
        serde_json::Value::Object(meta).to_string()
    }

    /// The same request made by an admin for `buyer` (the box office): the
    /// buyer owns what it places, the admin is recorded as the seller.
    pub fn selling_to(&self, buyer: BuyerId) -> Self {
        Self {
            actor: Actor::admin(buyer),
            sold_by: Some(self.actor.id.clone()),
            ..self.clone()
        }
    }
}
