//! Identity: HS256 bearer tokens with `sub`, `role` and `exp`, all required;
//! a buyer's token may also name sales `channels` it may sell through, on
//! the `shows` it names.

use chrono::{Duration, Utc};
use domain::ids::{BuyerId, ChannelId, ShowId};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Buyer,
    Admin,
    /// A door's scanner: checks tickets in at the shows its `shows` claim
    /// names, and reads their revocations and attendance.
    Scanner,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Buyer => "buyer",
            Role::Admin => "admin",
            Role::Scanner => "scanner",
        }
    }
}

/// Who is asking: the token's subject and role, verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub id: BuyerId,
    pub role: Role,
    /// The sales channels whose inventory this actor's buyers may hold
    /// (the token's `channels` claim; a partner's site signs its buyers'
    /// tokens with it), on the shows of `shows`.
    pub channels: Vec<ChannelId>,
    /// The shows the token's channels are for (the `shows` claim): a
    /// channel id is a show's own (two shows may each list a `partner-x`
    /// of different partners), so a claim of it holds on these shows only.
    pub shows: Vec<ShowId>,
}

impl Actor {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// May this actor act on something owned by `owner`? Owners may; admins
    /// may act on anything (support, refunds).
    pub fn may_act_for(&self, owner: &str) -> bool {
        self.is_admin() || self.id.as_str() == owner
    }

    /// May this actor sell from `show`'s `channel`'s inventory? An admin
    /// may (the box office); a buyer whose token names the channel and the
    /// show may.
    pub fn may_sell_through(&self, show: &ShowId, channel: &ChannelId) -> bool {
        self.is_admin() || (self.channels.contains(channel) && self.shows.contains(show))
    }

    /// May this actor check tickets in at `show` (and read its door)? An
    /// admin may; a scanner whose token names the show may.
    pub fn may_scan(&self, show: &ShowId) -> bool {
        self.is_admin() || (self.role == Role::Scanner && self.shows.contains(show))
    }

    /// The service itself, or an admin acting as `id`: every show, no
    /// channel claim.
    pub fn admin(id: BuyerId) -> Self {
        Self {
            id,
            role: Role::Admin,
            channels: Vec::new(),
            shows: Vec::new(),
        }
    }
}

/// What a token grants beyond its subject and role: the channels its buyer
/// may sell through, on which shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    pub channels: Vec<ChannelId>,
    pub shows: Vec<ShowId>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    role: Role,
    exp: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    channels: Vec<ChannelId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    shows: Vec<ShowId>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("invalid token: {0}")]
    Invalid(String),
}

/// The shortest `BOOKING_JWT_SECRET` the binary starts with: an HS256 key
/// shorter than the hash's 32-byte output is weak (RFC 7518, 3.2, requires
/// a key of at least the hash size), and a short one can be guessed offline
/// from any token.
pub const MIN_JWT_SECRET_BYTES: usize = 32;

/// Refuses a secret shorter than `MIN_JWT_SECRET_BYTES`, naming the setting.
pub fn check_secret(secret: &str) -> Result<(), String> {
    if secret.len() < MIN_JWT_SECRET_BYTES {
        return Err(format!(
            "BOOKING_JWT_SECRET must be at least {MIN_JWT_SECRET_BYTES} bytes \
             (MIN_JWT_SECRET_BYTES: a shorter HS256 key is weak); it has {}",
            secret.len()
        ));
    }
    Ok(())
}

/// Signs and verifies tokens with one shared secret.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl TokenKeys {
    /// The secret's UTF-8 bytes are the HS256 key.
    pub fn new(secret: &str) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_required_spec_claims(&["exp", "sub"]);
        validation.leeway = 0;
        Self {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
            validation,
        }
    }

    pub fn issue(&self, sub: &BuyerId, role: Role, ttl: Duration) -> Result<String, AuthError> {
        self.issue_granting(sub, role, &Grant::default(), ttl)
    }

    /// A token whose buyer may hold from `grant`'s channels on its shows too.
    pub fn issue_granting(
        &self,
        sub: &BuyerId,
        role: Role,
        grant: &Grant,
        ttl: Duration,
    ) -> Result<String, AuthError> {
        let claims = Claims {
            sub: sub.as_str().to_owned(),
            role,
            exp: (Utc::now() + ttl).timestamp(),
            channels: grant.channels.clone(),
            shows: grant.shows.clone(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| AuthError::Invalid(e.to_string()))
    }

    pub fn verify(&self, token: &str) -> Result<Actor, AuthError> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|e| AuthError::Invalid(e.to_string()))?;
        let id = BuyerId::parse(&data.claims.sub).map_err(|e| AuthError::Invalid(e.to_string()))?;
        Ok(Actor {
            id,
            role: data.claims.role,
            channels: data.claims.channels,
            shows: data.claims.shows,
        })
    }

    /// Verifies an `Authorization` header value (`Bearer <token>`).
    pub fn verify_header(&self, header: Option<&str>) -> Result<Actor, AuthError> {
        let header = header.ok_or(AuthError::Missing)?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .ok_or_else(|| AuthError::Invalid("expected `Bearer <token>`".into()))?;
        self.verify(token.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> TokenKeys {
        TokenKeys::new("test-secret")
    }

    #[test]
    fn a_token_it_issued_verifies_to_the_same_actor() {
        let alice = BuyerId::parse("alice").unwrap();
        let token = keys()
            .issue(&alice, Role::Buyer, Duration::minutes(5))
            .unwrap();
        let actor = keys()
            .verify_header(Some(&format!("Bearer {token}")))
            .unwrap();
        assert_eq!(
            actor,
            Actor {
                id: alice,
                role: Role::Buyer,
                channels: Vec::new(),
                shows: Vec::new(),
            }
        );
    }

    #[test]
    fn a_channel_claim_holds_on_the_shows_the_token_names_only() {
        let partner = ChannelId::parse("partner-x").unwrap();
        let (rock, jazz) = (
            ShowId::parse("rock").unwrap(),
            ShowId::parse("jazz").unwrap(),
        );
        let grant = Grant {
            channels: vec![partner.clone()],
            shows: vec![rock.clone()],
        };
        let bob = BuyerId::parse("bob").unwrap();
        let token = keys()
            .issue_granting(&bob, Role::Buyer, &grant, Duration::minutes(5))
            .unwrap();
        let actor = keys().verify(&token).unwrap();
        assert!(actor.may_sell_through(&rock, &partner));
        assert!(
            !actor.may_sell_through(&jazz, &partner),
            "another show's partner-x"
        );
        let untied = Grant {
            channels: vec![partner.clone()],
            shows: Vec::new(),
        };
        let token = keys()
            .issue_granting(&bob, Role::Buyer, &untied, Duration::minutes(5))
            .unwrap();
        assert!(!keys()
            .verify(&token)
            .unwrap()
            .may_sell_through(&rock, &partner));
    }

    #[test]
    fn a_token_signed_with_another_secret_is_refused() {
        let alice = BuyerId::parse("alice").unwrap();
        let token = TokenKeys::new("other")
            .issue(&alice, Role::Admin, Duration::minutes(5))
            .unwrap();
        assert!(matches!(keys().verify(&token), Err(AuthError::Invalid(_))));
    }

    #[test]
    fn an_expired_token_is_refused() {
        let alice = BuyerId::parse("alice").unwrap();
        let token = keys()
            .issue(&alice, Role::Buyer, Duration::minutes(-5))
            .unwrap();
        assert!(matches!(keys().verify(&token), Err(AuthError::Invalid(_))));
    }

    #[test]
    fn a_token_with_an_unknown_role_or_without_one_is_refused() {
        let key = EncodingKey::from_secret(b"test-secret");
        let exp = (Utc::now() + Duration::minutes(5)).timestamp();
        for claims in [
            serde_json::json!({"sub": "a", "role": "root", "exp": exp}),
            serde_json::json!({"sub": "a", "exp": exp}),
            serde_json::json!({"role": "buyer", "exp": exp}),
            serde_json::json!({"sub": "a", "role": "buyer"}),
        ] {
            let token =
                jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap();
            assert!(keys().verify(&token).is_err(), "{claims} must be refused");
        }
    }

    #[test]
    fn a_missing_header_is_told_apart_from_a_bad_one() {
        assert_eq!(keys().verify_header(None), Err(AuthError::Missing));
        assert!(matches!(
            keys().verify_header(Some("Basic abc")),
            Err(AuthError::Invalid(_))
        ));
    }

    #[test]
    fn a_secret_shorter_than_the_hash_output_is_refused_naming_the_setting() {
        let refused = check_secret(&"s".repeat(MIN_JWT_SECRET_BYTES - 1)).unwrap_err();
        assert!(refused.contains("BOOKING_JWT_SECRET"), "{refused}");
        assert!(refused.contains("32"), "{refused}");
        assert!(check_secret("").is_err());
        assert!(check_secret(&"s".repeat(MIN_JWT_SECRET_BYTES)).is_ok());
    }
}
