//! Stripe, as the payment port: PaymentIntents with manual capture.
//!
//! A small typed client over reqwest for exactly the calls the port needs
//! (create, confirm, retrieve, capture, cancel; refunds), not the
//! `async-stripe` crate: its generated types (a second HTTP stack in 0.x,
//! and in every version fields such as `amount_capturable` required that
//! Stripe-compatible test servers leave out) would cost minutes of build
//! for five endpoints, and would not parse the answers of the server the
//! tests run against. Responses are read leniently: only the fields the
//! port uses.
//!
//! Every call that changes something carries an `Idempotency-Key` (Stripe
//! keeps the first answer for 24 hours). The API version is pinned
//! (`STRIPE_API_VERSION`), so an account upgrade cannot change the shapes
//! read here. The secret key is held in [`SecretKey`], whose `Debug` shows
//! nothing, and is only ever written into the `Authorization` header.
//!
//! Webhooks: [`verify_signature`] checks `Stripe-Signature` (HMAC-SHA256 of
//! `"{t}.{body}"`, constant time, a tolerance on `t`).

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use futures::FutureExt;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::Value;
use sha2::Sha256;

use super::{
    BuyerAction, Decline, Payment, PaymentError, PaymentProvider, PaymentRequest, PaymentState,
    Refund,
};

/// The API version the shapes read here were written against.
pub const STRIPE_API_VERSION: &str = "2022-11-15";

/// Stripe's own base URL.
pub const DEFAULT_API_BASE: &str = "https://api.stripe.com";

/// How old a webhook's signed timestamp may be (Stripe's own libraries use
/// the same 5 minutes): a replayed old event is refused.
pub const WEBHOOK_TOLERANCE_SECONDS: i64 = 300;

/// A secret that must never reach a log, an error detail or `/metrics`.
#[derive(Clone)]
pub struct SecretKey(String);

impl SecretKey {
    pub fn new(key: String) -> Self {
        Self(key)
    }

    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

/// How to reach Stripe.
#[derive(Debug, Clone)]
pub struct StripeSettings {
    pub secret_key: SecretKey,
    /// `BOOKING_STRIPE_API_BASE` (a test server in tests).
    pub api_base: String,
    /// `BOOKING_STRIPE_WEBHOOK_SECRET` (`whsec_...`).
    pub webhook_secret: SecretKey,
    /// `BOOKING_STRIPE_PUBLISHABLE_KEY` (`pk_...`): what the seat map's
    /// Stripe.js is started with. Public by design.
    pub publishable_key: Option<String>,
    /// `BOOKING_STRIPE_JS_URL`: where the seat map loads Stripe.js from.
    pub js_url: String,
}

pub struct Stripe {
    client: reqwest::Client,
    settings: StripeSettings,
}

/// The fields of a PaymentIntent the port reads.
#[derive(Debug, Deserialize)]
struct PaymentIntent {
    id: String,
    status: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    next_action: Option<Value>,
    #[serde(default)]
    last_payment_error: Option<StripeError>,
}

#[derive(Debug, Default, Deserialize)]
struct StripeError {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    decline_code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: StripeError,
}

#[derive(Debug, Deserialize)]
struct RefundObject {
    id: String,
}

impl StripeError {
    fn decline(self) -> Decline {
        Decline {
            code: self.decline_code.or(self.code),
            message: self.message.unwrap_or_else(|| "card declined".into()),
        }
    }
}

impl PaymentIntent {
    fn payment(self) -> Payment {
        let state = match self.status.as_str() {
            "requires_confirmation" => PaymentState::Unconfirmed,
            "requires_action" => PaymentState::NeedsBuyer(BuyerAction {
                client_secret: self.client_secret.unwrap_or_default(),
                next_action: self.next_action.unwrap_or(Value::Null),
            }),
            "requires_capture" => PaymentState::Authorized,
            "processing" => PaymentState::Processing,
            "succeeded" => PaymentState::Captured,
            "canceled" => PaymentState::Canceled,
            // requires_payment_method: refused (or authentication failed);
            // a new attempt needs a new payment.
            _ => PaymentState::Declined(self.last_payment_error.unwrap_or_default().decline()),
        };
        Payment {
            payment_id: self.id,
            state,
        }
    }
}

/// What one call came to, before it is read as a PaymentIntent.
enum Answer {
    Ok(Vec<u8>),
    /// 402: the card was refused.
    CardError(StripeError),
    /// 400/404: the request was refused; nothing happened.
    Refused(StripeError),
}

impl Stripe {
    /// A client whose calls end after `timeout` (their outcome then
    /// unknown): the checkout's payment timeout.
    pub fn new(settings: StripeSettings, timeout: Duration) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self { client, settings })
    }

    pub fn settings(&self) -> &StripeSettings {
        &self.settings
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.settings.api_base.trim_end_matches('/'))
    }

    /// One call. Connection refused: nothing happened (`Unavailable`); a
    /// timeout or a 5xx after the request left: `Unknown`; 429: Stripe did
    /// nothing (`Unavailable`).
    async fn call(
        &self,
        request: reqwest::RequestBuilder,
        idempotency_key: Option<&str>,
    ) -> Result<Answer, PaymentError> {
        let mut request = request
            .bearer_auth(self.settings.secret_key.expose())
            .header("Stripe-Version", STRIPE_API_VERSION);
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_connect() {
                PaymentError::Unavailable(format!("Stripe is unreachable: {}", without_url(&e)))
            } else {
                PaymentError::Unknown(format!("Stripe did not answer: {}", without_url(&e)))
            }
        })?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| {
                PaymentError::Unknown(format!("Stripe's answer was cut: {}", without_url(&e)))
            })?
            .to_vec();
        let error = || {
            serde_json::from_slice::<ErrorBody>(&body)
                .map(|b| b.error)
                .unwrap_or_default()
        };
        match status.as_u16() {
            200..=299 => Ok(Answer::Ok(body)),
            402 => Ok(Answer::CardError(error())),
            400 | 404 => Ok(Answer::Refused(error())),
            429 => Err(PaymentError::Unavailable("Stripe is rate limiting".into())),
            401 | 403 => {
                tracing::error!(status = status.as_u16(), "Stripe refused the secret key");
                Err(PaymentError::Unavailable(
                    "Stripe refused the API key".into(),
                ))
            }
            other => Err(PaymentError::Unknown(format!("Stripe answered {other}"))),
        }
    }

    async fn retrieve_intent(&self, id: &str) -> Result<Payment, PaymentError> {
        let request = self
            .client
            .get(self.url(&format!("/v1/payment_intents/{id}")));
        match self.call(request, None).await? {
            Answer::Refused(error) => Err(PaymentError::Invalid(
                error
                    .message
                    .unwrap_or_else(|| format!("no PaymentIntent {id}")),
            )),
            answer => read(answer, id),
        }
    }

    async fn post_intent(
        &self,
        id: &str,
        operation: &str,
        key: &str,
    ) -> Result<Payment, PaymentError> {
        let url = self.url(&format!("/v1/payment_intents/{id}/{operation}"));
        match self
            .call(
                self.client.post(url).form(&[] as &[(&str, &str)]),
                Some(key),
            )
            .await?
        {
            // Capturing a cancelled payment, cancelling a captured one: the
            // payment's state is the answer.
            Answer::Refused(_) => self.retrieve_intent(id).await,
            answer => read(answer, id),
        }
    }

    async fn prepare_intent(&self, request: PaymentRequest<'_>) -> Result<Payment, PaymentError> {
        let amount = request.amount_minor.to_string();
        let hold_id = request.hold_id.to_string();
        let currency = request.currency.code();
        let form = [
            ("amount", amount.as_str()),
            ("currency", currency.as_str()),
            ("capture_method", "manual"),
            ("payment_method", request.payment_method),
            ("payment_method_types[]", "card"),
            ("metadata[hold_id]", hold_id.as_str()),
        ];
        let post = self
            .client
            .post(self.url("/v1/payment_intents"))
            .form(&form);
        match self.call(post, Some(request.idempotency_key)).await? {
            Answer::Ok(body) => parse_intent(&body),
            // An unknown PaymentMethod, an amount Stripe refuses: the
            // request's fault; nothing was created.
            Answer::CardError(error) | Answer::Refused(error) => Err(PaymentError::Invalid(
                error
                    .message
                    .unwrap_or_else(|| "Stripe refused the payment".into()),
            )),
        }
    }

    async fn refund_intent(
        &self,
        id: &str,
        amount_minor: Option<i64>,
        key: &str,
    ) -> Result<Refund, PaymentError> {
        let mut form = vec![("payment_intent", id.to_owned())];
        if let Some(amount) = amount_minor {
            form.push(("amount", amount.to_string()));
        }
        let post = self.client.post(self.url("/v1/refunds")).form(&form);
        match self.call(post, Some(key)).await? {
            Answer::Ok(body) => serde_json::from_slice::<RefundObject>(&body)
                .map(|refund| Refund {
                    refund_id: refund.id,
                })
                .map_err(|e| PaymentError::Unknown(format!("an unreadable refund: {e}"))),
            Answer::CardError(error) | Answer::Refused(error) => Err(PaymentError::Invalid(
                error
                    .message
                    .unwrap_or_else(|| "Stripe refused the refund".into()),
            )),
        }
    }

    /// The hold a PaymentIntent is for (its `metadata.hold_id`), as Stripe
    /// has it now: what the webhook endpoint acts on, never the event's copy.
    pub async fn hold_of(&self, id: &str) -> Result<(Payment, Option<String>), PaymentError> {
        let request = self
            .client
            .get(self.url(&format!("/v1/payment_intents/{id}")));
        let body = match self.call(request, None).await? {
            Answer::Ok(body) => body,
            Answer::CardError(error) | Answer::Refused(error) => {
                return Err(PaymentError::Invalid(
                    error
                        .message
                        .unwrap_or_else(|| format!("no PaymentIntent {id}")),
                ))
            }
        };
        let value: Value = serde_json::from_slice(&body)
            .map_err(|e| PaymentError::Unknown(format!("an unreadable PaymentIntent: {e}")))?;
        let hold = value["metadata"]["hold_id"].as_str().map(str::to_owned);
        let intent: PaymentIntent = serde_json::from_value(value)
            .map_err(|e| PaymentError::Unknown(format!("an unreadable PaymentIntent: {e}")))?;
        Ok((intent.payment(), hold))
    }
}

fn parse_intent(body: &[u8]) -> Result<Payment, PaymentError> {
    serde_json::from_slice::<PaymentIntent>(body)
        .map(PaymentIntent::payment)
        .map_err(|e| PaymentError::Unknown(format!("an unreadable PaymentIntent: {e}")))
}

/// The PaymentIntent `id` an answer shows: itself, or declined by a card
/// error (Stripe's 402 on confirm). A refused request is read by the caller.
fn read(answer: Answer, id: &str) -> Result<Payment, PaymentError> {
    match answer {
        Answer::Ok(body) => parse_intent(&body),
        Answer::CardError(error) => Ok(Payment {
            payment_id: id.to_owned(),
            state: PaymentState::Declined(error.decline()),
        }),
        Answer::Refused(error) => Err(PaymentError::Invalid(
            error
                .message
                .unwrap_or_else(|| "Stripe refused the request".into()),
        )),
    }
}

/// A reqwest error's text without its URL (which names the API base; the
/// key is never in it, but a detail should not carry addresses either).
fn without_url(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), "<stripe>");
    }
    text
}

impl PaymentProvider for Stripe {
    fn name(&self) -> &'static str {
        "stripe"
    }

    /// A PaymentMethod id (`pm_...`), as Stripe.js creates it.
    /// Every card method but the simulator's and the box office's.
    fn takes(&self, payment_method: &str) -> bool {
        !payment_method.starts_with(super::simulator::SIMULATOR_METHOD_PREFIX)
            && !payment_method.starts_with(super::offline::OFFLINE_METHOD_PREFIX)
    }

    fn check_method(&self, payment_method: &str) -> Result<(), PaymentError> {
        let well_formed = payment_method.starts_with("pm_")
            && payment_method.len() <= super::MAX_PAYMENT_METHOD_CHARS
            && payment_method
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if well_formed {
            Ok(())
        } else {
            Err(PaymentError::Invalid(format!(
                "payment_method must be a Stripe PaymentMethod id (pm_...), got {payment_method:?}"
            )))
        }
    }

    fn prepare<'a>(
        &'a self,
        request: PaymentRequest<'a>,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        self.prepare_intent(request).boxed()
    }

    fn authorize<'a>(
        &'a self,
        payment_id: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        self.post_intent(payment_id, "confirm", idempotency_key)
            .boxed()
    }

    fn retrieve<'a>(&'a self, payment_id: &'a str) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        self.retrieve_intent(payment_id).boxed()
    }

    fn capture<'a>(
        &'a self,
        payment_id: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        self.post_intent(payment_id, "capture", idempotency_key)
            .boxed()
    }

    fn cancel<'a>(
        &'a self,
        payment_id: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        self.post_intent(payment_id, "cancel", idempotency_key)
            .boxed()
    }

    fn refund<'a>(
        &'a self,
        payment_id: &'a str,
        amount_minor: Option<i64>,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Refund, PaymentError>> {
        self.refund_intent(payment_id, amount_minor, idempotency_key)
            .boxed()
    }
}

/// Why a webhook's signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("no Stripe-Signature header, or one without t= and v1=")]
    Malformed,
    #[error("the signed timestamp is more than {WEBHOOK_TOLERANCE_SECONDS} s from now")]
    Stale,
    #[error("no v1 signature matches")]
    Mismatch,
}

/// Checks `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=...]` against
/// the body: HMAC-SHA256 of `"{t}.{body}"` keyed with the endpoint secret
/// (the whole `whsec_...` string, as Stripe uses it), compared in constant
/// time, `t` within [`WEBHOOK_TOLERANCE_SECONDS`] of `now`.
pub fn verify_signature(
    secret: &SecretKey,
    header: &str,
    body: &[u8],
    now: DateTime<Utc>,
) -> Result<(), SignatureError> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", v1)) => signatures.extend(hex::decode(v1).ok()),
            _ => {}
        }
    }
    let (Some(timestamp), false) = (timestamp, signatures.is_empty()) else {
        return Err(SignatureError::Malformed);
    };
    if (now.timestamp() - timestamp).abs() > WEBHOOK_TOLERANCE_SECONDS {
        return Err(SignatureError::Stale);
    }
    let matches = signatures.iter().any(|signature| {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes()) else {
            return false;
        };
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac.verify_slice(signature).is_ok()
    });
    if matches {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

/// The header Stripe would send for `body` at `t` (tests, and the bench's
/// Stripe-shaped events).
pub fn sign(secret: &SecretKey, t: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> SecretKey {
        SecretKey::new("whsec_test_secret".into())
    }

    fn at(t: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(t, 0).unwrap()
    }

    #[test]
    fn a_signature_stripe_would_send_verifies() {
        let body = br#"{"id":"evt_1"}"#;
        let header = sign(&secret(), 1_800_000_000, body);
        assert_eq!(
            verify_signature(&secret(), &header, body, at(1_800_000_100)),
            Ok(())
        );
    }

    #[test]
    fn another_body_secret_or_a_stale_timestamp_is_refused() {
        let body = br#"{"id":"evt_1"}"#;
        let header = sign(&secret(), 1_800_000_000, body);
        let now = at(1_800_000_000);
        assert_eq!(
            verify_signature(&secret(), &header, br#"{"id":"evt_2"}"#, now),
            Err(SignatureError::Mismatch)
        );
        let other = SecretKey::new("whsec_other".into());
        assert_eq!(
            verify_signature(&other, &header, body, now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(&secret(), &header, body, at(1_800_000_301)),
            Err(SignatureError::Stale)
        );
        for malformed in ["", "t=1", "v1=00", "t=x,v1=00"] {
            assert_eq!(
                verify_signature(&secret(), malformed, body, now),
                Err(SignatureError::Malformed),
                "{malformed}"
            );
        }
    }

    #[test]
    fn a_secret_key_never_shows_in_debug() {
        let key = SecretKey::new("sk_live_do_not_print".into());
        assert!(!format!("{key:?}").contains("do_not_print"));
    }

    #[test]
    fn a_payment_intent_reads_as_the_port_states() {
        let read = |json: &str| {
            serde_json::from_str::<PaymentIntent>(json)
                .unwrap()
                .payment()
        };
        assert_eq!(
            read(r#"{"id":"pi_1","status":"requires_capture"}"#).state,
            PaymentState::Authorized
        );
        let declined = read(
            r#"{"id":"pi_1","status":"requires_payment_method","last_payment_error":{"code":"payment_intent_authentication_failure","message":"failed"}}"#,
        );
        assert_eq!(
            declined.state,
            PaymentState::Declined(Decline {
                code: Some("payment_intent_authentication_failure".into()),
                message: "failed".into()
            })
        );
        let action = read(
            r#"{"id":"pi_1","status":"requires_action","client_secret":"pi_1_secret","next_action":{"type":"use_stripe_sdk"}}"#,
        );
        assert!(
            matches!(action.state, PaymentState::NeedsBuyer(BuyerAction { ref client_secret, .. }) if client_secret == "pi_1_secret")
        );
    }
}
