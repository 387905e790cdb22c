//! A ticket's code: what its QR code holds and a scanner reads.
//!
//! `<payload>.<signature>`, both base64url without padding. The payload is
//! UTF-8 JSON: `{"ticket_id", "show_id", "version", "key_id"}` (the ticket,
//! its show, the ticket's version: 1 at issue, one more at each transfer,
//! and the id of the key that signed it). The signature is Ed25519 over the
//! payload's bytes *as encoded* (the base64url text before the dot is
//! decoded, and its bytes are what was signed): a scanner verifies it with
//! the public key alone, offline (`GET /v1/shows/{id}/ticket-keys`), then
//! checks the ticket and version against the revocations it last fetched.
//! docs/api.md, "Tickets", writes the format down for other scanners.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use domain::ids::ShowId;
use serde::{Deserialize, Serialize};

use super::keys::{KeyRing, TicketKey};
use super::TicketRef;

/// The longest code: what a QR code of this size still holds with room
/// for error correction, and the most a scanner is sent (docs/api.md).
pub const MAX_CODE_CHARS: usize = 400;

/// What a code says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodePayload {
    /// The ticket as the API names it (`{show_id}.{uuid}`).
    pub ticket_id: String,
    pub show_id: ShowId,
    pub version: u32,
    pub key_id: String,
    /// What it admits, for a door without the network to show (never
    /// changing for a ticket); left out when the code would pass
    /// `MAX_CODE_CHARS` with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admits: Option<Admitted>,
}

/// What a code says it admits: a seat or a pool's place, as a ticket type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admitted {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<String>,
    pub ticket_type: String,
}

impl CodePayload {
    /// The ticket the code names, if its id is a ticket's of its show.
    pub fn ticket(&self) -> Option<TicketRef> {
        TicketRef::parse(&self.ticket_id).filter(|t| t.show_id == self.show_id)
    }
}

/// Why a code does not verify: each is 422 `invalid_code` (a code of
/// another show is the caller's to tell).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    #[error("the code is longer than {MAX_CODE_CHARS} characters")]
    TooLong,
    #[error("the code is not <payload>.<signature> in base64url")]
    Malformed,
    #[error("the code's payload is not a ticket's: {0}")]
    Payload(String),
    #[error("the code's signature does not verify")]
    Signature,
}

/// The code of `ticket` at `version`, signed by `key`, saying what it
/// `admits` when that fits.
pub fn sign(key: &TicketKey, ticket: &TicketRef, version: u32, admits: Option<Admitted>) -> String {
    let mut payload = CodePayload {
        ticket_id: ticket.to_string(),
        show_id: ticket.show_id.clone(),
        version,
        key_id: key.key_id.clone(),
        admits,
    };
    let code = signed(key, &payload);
    if code.len() <= MAX_CODE_CHARS || payload.admits.is_none() {
        return code;
    }
    payload.admits = None;
    signed(key, &payload)
}

fn signed(key: &TicketKey, payload: &CodePayload) -> String {
    // A struct of ids, strings and a number always serializes.
    let json = serde_json::to_vec(payload).unwrap_or_default();
    let encoded = URL_SAFE_NO_PAD.encode(json);
    let signature = URL_SAFE_NO_PAD.encode(key.sign(encoded.as_bytes()));
    format!("{encoded}.{signature}")
}

/// The payload of a code whose signature verifies with one of `keys`.
pub fn read(code: &str, keys: &KeyRing) -> Result<CodePayload, CodeError> {
    if code.len() > MAX_CODE_CHARS {
        return Err(CodeError::TooLong);
    }
    let (encoded, signature) = code.trim().split_once('.').ok_or(CodeError::Malformed)?;
    let json = URL_SAFE_NO_PAD
        .decode(encoded)
        .map_err(|_| CodeError::Malformed)?;
    let signature: [u8; 64] = URL_SAFE_NO_PAD
        .decode(signature)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(CodeError::Malformed)?;
    let payload: CodePayload =
        serde_json::from_slice(&json).map_err(|e| CodeError::Payload(e.to_string()))?;
    if !keys.verifies(&payload.key_id, encoded.as_bytes(), &signature) {
        return Err(CodeError::Signature);
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(show: &str) -> TicketRef {
        TicketRef {
            show_id: ShowId::parse(show).unwrap(),
            ticket_id: domain::ids::TicketId(uuid::Uuid::from_u128(42)),
        }
    }

    fn read_code(code: &str, key: &TicketKey) -> CodePayload {
        read(code, &KeyRing::of(key.clone())).unwrap()
    }

    #[test]
    fn a_signed_code_reads_back_and_fits_a_qr_code() {
        let key = TicketKey::from_seed([3; 32]);
        let longest = ticket(&"s".repeat(64));
        let admits = Admitted {
            seat_id: Some("s".repeat(32)),
            pool_id: None,
            ticket_type: "t".repeat(32),
        };
        let code = sign(&key, &longest, 12, Some(admits));
        assert!(code.len() <= MAX_CODE_CHARS, "{} chars", code.len());
        let read = read_code(&code, &key);
        assert_eq!((read.ticket(), read.version), (Some(longest), 12));
        assert_eq!(read.admits, None, "left out: it would not fit");
        let short = ticket("rock");
        let admits = Admitted {
            seat_id: Some("A-1".into()),
            pool_id: None,
            ticket_type: "child".into(),
        };
        let code = sign(&key, &short, 1, Some(admits.clone()));
        assert_eq!(read_code(&code, &key).admits, Some(admits));
    }

    #[test]
    fn a_tampered_or_garbled_code_or_another_keys_is_refused() {
        let key = TicketKey::from_seed([3; 32]);
        let ring = KeyRing::of(key.clone());
        let code = sign(&key, &ticket("rock"), 1, None);
        let (payload, signature) = code.split_once('.').unwrap();
        let forged = URL_SAFE_NO_PAD.encode(
            String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap())
                .unwrap()
                .replace("\"version\":1", "\"version\":2"),
        );
        assert_eq!(
            read(&format!("{forged}.{signature}"), &ring),
            Err(CodeError::Signature)
        );
        assert_eq!(read("garbage", &ring), Err(CodeError::Malformed));
        assert_eq!(read(&"a".repeat(500), &ring), Err(CodeError::TooLong));
        let other = TicketKey::from_seed([4; 32]);
        let elsewhere = sign(&other, &ticket("rock"), 1, None);
        assert_eq!(read(&elsewhere, &ring), Err(CodeError::Signature));
        let not_json = format!("{}.{signature}", URL_SAFE_NO_PAD.encode("{}"));
        assert!(matches!(read(&not_json, &ring), Err(CodeError::Payload(_))));
    }
}
