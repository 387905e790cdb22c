//! The error contract: every error is `application/problem+json` with a
//! stable snake_case `code`. Each variant says its status; database and
//! unexpected errors are logged here and answered as an opaque 500.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use crate::catalog::CreateShowError;
use crate::command::checkout::CheckoutError;
use crate::command::holds::HoldError;
use crate::command::prices::PriceChangeError;
use crate::command::waiting_room::WaitingRoomError;
use crate::store::{StoreError, MAX_EVENTS_PER_BATCH};
use crate::webhooks::endpoints::WebhookError;
use domain::checkout::RefundReason;

/// Seconds a client should wait before retrying a 503.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// The detail of an unexpected error: nothing internal leaks in a 500.
const UNEXPECTED_DETAIL: &str = "an unexpected error occurred";

#[derive(Debug)]
pub enum ApiError {
    /// 400: the body is not JSON.
    MalformedJson(String),
    /// 400: a path parameter the route's type cannot hold.
    BadPath(String),
    /// 401: no token, or one that does not verify.
    Unauthorized(String),
    /// 403: a valid token that may not do this.
    Forbidden,
    /// 404: no such route.
    NotFound,
    /// 404
    ShowNotFound,
    /// 404
    HoldNotFound,
    /// 405
    MethodNotAllowed,
    /// 409: a different show exists under this id.
    ShowExists,
    /// 404
    VenueNotFound,
    /// 409: a different venue exists under this id.
    VenueExists,
    /// 422: a ticket type with no price for what was asked.
    TicketTypeUnavailable(String),
    /// 409: some seats are held or booked; nothing was held.
    SeatTaken(Vec<String>),
    /// 409: some seats are allocated to a sales channel the hold is not
    /// from (or public, for a channel's hold); nothing was held.
    SeatNotForSale(Vec<String>),
    /// 422: a sales channel the show does not list.
    UnknownChannel(String),
    /// 409: the pool cannot serve the quantity; `available` places are free.
    SoldOut { available: u32 },
    /// 409 `sold_out`: a waiting room closed, everything booked.
    SaleOver,
    /// 409: the hold would take the buyer past the show's
    /// `max_seats_per_buyer` (`limit`); `current` is what the buyer has.
    BuyerLimitReached { limit: u32, current: u32 },
    /// 409: best available found no block of free seats side by side.
    NoAdjacentSeats,
    /// 422: a pool the show does not have.
    UnknownPool(String),
    /// 409
    HoldConverted,
    /// 409: the hold already expires `max_hold_seconds` after its placement.
    HoldExtensionLimit,
    /// 409: the hold expired before the payment could be captured: nothing
    /// was charged (`voided`: its authorization was cancelled), or a charge
    /// made at once was refunded (`refunded`).
    HoldExpired { refunded: bool, voided: bool },
    /// 409: the hold was released (the same members).
    HoldReleased { refunded: bool, voided: bool },
    /// 404
    OrderNotFound,
    /// 409 with the first lost hold's `code` (`hold_expired`,
    /// `hold_released`, `hold_converted`): holds of an order lost before
    /// conversion; nothing charged (`voided`: the authorization cancelled).
    OrderHoldsLost {
        code: &'static str,
        holds: Vec<String>,
        voided: bool,
    },
    /// 422: a line the order does not have.
    UnknownLine(u32),
    /// 409: the order is not paid (voided, undone, or being paid).
    OrderNotConfirmed,
    /// 409: the show's window for buyers to cancel has closed.
    CancellationClosed,
    /// 402: nothing was charged; another payment method may follow. With the
    /// provider's `decline_code` when it gave one.
    PaymentDeclined {
        message: String,
        decline_code: Option<String>,
    },
    /// 402: the booking was undone because its payment could not be
    /// captured (the authorization expired or was cancelled at the
    /// provider); nothing was charged.
    PaymentNotCaptured { booking_id: String },
    /// 400: a provider's webhook whose signature does not verify.
    InvalidSignature(String),
    /// 403: the show sells through a waiting room and the buyer is not
    /// admitted (`queue` says where to join).
    AdmissionRequired { show_id: String },
    /// 404: the show sells without a waiting room.
    WaitingRoomNotFound,
    /// 404: the buyer has not joined the show's queue.
    QueueEntryNotFound,
    /// 409: the show keeps no waiting list.
    NoWaitlist,
    /// 409: what the entry asks for can be held now.
    AvailableNow,
    /// 409: the buyer waits already, for something else (`entry_id`).
    WaitlistEntryExists { entry_id: String },
    /// 409: the waiting list has taken all the entries it takes.
    WaitlistFull,
    /// 404: no such entry.
    WaitlistEntryNotFound,
    /// 429: past the buyer's or the client's request rate; retry after
    /// `retry_after_seconds` (at least 1).
    RateLimited { retry_after_seconds: u64 },
    /// 503: the payment provider failed; safe to retry. The reason is
    /// logged, never answered: it can carry database or provider text.
    PaymentUnavailable(String),
    /// 404
    BookingNotFound,
    /// 408: the body did not arrive within the body-read timeout; the
    /// connection is closed after this answer.
    BodyTimeout,
    /// 413: the body is larger than the limit named in the detail.
    PayloadTooLarge(String),
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 413: the request would write more events than one transaction
    /// holds (`StoreError::TooLarge`): the client's request is what is too
    /// big, a retry of the same request cannot succeed, and nothing was
    /// written, so it is the payload's fault (4xx), not the service's (5xx).
    TooLarge,
    /// 422: well-formed but invalid; the detail names the field or limit.
    Validation(String),
    /// 422: seats the show does not have.
    UnknownSeat(Vec<String>),
    /// 404: a seat the show does not have, named in the path.
    UnknownSeatHere(String),
    /// 422: the idempotency key was used for a different request.
    IdempotencyKeyReused,
    /// 404: no webhook endpoint has this id.
    WebhookNotFound,
    /// 404: the endpoint has no delivery with this id.
    DeliveryNotFound,
    /// 422: a webhook URL longer than `MAX_URL_CHARS`.
    WebhookUrlTooLong,
    /// 422: a webhook URL with a user or password in it.
    WebhookUrlCredentials,
    /// 422: not an http or https URL with a host; the detail says why.
    WebhookUrlInvalid(String),
    /// 422: an event type the service does not deliver.
    UnknownEventType(String),
    /// 409: `MAX_ENDPOINTS` endpoints are registered already.
    WebhookLimitReached,
    /// 503: the database did not answer in time, or contention did not settle.
    Busy,
    /// 503 from `/readyz`: up, but not ready for traffic (the detail says why).
    NotReady(String),
    /// 500: a bug or a broken database; logged, never described to the client.
    Internal(String),
    /// 404: no ticket has this id (or not one the caller may see).
    TicketNotFound,
    /// 409: the ticket was checked in; it changes hands no more.
    TicketCheckedIn,
    /// 409: the show's `transfer_until` has passed.
    TransferClosed,
    /// 409: the ticket is revoked (its line cancelled).
    TicketRevoked,
    /// A scan the door refused, recorded: its own status and code
    /// (`door_type`).
    Door(crate::command::tickets::Refused),
}

/// One kind of problem: its status, stable `code` and title.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProblemType {
    pub status: StatusCode,
    pub code: &'static str,
    pub title: &'static str,
}

const fn problem(status: StatusCode, code: &'static str, title: &'static str) -> ProblemType {
    ProblemType {
        status,
        code,
        title,
    }
}

/// Every kind of problem the API answers, once. `ApiError::problem_type`
/// maps each variant to its row; the OpenAPI document publishes the codes
/// from here, and a test holds every row used.
pub const PROBLEM_TYPES: &[ProblemType] = &[
    problem(StatusCode::BAD_REQUEST, "malformed_json", "Malformed JSON"),
    problem(
        StatusCode::BAD_REQUEST,
        "invalid_signature",
        "Invalid signature",
    ),
    problem(
        StatusCode::BAD_REQUEST,
        "validation_failed",
        "Validation failed",
    ),
    problem(StatusCode::UNAUTHORIZED, "unauthorized", "Unauthorized"),
    problem(StatusCode::FORBIDDEN, "forbidden", "Forbidden"),
    problem(
        StatusCode::FORBIDDEN,
        "admission_required",
        "Admission required",
    ),
    problem(StatusCode::NOT_FOUND, "not_found", "Not found"),
    problem(StatusCode::NOT_FOUND, "show_not_found", "Show not found"),
    problem(StatusCode::NOT_FOUND, "venue_not_found", "Venue not found"),
    problem(StatusCode::NOT_FOUND, "hold_not_found", "Hold not found"),
    problem(
        StatusCode::NOT_FOUND,
        "waiting_room_not_found",
        "Waiting room not found",
    ),
    problem(
        StatusCode::NOT_FOUND,
        "queue_entry_not_found",
        "Not in the queue",
    ),
    problem(StatusCode::CONFLICT, "no_waitlist", "No waiting list"),
    problem(StatusCode::CONFLICT, "available_now", "Available now"),
    problem(
        StatusCode::CONFLICT,
        "waitlist_entry_exists",
        "Waiting already",
    ),
    problem(StatusCode::CONFLICT, "waitlist_full", "Waiting list full"),
    problem(
        StatusCode::NOT_FOUND,
        "waitlist_entry_not_found",
        "Waiting-list entry not found",
    ),
    problem(
        StatusCode::NOT_FOUND,
        "booking_not_found",
        "Booking not found",
    ),
    problem(StatusCode::NOT_FOUND, "unknown_seat", "Unknown seat"),
    problem(
        StatusCode::NOT_FOUND,
        "webhook_not_found",
        "Webhook not found",
    ),
    problem(
        StatusCode::NOT_FOUND,
        "delivery_not_found",
        "Delivery not found",
    ),
    problem(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "Method not allowed",
    ),
    problem(
        StatusCode::REQUEST_TIMEOUT,
        "request_timeout",
        "Request timeout",
    ),
    problem(StatusCode::CONFLICT, "show_exists", "Show exists"),
    problem(StatusCode::CONFLICT, "venue_exists", "Venue exists"),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "ticket_type_unavailable",
        "Ticket type unavailable",
    ),
    problem(StatusCode::CONFLICT, "seat_taken", "Seat taken"),
    problem(
        StatusCode::CONFLICT,
        "seat_not_for_sale",
        "Seat not for sale here",
    ),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown_channel",
        "Unknown sales channel",
    ),
    problem(StatusCode::CONFLICT, "sold_out", "Sold out"),
    problem(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        "Too many requests",
    ),
    problem(
        StatusCode::CONFLICT,
        "buyer_limit_reached",
        "Buyer limit reached",
    ),
    problem(
        StatusCode::CONFLICT,
        "no_adjacent_seats",
        "No adjacent seats",
    ),
    problem(StatusCode::CONFLICT, "hold_converted", "Hold converted"),
    problem(
        StatusCode::CONFLICT,
        "hold_extension_limit",
        "Hold extension limit",
    ),
    problem(StatusCode::CONFLICT, "hold_expired", "Hold expired"),
    problem(StatusCode::CONFLICT, "hold_released", "Hold released"),
    problem(
        StatusCode::CONFLICT,
        "webhook_limit_reached",
        "Webhook limit reached",
    ),
    problem(
        StatusCode::PAYMENT_REQUIRED,
        "payment_declined",
        "Payment declined",
    ),
    problem(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        "Payload too large",
    ),
    problem(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "Unsupported media type",
    ),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
        "Validation failed",
    ),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown_seat",
        "Unknown seat",
    ),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown_pool",
        "Unknown pool",
    ),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency_key_reused",
        "Idempotency key reused",
    ),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "webhook_url_too_long",
        "Webhook URL too long",
    ),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "webhook_url_credentials",
        "Webhook URL with credentials",
    ),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "webhook_url_invalid",
        "Webhook URL invalid",
    ),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown_event_type",
        "Unknown event type",
    ),
    problem(StatusCode::NOT_FOUND, "order_not_found", "Order not found"),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown_line",
        "Unknown line",
    ),
    problem(
        StatusCode::CONFLICT,
        "order_not_confirmed",
        "Order not confirmed",
    ),
    problem(
        StatusCode::CONFLICT,
        "cancellation_closed",
        "Cancellation closed",
    ),
    problem(
        StatusCode::NOT_FOUND,
        "ticket_not_found",
        "Ticket not found",
    ),
    problem(
        StatusCode::CONFLICT,
        "ticket_checked_in",
        "Ticket checked in",
    ),
    problem(StatusCode::CONFLICT, "transfer_closed", "Transfer closed"),
    problem(StatusCode::CONFLICT, "ticket_revoked", "Ticket revoked"),
    problem(StatusCode::GONE, "ticket_revoked", "Ticket revoked"),
    problem(StatusCode::CONFLICT, "already_inside", "Already inside"),
    problem(
        StatusCode::CONFLICT,
        "reentry_not_allowed",
        "Re-entry not allowed",
    ),
    problem(StatusCode::CONFLICT, "not_inside", "Not inside"),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_code",
        "Invalid code",
    ),
    problem(StatusCode::FORBIDDEN, "wrong_show", "Wrong show"),
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown_gate",
        "Unknown gate",
    ),
    INTERNAL,
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "payment_unavailable",
        "Payment unavailable",
    ),
    problem(StatusCode::SERVICE_UNAVAILABLE, "busy", "Busy"),
    problem(StatusCode::SERVICE_UNAVAILABLE, "not_ready", "Not ready"),
];

/// `internal_error`: also what a variant without a row would answer (a test
/// holds every variant to a row of its own).
const INTERNAL: ProblemType = problem(
    StatusCode::INTERNAL_SERVER_ERROR,
    "internal_error",
    "Internal error",
);

/// The door's refusals, each its row.
fn door_type(refused: &crate::command::tickets::Refused) -> &'static ProblemType {
    use crate::command::tickets::Refused;
    use StatusCode as S;
    match refused {
        Refused::InvalidCode(_) => row(S::UNPROCESSABLE_ENTITY, "invalid_code"),
        Refused::WrongShow => row(S::FORBIDDEN, "wrong_show"),
        Refused::UnknownGate(_) => row(S::UNPROCESSABLE_ENTITY, "unknown_gate"),
        Refused::AlreadyInside { .. } => row(S::CONFLICT, "already_inside"),
        Refused::ReentryNotAllowed => row(S::CONFLICT, "reentry_not_allowed"),
        Refused::NotInside => row(S::CONFLICT, "not_inside"),
        Refused::Revoked => row(S::GONE, "ticket_revoked"),
    }
}

/// The row of `PROBLEM_TYPES` with this status and code.
fn row(status: StatusCode, code: &str) -> &'static ProblemType {
    PROBLEM_TYPES
        .iter()
        .find(|p| p.status == status && p.code == code)
        .unwrap_or(&INTERNAL)
}

/// Every stable `code`, once (as the OpenAPI document publishes them).
pub fn problem_codes() -> Vec<&'static str> {
    let mut codes: Vec<&'static str> = Vec::new();
    for problem in PROBLEM_TYPES {
        if !codes.contains(&problem.code) {
            codes.push(problem.code);
        }
    }
    codes
}

impl ApiError {
    /// The variant's row of `PROBLEM_TYPES`.
    pub fn problem_type(&self) -> &'static ProblemType {
        use ApiError::*;
        use StatusCode as S;
        match self {
            MalformedJson(_) => row(S::BAD_REQUEST, "malformed_json"),
            InvalidSignature(_) => row(S::BAD_REQUEST, "invalid_signature"),
            BadPath(_) => row(S::BAD_REQUEST, "validation_failed"),
            Unauthorized(_) => row(S::UNAUTHORIZED, "unauthorized"),
            Forbidden => row(S::FORBIDDEN, "forbidden"),
            AdmissionRequired { .. } => row(S::FORBIDDEN, "admission_required"),
            WaitingRoomNotFound => row(S::NOT_FOUND, "waiting_room_not_found"),
            QueueEntryNotFound => row(S::NOT_FOUND, "queue_entry_not_found"),
            NoWaitlist
            | AvailableNow
            | WaitlistEntryExists { .. }
            | WaitlistFull
            | WaitlistEntryNotFound => self.waitlist_type(),
            RateLimited { .. } => row(S::TOO_MANY_REQUESTS, "rate_limited"),
            NotFound => row(S::NOT_FOUND, "not_found"),
            ShowNotFound => row(S::NOT_FOUND, "show_not_found"),
            HoldNotFound => row(S::NOT_FOUND, "hold_not_found"),
            BookingNotFound => row(S::NOT_FOUND, "booking_not_found"),
            UnknownSeatHere(_) => row(S::NOT_FOUND, "unknown_seat"),
            MethodNotAllowed => row(S::METHOD_NOT_ALLOWED, "method_not_allowed"),
            BodyTimeout => row(S::REQUEST_TIMEOUT, "request_timeout"),
            ShowExists => row(S::CONFLICT, "show_exists"),
            VenueNotFound => row(S::NOT_FOUND, "venue_not_found"),
            VenueExists => row(S::CONFLICT, "venue_exists"),
            HoldConverted => row(S::CONFLICT, "hold_converted"),
            HoldExtensionLimit => row(S::CONFLICT, "hold_extension_limit"),
            HoldExpired { .. } => row(S::CONFLICT, "hold_expired"),
            HoldReleased { .. } => row(S::CONFLICT, "hold_released"),
            OrderNotFound => row(S::NOT_FOUND, "order_not_found"),
            OrderHoldsLost { code, .. } => row(S::CONFLICT, code),
            UnknownLine(_) => row(S::UNPROCESSABLE_ENTITY, "unknown_line"),
            OrderNotConfirmed => row(S::CONFLICT, "order_not_confirmed"),
            CancellationClosed => row(S::CONFLICT, "cancellation_closed"),
            PaymentDeclined { .. } | PaymentNotCaptured { .. } => {
                row(S::PAYMENT_REQUIRED, "payment_declined")
            }
            PayloadTooLarge(_) | TooLarge => row(S::PAYLOAD_TOO_LARGE, "payload_too_large"),
            UnsupportedMediaType => row(S::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
            Validation(_) => row(S::UNPROCESSABLE_ENTITY, "validation_failed"),
            IdempotencyKeyReused => row(S::UNPROCESSABLE_ENTITY, "idempotency_key_reused"),
            Internal(_) => row(S::INTERNAL_SERVER_ERROR, "internal_error"),
            PaymentUnavailable(_) => row(S::SERVICE_UNAVAILABLE, "payment_unavailable"),
            Busy => row(S::SERVICE_UNAVAILABLE, "busy"),
            NotReady(_) => row(S::SERVICE_UNAVAILABLE, "not_ready"),
            TicketNotFound | TicketCheckedIn | TransferClosed | TicketRevoked | Door(_) => {
                self.ticket_type()
            }
            // The webhooks' and the inventory's refusals, in rows below.
            _ => self.webhook_type(),
        }
    }

    /// The webhook endpoints' refusals: the row of each (the inventory's
    /// after them).
    fn webhook_type(&self) -> &'static ProblemType {
        use ApiError::*;
        use StatusCode as S;
        match self {
            WebhookNotFound => row(S::NOT_FOUND, "webhook_not_found"),
            DeliveryNotFound => row(S::NOT_FOUND, "delivery_not_found"),
            WebhookLimitReached => row(S::CONFLICT, "webhook_limit_reached"),
            WebhookUrlTooLong => row(S::UNPROCESSABLE_ENTITY, "webhook_url_too_long"),
            WebhookUrlCredentials => row(S::UNPROCESSABLE_ENTITY, "webhook_url_credentials"),
            WebhookUrlInvalid(_) => row(S::UNPROCESSABLE_ENTITY, "webhook_url_invalid"),
            UnknownEventType(_) => row(S::UNPROCESSABLE_ENTITY, "unknown_event_type"),
            _ => self.inventory_type(),
        }
    }

    /// A waiting list's refusals: the row of each.
    fn waitlist_type(&self) -> &'static ProblemType {
        use ApiError::*;
        use StatusCode as S;
        match self {
            NoWaitlist => row(S::CONFLICT, "no_waitlist"),
            AvailableNow => row(S::CONFLICT, "available_now"),
            WaitlistEntryExists { .. } => row(S::CONFLICT, "waitlist_entry_exists"),
            WaitlistFull => row(S::CONFLICT, "waitlist_full"),
            _ => row(S::NOT_FOUND, "waitlist_entry_not_found"),
        }
    }

    /// A ticket's and the door's refusals: the row of each.
    fn ticket_type(&self) -> &'static ProblemType {
        use ApiError::*;
        use StatusCode as S;
        match self {
            TicketCheckedIn => row(S::CONFLICT, "ticket_checked_in"),
            TransferClosed => row(S::CONFLICT, "transfer_closed"),
            TicketRevoked => row(S::CONFLICT, "ticket_revoked"),
            Door(refused) => door_type(refused),
            _ => row(S::NOT_FOUND, "ticket_not_found"),
        }
    }

    /// What a hold or an allocation asked for that the show does not have,
    /// or cannot give: the row of each.
    fn inventory_type(&self) -> &'static ProblemType {
        use ApiError::*;
        use StatusCode as S;
        match self {
            TicketTypeUnavailable(_) => row(S::UNPROCESSABLE_ENTITY, "ticket_type_unavailable"),
            SeatTaken(_) => row(S::CONFLICT, "seat_taken"),
            SeatNotForSale(_) => row(S::CONFLICT, "seat_not_for_sale"),
            UnknownChannel(_) => row(S::UNPROCESSABLE_ENTITY, "unknown_channel"),
            SoldOut { .. } | SaleOver => row(S::CONFLICT, "sold_out"),
            BuyerLimitReached { .. } => row(S::CONFLICT, "buyer_limit_reached"),
            NoAdjacentSeats => row(S::CONFLICT, "no_adjacent_seats"),
            UnknownSeat(_) => row(S::UNPROCESSABLE_ENTITY, "unknown_seat"),
            UnknownPool(_) => row(S::UNPROCESSABLE_ENTITY, "unknown_pool"),
            // Every other variant has its row in `problem_type`.
            _ => row(S::INTERNAL_SERVER_ERROR, "internal_error"),
        }
    }

    fn detail(&self) -> String {
        use ApiError::*;
        if let Some(detail) = self.waitlist_detail().or_else(|| self.ticket_detail()) {
            return detail;
        }
        match self {
            MalformedJson(d)
            | BadPath(d)
            | Unauthorized(d)
            | PayloadTooLarge(d)
            | Validation(d)
            | NotReady(d)
            | TicketTypeUnavailable(d) => d.clone(),
            InvalidSignature(why) => format!("{why}; nothing was done"),
            NotFound
            | MethodNotAllowed
            | UnsupportedMediaType
            | BodyTimeout
            | TooLarge
            | Forbidden
            | IdempotencyKeyReused
            | RateLimited { .. }
            | Busy => self.request_detail(),
            Internal(_) => UNEXPECTED_DETAIL.into(),
            ShowNotFound | ShowExists | VenueNotFound | VenueExists | HoldNotFound
            | BookingNotFound => self.lookup_detail(),
            SeatTaken(_)
            | SeatNotForSale(_)
            | UnknownChannel(_)
            | SoldOut { .. }
            | SaleOver
            | BuyerLimitReached { .. }
            | NoAdjacentSeats
            | UnknownSeat(_)
            | UnknownSeatHere(_)
            | UnknownPool(_) => self.seats_detail(),
            HoldExpired { .. } | HoldReleased { .. } | HoldConverted | HoldExtensionLimit => {
                self.hold_detail()
            }
            PaymentDeclined { .. } | PaymentNotCaptured { .. } | PaymentUnavailable(_) => {
                self.payment_detail()
            }
            AdmissionRequired { .. } | WaitingRoomNotFound | QueueEntryNotFound => {
                self.waiting_room_detail()
            }
            WebhookNotFound
            | DeliveryNotFound
            | WebhookUrlTooLong
            | WebhookUrlCredentials
            | WebhookUrlInvalid(_)
            | UnknownEventType(_)
            | WebhookLimitReached => self.webhook_detail(),
            // An order's (the waiting list's are answered above).
            _ => self.order_detail(),
        }
    }

    /// An order: lost holds and what became of the money, its lines.
    fn order_detail(&self) -> String {
        use ApiError::*;
        match self {
            OrderNotFound => "no order has this id".into(),
            OrderHoldsLost { voided: true, .. } => {
                "a hold of the order was lost before the order could be converted; the \
                 authorization was cancelled, nothing was charged and no hold was converted"
                    .into()
            }
            OrderHoldsLost { .. } => {
                "a hold of the order is no longer held; nothing was charged".into()
            }
            UnknownLine(line) => {
                format!("lines: the order has no line {line}; nothing was cancelled")
            }
            OrderNotConfirmed => {
                "the order is not confirmed (voided, undone or still being paid); nothing was \
                 cancelled"
                    .into()
            }
            CancellationClosed => {
                "the show's window for buyers to cancel has closed; nothing was cancelled".into()
            }
            _ => UNEXPECTED_DETAIL.into(),
        }
    }

    // The family details below are reached only from `detail`, each with its
    // own variants; any other variant gets the opaque 500 sentence (a test
    // checks that none does).

    /// The request as a whole: its route, its form, its rights, its rate,
    /// and the service's own state.
    fn request_detail(&self) -> String {
        use ApiError::*;
        match self {
            NotFound => "no such route".into(),
            MethodNotAllowed => "this route does not take that method".into(),
            UnsupportedMediaType => "send the body as Content-Type: application/json".into(),
            BodyTimeout => "the request body did not arrive in time".into(),
            TooLarge => format!(
                "the request would write more than {MAX_EVENTS_PER_BATCH} events in one \
                 transaction (MAX_EVENTS_PER_BATCH); nothing was written"
            ),
            Forbidden => "this token may not do that".into(),
            IdempotencyKeyReused => "this Idempotency-Key was used with a different request".into(),
            RateLimited { .. } => {
                "too many requests; retry after the Retry-After delay; nothing was done".into()
            }
            Busy => "the service is busy; retry after the Retry-After delay".into(),
            _ => UNEXPECTED_DETAIL.into(),
        }
    }

    /// A show, hold or booking the request names: unknown, or (a new show's
    /// id) taken.
    fn lookup_detail(&self) -> String {
        use ApiError::*;
        match self {
            ShowNotFound => "no show has this id".into(),
            ShowExists => "a different show already has this id".into(),
            VenueNotFound => "no venue has this id".into(),
            VenueExists => "a different venue already has this id".into(),
            HoldNotFound => "no hold has this id".into(),
            BookingNotFound => "no booking has this id".into(),
            _ => UNEXPECTED_DETAIL.into(),
        }
    }

    /// The seats or places asked for: unknown, taken, or past a limit.
    fn seats_detail(&self) -> String {
        use ApiError::*;
        match self {
            SeatTaken(_) => "some seats are held or booked; nothing was held".into(),
            SeatNotForSale(_) => "some seats are allocated to a sales channel this hold is not \
                 from (or, for a channel's hold, are not the channel's); nothing was held"
                .into(),
            UnknownChannel(channel) => format!("channel: the show has no sales channel {channel}"),
            SoldOut { available } => {
                format!("only {available} places are free; nothing was held")
            }
            SaleOver => "the sale is over: every seat and place is booked".into(),
            BuyerLimitReached { limit, current } => format!(
                "a buyer may have at most {limit} seats on this show and has {current}; \
                 nothing was held"
            ),
            NoAdjacentSeats => {
                "no block of that many free seats side by side is left; nothing was held".into()
            }
            UnknownSeat(_) => "the show has no seats with these ids".into(),
            UnknownSeatHere(seat) => format!("the show has no seat {seat}"),
            UnknownPool(pool) => format!("the show has no pool {pool}"),
            _ => UNEXPECTED_DETAIL.into(),
        }
    }

    /// A hold that can no longer be used as asked; when it ended while a
    /// payment ran, what became of the money.
    fn hold_detail(&self) -> String {
        use ApiError::*;
        match self {
            HoldExpired { refunded: true, .. } => {
                "the hold expired while the payment ran; the charge was refunded".into()
            }
            HoldExpired { voided: true, .. } => {
                "the hold expired before the payment could be captured; the authorization was \
                 cancelled and nothing was charged"
                    .into()
            }
            HoldExpired { .. } => "the hold has expired; nothing was charged".into(),
            HoldReleased { refunded: true, .. } => {
                "the hold was released while the payment ran; the charge was refunded".into()
            }
            HoldReleased { voided: true, .. } => {
                "the hold was released before the payment could be captured; the authorization \
                 was cancelled and nothing was charged"
                    .into()
            }
            HoldReleased { .. } => "the hold was released; nothing was charged".into(),
            HoldConverted => "the hold has been converted into a booking".into(),
            HoldExtensionLimit => {
                "the hold already lasts as long as the show allows (max_hold_seconds from its placement)"
                    .into()
            }
            _ => UNEXPECTED_DETAIL.into(),
        }
    }

    /// A payment that did not go through, and what was (not) charged.
    fn payment_detail(&self) -> String {
        use ApiError::*;
        match self {
            PaymentDeclined { message, .. } => format!("{message}; nothing was charged"),
            PaymentNotCaptured { .. } => "the payment's authorization could not be captured; \
                 the booking was undone, its seats freed, and nothing was charged"
                .into(),
            PaymentUnavailable(_) => {
                "the payment provider did not settle the payment; safe to retry".into()
            }
            _ => UNEXPECTED_DETAIL.into(),
        }
    }

    /// A show's waiting room: missing, or not yet passed.
    fn waiting_room_detail(&self) -> String {
        use ApiError::*;
        match self {
            AdmissionRequired { .. } => "this show sells through a waiting room: join its queue \
                 and hold once admitted; nothing was held"
                .into(),
            WaitingRoomNotFound => "this show sells without a waiting room".into(),
            QueueEntryNotFound => "you have not joined this show's queue".into(),
            _ => UNEXPECTED_DETAIL.into(),
        }
    }

    /// A waiting list's refusals (`None`: not one).
    fn waitlist_detail(&self) -> Option<String> {
        use ApiError::*;
        Some(match self {
            NoWaitlist => "this show keeps no waiting list; nothing was joined".into(),
            AvailableNow => "what you ask for is available now: hold it instead; nothing \
                 was joined"
                .into(),
            WaitlistEntryExists { .. } => "you wait already on this show for something else \
                 (entry_id): leave that entry first; nothing was joined"
                .into(),
            WaitlistFull => format!(
                "the waiting list has taken {} entries (MAX_WAITLIST_ENTRIES); nothing was \
                 joined",
                domain::limits::MAX_WAITLIST_ENTRIES
            ),
            WaitlistEntryNotFound => "no waiting-list entry has this id".into(),
            _ => return None,
        })
    }

    /// A ticket's refusals and the door's (`None`: not one).
    fn ticket_detail(&self) -> Option<String> {
        use crate::command::tickets::Refused;
        use ApiError::*;
        Some(match self {
            TicketNotFound => "no ticket has this id".into(),
            TicketCheckedIn => "the ticket was checked in: it changes hands no more".into(),
            TransferClosed => "the show's transfer_until has passed: its tickets change \
                 hands no more"
                .into(),
            TicketRevoked => "the ticket is revoked (its line was cancelled)".into(),
            Door(Refused::InvalidCode(why)) => format!("{why}; the scan was refused and recorded"),
            Door(Refused::WrongShow) => {
                "the code is a ticket of another show; the scan was refused and recorded".into()
            }
            Door(Refused::UnknownGate(gate)) => {
                format!("the show has no gate {gate:?}; the scan was refused and recorded")
            }
            Door(Refused::AlreadyInside { .. }) => "the ticket is inside already (gate, at): \
                 no exit since its entry; not admitted again"
                .into(),
            Door(Refused::ReentryNotAllowed) => {
                "the ticket left, and this show allows no re-entry".into()
            }
            Door(Refused::NotInside) => "the ticket is not inside: an exit needs an entry".into(),
            Door(Refused::Revoked) => "the code is revoked (its line was cancelled, or the \
                 ticket was transferred and this is an older code): not admitted"
                .into(),
            _ => return None,
        })
    }

    /// A webhook endpoint or delivery: unknown, or a registration refused.
    fn webhook_detail(&self) -> String {
        use ApiError::*;
        match self {
            WebhookNotFound => "no webhook endpoint has this id".into(),
            DeliveryNotFound => "the endpoint has no delivery with this id".into(),
            WebhookUrlTooLong => format!(
                "url is longer than {} characters (MAX_URL_CHARS)",
                crate::webhooks::endpoints::MAX_URL_CHARS
            ),
            WebhookUrlCredentials => {
                "url carries credentials (a user or password); nothing was registered".into()
            }
            WebhookUrlInvalid(why) => format!("url {why}; nothing was registered"),
            UnknownEventType(name) => format!(
                "{name:?} is not an event type (booking.confirmed, booking.cancelled, \
                 refund.issued, hold.expired, order.confirmed, order.cancelled, waitlist.offered, \
                 ticket.transferred, ticket.revoked, ticket.checked_in); \
                 nothing was registered"
            ),
            WebhookLimitReached => format!(
                "{} endpoints are registered (MAX_ENDPOINTS); delete one first",
                crate::webhooks::endpoints::MAX_ENDPOINTS
            ),
            _ => UNEXPECTED_DETAIL.into(),
        }
    }

    fn extra(&self) -> Map<String, Value> {
        let mut extra = Map::new();
        match self {
            ApiError::SeatTaken(seats)
            | ApiError::SeatNotForSale(seats)
            | ApiError::UnknownSeat(seats) => {
                extra.insert("seats".into(), json!(seats));
            }
            ApiError::SoldOut { available } => {
                extra.insert("available".into(), json!(available));
            }
            ApiError::BuyerLimitReached { limit, current } => {
                extra.insert("limit".into(), json!(limit));
                extra.insert("current".into(), json!(current));
            }
            ApiError::HoldExpired { refunded, voided }
            | ApiError::HoldReleased { refunded, voided } => {
                extra.insert("refunded".into(), json!(refunded));
                extra.insert("voided".into(), json!(voided));
            }
            ApiError::OrderHoldsLost { holds, voided, .. } => {
                extra.insert("holds".into(), json!(holds));
                extra.insert("refunded".into(), json!(false));
                extra.insert("voided".into(), json!(voided));
            }
            ApiError::UnknownLine(line) => {
                extra.insert("lines".into(), json!([line]));
            }
            ApiError::PaymentDeclined {
                decline_code: Some(code),
                ..
            } => {
                extra.insert("decline_code".into(), json!(code));
            }
            ApiError::AdmissionRequired { show_id } => {
                extra.insert("queue".into(), json!(format!("/v1/shows/{show_id}/queue")));
            }
            ApiError::WaitlistEntryExists { entry_id } => {
                extra.insert("entry_id".into(), json!(entry_id));
            }
            ApiError::PaymentNotCaptured { booking_id } => {
                extra.insert("booking_id".into(), json!(booking_id));
                extra.insert("reversed".into(), json!(true));
            }
            ApiError::Door(crate::command::tickets::Refused::AlreadyInside { gate, at }) => {
                extra.insert("gate".into(), json!(gate));
                extra.insert("at".into(), json!(at));
            }
            _ => {}
        }
        extra
    }
}

impl ApiError {
    pub fn into_response_now(self) -> Response {
        self.into_response()
    }

    /// The stable `code` of the problem.
    pub fn code(&self) -> &'static str {
        self.problem_type().code
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let ProblemType {
            status,
            code,
            title,
        } = *self.problem_type();
        match &self {
            ApiError::Internal(cause) => tracing::error!(%cause, "internal error"),
            ApiError::PaymentUnavailable(reason) => {
                tracing::warn!(%reason, "payment unavailable")
            }
            _ => {}
        }
        let mut body = Map::new();
        body.insert("type".into(), format!("/problems/{code}").into());
        body.insert("title".into(), title.into());
        body.insert("status".into(), status.as_u16().into());
        body.insert("detail".into(), self.detail().into());
        body.insert("code".into(), code.into());
        body.extend(self.extra());
        let mut response = (status, Value::Object(body).to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        if let ApiError::RateLimited {
            retry_after_seconds,
        } = self
        {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after_seconds.max(1)),
            );
        }
        if status == StatusCode::REQUEST_TIMEOUT {
            // The rest of a stalled body may still come: do not read it as
            // the next request.
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Unavailable(cause) | StoreError::ConnectionLost(cause) => {
                tracing::warn!(%cause, "database unavailable");
                ApiError::Busy
            }
            StoreError::TooLarge(cause) => {
                tracing::warn!(%cause, "write refused as too large");
                ApiError::TooLarge
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl From<HoldError> for ApiError {
    fn from(err: HoldError) -> Self {
        match err {
            HoldError::ShowNotFound => ApiError::ShowNotFound,
            HoldError::Invalid(detail) => ApiError::Validation(detail),
            HoldError::Bug(what) => ApiError::Internal(what),
            HoldError::AdmissionRequired(show_id) => ApiError::AdmissionRequired {
                show_id: show_id.to_string(),
            },
            HoldError::UnknownSeats(seats) => {
                ApiError::UnknownSeat(seats.iter().map(ToString::to_string).collect())
            }
            HoldError::SeatsTaken(seats) => {
                ApiError::SeatTaken(seats.iter().map(ToString::to_string).collect())
            }
            HoldError::NotForSale(seats) => {
                ApiError::SeatNotForSale(seats.iter().map(ToString::to_string).collect())
            }
            HoldError::UnknownChannel(channel) => ApiError::UnknownChannel(channel.to_string()),
            HoldError::OfferGone => ApiError::Internal("an offer outside the waiting list".into()),
            HoldError::IdempotencyKeyReused => ApiError::IdempotencyKeyReused,
            HoldError::TicketTypeUnavailable(why) => ApiError::TicketTypeUnavailable(why),
            HoldError::SoldOut { available } => ApiError::SoldOut { available },
            HoldError::BuyerLimitReached { limit, current } => {
                ApiError::BuyerLimitReached { limit, current }
            }
            HoldError::NoAdjacentSeats => ApiError::NoAdjacentSeats,
            HoldError::UnknownPool(pool) => ApiError::UnknownPool(pool.to_string()),
            HoldError::HoldNotFound => ApiError::HoldNotFound,
            HoldError::Forbidden => ApiError::Forbidden,
            HoldError::HoldConverted => ApiError::HoldConverted,
            HoldError::HoldExpired => ApiError::HoldExpired {
                refunded: false,
                voided: false,
            },
            HoldError::HoldReleased => ApiError::HoldReleased {
                refunded: false,
                voided: false,
            },
            HoldError::ExtensionLimit => ApiError::HoldExtensionLimit,
            HoldError::Busy => ApiError::Busy,
            HoldError::Store(e) => e.into(),
        }
    }
}

impl From<CheckoutError> for ApiError {
    fn from(err: CheckoutError) -> Self {
        match err {
            CheckoutError::HoldNotFound => ApiError::HoldNotFound,
            CheckoutError::BookingNotFound => ApiError::BookingNotFound,
            CheckoutError::Forbidden => ApiError::Forbidden,
            CheckoutError::HoldExpired { refunded, voided } => {
                ApiError::HoldExpired { refunded, voided }
            }
            CheckoutError::HoldReleased { refunded, voided } => {
                ApiError::HoldReleased { refunded, voided }
            }
            CheckoutError::PaymentDeclined(decline) => ApiError::PaymentDeclined {
                message: decline.message,
                decline_code: decline.code,
            },
            CheckoutError::Reversed(booking_id) => ApiError::PaymentNotCaptured {
                booking_id: booking_id.to_string(),
            },
            CheckoutError::PaymentUnavailable(reason) => ApiError::PaymentUnavailable(reason),
            CheckoutError::OrderNotFound => ApiError::OrderNotFound,
            CheckoutError::HoldConverted => ApiError::HoldConverted,
            CheckoutError::OrderHoldsLost {
                reason,
                holds,
                voided,
            } => ApiError::OrderHoldsLost {
                code: match reason {
                    RefundReason::HoldExpired => "hold_expired",
                    RefundReason::HoldReleased => "hold_released",
                    RefundReason::HoldConverted => "hold_converted",
                },
                holds: holds.iter().map(ToString::to_string).collect(),
                voided,
            },
            CheckoutError::UnknownLine(line) => ApiError::UnknownLine(line),
            CheckoutError::OrderNotConfirmed => ApiError::OrderNotConfirmed,
            CheckoutError::CancellationClosed => ApiError::CancellationClosed,
            CheckoutError::Invalid(detail) => ApiError::Validation(detail),
            CheckoutError::Bug(what) => ApiError::Internal(what),
            CheckoutError::Busy | CheckoutError::OtherProvider => ApiError::Busy,
            CheckoutError::Store(e) => e.into(),
        }
    }
}

impl From<WebhookError> for ApiError {
    fn from(err: WebhookError) -> Self {
        match err {
            WebhookError::UrlTooLong => ApiError::WebhookUrlTooLong,
            WebhookError::UrlCredentials => ApiError::WebhookUrlCredentials,
            WebhookError::UrlInvalid(why) => ApiError::WebhookUrlInvalid(why),
            WebhookError::UnknownEventType(name) => ApiError::UnknownEventType(name),
            WebhookError::Invalid(why) => ApiError::Validation(why),
            WebhookError::TooManyEndpoints => ApiError::WebhookLimitReached,
            WebhookError::EndpointNotFound => ApiError::WebhookNotFound,
            WebhookError::DeliveryNotFound => ApiError::DeliveryNotFound,
            WebhookError::Store(e) => e.into(),
        }
    }
}

impl From<WaitingRoomError> for ApiError {
    fn from(err: WaitingRoomError) -> Self {
        match err {
            WaitingRoomError::ShowNotFound => ApiError::ShowNotFound,
            WaitingRoomError::NoWaitingRoom => ApiError::WaitingRoomNotFound,
            WaitingRoomError::NotInQueue => ApiError::QueueEntryNotFound,
            WaitingRoomError::SoldOut => ApiError::SaleOver,
            WaitingRoomError::Invalid(why) => ApiError::Validation(why),
            WaitingRoomError::Bug(what) => ApiError::Internal(what),
            WaitingRoomError::Busy => ApiError::Busy,
            WaitingRoomError::Store(e) => e.into(),
        }
    }
}

impl From<PriceChangeError> for ApiError {
    fn from(err: PriceChangeError) -> Self {
        match err {
            PriceChangeError::ShowNotFound => ApiError::ShowNotFound,
            PriceChangeError::Invalid(why) => ApiError::Validation(why),
            PriceChangeError::Busy => ApiError::Busy,
            PriceChangeError::Store(e) => e.into(),
            PriceChangeError::Bug(why) => ApiError::Internal(why),
        }
    }
}

impl From<crate::command::tickets::TicketError> for ApiError {
    fn from(err: crate::command::tickets::TicketError) -> Self {
        use crate::command::tickets::TicketError;
        match err {
            TicketError::NotFound => ApiError::TicketNotFound,
            TicketError::CheckedIn => ApiError::TicketCheckedIn,
            TicketError::TransferClosed => ApiError::TransferClosed,
            TicketError::Revoked => ApiError::TicketRevoked,
            TicketError::Invalid(why) => ApiError::Validation(why),
            TicketError::Forbidden => ApiError::Forbidden,
            TicketError::Scan(refused) => ApiError::Door(refused),
            TicketError::ShowNotFound => ApiError::ShowNotFound,
            TicketError::Busy => ApiError::Busy,
            TicketError::Bug(what) => ApiError::Internal(what),
            TicketError::Store(e) => e.into(),
        }
    }
}

impl From<CreateShowError> for ApiError {
    fn from(err: CreateShowError) -> Self {
        match err {
            CreateShowError::Invalid(e) => ApiError::Validation(e.to_string()),
            CreateShowError::Exists => ApiError::ShowExists,
            CreateShowError::VenueExists => ApiError::VenueExists,
            CreateShowError::Store(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::command::tickets::Refused;

    #[test]
    fn every_variant_has_a_row_and_every_row_is_used() {
        let all = [
            ApiError::MalformedJson(String::new()),
            ApiError::BadPath(String::new()),
            ApiError::Unauthorized(String::new()),
            ApiError::Forbidden,
            ApiError::NotFound,
            ApiError::ShowNotFound,
            ApiError::HoldNotFound,
            ApiError::MethodNotAllowed,
            ApiError::ShowExists,
            ApiError::VenueNotFound,
            ApiError::VenueExists,
            ApiError::TicketTypeUnavailable(String::new()),
            ApiError::SeatTaken(vec![]),
            ApiError::SeatNotForSale(vec![]),
            ApiError::UnknownChannel(String::new()),
            ApiError::SoldOut { available: 0 },
            ApiError::SaleOver,
            ApiError::BuyerLimitReached {
                limit: 1,
                current: 1,
            },
            ApiError::NoAdjacentSeats,
            ApiError::UnknownPool(String::new()),
            ApiError::HoldConverted,
            ApiError::HoldExtensionLimit,
            ApiError::HoldExpired {
                refunded: false,
                voided: true,
            },
            ApiError::HoldReleased {
                refunded: false,
                voided: false,
            },
            ApiError::PaymentDeclined {
                message: String::new(),
                decline_code: None,
            },
            ApiError::PaymentNotCaptured {
                booking_id: String::new(),
            },
            ApiError::InvalidSignature(String::new()),
            ApiError::AdmissionRequired {
                show_id: String::new(),
            },
            ApiError::WaitingRoomNotFound,
            ApiError::QueueEntryNotFound,
            ApiError::NoWaitlist,
            ApiError::AvailableNow,
            ApiError::WaitlistEntryExists {
                entry_id: String::new(),
            },
            ApiError::WaitlistFull,
            ApiError::WaitlistEntryNotFound,
            ApiError::RateLimited {
                retry_after_seconds: 1,
            },
            ApiError::PaymentUnavailable(String::new()),
            ApiError::BookingNotFound,
            ApiError::PayloadTooLarge(String::new()),
            ApiError::BodyTimeout,
            ApiError::UnsupportedMediaType,
            ApiError::TooLarge,
            ApiError::Validation(String::new()),
            ApiError::UnknownSeat(vec![]),
            ApiError::UnknownSeatHere(String::new()),
            ApiError::IdempotencyKeyReused,
            ApiError::WebhookNotFound,
            ApiError::DeliveryNotFound,
            ApiError::WebhookUrlTooLong,
            ApiError::WebhookUrlCredentials,
            ApiError::WebhookUrlInvalid(String::new()),
            ApiError::UnknownEventType(String::new()),
            ApiError::WebhookLimitReached,
            ApiError::OrderNotFound,
            ApiError::OrderHoldsLost {
                code: "hold_converted",
                holds: vec![],
                voided: true,
            },
            ApiError::UnknownLine(1),
            ApiError::OrderNotConfirmed,
            ApiError::CancellationClosed,
            ApiError::Busy,
            ApiError::NotReady(String::new()),
            ApiError::Internal(String::new()),
            ApiError::TicketNotFound,
            ApiError::TicketCheckedIn,
            ApiError::TransferClosed,
            ApiError::TicketRevoked,
            ApiError::Door(Refused::InvalidCode(String::new())),
            ApiError::Door(Refused::WrongShow),
            ApiError::Door(Refused::UnknownGate(String::new())),
            ApiError::Door(Refused::AlreadyInside {
                gate: String::new(),
                at: chrono::Utc::now(),
            }),
            ApiError::Door(Refused::ReentryNotAllowed),
            ApiError::Door(Refused::NotInside),
            ApiError::Door(Refused::Revoked),
        ];
        for error in &all {
            assert!(
                matches!(error, ApiError::Internal(_)) || error.detail() != UNEXPECTED_DETAIL,
                "{error:?} has no detail of its own"
            );
        }
        let internal = &INTERNAL;
        for error in &all {
            let problem = error.problem_type();
            assert!(
                !matches!(error, ApiError::Internal(_)) || problem == internal,
                "{error:?}"
            );
            assert!(
                matches!(error, ApiError::Internal(_)) || problem != internal,
                "{error:?} has no row of its own"
            );
        }
        let used: std::collections::HashSet<(u16, &str)> = all
            .iter()
            .map(|e| (e.problem_type().status.as_u16(), e.code()))
            .collect();
        for problem in PROBLEM_TYPES {
            assert!(
                used.contains(&(problem.status.as_u16(), problem.code)),
                "{} ({}) is published but never used",
                problem.code,
                problem.status
            );
        }
    }

    fn detail_of(error: ApiError) -> (u16, String) {
        let response = error.into_response();
        let status = response.status().as_u16();
        let body = futures::executor::block_on(axum::body::to_bytes(response.into_body(), 1 << 16))
            .expect("a body");
        let body: Value = serde_json::from_slice(&body).expect("problem json");
        (status, body["detail"].as_str().unwrap_or("").to_owned())
    }

    /// docs/api.md: no database or provider error text reaches a client.
    #[test]
    fn no_5xx_detail_carries_database_or_provider_text() {
        let secret = "error returned from database: relation \"sim_charges\" does not exist";
        let errors = [
            ApiError::from(CheckoutError::PaymentUnavailable(secret.into())),
            ApiError::from(CheckoutError::Store(StoreError::Unavailable(secret.into()))),
            ApiError::from(StoreError::ConnectionLost(secret.into())),
            ApiError::from(CheckoutError::Store(StoreError::Corrupt(secret.into()))),
            ApiError::from(StoreError::Database(sqlx::Error::Protocol(secret.into()))),
            ApiError::from(StoreError::TooLarge(secret.into())),
            ApiError::Internal(secret.into()),
        ];
        for error in errors {
            let code = error.code();
            let (status, detail) = detail_of(error);
            assert!(status >= 413, "{code}: {status}");
            assert!(!detail.is_empty(), "{code}");
            assert!(
                !detail.contains("sim_charges") && !detail.contains("database:"),
                "{code} leaks: {detail}"
            );
        }
    }

    #[test]
    fn a_lost_connection_is_503_busy() {
        let error = ApiError::from(StoreError::ConnectionLost(
            "terminating connection due to administrator command".into(),
        ));
        assert_eq!(error.code(), "busy");
        assert_eq!(detail_of(error).0, 503);
    }

    #[test]
    fn a_batch_too_large_is_413_naming_the_limit() {
        let error = ApiError::from(StoreError::TooLarge("65536 events".into()));
        assert_eq!(error.code(), "payload_too_large");
        let (status, detail) = detail_of(error);
        assert_eq!(status, 413);
        assert!(detail.contains("MAX_EVENTS_PER_BATCH"), "{detail}");
    }
}
