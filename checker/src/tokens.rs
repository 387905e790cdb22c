//! Bearer tokens as the service expects them (`src/auth.rs` of the
//! service): HS256 over the secret's UTF-8 bytes, claims `sub`, `role`,
//! `exp` and, for a partner's buyers, `channels` with the `shows` they hold
//! on (a channel id is its show's own). Minted here so the
//! checker needs nothing of the service's code.

use serde::Serialize;

/// A run lasts minutes; tokens outlive any run.
const TOKEN_TTL_SECONDS: i64 = 6 * 3_600;

#[derive(Serialize)]
struct Claims<'a> {
    sub: &'a str,
    role: &'a str,
    exp: i64,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    channels: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    shows: &'a [String],
}

/// Signs tokens with the run's secret.
#[derive(Clone)]
pub struct Minter {
    key: jsonwebtoken::EncodingKey,
}

impl Minter {
    pub fn new(secret: &str) -> Self {
        Self {
            key: jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        }
    }

    /// A token for `sub` as `role` (`buyer` or `admin`), selling through
    /// `channels` on `shows`.
    pub fn token(
        &self,
        sub: &str,
        role: &str,
        (channels, shows): (&[String], &[String]),
    ) -> anyhow::Result<String> {
        let claims = Claims {
            sub,
            role,
            exp: chrono::Utc::now().timestamp() + TOKEN_TTL_SECONDS,
            channels,
            shows,
        };
        let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        Ok(jsonwebtoken::encode(&header, &claims, &self.key)?)
    }
}
