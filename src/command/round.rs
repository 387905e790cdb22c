//! One round of a command, written once.
//!
//! Every command that changes inventory does the same thing: lock the
//! streams it needs, bring them up to date, capture `now` once, decide every
//! stream at that instant, append what it decided in one transaction at the
//! versions it decided on, and fold the events into the caches; or, refused
//! because another instance got there first, forget what it knew and do it
//! all again, at most [`MAX_DECIDE_ROUNDS`] times. [`Rounds::run`] is that
//! loop. A command brings its decision: a pure function of the streams as
//! locked (a [`View`]) to the events of each ([`Decided`]).
//!
//! Lock order, one for the whole process, kept here and nowhere else: the
//! checkout, then the buyer's allowance, then the units (seats in stream-id
//! order, or shards in index order; a hold never has both, see
//! [`Stream::sort`]). Each type has its own cache, so the order between types
//! is what keeps two commands from waiting on each other in a cycle. A
//! checkout is locked by the purchase that drives it
//! ([`Rounds::lock_checkout`]), across its provider calls and several
//! rounds: it is first in the order, so a round may lock the rest while it
//! is held. Allowances and units are locked by a round only, for one round.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use domain::allowance::{
    self, allowance_stream_id, Allowance, AllowanceCommand, AllowanceError, AllowanceEvent,
};
use domain::checkout::{Checkout, CheckoutEvent};
use domain::ids::{BuyerId, HoldId, ShowId};
use domain::pool::PoolShard;
use domain::seat::Seat;
use domain::show::Show;
use projections::rows::Rows;
use projections::time::to_micros;

use crate::clock::Clock;
use crate::command::context::{OutcomeMark, RequestContext};
use crate::command::streams::{
    refresh_all, refresh_or_assume_new, Inventory, LockedStream, Stream,
};
use crate::command::units::{HoldUnits, Unit};
use crate::store::{AppendBatch, AppendOutcome, EventLog, IdempotencyKeyRow, StoreError};

/// Rounds of deciding and appending per command before giving up with 503
/// `busy`. Each new round follows a conflict with another instance that did
/// commit, so five in a row means extreme contention across instances; the
/// client may retry.
pub const MAX_DECIDE_ROUNDS: usize = 5;

/// A checkout locked by the request (or recovery) driving it.
pub type CheckoutLock = LockedStream<Checkout>;

/// What a command's error must be able to say about a round.
pub trait RoundError: From<StoreError> {
    /// Every round was refused: contention did not settle (503 `busy`).
    fn contended() -> Self;
    /// A decision refused in a way its command rules out: a bug, answered
    /// 500 and logged with `what`.
    fn bug(what: String) -> Self;
}

/// The per-buyer limit a command counts against: the buyer's allowance
/// stream on a show with `max_seats_per_buyer`.
#[derive(Debug, Clone)]
pub struct BuyerLimit {
    show_id: ShowId,
    buyer: BuyerId,
    limit: u32,
}

impl BuyerLimit {
    /// The limit `buyer` has on `show`, if the show sets one.
    pub fn of(show: &Show, buyer: &BuyerId) -> Option<Self> {
        show.max_seats_per_buyer.map(|limit| Self {
            show_id: show.show_id.clone(),
            buyer: buyer.clone(),
            limit,
        })
    }
}

/// How a round brings its unit streams up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// Every stream is read (what this process has not seen of it).
    All,
    /// A stream this process never loaded is taken to be empty instead of
    /// read (`streams::refresh_or_assume_new`): for a decision that appends
    /// whatever it decides on an empty stream (placing a hold), the append
    /// at version 0 is the check. A decision that would refuse on such a
    /// stream asks to read it first ([`Decision::ReadAll`]).
    AssumeNew,
}

/// Who runs a round and what it locks besides its units.
pub struct Round<'a> {
    /// The command's name, for the metrics of refused appends.
    command: &'static str,
    /// Stamped on every event (`RequestContext::metadata`).
    metadata: String,
    /// Marked before an append that is the command's outcome.
    outcome: OutcomeMark,
    checkout: Option<&'a mut CheckoutLock>,
    limit: Option<BuyerLimit>,
    read: Read,
}

impl<'a> Round<'a> {
    pub fn new(command: &'static str, ctx: &RequestContext) -> Self {
        Self {
            command,
            metadata: ctx.metadata(),
            outcome: ctx.outcome.clone(),
            checkout: None,
            limit: None,
            read: Read::All,
        }
    }

    /// Counts against the buyer's limit, if there is one: the allowance is
    /// locked (before the units) and decided with them.
    pub fn counting(mut self, limit: Option<BuyerLimit>) -> Self {
        self.limit = limit;
        self
    }

    /// Decides and appends the checkout (held by the caller) with the units.
    pub fn with_checkout(mut self, checkout: &'a mut CheckoutLock) -> Self {
        self.checkout = Some(checkout);
        self
    }

    /// Takes unit streams this process never loaded to be empty (see
    /// [`Read::AssumeNew`]).
    pub fn assuming_new(mut self) -> Self {
        self.read = Read::AssumeNew;
        self
    }
}

/// The streams of a round as locked and brought up to date, at `now`.
pub struct View<'v, U: Stream> {
    pub now: DateTime<Utc>,
    /// The checkout, if the round has one.
    pub checkout: Option<&'v Checkout>,
    allowance: Option<(&'v Allowance, u32)>,
    /// Each unit with its key, in lock order.
    pub units: Vec<(&'v U, &'v U::Key)>,
    /// Whether some unit was taken to be empty rather than read.
    pub assumed_new: bool,
}

impl<U: Stream> View<'_, U> {
    /// The buyer's limit on the show, if it has one.
    pub fn limit(&self) -> Option<u32> {
        self.allowance.map(|(_, limit)| limit)
    }

    /// Decides `command` on the buyer's allowance at `now`; nothing on a
    /// show without a limit.
    pub fn allowance(
        &self,
        command: &AllowanceCommand,
    ) -> Result<Vec<AllowanceEvent>, AllowanceError> {
        match self.allowance {
            Some((allowance, _)) => allowance::decide(allowance, command, self.now),
            None => Ok(Vec::new()),
        }
    }
}

/// The events a decision appends, stream by stream.
pub struct Decided<U: Stream> {
    /// One list per unit, in the view's order.
    pub units: Vec<Vec<U::Event>>,
    pub allowance: Vec<AllowanceEvent>,
    pub checkout: Vec<CheckoutEvent>,
    /// The buyer's idempotency key, written with the events.
    pub idempotency: Option<IdempotencyKeyRow>,
}

impl<U: Stream> Decided<U> {
    pub fn units(units: Vec<Vec<U::Event>>) -> Self {
        Self {
            units,
            allowance: Vec::new(),
            checkout: Vec::new(),
            idempotency: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.units.iter().all(Vec::is_empty)
            && self.allowance.is_empty()
            && self.checkout.is_empty()
    }
}

/// What a decision comes to.
pub enum Decision<U: Stream, T> {
    /// Append these events; once they are, the round answers `T`.
    Append(Decided<U>, T),
    /// Nothing to write: answer `T` now.
    Answer(T),
    /// The decision would refuse, but some unit was only assumed empty:
    /// read every unit and decide again (at the same `now`).
    ReadAll,
}

impl<U: Stream, T> Decision<U, T> {
    pub fn map<R>(self, f: impl FnOnce(T) -> R) -> Decision<U, R> {
        match self {
            Decision::Append(decided, answer) => Decision::Append(decided, f(answer)),
            Decision::Answer(answer) => Decision::Answer(f(answer)),
            Decision::ReadAll => Decision::ReadAll,
        }
    }
}

/// How a round ended.
#[derive(Debug)]
pub enum Settled<T> {
    /// The decided events are appended.
    Appended(T),
    /// The decision wrote nothing.
    Answered(T),
    /// The buyer's idempotency key was taken by another request meanwhile;
    /// nothing was written.
    KeyTaken,
}

/// A decision that works on either kind of unit, for a command on an
/// existing hold (whose units are seats or shards: [`Rounds::run_on`]).
pub trait Decide {
    type Output;
    type Error: RoundError;
    fn decide<U: Unit>(
        &mut self,
        view: &View<'_, U>,
    ) -> Result<Decision<U, Self::Output>, Self::Error>;
}

/// The owner of command rounds: the store, the clock and this process's
/// loaded streams.
pub struct Rounds {
    log: EventLog,
    clock: Arc<dyn Clock>,
    inventory: Inventory,
}

impl Rounds {
    pub fn new(log: EventLog, clock: Arc<dyn Clock>) -> Self {
        Self {
            log,
            clock,
            inventory: Inventory::default(),
        }
    }

    /// Locks a hold's checkout (the first stream in the order) and brings it
    /// up to date.
    pub async fn lock_checkout(&self, hold_id: HoldId) -> Result<CheckoutLock, StoreError> {
        let mut locked = self.inventory.checkouts.lock(&[hold_id.to_string()]).await;
        refresh_all(&self.log, &mut locked).await?;
        locked
            .pop()
            .ok_or_else(|| StoreError::Corrupt(format!("checkout {hold_id} was not locked")))
    }

    /// [`Self::lock_checkout`] unless a request of this process holds it.
    pub async fn try_lock_checkout(
        &self,
        hold_id: HoldId,
    ) -> Result<Option<CheckoutLock>, StoreError> {
        let Some(mut checkout) = self.inventory.checkouts.try_lock(&hold_id.to_string()) else {
            return Ok(None);
        };
        self.refresh_checkout(&mut checkout).await?;
        Ok(Some(checkout))
    }

    /// Brings a locked checkout up to date.
    pub async fn refresh_checkout(&self, checkout: &mut CheckoutLock) -> Result<(), StoreError> {
        refresh_all(&self.log, std::slice::from_mut(checkout)).await
    }

    /// Looks at a pool shard's cached state without waiting (see
    /// `StreamCache::peek`): a guess for choosing where to look, never an
    /// answer.
    pub fn peek_shard<R>(&self, id: &str, look: impl FnOnce(&PoolShard) -> R) -> Option<R> {
        self.inventory.shards.peek(id, look)
    }

    /// Runs `decision` on the units of an existing hold, seats or shards.
    pub async fn run_on<D: Decide>(
        &self,
        round: Round<'_>,
        units: HoldUnits,
        mut decision: D,
    ) -> Result<Settled<D::Output>, D::Error> {
        match units {
            HoldUnits::Seats(units) => {
                let decide = |view: &View<'_, Seat>| decision.decide(view);
                self.run(round, units, decide).await
            }
            HoldUnits::Pool(units) => {
                let decide = |view: &View<'_, PoolShard>| decision.decide(view);
                self.run(round, units, decide).await
            }
        }
    }

    /// One command: locks the round's streams and `units` in the one order,
    /// brings them up to date, decides at one `now`, appends, and folds the
    /// events in; refused, it decides again, up to [`MAX_DECIDE_ROUNDS`]
    /// times.
    pub async fn run<U: Stream, T, E: RoundError>(
        &self,
        mut round: Round<'_>,
        mut units: Vec<(String, U::Key)>,
        mut decide: impl FnMut(&View<'_, U>) -> Result<Decision<U, T>, E>,
    ) -> Result<Settled<T>, E> {
        U::sort(&mut units);
        for _ in 0..MAX_DECIDE_ROUNDS {
            let mut locked = self.lock(&mut round, &units).await?;
            let now = self.clock.now();
            let (decided, answer) = match self.decide(&round, &mut locked, now, &mut decide).await?
            {
                Decision::Append(decided, answer) if !decided.is_empty() => (decided, answer),
                Decision::Append(_, answer) | Decision::Answer(answer) => {
                    return Ok(Settled::Answered(answer))
                }
                Decision::ReadAll => {
                    return Err(E::bug(format!(
                        "{}: asked to read streams it had read",
                        round.command
                    )))
                }
            };
            match self.append(&mut round, &mut locked, now, decided).await? {
                AppendOutcome::Appended => return Ok(Settled::Appended(answer)),
                AppendOutcome::IdempotencyKeyTaken => return Ok(Settled::KeyTaken),
                AppendOutcome::Conflict | AppendOutcome::CheckpointMoved => {
                    metrics::counter!("append_conflicts_total", "command" => round.command)
                        .increment(1);
                }
            }
        }
        Err(E::contended())
    }

    /// Locks the buyer's allowance, then the units (in the order they are
    /// in), and brings them and the round's checkout up to date.
    async fn lock<'k, U: Stream>(
        &self,
        round: &mut Round<'_>,
        units: &'k [(String, U::Key)],
    ) -> Result<Locked<'k, U>, StoreError> {
        let allowance = match &round.limit {
            Some(limit) => {
                let id = allowance_stream_id(&limit.show_id, &limit.buyer);
                let mut locked = self.inventory.allowances.lock(&[id]).await;
                refresh_all(&self.log, &mut locked).await?;
                locked.pop()
            }
            None => None,
        };
        let ids: Vec<String> = units.iter().map(|(id, _)| id.clone()).collect();
        let mut streams = U::cache(&self.inventory).lock(&ids).await;
        match round.read {
            Read::All => refresh_all(&self.log, &mut streams).await?,
            Read::AssumeNew => refresh_or_assume_new(&self.log, &mut streams).await?,
        }
        if let Some(checkout) = round.checkout.as_deref_mut() {
            self.refresh_checkout(checkout).await?;
        }
        Ok(Locked {
            streams,
            keys: units,
            allowance,
        })
    }

    /// Runs the decision on the locked streams at `now`; when it asks, reads
    /// the streams only assumed new and runs it again.
    async fn decide<U: Stream, T, E: RoundError>(
        &self,
        round: &Round<'_>,
        locked: &mut Locked<'_, U>,
        now: DateTime<Utc>,
        decide: &mut impl FnMut(&View<'_, U>) -> Result<Decision<U, T>, E>,
    ) -> Result<Decision<U, T>, E> {
        let limit = round.limit.as_ref().map(|l| l.limit);
        let mut assumed_new = locked.streams.iter().any(|s| !s.is_loaded());
        loop {
            let view = View {
                now,
                checkout: round.checkout.as_deref().map(LockedStream::aggregate),
                allowance: locked.allowance.as_ref().map(|a| a.aggregate()).zip(limit),
                units: locked
                    .streams
                    .iter()
                    .zip(locked.keys)
                    .map(|(stream, (_, key))| (stream.aggregate(), key))
                    .collect(),
                assumed_new,
            };
            match decide(&view)? {
                Decision::ReadAll if assumed_new => {
                    refresh_all(&self.log, &mut locked.streams).await?;
                    assumed_new = false;
                }
                decision => return Ok(decision),
            }
        }
    }

    /// Appends what was decided; folds it into the caches if it landed, or
    /// marks every stream stale if not (refused, or an error whose outcome
    /// is unknown: the commit may have landed).
    async fn append<U: Stream>(
        &self,
        round: &mut Round<'_>,
        locked: &mut Locked<'_, U>,
        now: DateTime<Utc>,
        decided: Decided<U>,
    ) -> Result<AppendOutcome, StoreError> {
        let batch = batch(round, now, &decided, locked)?;
        let mut streams = Tracked {
            units: &mut locked.streams,
            allowance: locked.allowance.as_mut(),
            checkout: round.checkout.as_deref_mut(),
        };
        streams.before_append();
        // From here the write may land whatever happens to this future:
        // a command's outcome is then awaited by the request timer, not cut
        // (a checkout's step is finished by recovery instead).
        if streams.checkout.is_none() {
            round.outcome.begin();
        }
        let outcome = self.log.append(&batch).await;
        match outcome {
            Ok(AppendOutcome::Appended) => streams.appended(decided),
            _ => streams.invalidate(),
        }
        outcome
    }
}

/// The streams of one round, locked and up to date.
struct Locked<'k, U: Stream> {
    streams: Vec<LockedStream<U>>,
    /// Each stream's id and key, in the same order.
    keys: &'k [(String, U::Key)],
    allowance: Option<LockedStream<Allowance>>,
}

/// The batch of a decision: the events of every stream at the versions they
/// were decided on, in the order allowance, units, checkout, and the rows
/// they produce.
fn batch<U: Stream>(
    round: &Round<'_>,
    now: DateTime<Utc>,
    decided: &Decided<U>,
    locked: &Locked<'_, U>,
) -> Result<AppendBatch, StoreError> {
    let metadata = &round.metadata;
    let mut batch = AppendBatch::new(now);
    batch.idempotency = decided.idempotency.clone();
    if let (Some(stream), Some(limit)) = (&locked.allowance, &round.limit) {
        batch.push_events::<Allowance>(
            stream.id(),
            stream.version(),
            &decided.allowance,
            metadata,
            Some(&limit.show_id),
        )?;
    }
    let mut rows = Rows::default();
    let units = locked.streams.iter().zip(locked.keys).zip(&decided.units);
    for ((stream, (_, key)), events) in units {
        let version = stream.version();
        let show_id = Some(U::show_id(key));
        batch.push_events::<U>(stream.id(), version, events, metadata, show_id)?;
        U::rows(&mut rows, key, stream.aggregate(), version, events);
    }
    if let Some(checkout) = round.checkout.as_deref() {
        let events = &decided.checkout;
        let show_id = Rows::checkout_after(checkout.aggregate(), events).show_id;
        let version = checkout.version();
        batch.push_events::<Checkout>(
            checkout.id(),
            version,
            events,
            metadata,
            show_id.as_ref(),
        )?;
        rows.checkout(checkout.aggregate(), version, events, to_micros(now));
    }
    batch.rows = rows;
    Ok(batch)
}

/// The streams of one append, whose caches follow its outcome.
struct Tracked<'r, U: Stream> {
    units: &'r mut [LockedStream<U>],
    allowance: Option<&'r mut LockedStream<Allowance>>,
    checkout: Option<&'r mut CheckoutLock>,
}

impl<U: Stream> Tracked<'_, U> {
    fn before_append(&mut self) {
        self.units.iter_mut().for_each(LockedStream::before_append);
        self.allowance.iter_mut().for_each(|s| s.before_append());
        self.checkout.iter_mut().for_each(|s| s.before_append());
    }

    /// Refused, or the outcome unknown: reload next time.
    fn invalidate(&mut self) {
        self.units.iter_mut().for_each(LockedStream::invalidate);
        self.allowance.iter_mut().for_each(|s| s.invalidate());
        self.checkout.iter_mut().for_each(|s| s.invalidate());
    }

    /// Appended: fold the events into the caches.
    fn appended(self, decided: Decided<U>) {
        for (stream, events) in self.units.iter_mut().zip(decided.units) {
            stream.appended(events);
        }
        if let Some(stream) = self.allowance {
            stream.appended(decided.allowance);
        }
        if let Some(stream) = self.checkout {
            stream.appended(decided.checkout);
        }
    }
}
