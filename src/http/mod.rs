//! The HTTP edge: routes, extractors and the error contract. A handler
//! parses, calls one application function, and maps the result.

pub mod extract;
pub mod problem;
mod response;

mod allocations;
mod audit;
mod availability;
mod bookings;
mod box_office;
mod checkins;
mod etag;
mod holds;
mod live;
pub mod openapi;
mod ops;
mod orders;
pub mod page;
mod rate_limit;
mod report;
mod shows;
pub mod starting;
mod stripe;
mod tickets;
mod timeout;
mod venues;
mod waiting_room;
mod waitlist;
mod webhooks;

use std::sync::Arc;

use axum::Router;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::auth::TokenKeys;
use crate::catalog::ShowCatalog;
use crate::clock::Clock;
use crate::command::checkout::CheckoutService;
use crate::command::holds::HoldService;
use crate::rebuild::projector::Projector;
use crate::store::{Database, EventLog, Shows};
use crate::webhooks::endpoints::WebhookEndpoints;
use problem::ApiError;

/// What every handler can reach.
pub struct Services {
    /// The log, for history and availability as of an instant.
    pub log: EventLog,
    /// Seat and shard rows, for availability now.
    pub shows: Shows,
    /// The connection itself, for readiness.
    pub database: Database,
    pub catalog: Arc<ShowCatalog>,
    pub holds: Arc<HoldService>,
    /// Sales channels' allocations (admin).
    pub allocations: Arc<crate::command::allocations::AllocationService>,
    pub checkout: Arc<CheckoutService>,
    /// Price changes (admin).
    pub prices: Arc<crate::command::prices::PriceService>,
    pub projector: Projector,
    pub availability: Arc<crate::query::availability::AvailabilityCache>,
    pub live: Arc<crate::live::LiveHub>,
    pub webhooks: WebhookEndpoints,
    pub keys: TokenKeys,
    pub clock: Arc<dyn Clock>,
    /// Stripe, when the service pays through it (its webhook, the seat
    /// map's Stripe.js).
    pub stripe: Option<Arc<crate::payment::stripe::Stripe>>,
    /// The pages (the seat map's made once for the payment provider).
    pub pages: page::Pages,
    /// Waiting lists: joining, leaving (and the judge's offers).
    pub waitlists: Arc<crate::command::waitlist::WaitlistService>,
    /// Waiting lists as readers see them.
    pub waitlist_book: Arc<crate::query::waitlist::WaitlistBook>,
    /// Tickets: naming, transfers, the door's scans.
    pub tickets: Arc<crate::command::tickets::TicketService>,
    /// The door as staff read it: attendance, conflicts, revocations.
    pub door: Arc<crate::query::door::DoorBook>,
    /// Waiting rooms: joining, standing, the operator's view.
    pub waiting_rooms: Arc<crate::command::waiting_room::WaitingRoomService>,
}

pub type AppState = Arc<Services>;

/// Every route answered within the request timeout.
fn routes() -> Router<AppState> {
    Router::new()
        .merge(shows::router())
        .merge(venues::router())
        .merge(availability::router())
        .merge(allocations::router())
        .merge(holds::router())
        .merge(waiting_room::router())
        .merge(waitlist::router())
        .merge(bookings::router())
        .merge(box_office::router())
        .merge(report::router())
        .merge(orders::router())
        .merge(tickets::router())
        .merge(checkins::router())
        .merge(stripe::router())
        .merge(audit::router())
        .merge(webhooks::router())
        .merge(openapi::router())
        .merge(ops::router())
        .merge(page::router())
}

/// No compression layer here, on purpose: the large read answers opt in
/// route by route (`etag::cached`), so a streaming route (`text/event-stream`)
/// is never compressed by construction.
/// `request_timeout`: see `timeout.rs` (streaming routes go after its layer).
/// `rate_limits`: see `rate_limit.rs` (its layer covers every route, the
/// streams and the fallbacks, inside the metrics).
pub fn router(
    state: AppState,
    request_timeout: std::time::Duration,
    rate_limits: crate::rate_limit::RateLimits,
) -> Router {
    let gate = Arc::new(rate_limit::Gate::new(
        state.keys.clone(),
        crate::rate_limit::RateLimiter::new(rate_limits, state.clock.clone()),
    ));
    routes()
        .layer(axum::middleware::from_fn_with_state(
            request_timeout,
            timeout::request_timeout,
        ))
        // Streaming (text/event-stream) routes are merged here, past the
        // request timeout and inside the metrics.
        .merge(live::router())
        .merge(waiting_room::stream_router())
        // The fallbacks last, so that they cover every route merged above
        // (a route merged after `method_not_allowed_fallback` would answer
        // a wrong method with an empty 405).
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        // Past the fallbacks, so that it covers them too; before the
        // metrics, so that a refused request is still counted there.
        .layer(axum::middleware::from_fn_with_state(gate, rate_limit::limit))
        .layer(axum::middleware::from_fn(crate::metrics::track))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(|request: &axum::http::Request<_>| {
            // One span per request, named by its request id (set just before).
            let request_id = request
                .headers()
                .get(extract::REQUEST_ID)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            tracing::info_span!("request", method = %request.method(), uri = %request.uri(), request_id)
        }))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        // Outermost: whether the client sent its own request id, seen
        // before the layer above makes one up.
        .layer(axum::middleware::from_fn(extract::mark_client_request_id))
        .with_state(state)
}
