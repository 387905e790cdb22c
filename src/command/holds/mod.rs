//! Holds: place, read and release, all or nothing across the units of a hold
//! (seats, or places in the shards of a pool).
//!
//! Each command is a decision run by `command::round` (lock, refresh, one
//! `now`, append at the decided versions, again on conflict): the answer is
//! always a decision, never the conflict itself.
//!
//! `HoldService` hands each command to its handler, a type in the
//! command's own file. By step: `request` (what is asked, checked against
//! the show), `place` (the handler placing a new hold, or answering an
//! idempotent retry), `placement` (what every placing decision shares),
//! `place_seats` and `place_pool` (the decisions placing listed seats, or
//! places of a pool), `best` (best available: the handler and the decision
//! that chooses the seats) and `claims` (what concurrent choices of this
//! instance keep from each other), `read` (the reader: a stored hold as the
//! API shows it), `release` (ending a hold before it is bought: released by
//! the buyer, or expired by the sweeper) and `extend` (moving an active
//! hold's expiry on, up to the show's cap).

mod best;
mod claims;
pub(crate) mod extend;
mod offer;
mod place;
mod place_pool;
mod place_seats;
mod placement;
mod read;
mod release;
mod request;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use domain::ids::{BookingId, ChannelId, HoldId, OrderId, PoolId, SeatId, ShowId};
use projections::holds::HoldStatus;
use serde::Serialize;

use crate::auth::Actor;
use crate::catalog::ShowCatalog;
use crate::clock::Clock;
use crate::command::context::RequestContext;
use crate::command::round::{RoundError, Rounds};
use crate::command::waiting_room::{WaitingRoomError, WaitingRoomService};
use crate::query::availability::AvailabilityCache;
use crate::store::{Holds, IdempotencyKeys, Shows, StoreError};

use best::BestHandler;
use extend::ExtendHandler;
use place::PlaceHandler;
use read::HoldReader;
use release::ReleaseHandler;

pub use best::MAX_CHOOSE_ROUNDS;
pub use offer::WAITLIST_ACTOR;
pub use read::{hold_amount, hold_items};
pub use request::{HoldRequest, Sale, SeatAsk};

#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    #[error("show not found")]
    ShowNotFound,
    /// The request breaks a rule (422 `validation_failed`); the text names it.
    #[error("{0}")]
    Invalid(String),
    /// A decision refused in a way the command rules out: a bug (500,
    /// logged with this text, never answered with it).
    #[error("{0}")]
    Bug(String),
    #[error("unknown seats")]
    UnknownSeats(Vec<SeatId>),
    #[error("unknown pool")]
    UnknownPool(PoolId),
    #[error("seats taken")]
    SeatsTaken(Vec<SeatId>),
    /// Seats allocated to a sales channel the hold is not from (or public
    /// seats, for a channel's hold).
    #[error("seats not for sale here")]
    NotForSale(Vec<SeatId>),
    /// A channel the show does not list (422, naming it).
    #[error("the show has no sales channel {0}")]
    UnknownChannel(ChannelId),
    #[error("sold out")]
    SoldOut { available: u32 },
    #[error("the buyer has {current} of at most {limit} seats on this show")]
    BuyerLimitReached { limit: u32, current: u32 },
    #[error("no block of free seats side by side of that size")]
    NoAdjacentSeats,
    #[error("idempotency key reused with another request")]
    IdempotencyKeyReused,
    /// A ticket type the show does not sell, or does not price for what
    /// was asked (422 `ticket_type_unavailable`); the text says which.
    #[error("{0}")]
    TicketTypeUnavailable(String),
    #[error("hold not found")]
    HoldNotFound,
    #[error("not your hold")]
    Forbidden,
    #[error("the hold has been converted into a booking")]
    HoldConverted,
    #[error("the hold has expired")]
    HoldExpired,
    #[error("the hold was released")]
    HoldReleased,
    #[error("the hold already lasts as long as the show allows")]
    ExtensionLimit,
    /// The show sells through a waiting room and the buyer is not
    /// admitted at the hold's instant.
    #[error("the buyer is not admitted from the show's waiting room")]
    AdmissionRequired(ShowId),
    /// The waiting-list entry an offer was for is no longer waiting
    /// (offered by another instance, or left).
    #[error("the entry is no longer waiting")]
    OfferGone,
    #[error("contention did not settle")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A hold as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HoldView {
    #[schema(value_type = uuid::Uuid)]
    pub hold_id: HoldId,
    pub show_id: String,
    pub seats: Vec<String>,
    pub pool_id: Option<String>,
    pub quantity: Option<u32>,
    pub expires_at: DateTime<Utc>,
    /// `held`, `expired`, `released` or `converted`.
    #[schema(value_type = String)]
    pub status: HoldStatus,
    /// Set once the hold was converted into a booking.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<uuid::Uuid>)]
    pub booking_id: Option<BookingId>,
    /// Set once the hold was converted by an order (instead of a booking).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<uuid::Uuid>)]
    pub order_id: Option<OrderId>,
    /// What each seat, or a pool's places, costs: fixed when the hold was
    /// placed.
    pub items: Vec<ItemView>,
    /// What a purchase of the hold charges: the items' sum.
    pub amount_cents: i64,
    /// The hold is a waiting list's offer to its buyer (its id is the
    /// entry's).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub offer: bool,
}

/// One line of a hold: a seat, or places of a pool, with its price.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ItemView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<String>,
    /// 1 for a seat.
    pub quantity: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    pub ticket_type: String,
    /// A seat's, or one place's, price.
    pub price_cents: i64,
}

#[derive(Debug)]
pub enum Placed {
    /// A new hold (201).
    New(HoldView),
    /// The hold an earlier request with the same idempotency key made (200).
    Existing(HoldView),
}

impl RoundError for HoldError {
    fn contended() -> Self {
        HoldError::Busy
    }

    fn bug(what: String) -> Self {
        HoldError::Bug(what)
    }
}

/// What holds read of the database (their writes go through the round).
pub struct HoldReads {
    /// Hold records: what a hold is now.
    pub records: Holds,
    /// Which hold a buyer's idempotency key made.
    pub keys: IdempotencyKeys,
    /// Seat rows, for best available's statuses.
    pub shows: Shows,
}

/// The hold commands and reads, one handler each (`place`, `release`,
/// `extend`, `read`): what the HTTP edge, the sweeper and the webhooks
/// call.
pub struct HoldService {
    placing: PlaceHandler,
    releasing: ReleaseHandler,
    extending: ExtendHandler,
    reader: HoldReader,
}

impl HoldService {
    pub fn new(
        reads: HoldReads,
        catalog: Arc<ShowCatalog>,
        clock: Arc<dyn Clock>,
        rounds: Arc<Rounds>,
        availability: Arc<AvailabilityCache>,
        waiting_rooms: Arc<WaitingRoomService>,
    ) -> Self {
        let HoldReads {
            records,
            keys,
            shows,
        } = reads;
        let reader = HoldReader::new(records, catalog, clock.clone(), rounds.clone());
        let best = BestHandler::new(shows, availability, clock.clone(), rounds.clone());
        Self {
            placing: PlaceHandler {
                keys,
                reader: reader.clone(),
                rounds: rounds.clone(),
                clock: clock.clone(),
                waiting_rooms,
                best,
            },
            releasing: ReleaseHandler::new(reader.clone(), rounds.clone()),
            extending: ExtendHandler::new(reader.clone(), rounds, clock),
            reader,
        }
    }

    /// `POST /v1/shows/{id}/holds` (see `place`).
    pub async fn place(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        request: HoldRequest,
        sale: Sale,
    ) -> Result<Placed, HoldError> {
        let placing: &PlaceHandler = &self.placing;
        placing.place(ctx, show_id, request, sale).await
    }

    /// The waiting list's offers, each entry its seats (see `offer`).
    pub async fn offer(
        &self,
        list: &mut crate::command::round::WaitlistLock,
        entry: &crate::catalog::CatalogEntry,
        offers: &[(domain::waitlist::Entry, Vec<SeatId>)],
    ) -> Result<(), HoldError> {
        let placing: &PlaceHandler = &self.placing;
        placing.offer(list, entry, offers).await
    }

    /// The waiting list's offer of `quantity` places of `pool_id` to one
    /// entry (see `offer`).
    pub async fn offer_places(
        &self,
        list: &mut crate::command::round::WaitlistLock,
        entry: &crate::catalog::CatalogEntry,
        offered: &domain::waitlist::Entry,
        (pool_id, quantity): (&domain::ids::PoolId, u32),
    ) -> Result<(), HoldError> {
        let placing: &PlaceHandler = &self.placing;
        placing
            .offer_places(list, entry, offered, (pool_id, quantity))
            .await
    }

    /// `DELETE /v1/holds/{id}` (see `release`): the hold's show.
    pub async fn release(
        &self,
        ctx: &RequestContext,
        hold_id: &HoldId,
    ) -> Result<ShowId, HoldError> {
        let releasing: &ReleaseHandler = &self.releasing;
        releasing.release(ctx, hold_id).await
    }

    /// Records an expired hold as expired (the sweeper; see `release`).
    pub async fn expire(&self, ctx: &RequestContext, hold_id: &HoldId) -> Result<(), HoldError> {
        let releasing: &ReleaseHandler = &self.releasing;
        releasing.expire(ctx, hold_id).await
    }

    /// `POST /v1/holds/{id}/extend` (see `extend`).
    pub async fn extend(
        &self,
        ctx: &RequestContext,
        hold_id: &HoldId,
    ) -> Result<HoldView, HoldError> {
        let extending: &ExtendHandler = &self.extending;
        extending.extend(ctx, hold_id).await
    }

    /// `GET /v1/holds/{id}`.
    pub async fn get(&self, actor: &Actor, hold_id: &HoldId) -> Result<HoldView, HoldError> {
        let reader: &HoldReader = &self.reader;
        reader.get(actor, hold_id).await
    }

    /// A hold as the API shows it, whoever owns it (a system reader such
    /// as the webhook dispatcher); `None` if there is no such hold.
    pub async fn view_any(&self, hold_id: &HoldId) -> Result<Option<HoldView>, HoldError> {
        let reader: &HoldReader = &self.reader;
        reader.view_any(hold_id).await
    }
}

/// A price asked for that the show does not have.
impl From<domain::pricing::PriceError> for HoldError {
    fn from(e: domain::pricing::PriceError) -> Self {
        match e {
            unavailable @ domain::pricing::PriceError::Unavailable { .. } => {
                HoldError::TicketTypeUnavailable(unavailable.to_string())
            }
            other => HoldError::Bug(format!("pricing a hold: {other}")),
        }
    }
}

/// The waiting room's errors, met while checking an admission.
impl From<WaitingRoomError> for HoldError {
    fn from(e: WaitingRoomError) -> Self {
        match e {
            WaitingRoomError::Store(e) => HoldError::Store(e),
            WaitingRoomError::Busy => HoldError::Busy,
            other => HoldError::Bug(format!("checking an admission: {other}")),
        }
    }
}
