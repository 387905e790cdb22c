//! The door as staff and scanners read it: a show's tickets folded from
//! the log (their events by show, in log order: `LogFilter::Tickets`),
//! kept per show and read on from where the last read ended (a show's
//! positions grow in its commit order), so what it has read is final and a
//! revocation list's cursor never passes one that commits late.
//! Attendance by gate, the conflicts offline scanners left, the codes
//! revoked so far. As of a past instant, the show's ticket events up to it
//! are folded afresh.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use domain::ids::ShowId;
use domain::ticket::{Direction, Outcome, Scan, Ticket, TicketEvent};
use serde::Serialize;
use tokio::sync::Mutex;

use crate::clock::Clock;
use crate::store::{EventLog, LogEvent, LogFilter, StoreError};

/// Events one read of a show's ticket log takes at a time.
const PAGE: i64 = 2_000;

/// Revocations one answer lists at most; `next` asks for the rest.
pub const MAX_REVOCATIONS_PER_PAGE: usize = 10_000;

/// Who came in and out, by gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct AttendanceView {
    pub show_id: String,
    pub as_of: DateTime<Utc>,
    /// Valid tickets (issued, not revoked).
    pub tickets: usize,
    /// Inside now.
    pub inside: usize,
    /// Entered at least once.
    pub entered: usize,
    /// Entered, and out now.
    pub exited: usize,
    /// Never entered.
    pub not_arrived: usize,
    pub by_gate: Vec<GateCount>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct GateCount {
    pub gate_id: String,
    pub entries: usize,
    pub exits: usize,
}

/// A code revoked: a ticket at a version no longer valid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RevocationView {
    pub ticket_id: String,
    pub version: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RevocationsView {
    pub revoked: Vec<RevocationView>,
    /// Ask with `?after=` this to get only what is revoked later.
    pub next: i64,
}

/// An entry that should not have happened (offline): with the entry that
/// let the ticket in before it, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ConflictView {
    pub ticket_id: String,
    pub scan: ScanView,
    pub inside_since: Option<ScanView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ScanView {
    pub nonce: String,
    pub gate: String,
    /// `entry` or `exit`.
    pub direction: &'static str,
    pub scanned_at: DateTime<Utc>,
    pub version: u32,
    /// `online` or `offline`.
    pub mode: &'static str,
    pub result: &'static str,
}

impl ScanView {
    fn of(scan: &Scan) -> Self {
        Self {
            nonce: scan.nonce.to_string(),
            gate: scan.gate.to_string(),
            direction: match scan.direction {
                Direction::Entry => "entry",
                Direction::Exit => "exit",
            },
            scanned_at: scan.scanned_at,
            version: scan.version,
            mode: match scan.mode {
                domain::ticket::Mode::Online => "online",
                domain::ticket::Mode::Offline => "offline",
            },
            result: scan.outcome.as_str(),
        }
    }
}

/// One show's tickets as folded so far.
#[derive(Default)]
struct Folded {
    /// The log position read to.
    after: i64,
    /// Each ticket by its API id (`{show}.{uuid}`).
    tickets: BTreeMap<String, Ticket>,
    /// Codes revoked, with the position of the event that revoked them.
    revocations: Vec<(i64, RevocationView)>,
}

impl Folded {
    fn fold(&mut self, event: &LogEvent) -> Result<(), StoreError> {
        let corrupt = |e: &dyn std::fmt::Display| {
            StoreError::Corrupt(format!("ticket event at {}: {e}", event.position))
        };
        let payload: TicketEvent = serde_json::from_str(&event.payload).map_err(|e| corrupt(&e))?;
        let (show, uuid) = event
            .aggregate_id
            .split_once('/')
            .ok_or_else(|| corrupt(&"not a ticket stream"))?;
        let id = format!("{show}.{uuid}");
        let ticket = self.tickets.entry(id.clone()).or_default();
        let revoked = match &payload {
            TicketEvent::TicketTransferred { version, .. } => Some(version.saturating_sub(1)),
            TicketEvent::TicketRevoked { version } => Some(*version),
            _ => None,
        };
        ticket.apply_event(&payload);
        if let Some(version) = revoked {
            let revocation = RevocationView {
                ticket_id: id,
                version,
            };
            self.revocations.push((event.position, revocation));
        }
        self.after = event.position;
        Ok(())
    }

    fn attendance(&self, show_id: &ShowId, at: DateTime<Utc>) -> AttendanceView {
        let mut view = AttendanceView {
            show_id: show_id.to_string(),
            as_of: at,
            tickets: 0,
            inside: 0,
            entered: 0,
            exited: 0,
            not_arrived: 0,
            by_gate: Vec::new(),
        };
        let mut gates: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for ticket in self.tickets.values().filter(|t| t.issued.is_some()) {
            for scan in ticket
                .scans
                .iter()
                .filter(|s| s.outcome.counts() && s.scanned_at <= at)
            {
                let counts = gates.entry(scan.gate.to_string()).or_default();
                match (scan.direction, scan.outcome) {
                    (Direction::Entry, _) => counts.0 += 1,
                    (Direction::Exit, Outcome::Exited) => counts.1 += 1,
                    (Direction::Exit, _) => {}
                }
            }
            if ticket.revoked {
                continue;
            }
            let door = ticket.at_door(at);
            view.tickets += 1;
            view.inside += usize::from(door.inside.is_some());
            view.entered += usize::from(door.entered);
            view.exited += usize::from(door.entered && door.inside.is_none());
            view.not_arrived += usize::from(!door.entered);
        }
        view.by_gate = gates
            .into_iter()
            .map(|(gate_id, (entries, exits))| GateCount {
                gate_id,
                entries,
                exits,
            })
            .collect();
        view
    }

    fn conflicts(&self, at: DateTime<Utc>) -> Vec<ConflictView> {
        let mut conflicts: Vec<ConflictView> = self
            .tickets
            .iter()
            .flat_map(|(id, ticket)| {
                ticket
                    .at_door(at)
                    .conflicts
                    .into_iter()
                    .map(move |(scan, before)| ConflictView {
                        ticket_id: id.clone(),
                        scan: ScanView::of(&scan),
                        inside_since: before.as_ref().map(ScanView::of),
                    })
            })
            .collect();
        conflicts.sort_by_key(|c| c.scan.scanned_at);
        conflicts
    }
}

/// Every show's door as read so far, one fold per show.
pub struct DoorBook {
    log: EventLog,
    clock: Arc<dyn Clock>,
    shows: Mutex<HashMap<ShowId, Arc<Mutex<Folded>>>>,
}

impl DoorBook {
    pub fn new(log: EventLog, clock: Arc<dyn Clock>) -> Self {
        Self {
            log,
            clock,
            shows: Mutex::default(),
        }
    }

    /// Runs `read` on the show's door as the log has it now.
    async fn with_door<R>(
        &self,
        show_id: &ShowId,
        read: impl FnOnce(&Folded) -> R,
    ) -> Result<R, StoreError> {
        let slot = self
            .shows
            .lock()
            .await
            .entry(show_id.clone())
            .or_default()
            .clone();
        let mut folded = slot.lock().await;
        loop {
            let page = self
                .log
                .read_log(LogFilter::Tickets(show_id.as_str()), folded.after, PAGE)
                .await?;
            for event in &page {
                folded.fold(event)?;
            }
            if (page.len() as i64) < PAGE {
                break;
            }
        }
        Ok(read(&folded))
    }

    /// The show's door folded from its log up to `at`, afresh.
    async fn folded_until(
        &self,
        show_id: &ShowId,
        at: DateTime<Utc>,
    ) -> Result<Folded, StoreError> {
        let mut folded = Folded::default();
        let events = self
            .log
            .show_log_until(show_id.as_str(), projections::time::to_micros(at))
            .await?;
        for event in events.iter().filter(|e| e.aggregate_type == "Ticket") {
            folded.fold(event)?;
        }
        Ok(folded)
    }

    /// `GET /v1/shows/{id}/attendance`: now, or as of `as_of`.
    pub async fn attendance(
        &self,
        show_id: &ShowId,
        as_of: Option<DateTime<Utc>>,
    ) -> Result<AttendanceView, StoreError> {
        match as_of {
            Some(at) => Ok(self
                .folded_until(show_id, at)
                .await?
                .attendance(show_id, at)),
            None => {
                let now = self.clock.now();
                self.with_door(show_id, |door| door.attendance(show_id, now))
                    .await
            }
        }
    }

    /// `GET /v1/shows/{id}/checkins/conflicts`.
    pub async fn conflicts(&self, show_id: &ShowId) -> Result<Vec<ConflictView>, StoreError> {
        let now = self.clock.now();
        self.with_door(show_id, |door| door.conflicts(now)).await
    }

    /// `GET /v1/shows/{id}/revocations?after=`: codes revoked after the
    /// cursor, in the order they were revoked.
    pub async fn revocations(
        &self,
        show_id: &ShowId,
        after: i64,
    ) -> Result<RevocationsView, StoreError> {
        self.with_door(show_id, |door| {
            let from = door
                .revocations
                .partition_point(|(position, _)| *position <= after);
            let page: Vec<&(i64, RevocationView)> = door.revocations[from..]
                .iter()
                .take(MAX_REVOCATIONS_PER_PAGE)
                .collect();
            let next = match page.len() == MAX_REVOCATIONS_PER_PAGE {
                true => page.last().map_or(after, |(p, _)| *p),
                false => door.after.max(after),
            };
            RevocationsView {
                revoked: page.into_iter().map(|(_, r)| r.clone()).collect(),
                next,
            }
        })
        .await
    }
}
