//! The door: scans online one at a time, offline scanners' uploads, the
//! conflicts they leave, and attendance (a scanner of the show, or an
//! admin; conflicts: an admin). docs/api.md, "Check-in".

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use domain::ids::{GateId, ScanNonce};
use domain::limits::MAX_SCANS_PER_BATCH;
use domain::ticket::Direction;
use serde::{Deserialize, Serialize};

use super::extract::{Admin, JsonBody, PathParams, QueryParams};
use super::problem::ApiError;
use super::response::json_body;
use super::tickets::door_show;
use super::AppState;
use crate::auth::Actor;
use crate::command::context::RequestContext;
use crate::command::tickets::{BatchScan, CheckinView, ScanAsked, ScanResult};
use crate::query::door::{AttendanceView, ConflictView};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/shows/{show_id}/checkins", post(check_in))
        .route("/v1/shows/{show_id}/checkins/batch", post(check_in_batch))
        .route("/v1/shows/{show_id}/checkins/conflicts", get(conflicts))
        .route("/v1/shows/{show_id}/attendance", get(attendance))
}

/// The body of `POST /v1/shows/{id}/checkins`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ScanBody {
    /// What the ticket's QR code holds.
    #[schema(max_length = 400)]
    code: String,
    #[schema(min_length = 1, max_length = 64)]
    gate: String,
    #[schema(value_type = String, pattern = "^(entry|exit)$")]
    direction: Direction,
    /// The scanner's id for this scan: the same nonce again is the same
    /// answer.
    #[schema(value_type = String, pattern = "^[\\x21-\\x7E]{1,64}$", min_length = 1, max_length = 64)]
    nonce: ScanNonce,
}

/// A scan at the door (a scanner of the show, or an admin): 201 with whom
/// it let in or out, or why not; recorded either way.
#[utoipa::path(post, path = "/v1/shows/{show_id}/checkins", tag = "check-in",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    request_body = ScanBody,
    responses(
        (status = 201, description = "Admitted or exited", body = CheckinView),
        (status = 409, description = "already_inside (gate, at), reentry_not_allowed, not_inside", body = super::response::Problem, content_type = "application/problem+json"),
        (status = 410, description = "ticket_revoked", body = super::response::Problem, content_type = "application/problem+json"),
        (status = 422, description = "invalid_code, unknown_gate, validation_failed", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, forbidden, wrong_show (403), show_not_found, malformed_json, unsupported_media_type", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn check_in(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(raw): PathParams<String>,
    JsonBody(body): JsonBody<ScanBody>,
) -> Result<Response, ApiError> {
    let show_id = door_show(&state, &ctx.actor, &raw).await?;
    let asked = ScanAsked {
        code: body.code,
        gate: body.gate,
        direction: body.direction,
        nonce: body.nonce,
    };
    let scanned = state.tickets.scan(&ctx, &show_id, asked).await;
    let outcome = match &scanned {
        Ok(view) => view.result,
        Err(error) => error_code(error),
    };
    metrics::counter!("checkins_total", "mode" => "online", "result" => outcome).increment(1);
    json_body(StatusCode::CREATED, &scanned?)
}

fn error_code(error: &crate::command::tickets::TicketError) -> &'static str {
    match error {
        crate::command::tickets::TicketError::Scan(refused) => refused.code(),
        _ => "error",
    }
}

/// One scan as an offline scanner uploads it.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BatchScanBody {
    #[schema(max_length = 400)]
    code: String,
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    gate: GateId,
    #[schema(value_type = String, pattern = "^(entry|exit)$")]
    direction: Direction,
    #[schema(value_type = String, pattern = "^[\\x21-\\x7E]{1,64}$", min_length = 1, max_length = 64)]
    nonce: ScanNonce,
    /// When it happened at the door (RFC 3339).
    scanned_at: DateTime<Utc>,
    /// The scanner refused it at the door itself (it knew the code
    /// revoked, or the ticket inside): recorded, it counts for nothing.
    #[serde(default)]
    refused: bool,
}

/// The body of `POST /v1/shows/{id}/checkins/batch`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BatchBody {
    #[schema(min_items = 1, max_items = 1000)]
    scans: Vec<BatchScanBody>,
}

/// The results of an upload, in its order.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct BatchView {
    results: Vec<ScanResult>,
}

/// An offline scanner's scans, recorded as they happened (never refused
/// for a ticket's state), deduplicated by nonce, applied in scan order.
#[utoipa::path(post, path = "/v1/shows/{show_id}/checkins/batch", tag = "check-in",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    request_body = BatchBody,
    responses(
        (status = 200, description = "Each scan's result", body = BatchView),
        (status = 422, description = "unknown_gate, validation_failed (naming the scan)", body = super::response::Problem, content_type = "application/problem+json"),
        (status = "4XX", description = "unauthorized, forbidden, show_not_found, malformed_json, unsupported_media_type, payload_too_large", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn check_in_batch(
    State(state): State<AppState>,
    ctx: RequestContext,
    PathParams(raw): PathParams<String>,
    JsonBody(body): JsonBody<BatchBody, MAX_BATCH_BODY_BYTES>,
) -> Result<Response, ApiError> {
    let show_id = door_show(&state, &ctx.actor, &raw).await?;
    if body.scans.is_empty() || body.scans.len() > MAX_SCANS_PER_BATCH {
        return Err(ApiError::Validation(format!(
            "scans: 1..={MAX_SCANS_PER_BATCH} scans, got {}",
            body.scans.len()
        )));
    }
    let entry = state
        .catalog
        .get(&show_id)
        .await?
        .ok_or(ApiError::ShowNotFound)?;
    if let Some((i, scan)) = (body.scans.iter().enumerate())
        .find(|(_, s)| entry.show.checkin.gate(s.gate.as_str()).is_none())
    {
        return Err(ApiError::Door(
            crate::command::tickets::Refused::UnknownGate(format!(
                "{} (scans[{i}].gate)",
                scan.gate
            )),
        ));
    }
    let scans = body.scans.into_iter().map(|s| BatchScan {
        code: s.code,
        gate: s.gate,
        direction: s.direction,
        nonce: s.nonce,
        scanned_at: s.scanned_at,
        refused: s.refused,
    });
    let results = state
        .tickets
        .scan_batch(&ctx, &show_id, scans.collect())
        .await?;
    for result in &results {
        metrics::counter!("checkins_total", "mode" => "offline", "result" => result.result)
            .increment(1);
    }
    json_body(StatusCode::OK, &BatchView { results })
}

/// A batch of up to `MAX_SCANS_PER_BATCH` scans of 400-character codes.
const MAX_BATCH_BODY_BYTES: usize = 1024 * 1024;

/// The conflicts offline scanners left (an admin): each with the entry
/// that let the ticket in before it.
#[utoipa::path(get, path = "/v1/shows/{show_id}/checkins/conflicts", tag = "check-in",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses(
        (status = 200, description = "The conflicts, by scan time", body = ConflictsView),
        (status = "4XX", description = "unauthorized, forbidden, show_not_found", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn conflicts(
    State(state): State<AppState>,
    Admin(admin): Admin,
    PathParams(raw): PathParams<String>,
) -> Result<Response, ApiError> {
    let show_id = door_show(&state, &admin, &raw).await?;
    let conflicts = state.door.conflicts(&show_id).await?;
    json_body(StatusCode::OK, &ConflictsView { conflicts })
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct ConflictsView {
    conflicts: Vec<ConflictView>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AttendanceQuery {
    as_of: Option<DateTime<Utc>>,
}

/// Who came in and out, by gate (a scanner of the show, or an admin); now
/// or as of a past instant.
#[utoipa::path(get, path = "/v1/shows/{show_id}/attendance", tag = "check-in",
    params(("show_id" = String, Path, pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64),
           ("as_of" = Option<DateTime<Utc>>, Query, description = "RFC 3339: attendance then")),
    responses(
        (status = 200, description = "Attendance", body = AttendanceView),
        (status = "4XX", description = "unauthorized, forbidden, show_not_found, validation_failed", body = super::response::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub(super) async fn attendance(
    State(state): State<AppState>,
    actor: Actor,
    PathParams(raw): PathParams<String>,
    QueryParams(query): QueryParams<AttendanceQuery>,
) -> Result<Response, ApiError> {
    let show_id = door_show(&state, &actor, &raw).await?;
    let view = state.door.attendance(&show_id, query.as_of).await?;
    json_body(StatusCode::OK, &view)
}
