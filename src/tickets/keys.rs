//! The keys tickets' codes are signed with. One Ed25519 key signs (the
//! newest); every key ever used still verifies (a code names its key's id).
//! The first start makes a key and keeps it in the database, so every
//! instance signs alike; an operator may give one instead
//! (`BOOKING_TICKET_SIGNING_KEY`, the base64url of a 32-byte seed), which
//! is then kept too, and signs from then on (a rotation). The seed is never
//! answered, logged or printed.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ed25519_dalek::{Signer, SigningKey, Verifier, VerifyingKey};
use rand::RngCore;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::store::{StoreError, TicketKeyRow, TicketKeys};

/// The one algorithm: Ed25519 (RFC 8032), which browsers' WebCrypto and
/// every platform's crypto library verify.
pub const ALGORITHM: &str = "Ed25519";

/// A key's id: the first bytes of the SHA-256 of its public key, as hex.
/// The same key given to two instances has the same id.
const KEY_ID_BYTES: usize = 4;

/// A seed given or stored, refused with a reason that never shows it.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("BOOKING_TICKET_SIGNING_KEY must be the base64url of 32 bytes (an Ed25519 seed)")]
    BadSeed,
    #[error("a stored ticket key ({0}) is not a 32-byte seed")]
    BadStored(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One key: its id, and its signing half.
#[derive(Clone)]
pub struct TicketKey {
    pub key_id: String,
    signing: SigningKey,
}

impl std::fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TicketKey")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl TicketKey {
    /// The key of a 32-byte seed.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        let signing = SigningKey::from_bytes(&seed);
        let public = signing.verifying_key();
        let digest = Sha256::digest(public.as_bytes());
        Self {
            key_id: hex::encode(&digest[..KEY_ID_BYTES]),
            signing,
        }
    }

    /// The key of a base64url seed (given by the operator, or stored).
    pub fn from_base64(seed: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD
            .decode(seed.trim().trim_end_matches('='))
            .ok()?;
        Some(Self::from_seed(bytes.try_into().ok()?))
    }

    /// A new random key.
    pub fn generate() -> Self {
        let mut seed = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut seed);
        Self::from_seed(seed)
    }

    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.signing.sign(message).to_bytes()
    }

    pub fn public(&self) -> VerifyingKey {
        self.signing.verifying_key()
    }

    fn row(&self, created_at_us: i64) -> TicketKeyRow {
        TicketKeyRow {
            key_id: self.key_id.clone(),
            secret: URL_SAFE_NO_PAD.encode(self.signing.to_bytes()),
            created_at_us,
        }
    }
}

/// A public key as `GET /v1/shows/{id}/ticket-keys` answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PublicKeyView {
    pub key_id: String,
    /// `Ed25519`.
    pub algorithm: &'static str,
    /// The base64url (no padding) of the 32-byte public key.
    pub public_key: String,
}

/// The service's keys: the newest signs, all verify.
#[derive(Debug, Clone)]
pub struct KeyRing {
    /// Oldest first; never empty.
    keys: Vec<TicketKey>,
}

impl KeyRing {
    /// A ring of one key (tests, tools).
    pub fn of(key: TicketKey) -> Self {
        Self { keys: vec![key] }
    }

    /// The keys kept in the database, with `given` (the operator's) kept
    /// too if it is new; a database without any gets a new key. Two
    /// instances starting at once on an empty database may each store one:
    /// both are read back, and the newest signs on both.
    pub async fn load(
        store: &TicketKeys,
        given: Option<&str>,
        now_us: i64,
    ) -> Result<Self, KeyError> {
        let given = given
            .map(|seed| TicketKey::from_base64(seed).ok_or(KeyError::BadSeed))
            .transpose()?;
        let mut stored = store.all().await?;
        let missing = match &given {
            Some(key) => !stored.iter().any(|row| row.key_id == key.key_id),
            None => stored.is_empty(),
        };
        if missing {
            let key = given.unwrap_or_else(TicketKey::generate);
            store.insert(&key.row(now_us)).await?;
            stored = store.all().await?;
        }
        let keys = stored
            .iter()
            .map(|row| {
                TicketKey::from_base64(&row.secret)
                    .ok_or_else(|| KeyError::BadStored(row.key_id.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if keys.is_empty() {
            return Err(KeyError::BadStored("none kept".into()));
        }
        Ok(Self { keys })
    }

    /// The key that signs: the newest.
    pub fn signing(&self) -> &TicketKey {
        // `keys` is never empty (`of`, `load`).
        &self.keys[self.keys.len() - 1]
    }

    /// Every key, as scanners are given them (newest first).
    pub fn public_keys(&self) -> Vec<PublicKeyView> {
        self.keys
            .iter()
            .rev()
            .map(|key| PublicKeyView {
                key_id: key.key_id.clone(),
                algorithm: ALGORITHM,
                public_key: URL_SAFE_NO_PAD.encode(key.public().as_bytes()),
            })
            .collect()
    }

    /// Whether `signature` over `message` is by the key `key_id`.
    pub fn verifies(&self, key_id: &str, message: &[u8], signature: &[u8; 64]) -> bool {
        let signature = ed25519_dalek::Signature::from_bytes(signature);
        self.keys
            .iter()
            .find(|key| key.key_id == key_id)
            .is_some_and(|key| key.public().verify(message, &signature).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_given_twice_has_the_same_id_and_signs_alike() {
        let seed = URL_SAFE_NO_PAD.encode([7u8; 32]);
        let (a, b) = (
            TicketKey::from_base64(&seed).unwrap(),
            TicketKey::from_base64(&seed).unwrap(),
        );
        assert_eq!(a.key_id, b.key_id);
        assert_eq!(a.key_id.len(), 2 * KEY_ID_BYTES);
        assert_eq!(a.sign(b"x"), b.sign(b"x"));
        assert!(TicketKey::from_base64("short").is_none());
    }

    #[test]
    fn the_ring_verifies_by_key_id_and_refuses_another_keys_signature() {
        let (old, new) = (TicketKey::from_seed([1; 32]), TicketKey::from_seed([2; 32]));
        let ring = KeyRing {
            keys: vec![old.clone(), new.clone()],
        };
        assert_eq!(ring.signing().key_id, new.key_id);
        let signed = old.sign(b"payload");
        assert!(ring.verifies(&old.key_id, b"payload", &signed));
        assert!(!ring.verifies(&new.key_id, b"payload", &signed));
        assert!(!ring.verifies(&old.key_id, b"tampered", &signed));
        assert_eq!(ring.public_keys()[0].key_id, new.key_id, "newest first");
    }
}
