//! The door: scans of tickets' codes, online one at a time and offline in
//! batches.
//!
//! A code is read first (its signature, with the show's keys): one that
//! does not verify, one of another show, or a gate the show has not, is
//! refused and recorded as a refused scan of its own (a stream per nonce,
//! so the same nonce again finds it). A code that reads is a scan of its
//! ticket: one round on the ticket's stream (online), or one round on the
//! streams of every ticket of a batch (offline), each scan decided by
//! `domain::ticket::scan` on the ticket as the ones before it leave it.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use domain::ids::{GateId, ScanNonce, ShowId};
use domain::ticket::{
    self, refused_scan_stream_id, Direction, DoorRules, Mode, Outcome, Refusal, RefusedScan,
    RefusedScanEvent, Scan, Scanning, Ticket, TicketEvent,
};
use serde::Serialize;

use super::{unit, TicketError, TicketRef, TicketService};
use crate::catalog::CatalogEntry;
use crate::command::context::RequestContext;
use crate::command::round::{Decided, Decides, Decision, Round, Settled, View};
use crate::command::streams::{show_stream, ShowKey};
use crate::tickets::code;

// A refused scan's stream has no rows either.
show_stream!(RefusedScan, RefusedScanEvent, refused_scans);

/// A scan asked online.
#[derive(Debug, Clone)]
pub struct ScanAsked {
    pub code: String,
    pub gate: String,
    pub direction: Direction,
    pub nonce: ScanNonce,
}

/// A scan uploaded by a scanner that was offline.
#[derive(Debug, Clone)]
pub struct BatchScan {
    pub code: String,
    pub gate: GateId,
    pub direction: Direction,
    pub nonce: ScanNonce,
    pub scanned_at: DateTime<Utc>,
    /// The scanner refused it at the door itself (it knew the code revoked,
    /// or the ticket inside): recorded, it counts for nothing.
    pub refused: bool,
}

/// An online scan that let someone in or out (201).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CheckinView {
    /// `{ticket_id}:{n}`: the ticket's `n`-th scan.
    pub checkin_id: String,
    pub ticket_id: String,
    /// `admitted` or `exited`.
    pub result: &'static str,
    pub gate: String,
    pub at: DateTime<Utc>,
    pub seat_id: Option<String>,
    pub pool_id: Option<String>,
    pub section: Option<String>,
    pub row: Option<String>,
    pub number: Option<u32>,
    pub ticket_type: String,
    pub holder_name: Option<String>,
}

/// One uploaded scan's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ScanResult {
    pub nonce: String,
    /// `admitted`, `exited`, `duplicate`, `conflict`, `revoked`, `invalid`,
    /// or `refused` (refused at the door by the scanner itself).
    pub result: &'static str,
}

/// Why the door refused a scan online (each recorded).
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// 422 `invalid_code`: garbled, or a signature that does not verify.
    InvalidCode(String),
    /// 403 `wrong_show`: a code of another show.
    WrongShow,
    /// 422 `unknown_gate`.
    UnknownGate(String),
    /// 409 `already_inside`: entered at `gate` at `at`, no exit since.
    AlreadyInside { gate: String, at: DateTime<Utc> },
    /// 409 `reentry_not_allowed`.
    ReentryNotAllowed,
    /// 409 `not_inside`: an exit without an entry.
    NotInside,
    /// 410 `ticket_revoked`: its line cancelled, or an older version.
    Revoked,
}

impl Refused {
    pub fn code(&self) -> &'static str {
        match self {
            Refused::InvalidCode(_) => "invalid_code",
            Refused::WrongShow => "wrong_show",
            Refused::UnknownGate(_) => "unknown_gate",
            Refused::AlreadyInside { .. } => "already_inside",
            Refused::ReentryNotAllowed => "reentry_not_allowed",
            Refused::NotInside => "not_inside",
            Refused::Revoked => "ticket_revoked",
        }
    }
}

/// The decision of an online scan: the scan on the ticket as locked.
struct ScanningOnline<'a> {
    scanning: &'a Scanning,
    rules: DoorRules,
}

impl Decides<Ticket> for ScanningOnline<'_> {
    type Output = (Scan, Ticket);
    type Error = TicketError;

    fn decide(
        &mut self,
        view: &View<'_, Ticket>,
    ) -> Result<Decision<Ticket, (Scan, Ticket)>, TicketError> {
        let Some(&(ticket, _)) = view.units.first() else {
            return Err(TicketError::Bug("a scan without its ticket".into()));
        };
        let (events, scan) = ticket::scan(ticket, self.scanning, self.rules, view.now)
            .map_err(|e| TicketError::Invalid(e.to_string()))?;
        let mut after = ticket.clone();
        events.iter().for_each(|e| after.apply_event(e));
        Ok(Decision::Append(
            Decided::units(vec![events]),
            (scan, after),
        ))
    }
}

/// The decision of a batch's scans of the tickets locked: each ticket's
/// scans in scan order, each on the ticket as the ones before leave it.
struct ScanningBatch<'a> {
    /// Each ticket's scans, in the units' order.
    scans: Vec<Vec<&'a Scanning>>,
    rules: DoorRules,
}

impl Decides<Ticket> for ScanningBatch<'_> {
    /// Each scan's outcome by nonce (`None`: seen before).
    type Output = BTreeMap<ScanNonce, Option<Outcome>>;
    type Error = TicketError;

    fn decide(
        &mut self,
        view: &View<'_, Ticket>,
    ) -> Result<Decision<Ticket, Self::Output>, TicketError> {
        let mut outcomes = BTreeMap::new();
        let mut units = Vec::with_capacity(view.units.len());
        for ((ticket, _), scans) in view.units.iter().zip(&self.scans) {
            let mut state: Ticket = (*ticket).clone();
            let mut events: Vec<TicketEvent> = Vec::new();
            for scanning in scans {
                let (new, scan) = ticket::scan(&state, scanning, self.rules, view.now)
                    .map_err(|e| TicketError::Invalid(e.to_string()))?;
                let outcome = (!new.is_empty()).then_some(scan.outcome);
                outcomes.insert(scanning.nonce.clone(), outcome);
                new.iter().for_each(|e| state.apply_event(e));
                events.extend(new);
            }
            units.push(events);
        }
        Ok(Decision::Append(Decided::units(units), outcomes))
    }
}

/// Records refused scans, each on its own stream (the same nonce again:
/// nothing more).
struct RecordingRefusals<'a> {
    refusals: &'a [Refusal],
}

impl Decides<RefusedScan> for RecordingRefusals<'_> {
    type Output = ();
    type Error = TicketError;

    fn decide(
        &mut self,
        view: &View<'_, RefusedScan>,
    ) -> Result<Decision<RefusedScan, ()>, TicketError> {
        let units = view
            .units
            .iter()
            .zip(self.refusals)
            .map(|((stream, _), refusal)| {
                domain::aggregate::Decider::decide(*stream, refusal).unwrap_or_default()
            })
            .collect();
        Ok(Decision::Append(Decided::units(units), ()))
    }
}

impl TicketService {
    /// `POST /v1/shows/{id}/checkins`: one scan at the door, answered at
    /// once; refused when the code, the gate or the ticket's state forbids
    /// it, and recorded either way.
    pub async fn scan(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        asked: ScanAsked,
    ) -> Result<CheckinView, TicketError> {
        let entry = self
            .catalog
            .get(show_id)
            .await?
            .ok_or(TicketError::ShowNotFound)?;
        let read = self.read_scan(&entry, &asked.code, &asked.gate);
        let (ticket, gate) = match read {
            Ok(found) => found,
            Err((refused, ticket_id)) => {
                let refusal = self.refusal(&refused, &asked.gate, ticket_id, Mode::Online);
                self.record_refusals(ctx, show_id, &[(asked.nonce, refusal)])
                    .await?;
                return Err(TicketError::Scan(refused));
            }
        };
        let scanning = Scanning {
            nonce: asked.nonce,
            gate,
            direction: asked.direction,
            version: ticket.1,
            mode: Mode::Online,
            scanned_at: None,
            refused_at_door: false,
        };
        let rules = DoorRules {
            reentry: entry.show.checkin.reentry,
        };
        let mut decision = ScanningOnline {
            scanning: &scanning,
            rules,
        };
        let round = Round::new("checkin", ctx);
        let (scan, state) = match self
            .rounds
            .run(round, vec![unit(&ticket.0)], &mut decision)
            .await?
        {
            Settled::Appended(done) | Settled::Answered(done) => done,
            Settled::KeyTaken => return Err(TicketError::Bug("a scan took a key".into())),
        };
        self.answer(&ticket.0, &state, &scan).await
    }

    /// The ticket a code names and its version, and the gate, or why the
    /// scan is refused (with the ticket, when the code could be read).
    #[allow(clippy::type_complexity)]
    fn read_scan(
        &self,
        entry: &CatalogEntry,
        code: &str,
        gate: &str,
    ) -> Result<((TicketRef, u32), GateId), (Refused, Option<domain::ids::TicketId>)> {
        let payload = code::read(code, &self.keys)
            .map_err(|e| (Refused::InvalidCode(e.to_string()), None))?;
        let ticket = payload.ticket().ok_or_else(|| {
            (
                Refused::InvalidCode("the code names no ticket of its show".into()),
                None,
            )
        })?;
        if ticket.show_id != entry.show.show_id {
            return Err((Refused::WrongShow, Some(ticket.ticket_id)));
        }
        let gate = entry
            .show
            .checkin
            .gate(gate)
            .map(|g| g.gate_id.clone())
            .ok_or_else(|| {
                (
                    Refused::UnknownGate(gate.to_owned()),
                    Some(ticket.ticket_id),
                )
            })?;
        Ok(((ticket, payload.version), gate))
    }

    fn refusal(
        &self,
        refused: &Refused,
        gate: &str,
        ticket_id: Option<domain::ids::TicketId>,
        mode: Mode,
    ) -> Refusal {
        Refusal {
            code: refused.code().to_owned(),
            gate: gate
                .chars()
                .take(domain::limits::MAX_SHOW_ID_CHARS)
                .collect(),
            ticket_id,
            mode,
            at: self.clock.now(),
        }
    }

    /// Records refused scans, one stream each (by nonce).
    async fn record_refusals(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        refused: &[(ScanNonce, Refusal)],
    ) -> Result<(), TicketError> {
        let key = ShowKey {
            show_id: show_id.clone(),
        };
        let mut by_stream: Vec<(String, &Refusal)> = refused
            .iter()
            .map(|(nonce, refusal)| (refused_scan_stream_id(show_id, nonce), refusal))
            .collect();
        by_stream.sort_by(|a, b| a.0.cmp(&b.0));
        by_stream.dedup_by(|a, b| a.0 == b.0);
        if by_stream.is_empty() {
            return Ok(());
        }
        let refusals: Vec<Refusal> = by_stream.iter().map(|(_, r)| (*r).clone()).collect();
        let units = by_stream
            .into_iter()
            .map(|(id, _)| (id, key.clone()))
            .collect();
        let round = Round::new("scan_refused", ctx).assuming_new();
        self.rounds
            .run(
                round,
                units,
                &mut RecordingRefusals {
                    refusals: &refusals,
                },
            )
            .await?;
        Ok(())
    }

    /// A scan's answer: who came in or went out, or why not.
    async fn answer(
        &self,
        ticket: &TicketRef,
        state: &Ticket,
        scan: &Scan,
    ) -> Result<CheckinView, TicketError> {
        let refused = match scan.outcome {
            Outcome::Admitted | Outcome::Exited => None,
            Outcome::AlreadyInside => {
                let inside = state.at_door(scan.scanned_at).inside;
                Some(Refused::AlreadyInside {
                    gate: inside
                        .as_ref()
                        .map_or_else(String::new, |s| s.gate.to_string()),
                    at: inside.map_or(scan.scanned_at, |s| s.scanned_at),
                })
            }
            Outcome::ReentryNotAllowed => Some(Refused::ReentryNotAllowed),
            Outcome::NotInside => Some(Refused::NotInside),
            Outcome::Revoked | Outcome::Conflict | Outcome::RefusedAtDoor => Some(Refused::Revoked),
        };
        if let Some(refused) = refused {
            return Err(TicketError::Scan(refused));
        }
        let view = self.view(ticket, state).await?;
        let n = state
            .scans
            .iter()
            .position(|s| s.nonce == scan.nonce)
            .map_or(0, |i| i + 1);
        Ok(CheckinView {
            checkin_id: format!("{ticket}:{n}"),
            ticket_id: ticket.to_string(),
            result: scan.outcome.as_str(),
            gate: scan.gate.to_string(),
            at: scan.scanned_at,
            seat_id: view.seat_id,
            pool_id: view.pool_id,
            section: view.section,
            row: view.row,
            number: view.number,
            ticket_type: view.ticket_type,
            holder_name: view.holder_name,
        })
    }

    /// `POST /v1/shows/{id}/checkins/batch`: what an offline scanner did,
    /// recorded as it happened (never refused for a ticket's state), each
    /// scan answered; a nonce seen before is `duplicate`.
    pub async fn scan_batch(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        scans: Vec<BatchScan>,
    ) -> Result<Vec<ScanResult>, TicketError> {
        let entry = self
            .catalog
            .get(show_id)
            .await?
            .ok_or(TicketError::ShowNotFound)?;
        let mut invalid = Vec::new();
        let mut by_ticket: BTreeMap<String, (TicketRef, Vec<Scanning>)> = BTreeMap::new();
        let mut in_batch = HashSet::new();
        let mut duplicates = HashSet::new();
        for scan in &scans {
            if !in_batch.insert(scan.nonce.clone()) {
                duplicates.insert(scan.nonce.clone());
                continue;
            }
            match self.read_scan(&entry, &scan.code, scan.gate.as_str()) {
                Ok(((ticket, version), gate)) => {
                    let scanning = offline_scanning(scan, gate, version);
                    let slot = by_ticket
                        .entry(ticket.stream_id())
                        .or_insert_with(|| (ticket, Vec::new()));
                    slot.1.push(scanning);
                }
                Err((refused, ticket_id)) => {
                    let refusal =
                        self.refusal(&refused, scan.gate.as_str(), ticket_id, Mode::Offline);
                    invalid.push((scan.nonce.clone(), refusal));
                }
            }
        }
        self.record_refusals(ctx, show_id, &invalid).await?;
        let outcomes = self.scan_tickets(ctx, &entry, by_ticket).await?;
        let invalid: HashSet<ScanNonce> = invalid.into_iter().map(|(n, _)| n).collect();
        Ok(results(&scans, &outcomes, &invalid, &duplicates))
    }

    /// One round over every ticket of a batch.
    async fn scan_tickets(
        &self,
        ctx: &RequestContext,
        entry: &CatalogEntry,
        by_ticket: BTreeMap<String, (TicketRef, Vec<Scanning>)>,
    ) -> Result<BTreeMap<ScanNonce, Option<Outcome>>, TicketError> {
        if by_ticket.is_empty() {
            return Ok(BTreeMap::new());
        }
        // Stream-id order, the round's lock order: the scans stay beside
        // their tickets.
        let (units, scans): (Vec<_>, Vec<_>) = by_ticket
            .into_values()
            .map(|(ticket, mut scans)| {
                scans.sort_by_key(|s| s.scanned_at);
                (unit(&ticket), scans)
            })
            .unzip();
        let rules = DoorRules {
            reentry: entry.show.checkin.reentry,
        };
        let mut decision = ScanningBatch {
            scans: scans.iter().map(|s| s.iter().collect()).collect(),
            rules,
        };
        let round = Round::new("checkin_batch", ctx);
        match self.rounds.run(round, units, &mut decision).await? {
            Settled::Appended(outcomes) | Settled::Answered(outcomes) => Ok(outcomes),
            Settled::KeyTaken => Err(TicketError::Bug("a batch took a key".into())),
        }
    }
}

fn offline_scanning(scan: &BatchScan, gate: GateId, version: u32) -> Scanning {
    Scanning {
        nonce: scan.nonce.clone(),
        gate,
        direction: scan.direction,
        version,
        mode: Mode::Offline,
        scanned_at: Some(scan.scanned_at),
        refused_at_door: scan.refused,
    }
}

/// Each uploaded scan's result, in the order uploaded.
fn results(
    scans: &[BatchScan],
    outcomes: &BTreeMap<ScanNonce, Option<Outcome>>,
    invalid: &HashSet<ScanNonce>,
    duplicates: &HashSet<ScanNonce>,
) -> Vec<ScanResult> {
    let mut answered = HashSet::new();
    scans
        .iter()
        .map(|scan| {
            let first = answered.insert(scan.nonce.clone());
            let result = match outcomes.get(&scan.nonce) {
                _ if !first && duplicates.contains(&scan.nonce) => "duplicate",
                _ if invalid.contains(&scan.nonce) => "invalid",
                Some(None) | None => "duplicate",
                Some(Some(Outcome::Admitted)) => "admitted",
                Some(Some(Outcome::Exited)) => "exited",
                Some(Some(Outcome::Conflict)) => "conflict",
                Some(Some(Outcome::RefusedAtDoor)) => "refused",
                Some(Some(_)) => "revoked",
            };
            ScanResult {
                nonce: scan.nonce.to_string(),
                result,
            }
        })
        .collect()
}
