//! The Ticket stream: one per sold seat or pool place, from its sale's
//! confirmation to the door.
//!
//! A ticket is issued when its sale is confirmed (`TicketIssued`, in the
//! append that completes the checkout), revoked when its line is cancelled
//! (before the line's seat or place is freed, so a freed seat never has a
//! valid ticket), named, transferred, and scanned at the door. Everything
//! that must be decided against the ticket's state at once is a decision
//! of this one stream, at its version: a transfer racing a check-in, two
//! transfers at once, a revocation racing either; exactly one wins.
//!
//! A ticket has a `version`, 1 at issue, one more at each transfer: the
//! code a scanner reads names it, and a code of an older version is
//! revoked. Scans are recorded whatever they come to (admitted, exited or
//! refused: the door's history), with the scanner's `nonce` (the same
//! nonce is the same scan, answered as before). The ticket's place at the
//! door (inside or not) is computed from the scans that count, in the
//! order they were *scanned* (`scanned_at`), never the order they reached
//! the service: scanners offline upload late, and whichever syncs first,
//! the ticket ends in the same state. Online, the door refuses what the
//! state forbids (`already_inside`, `not_inside`, `reentry_not_allowed`,
//! a revoked code); offline scans are facts, recorded as they happened and
//! never refused for the ticket's state: an entry while inside, or with a
//! revoked code, is a conflict, kept for the staff to look at.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::aggregate::{event_names, impl_aggregate, Decider};
use crate::ids::{
    BookingId, BuyerId, CategoryId, GateId, HoldId, OrderId, PoolId, ScanNonce, SeatId, ShowId,
    TicketId, TicketType,
};
use crate::limits::{MAX_HOLDER_NAME_CHARS, MAX_SCANS_PER_TICKET};

/// What a ticket admits: one seat, or one place of a pool, as sold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<SeatId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<PoolId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<CategoryId>,
    pub ticket_type: TicketType,
}

/// The sale a ticket comes from: its checkout stream (a hold's purchase,
/// or an order), its booking and its line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sold {
    pub checkout: HoldId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<OrderId>,
    pub booking_id: BookingId,
    pub line_id: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Entry,
    Exit,
}

/// How a scan reached the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Asked at the door, answered at once: refused if the state forbids it.
    Online,
    /// Uploaded later by a scanner that was offline: recorded as it
    /// happened, never refused for the ticket's state.
    Offline,
}

/// What a scan came to, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Admitted,
    Exited,
    /// Online: an entry while inside (no exit since the last entry).
    AlreadyInside,
    /// Online: an entry after an exit on a show without re-entry.
    ReentryNotAllowed,
    /// Online: an exit without an entry.
    NotInside,
    /// The code is revoked (its line cancelled, or an older version).
    Revoked,
    /// Offline: an entry while inside, or with a revoked code; it happened,
    /// and is listed for the staff.
    Conflict,
    /// Offline: the scanner itself refused it at the door (it knew the
    /// code revoked): recorded, counts for nothing.
    RefusedAtDoor,
}

impl Outcome {
    /// Whether the scan moved the ticket at the door.
    pub fn counts(self) -> bool {
        matches!(
            self,
            Outcome::Admitted | Outcome::Exited | Outcome::Conflict
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Exited => "exited",
            Outcome::AlreadyInside => "already_inside",
            Outcome::ReentryNotAllowed => "reentry_not_allowed",
            Outcome::NotInside => "not_inside",
            Outcome::Revoked => "revoked",
            Outcome::Conflict => "conflict",
            Outcome::RefusedAtDoor => "refused_at_door",
        }
    }
}

/// One scan as recorded on the ticket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scan {
    pub nonce: ScanNonce,
    pub gate: GateId,
    pub direction: Direction,
    /// When it happened at the door (an online scan: when it was decided).
    pub scanned_at: DateTime<Utc>,
    /// The version the code named.
    pub version: u32,
    pub mode: Mode,
    pub outcome: Outcome,
}

/// A ticket's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticket {
    /// `None` until issued.
    pub issued: Option<Issued>,
    /// 1 at issue, one more at each transfer.
    pub version: u32,
    /// Revoked as a whole (its line cancelled): no code of it admits.
    pub revoked: bool,
    /// Every scan, in the order recorded.
    pub scans: Vec<Scan>,
}

/// What issue fixed, and who holds the ticket now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issued {
    pub ticket_id: TicketId,
    pub show_id: ShowId,
    pub sold: Sold,
    pub admits: Admits,
    /// The buyer who holds it now.
    pub holder: BuyerId,
    pub holder_name: Option<String>,
    pub issued_at: DateTime<Utc>,
}

/// Where a ticket stands at the door, from the scans that count, in the
/// order they were scanned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AtDoor {
    /// The entry that let it in, while inside.
    pub inside: Option<Scan>,
    /// Entered at least once.
    pub entered: bool,
    /// Left at least once after an entry.
    pub exited: bool,
    /// Entries while inside, or with a revoked code (offline), with the
    /// scan that let it in before (none for a revoked code's).
    pub conflicts: Vec<(Scan, Option<Scan>)>,
}

impl Ticket {
    /// The ticket's place at the door from every scan that counts,
    /// scanned at or before `at`, in scan order (ties: log order).
    pub fn at_door(&self, at: DateTime<Utc>) -> AtDoor {
        let mut counted: Vec<&Scan> = self
            .scans
            .iter()
            .filter(|s| s.outcome.counts() && s.scanned_at <= at)
            .collect();
        counted.sort_by_key(|s| s.scanned_at);
        let mut door = AtDoor::default();
        for scan in counted {
            match scan.direction {
                Direction::Entry if scan.outcome == Outcome::Conflict || door.inside.is_some() => {
                    door.conflicts.push((scan.clone(), door.inside.clone()));
                    door.entered = true;
                    door.inside.get_or_insert_with(|| scan.clone());
                }
                Direction::Entry => {
                    door.entered = true;
                    door.inside = Some(scan.clone());
                }
                Direction::Exit if door.inside.is_some() => {
                    door.inside = None;
                    door.exited = true;
                }
                Direction::Exit => {}
            }
        }
        door
    }

    /// Whether a code of `version` admits now: the ticket's own version,
    /// not revoked.
    pub fn is_valid(&self, version: u32) -> bool {
        self.issued.is_some() && !self.revoked && version == self.version
    }

    fn scan_of(&self, nonce: &ScanNonce) -> Option<&Scan> {
        self.scans.iter().find(|s| &s.nonce == nonce)
    }
}

/// The door's rules for one show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoorRules {
    /// A ticket that left may come in again.
    pub reentry: bool,
}

/// A scan asked of the ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scanning {
    pub nonce: ScanNonce,
    pub gate: GateId,
    pub direction: Direction,
    pub version: u32,
    pub mode: Mode,
    /// Offline: when it happened at the door (online: the decision's `now`).
    pub scanned_at: Option<DateTime<Utc>>,
    /// Offline: the scanner refused it at the door itself.
    pub refused_at_door: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TicketCommand {
    Issue(Box<Issued>),
    /// The holder names who comes (the code stays the same).
    Name {
        holder_name: String,
    },
    /// To another buyer: a new version, the old code revoked.
    Transfer {
        to: BuyerId,
        holder_name: Option<String>,
        /// The show's `transfer_until`, if it has one.
        until: Option<DateTime<Utc>>,
    },
    /// Its line is cancelled: no code of it admits any more.
    Revoke,
    Scan {
        scanning: Scanning,
        rules: DoorRules,
    },
}

/// Events are forever: add variants, never change one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TicketEvent {
    TicketIssued {
        ticket_id: TicketId,
        show_id: ShowId,
        sold: Sold,
        admits: Admits,
        holder: BuyerId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        holder_name: Option<String>,
        issued_at: DateTime<Utc>,
    },
    TicketHolderNamed {
        holder_name: String,
    },
    /// Held by `to` from now on, as `version`; every older code is revoked.
    TicketTransferred {
        from: BuyerId,
        to: BuyerId,
        version: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        holder_name: Option<String>,
    },
    /// Every code of the ticket revoked (its line cancelled).
    TicketRevoked {
        version: u32,
    },
    TicketScanned {
        scan: Scan,
    },
}

event_names!(TicketEvent {
    TicketIssued => "TicketIssued",
    TicketHolderNamed => "TicketHolderNamed",
    TicketTransferred => "TicketTransferred",
    TicketRevoked => "TicketRevoked",
    TicketScanned => "TicketScanned",
});

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TicketError {
    #[error("no such ticket")]
    NotIssued,
    #[error("the ticket is revoked")]
    Revoked,
    #[error("the ticket has been checked in")]
    CheckedIn,
    #[error("transfers of this show's tickets have closed")]
    TransferClosed,
    #[error("a ticket is transferred to someone else")]
    ToSelf,
    #[error("holder_name must be 1..={MAX_HOLDER_NAME_CHARS} characters")]
    HolderName,
    #[error("the ticket has been scanned {MAX_SCANS_PER_TICKET} times")]
    ScanLimit,
}

/// What a scan decided: the events (the scan recorded, or nothing for a
/// nonce seen before) and the scan as answered.
pub type Scanned = (Vec<TicketEvent>, Scan);

/// The stream's decision, each command to its own function.
pub fn decide(
    ticket: &Ticket,
    command: &TicketCommand,
    now: DateTime<Utc>,
) -> Result<Vec<TicketEvent>, TicketError> {
    match command {
        TicketCommand::Issue(issued) => Ok(issue(ticket, issued)),
        TicketCommand::Name { holder_name } => name(ticket, holder_name),
        TicketCommand::Transfer {
            to,
            holder_name,
            until,
        } => transfer(ticket, to, holder_name.as_deref(), *until, now),
        TicketCommand::Revoke => Ok(revoke(ticket)),
        TicketCommand::Scan { scanning, rules } => {
            scan(ticket, scanning, *rules, now).map(|(events, _)| events)
        }
    }
}

/// Issued once: a ticket issued already is a no-op (a retried completion).
fn issue(ticket: &Ticket, issued: &Issued) -> Vec<TicketEvent> {
    if ticket.issued.is_some() {
        return vec![];
    }
    vec![TicketEvent::TicketIssued {
        ticket_id: issued.ticket_id,
        show_id: issued.show_id.clone(),
        sold: issued.sold.clone(),
        admits: issued.admits.clone(),
        holder: issued.holder.clone(),
        holder_name: issued.holder_name.clone(),
        issued_at: issued.issued_at,
    }]
}

/// The name printed on the ticket: 1..=MAX_HOLDER_NAME_CHARS characters,
/// none a control character.
pub fn check_holder_name(name: &str) -> Result<(), TicketError> {
    let chars = name.chars().count();
    if (1..=MAX_HOLDER_NAME_CHARS).contains(&chars) && !name.chars().any(char::is_control) {
        Ok(())
    } else {
        Err(TicketError::HolderName)
    }
}

fn name(ticket: &Ticket, holder_name: &str) -> Result<Vec<TicketEvent>, TicketError> {
    check_holder_name(holder_name)?;
    let issued = ticket.issued.as_ref().ok_or(TicketError::NotIssued)?;
    if ticket.revoked {
        return Err(TicketError::Revoked);
    }
    if issued.holder_name.as_deref() == Some(holder_name) {
        return Ok(vec![]);
    }
    Ok(vec![TicketEvent::TicketHolderNamed {
        holder_name: holder_name.to_owned(),
    }])
}

fn transfer(
    ticket: &Ticket,
    to: &BuyerId,
    holder_name: Option<&str>,
    until: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Vec<TicketEvent>, TicketError> {
    let issued = ticket.issued.as_ref().ok_or(TicketError::NotIssued)?;
    if let Some(name) = holder_name {
        check_holder_name(name)?;
    }
    if ticket.revoked {
        return Err(TicketError::Revoked);
    }
    if &issued.holder == to {
        return Err(TicketError::ToSelf);
    }
    if ticket.at_door(now).entered {
        return Err(TicketError::CheckedIn);
    }
    if until.is_some_and(|until| now >= until) {
        return Err(TicketError::TransferClosed);
    }
    Ok(vec![TicketEvent::TicketTransferred {
        from: issued.holder.clone(),
        to: to.clone(),
        version: ticket.version + 1,
        holder_name: holder_name.map(str::to_owned),
    }])
}

/// Revoked once: again is a no-op; a ticket never issued has nothing to
/// revoke.
fn revoke(ticket: &Ticket) -> Vec<TicketEvent> {
    if ticket.issued.is_none() || ticket.revoked {
        return vec![];
    }
    vec![TicketEvent::TicketRevoked {
        version: ticket.version,
    }]
}

/// A scan: recorded whatever it comes to, and answered; a nonce seen
/// before is the same scan, answered as recorded, with nothing to append.
pub fn scan(
    ticket: &Ticket,
    scanning: &Scanning,
    rules: DoorRules,
    now: DateTime<Utc>,
) -> Result<Scanned, TicketError> {
    if ticket.issued.is_none() {
        return Err(TicketError::NotIssued);
    }
    if let Some(seen) = ticket.scan_of(&scanning.nonce) {
        return Ok((vec![], seen.clone()));
    }
    if ticket.scans.len() >= MAX_SCANS_PER_TICKET {
        return Err(TicketError::ScanLimit);
    }
    let scanned_at = match scanning.mode {
        Mode::Online => now,
        Mode::Offline => scanning.scanned_at.unwrap_or(now),
    };
    let outcome = match scanning.mode {
        Mode::Online => online_outcome(ticket, scanning, rules, now),
        Mode::Offline => offline_outcome(ticket, scanning, scanned_at),
    };
    let scan = Scan {
        nonce: scanning.nonce.clone(),
        gate: scanning.gate.clone(),
        direction: scanning.direction,
        scanned_at,
        version: scanning.version,
        mode: scanning.mode,
        outcome,
    };
    Ok((
        vec![TicketEvent::TicketScanned { scan: scan.clone() }],
        scan,
    ))
}

/// Online, the door refuses what the ticket's state forbids now.
fn online_outcome(
    ticket: &Ticket,
    scanning: &Scanning,
    rules: DoorRules,
    now: DateTime<Utc>,
) -> Outcome {
    if !ticket.is_valid(scanning.version) {
        return Outcome::Revoked;
    }
    let door = ticket.at_door(now);
    match scanning.direction {
        Direction::Entry if door.inside.is_some() => Outcome::AlreadyInside,
        Direction::Entry if door.exited && !rules.reentry => Outcome::ReentryNotAllowed,
        Direction::Entry => Outcome::Admitted,
        Direction::Exit if door.inside.is_none() => Outcome::NotInside,
        Direction::Exit => Outcome::Exited,
    }
}

/// Offline, what happened is recorded: an entry while inside (as of when
/// it was scanned, with every scan known now) or with a revoked code is a
/// conflict; an exit of a revoked code is told as revoked.
fn offline_outcome(ticket: &Ticket, scanning: &Scanning, scanned_at: DateTime<Utc>) -> Outcome {
    if scanning.refused_at_door {
        return Outcome::RefusedAtDoor;
    }
    let valid = ticket.is_valid(scanning.version);
    match scanning.direction {
        Direction::Entry if !valid => Outcome::Conflict,
        Direction::Entry if ticket.at_door(scanned_at).inside.is_some() => Outcome::Conflict,
        Direction::Entry => Outcome::Admitted,
        Direction::Exit if !valid => Outcome::Revoked,
        Direction::Exit => Outcome::Exited,
    }
}

impl Ticket {
    /// Folds one event into the state. Never fails: events are facts.
    pub fn apply_event(&mut self, event: &TicketEvent) {
        match event {
            TicketEvent::TicketIssued {
                ticket_id,
                show_id,
                sold,
                admits,
                holder,
                holder_name,
                issued_at,
            } => {
                self.version = 1;
                self.issued = Some(Issued {
                    ticket_id: *ticket_id,
                    show_id: show_id.clone(),
                    sold: sold.clone(),
                    admits: admits.clone(),
                    holder: holder.clone(),
                    holder_name: holder_name.clone(),
                    issued_at: *issued_at,
                });
            }
            TicketEvent::TicketHolderNamed { holder_name } => {
                if let Some(issued) = self.issued.as_mut() {
                    issued.holder_name = Some(holder_name.clone());
                }
            }
            TicketEvent::TicketTransferred {
                to,
                version,
                holder_name,
                ..
            } => {
                self.version = *version;
                if let Some(issued) = self.issued.as_mut() {
                    issued.holder = to.clone();
                    issued.holder_name = holder_name.clone();
                }
            }
            TicketEvent::TicketRevoked { .. } => self.revoked = true,
            TicketEvent::TicketScanned { scan } => self.scans.push(scan.clone()),
        }
    }
}

/// A command with the instant it is decided at.
#[derive(Debug, Clone)]
pub struct TimedTicket {
    pub command: TicketCommand,
    pub now: DateTime<Utc>,
}

impl Decider for Ticket {
    type Command = TimedTicket;
    type Event = TicketEvent;
    type Error = TicketError;

    fn decide(&self, command: &TimedTicket) -> Result<Vec<TicketEvent>, TicketError> {
        decide(self, &command.command, command.now)
    }

    fn evolve(&mut self, event: &TicketEvent) {
        self.apply_event(event);
    }
}

impl_aggregate!(Ticket, "Ticket");

/// A scan the door refused before any ticket was found (a code that does
/// not verify, a code of another show, a gate the show does not have): a
/// stream of its own, one event, keyed by the scan's nonce, so the same
/// nonce again finds it and is answered alike.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedScan {
    pub refusal: Option<Refusal>,
}

/// Why the door refused a scan it found no ticket for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The problem code the scanner was answered (`invalid_code`,
    /// `wrong_show`, `unknown_gate`).
    pub code: String,
    /// The gate as the scanner sent it (at most a gate id's length).
    pub gate: String,
    /// The ticket the code names, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket_id: Option<TicketId>,
    pub mode: Mode,
    pub at: DateTime<Utc>,
}

/// Events are forever: add variants, never change one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RefusedScanEvent {
    ScanRefused { refusal: Refusal },
}

event_names!(RefusedScanEvent {
    ScanRefused => "ScanRefused",
});

/// The id of a refused scan's stream: `show_id/nonce` (a show id never
/// holds a `/`, so the first one splits them).
pub fn refused_scan_stream_id(show: &ShowId, nonce: &ScanNonce) -> String {
    format!("{}/{}", show.as_str(), nonce.as_str())
}

impl Decider for RefusedScan {
    type Command = Refusal;
    type Event = RefusedScanEvent;
    type Error = std::convert::Infallible;

    /// Recorded once: the same nonce again is the refusal recorded.
    fn decide(&self, refusal: &Refusal) -> Result<Vec<RefusedScanEvent>, Self::Error> {
        Ok(match self.refusal {
            Some(_) => vec![],
            None => vec![RefusedScanEvent::ScanRefused {
                refusal: refusal.clone(),
            }],
        })
    }

    fn evolve(&mut self, event: &RefusedScanEvent) {
        let RefusedScanEvent::ScanRefused { refusal } = event;
        self.refusal = Some(refusal.clone());
    }
}

impl_aggregate!(RefusedScan, "RefusedScan");

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use uuid::Uuid;

    use super::*;

    fn t(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + Duration::seconds(1_900_000_000 + seconds)
    }
    fn buyer(name: &str) -> BuyerId {
        BuyerId::parse(name).unwrap()
    }
    fn issued() -> Issued {
        Issued {
            ticket_id: TicketId(Uuid::from_u128(7)),
            show_id: ShowId::parse("rock").unwrap(),
            sold: Sold {
                checkout: HoldId(Uuid::from_u128(1)),
                order_id: None,
                booking_id: BookingId(Uuid::from_u128(2)),
                line_id: 1,
            },
            admits: Admits {
                seat_id: Some(SeatId::parse("A-1").unwrap()),
                pool_id: None,
                category: None,
                ticket_type: TicketType::standard(),
            },
            holder: buyer("alice"),
            holder_name: None,
            issued_at: t(0),
        }
    }
    /// given these commands, each decided at its instant
    fn given(commands: &[(TicketCommand, i64)]) -> Ticket {
        let mut ticket = Ticket::default();
        for (command, at) in commands {
            for event in decide(&ticket, command, t(*at)).unwrap() {
                ticket.apply_event(&event);
            }
        }
        ticket
    }
    fn issue_it() -> (TicketCommand, i64) {
        (TicketCommand::Issue(Box::new(issued())), 0)
    }
    fn scanning(nonce: &str, gate: &str, direction: Direction) -> Scanning {
        Scanning {
            nonce: ScanNonce::parse(nonce).unwrap(),
            gate: GateId::parse(gate).unwrap(),
            direction,
            version: 1,
            mode: Mode::Online,
            scanned_at: None,
            refused_at_door: false,
        }
    }
    fn offline(nonce: &str, gate: &str, at: i64) -> Scanning {
        Scanning {
            mode: Mode::Offline,
            scanned_at: Some(t(at)),
            ..scanning(nonce, gate, Direction::Entry)
        }
    }
    const REENTRY: DoorRules = DoorRules { reentry: true };
    fn scan_cmd(scanning: Scanning) -> TicketCommand {
        TicketCommand::Scan {
            scanning,
            rules: REENTRY,
        }
    }
    fn outcome(ticket: &Ticket, scanning: &Scanning, rules: DoorRules, at: i64) -> Outcome {
        scan(ticket, scanning, rules, t(at)).unwrap().1.outcome
    }

    #[test]
    fn it_should_admit_once_then_refuse_a_second_entry_naming_the_first() {
        let inside = given(&[
            issue_it(),
            (scan_cmd(scanning("n1", "north", Direction::Entry)), 10),
        ]);
        let again = scanning("n2", "south", Direction::Entry);
        assert_eq!(
            outcome(&inside, &again, REENTRY, 20),
            Outcome::AlreadyInside
        );
        let door = inside.at_door(t(20));
        assert_eq!(
            door.inside.map(|s| s.gate.to_string()),
            Some("north".into())
        );
        // The same nonce again: the same answer, nothing recorded.
        let (events, answer) = scan(
            &inside,
            &scanning("n1", "x", Direction::Exit),
            REENTRY,
            t(30),
        )
        .unwrap();
        assert!(events.is_empty());
        assert_eq!(answer.outcome, Outcome::Admitted);
    }

    #[test]
    fn it_should_let_in_again_after_an_exit_only_where_reentry_is_allowed() {
        let left = given(&[
            issue_it(),
            (scan_cmd(scanning("n1", "north", Direction::Entry)), 10),
            (scan_cmd(scanning("n2", "north", Direction::Exit)), 20),
        ]);
        let back = scanning("n3", "north", Direction::Entry);
        assert_eq!(outcome(&left, &back, REENTRY, 30), Outcome::Admitted);
        let no_reentry = DoorRules { reentry: false };
        assert_eq!(
            outcome(&left, &back, no_reentry, 30),
            Outcome::ReentryNotAllowed
        );
        let fresh = given(&[issue_it()]);
        let exit = scanning("n4", "north", Direction::Exit);
        assert_eq!(outcome(&fresh, &exit, REENTRY, 30), Outcome::NotInside);
    }

    #[test]
    fn a_transfer_revokes_the_old_code_and_is_refused_once_checked_in() {
        let transfer = |to: &str| TicketCommand::Transfer {
            to: buyer(to),
            holder_name: Some("Bob B.".into()),
            until: None,
        };
        let moved = given(&[issue_it(), (transfer("bob"), 5)]);
        assert_eq!(moved.version, 2);
        assert_eq!(
            moved.issued.as_ref().map(|i| i.holder.to_string()),
            Some("bob".into())
        );
        let old_code = scanning("n1", "north", Direction::Entry);
        assert_eq!(outcome(&moved, &old_code, REENTRY, 10), Outcome::Revoked);
        let new_code = Scanning {
            version: 2,
            ..old_code
        };
        assert_eq!(outcome(&moved, &new_code, REENTRY, 10), Outcome::Admitted);
        let inside = given(&[
            issue_it(),
            (scan_cmd(scanning("n1", "n", Direction::Entry)), 5),
        ]);
        assert_eq!(
            decide(&inside, &transfer("bob"), t(6)),
            Err(TicketError::CheckedIn)
        );
        assert_eq!(
            decide(&moved, &transfer("bob"), t(6)),
            Err(TicketError::ToSelf)
        );
        let closed = TicketCommand::Transfer {
            to: buyer("carol"),
            holder_name: None,
            until: Some(t(6)),
        };
        assert_eq!(
            decide(&moved, &closed, t(6)),
            Err(TicketError::TransferClosed)
        );
    }

    #[test]
    fn a_revoked_ticket_admits_nothing_and_cannot_change_hands() {
        let revoked = given(&[issue_it(), (TicketCommand::Revoke, 5)]);
        let entry = scanning("n1", "north", Direction::Entry);
        assert_eq!(outcome(&revoked, &entry, REENTRY, 10), Outcome::Revoked);
        assert!(decide(&revoked, &TicketCommand::Revoke, t(11))
            .unwrap()
            .is_empty());
        let transfer = TicketCommand::Transfer {
            to: buyer("bob"),
            holder_name: None,
            until: None,
        };
        assert_eq!(
            decide(&revoked, &transfer, t(12)),
            Err(TicketError::Revoked)
        );
    }

    #[test]
    fn two_offline_entries_end_the_same_whichever_is_uploaded_first() {
        let (north, south) = (offline("a1", "north", 100), offline("b1", "south", 130));
        for order in [[&north, &south], [&south, &north]] {
            let mut ticket = given(&[issue_it()]);
            for scanning in order {
                let (events, _) = scan(&ticket, scanning, REENTRY, t(500)).unwrap();
                events.iter().for_each(|e| ticket.apply_event(e));
            }
            let door = ticket.at_door(t(500));
            assert_eq!(
                door.inside.as_ref().map(|s| s.gate.to_string()),
                Some("north".into())
            );
            let conflicts: Vec<String> = door
                .conflicts
                .iter()
                .map(|(s, _)| s.nonce.to_string())
                .collect();
            assert_eq!(conflicts, vec!["b1".to_owned()], "{order:?}");
        }
    }

    #[test]
    fn an_offline_entry_with_a_revoked_code_is_a_conflict_and_a_door_refusal_counts_for_nothing() {
        let revoked = given(&[issue_it(), (TicketCommand::Revoke, 5)]);
        assert_eq!(
            outcome(&revoked, &offline("c1", "north", 50), REENTRY, 100),
            Outcome::Conflict
        );
        let refused = Scanning {
            refused_at_door: true,
            ..offline("c2", "north", 60)
        };
        let (events, scanned) = scan(&revoked, &refused, REENTRY, t(100)).unwrap();
        assert_eq!(scanned.outcome, Outcome::RefusedAtDoor);
        let mut ticket = revoked.clone();
        events.iter().for_each(|e| ticket.apply_event(e));
        assert_eq!(ticket.at_door(t(100)), AtDoor::default());
    }

    #[test]
    fn a_holder_name_is_one_to_a_hundred_printable_characters() {
        let ticket = given(&[issue_it()]);
        let named = TicketCommand::Name {
            holder_name: "Alice A.".into(),
        };
        assert_eq!(decide(&ticket, &named, t(1)).unwrap().len(), 1);
        for bad in [String::new(), "x".repeat(101), "a\nb".into()] {
            let command = TicketCommand::Name { holder_name: bad };
            assert_eq!(
                decide(&ticket, &command, t(1)),
                Err(TicketError::HolderName)
            );
        }
    }
}
