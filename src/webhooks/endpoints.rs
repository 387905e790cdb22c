//! Webhook endpoints (admin): registration with its rules, listing,
//! deletion, and an endpoint's deliveries with their manual retry.
//!
//! The secret is stored as it is returned (`whsec_<base64>`), in the
//! service's own database: signing needs the key itself, so a hash would
//! not do, and encrypting it with a key from the configuration would only
//! move the secret beside `BOOKING_JWT_SECRET`, which already lets its
//! holder act as any admin. Whoever can read the database can also forge
//! bookings; protect it (and its backups) as the secret it holds. It is
//! shown once, at registration; to rotate it, register a new endpoint and
//! delete the old one.

use std::sync::Arc;

use base64::Engine;
use rand::RngCore;

use crate::clock::Clock;
use crate::store::{
    DeliveryId, DeliveryRow, DeliveryStatus, EndpointId, EndpointRow, EventLog, RetryOutcome,
    StoreError, WebhookEventType, WebhookOutbox,
};
use projections::time::to_micros;

/// docs/api.md: a longer URL is refused (422).
pub const MAX_URL_CHARS: usize = 2_048;

/// Endpoints per service at most: every dispatcher pass looks at all of
/// them, and a platform needs a handful, not thousands.
pub const MAX_ENDPOINTS: i64 = 100;

/// Random bytes in a secret: Standard Webhooks asks for 24 to 64.
pub const SECRET_BYTES: usize = 24;

pub const SECRET_PREFIX: &str = "whsec_";

/// Deliveries in one list answer at most, and by default.
pub const MAX_DELIVERIES_PAGE: i64 = 500;
pub const DEFAULT_DELIVERIES_PAGE: i64 = 100;

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("url is longer than {MAX_URL_CHARS} characters")]
    UrlTooLong,
    #[error("url carries credentials (user or password); put none in it")]
    UrlCredentials,
    #[error("url {0}")]
    UrlInvalid(String),
    #[error("unknown event type {0:?}")]
    UnknownEventType(String),
    #[error("{0}")]
    Invalid(String),
    #[error("at most {MAX_ENDPOINTS} endpoints may be registered")]
    TooManyEndpoints,
    #[error("no webhook endpoint has this id")]
    EndpointNotFound,
    #[error("the endpoint has no delivery with this id")]
    DeliveryNotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A URL an endpoint may have: `http` or `https`, with a host, without
/// credentials, at most [`MAX_URL_CHARS`] printable ASCII characters.
/// Returned as given (the API echoes what the admin sent).
pub fn check_url(raw: &str) -> Result<url::Url, WebhookError> {
    if raw.chars().count() > MAX_URL_CHARS {
        return Err(WebhookError::UrlTooLong);
    }
    // The URL parser would trim spaces and drop tabs and newlines; a URL
    // that needs that is not the one the admin meant.
    if !raw.chars().all(|c| c.is_ascii_graphic()) {
        return Err(WebhookError::UrlInvalid(
            "must be printable ASCII without spaces".into(),
        ));
    }
    let lower = raw.to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
    else {
        return Err(WebhookError::UrlInvalid(
            "must be an http:// or https:// URL".into(),
        ));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(WebhookError::UrlCredentials);
    }
    let url =
        url::Url::parse(raw).map_err(|e| WebhookError::UrlInvalid(format!("is not valid: {e}")))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(WebhookError::UrlCredentials);
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(WebhookError::UrlInvalid("has no host".into()));
    }
    Ok(url)
}

/// The event types asked for: at least one, each known, none twice.
pub fn check_events(names: &[String]) -> Result<Vec<WebhookEventType>, WebhookError> {
    if names.is_empty() {
        return Err(WebhookError::Invalid(
            "events must name at least one event type".into(),
        ));
    }
    let mut events = Vec::with_capacity(names.len());
    for name in names {
        let event: WebhookEventType = name
            .parse()
            .map_err(|_| WebhookError::UnknownEventType(name.clone()))?;
        if events.contains(&event) {
            return Err(WebhookError::Invalid(format!("events names {name} twice")));
        }
        events.push(event);
    }
    Ok(events)
}

/// A new secret: `whsec_` and the base64 of [`SECRET_BYTES`] random bytes
/// (the thread generator is a CSPRNG, reseeded from the OS).
pub fn new_secret() -> String {
    let mut key = [0u8; SECRET_BYTES];
    rand::thread_rng().fill_bytes(&mut key);
    format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

pub struct WebhookEndpoints {
    outbox: WebhookOutbox,
    log: EventLog,
    clock: Arc<dyn Clock>,
}

impl WebhookEndpoints {
    pub fn new(outbox: WebhookOutbox, log: EventLog, clock: Arc<dyn Clock>) -> Self {
        Self { outbox, log, clock }
    }

    /// Registers an endpoint. It hears of events recorded after this: the
    /// log's head now is where its deliveries begin.
    pub async fn register(
        &self,
        url: &str,
        events: &[String],
    ) -> Result<EndpointRow, WebhookError> {
        check_url(url)?;
        let events = check_events(events)?;
        if self.outbox.count_webhook_endpoints().await? >= MAX_ENDPOINTS {
            return Err(WebhookError::TooManyEndpoints);
        }
        let row = EndpointRow {
            endpoint_id: EndpointId(uuid::Uuid::new_v4()),
            url: url.to_owned(),
            events,
            secret: new_secret(),
            after: self.log.head_cursor().await?,
            created_at_us: to_micros(self.clock.now()),
        };
        self.outbox.insert_webhook_endpoint(&row).await?;
        tracing::info!(endpoint_id = %row.endpoint_id, url = %row.url, "webhook endpoint registered");
        Ok(row)
    }

    pub async fn list(&self) -> Result<Vec<EndpointRow>, WebhookError> {
        Ok(self.outbox.webhook_endpoints().await?)
    }

    /// Deletes an endpoint with its deliveries (pending ones are not sent).
    pub async fn delete(&self, id: EndpointId) -> Result<(), WebhookError> {
        if self.outbox.delete_webhook_endpoint(id).await? {
            tracing::info!(endpoint_id = %id, "webhook endpoint deleted");
            Ok(())
        } else {
            Err(WebhookError::EndpointNotFound)
        }
    }

    /// An endpoint's deliveries, newest first.
    pub async fn deliveries(
        &self,
        id: EndpointId,
        status: Option<DeliveryStatus>,
        limit: Option<i64>,
    ) -> Result<Vec<DeliveryRow>, WebhookError> {
        if self.outbox.webhook_endpoint(id).await?.is_none() {
            return Err(WebhookError::EndpointNotFound);
        }
        let limit = limit
            .unwrap_or(DEFAULT_DELIVERIES_PAGE)
            .clamp(1, MAX_DELIVERIES_PAGE);
        Ok(self.outbox.webhook_deliveries(id, status, limit).await?)
    }

    /// Makes a delivery pending again, due now, with a fresh retry window
    /// (any status: a delivered one is sent again, with the same id).
    pub async fn retry(
        &self,
        id: EndpointId,
        delivery: DeliveryId,
    ) -> Result<DeliveryRow, WebhookError> {
        if self.outbox.webhook_endpoint(id).await?.is_none() {
            return Err(WebhookError::EndpointNotFound);
        }
        let now_us = to_micros(self.clock.now());
        match self
            .outbox
            .retry_webhook_delivery(id, delivery, now_us)
            .await?
        {
            RetryOutcome::Reset(row) => Ok(row),
            RetryOutcome::NotFound => Err(WebhookError::DeliveryNotFound),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_and_https_urls_are_taken_as_given() {
        for url in [
            "https://example.com/hooks",
            "http://127.0.0.1:8080/x?y=1",
            "HTTPS://Example.com",
            "https://[::1]:9000/",
        ] {
            assert!(check_url(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn a_url_of_another_scheme_or_without_host_is_invalid() {
        for url in [
            "ftp://example.com",
            "example.com",
            "https://",
            "javascript:alert(1)",
            " https://example.com",
            "https://exa mple.com",
            "https://example.com/\n",
        ] {
            assert!(
                matches!(check_url(url), Err(WebhookError::UrlInvalid(_))),
                "{url}"
            );
        }
    }

    #[test]
    fn a_url_with_credentials_is_refused() {
        for url in [
            "https://user:pw@example.com",
            "https://user@example.com/",
            "http://:@example.com",
        ] {
            assert!(
                matches!(check_url(url), Err(WebhookError::UrlCredentials)),
                "{url}"
            );
        }
        // An @ in the path is no credential.
        assert!(check_url("https://example.com/a@b").is_ok());
    }

    #[test]
    fn a_url_longer_than_the_limit_is_refused() {
        let base = "https://example.com/";
        let fits = format!("{base}{}", "a".repeat(MAX_URL_CHARS - base.len()));
        assert!(check_url(&fits).is_ok());
        let long = format!("{fits}a");
        assert!(matches!(check_url(&long), Err(WebhookError::UrlTooLong)));
    }

    #[test]
    fn events_must_be_known_present_and_distinct() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            check_events(&names(&["booking.confirmed", "hold.expired"])).unwrap(),
            vec![
                WebhookEventType::BookingConfirmed,
                WebhookEventType::HoldExpired
            ]
        );
        assert!(matches!(check_events(&[]), Err(WebhookError::Invalid(_))));
        assert!(matches!(
            check_events(&names(&["booking.created"])),
            Err(WebhookError::UnknownEventType(name)) if name == "booking.created"
        ));
        assert!(matches!(
            check_events(&names(&["refund.issued", "refund.issued"])),
            Err(WebhookError::Invalid(_))
        ));
    }

    #[test]
    fn a_secret_is_whsec_and_24_random_bytes() {
        let secret = new_secret();
        let key = base64::engine::general_purpose::STANDARD
            .decode(secret.strip_prefix(SECRET_PREFIX).expect("prefix"))
            .expect("base64");
        assert_eq!(key.len(), SECRET_BYTES);
        assert_ne!(new_secret(), secret);
    }
}
