//! One round of a command, written once.
//!
//! Every command that changes inventory does the same thing: lock the
//! streams it needs, bring them up to date, capture `now` once, decide every
//! stream at that instant, append what it decided in one transaction at the
//! versions it decided on, and fold the events into the caches; or, refused
//! because another instance got there first, forget what it knew and do it
//! all again, at most [`MAX_DECIDE_ROUNDS`] times. [`Rounds::run`] is that
//! loop. A command brings its decision, a named type ([`Decides`]): a pure
//! function of the streams as locked (a [`View`]) to the events of each
//! ([`Decided`]).
//!
//! A decision may also find, from the streams as locked, that it needs
//! other streams (best available: a chosen seat was taken, so it chooses
//! again from what the round showed it). It answers [`Decision::Replan`]
//! with the streams it needs now, and the round locks those instead, as
//! one of its bounded rounds ([`Decides::MAX_PLANS`]). The streams of one
//! plan are let go before the next plan's are locked, so a plan never
//! holds streams while waiting for others out of order. So the only loops
//! that decide again live here; the handlers run a round once.
//!
//! Lock order, one for the whole process, kept here and nowhere else: the
//! checkout, then the buyer's allowance, then the units (seats in stream-id
//! order, then shards in index order, see [`Stream::sort`]; a hold never has
//! both, an order's conversion may: [`Round::with_shards`]). Each type has its own cache, so the order between types
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
use domain::pool::{PoolEvent, PoolShard};
use domain::seat::Seat;
use domain::show::Show;
use domain::waitlist::{Waitlist, WaitlistEvent};
use projections::rows::Rows;
use projections::time::to_micros;

use crate::clock::Clock;
use crate::command::context::{OutcomeMark, RequestContext};
use crate::command::streams::{
    refresh_all, refresh_or_assume_new, Inventory, LockedStream, Stream,
};
use crate::command::units::{HoldUnits, ShardKey, Unit};
use crate::store::batch::AppendBatch;
use crate::store::log::EventLog;
use crate::store::{AppendOutcome, IdempotencyKeyRow, StoreError};

/// Rounds of deciding and appending per command before giving up with 503
/// `busy`. Each new round follows a conflict with another instance that did
/// commit, so five in a row means extreme contention across instances; the
/// client may retry.
pub const MAX_DECIDE_ROUNDS: usize = 5;

/// A checkout locked by the request (or recovery) driving it.
pub type CheckoutLock = LockedStream<Checkout>;

/// A show's waiting list, locked by the judge offering its freed
/// inventory across several rounds (first in the lock order).
pub type WaitlistLock = LockedStream<Waitlist>;

/// What a command's error must be able to say about a round.
pub trait RoundError: From<StoreError> + Send {
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
    waitlist: Option<&'a mut WaitlistLock>,
    limit: Option<BuyerLimit>,
    read: Read,
    /// Pool shards locked after the round's seats and decided with them
    /// (see [`Round::with_shards`]).
    shards: Vec<(String, ShardKey)>,
}

impl<'a> Round<'a> {
    pub fn new(command: &'static str, ctx: &RequestContext) -> Self {
        Self {
            command,
            metadata: ctx.metadata(),
            outcome: ctx.outcome.clone(),
            checkout: None,
            waitlist: None,
            limit: None,
            read: Read::All,
            shards: Vec::new(),
        }
    }

    /// Decides these pool shards with the round's seats, in one append: an
    /// order of seat and pool holds converts them all or none. Shards come
    /// after seats in the lock order; a round whose units are shards
    /// takes none here.
    pub fn with_shards(mut self, mut shards: Vec<(String, ShardKey)>) -> Self {
        PoolShard::sort(&mut shards);
        self.shards = shards;
        self
    }

    /// Decides and appends the show's waiting list (held by the caller)
    /// with the units: an offer, or what the waiting list passes on.
    pub fn with_waitlist(mut self, list: &'a mut WaitlistLock) -> Self {
        self.waitlist = Some(list);
        self
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
    /// The show's waiting list, if the round has it.
    pub waitlist: Option<&'v Waitlist>,
    allowance: Option<(&'v Allowance, u32)>,
    /// Each unit with its key, in lock order.
    pub units: Vec<(&'v U, &'v U::Key)>,
    /// The round's shards beside its seats ([`Round::with_shards`]).
    pub shards: Vec<(&'v PoolShard, &'v ShardKey)>,
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

    /// Decides `commands` on the buyer's allowance at `now`, each on the
    /// state the ones before it leave; nothing on a show without a limit.
    pub fn allowance_each(
        &self,
        commands: &[AllowanceCommand],
    ) -> Result<Vec<AllowanceEvent>, AllowanceError> {
        let Some((allowance, _)) = self.allowance else {
            return Ok(Vec::new());
        };
        let mut state = allowance.clone();
        let mut events = Vec::new();
        for command in commands {
            for event in allowance::decide(&state, command, self.now)? {
                cqrs_es::Aggregate::apply(&mut state, event.clone());
                events.push(event);
            }
        }
        Ok(events)
    }
}

/// The events a decision appends, stream by stream.
pub struct Decided<U: Stream> {
    /// One list per unit, in the view's order.
    pub units: Vec<Vec<U::Event>>,
    /// One list per shard of the view's `shards`, in its order.
    pub shards: Vec<Vec<PoolEvent>>,
    pub allowance: Vec<AllowanceEvent>,
    pub checkout: Vec<CheckoutEvent>,
    pub waitlist: Vec<WaitlistEvent>,
    /// The buyer's idempotency key, written with the events.
    pub idempotency: Option<IdempotencyKeyRow>,
    /// The latest instant the append may commit at (`AppendBatch::commit_by`):
    /// late, it is refused and decided again.
    pub commit_by: Option<DateTime<Utc>>,
}

impl<U: Stream> Decided<U> {
    pub fn units(units: Vec<Vec<U::Event>>) -> Self {
        Self {
            units,
            commit_by: None,
            shards: Vec::new(),
            allowance: Vec::new(),
            checkout: Vec::new(),
            waitlist: Vec::new(),
            idempotency: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.units.iter().all(Vec::is_empty)
            && self.shards.iter().all(Vec::is_empty)
            && self.allowance.is_empty()
            && self.checkout.is_empty()
            && self.waitlist.is_empty()
    }
}

/// What a decision comes to.
// One per round, moved once to the round's append: boxing the large
// variant would cost an allocation on every hold's path for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Decision<U: Stream, T> {
    /// Append these events; once they are, the round answers `T`.
    Append(Decided<U>, T),
    /// Nothing to write: answer `T` now.
    Answer(T),
    /// The streams as this process holds them are past what the command
    /// applies to (another process moved them on): answer `T`, and forget
    /// them, so that whoever looks next reads them from the store.
    Moved(T),
    /// The decision would refuse, but some unit was only assumed empty:
    /// read every unit and decide again (at the same `now`).
    ReadAll,
    /// These streams, not the ones locked, are what the command needs (the
    /// decision learned it from the streams as locked): lock them instead
    /// and decide again, at most [`Decides::MAX_PLANS`] plans in all.
    Replan(Vec<(String, U::Key)>),
}

impl<U: Stream, T> Decision<U, T> {
    pub fn map<R>(self, f: impl FnOnce(T) -> R) -> Decision<U, R> {
        match self {
            Decision::Append(decided, answer) => Decision::Append(decided, f(answer)),
            Decision::Answer(answer) => Decision::Answer(f(answer)),
            Decision::Moved(answer) => Decision::Moved(f(answer)),
            Decision::ReadAll => Decision::ReadAll,
            Decision::Replan(units) => Decision::Replan(units),
        }
    }
}

/// A command's decision on streams of one unit type: a pure function of
/// the streams as locked, at the round's one `now`, to what follows.
/// Stateful (`&mut self`) only to remember what earlier rounds of the same
/// command showed it (best available: the seats it found taken).
pub trait Decides<U: Stream> {
    type Output;
    type Error: RoundError;
    /// Plans (sets of streams locked) the decision may go through, the
    /// first included: one, unless it answers [`Decision::Replan`]. Each
    /// plan has its own [`MAX_DECIDE_ROUNDS`] against conflicts, as a new
    /// command would.
    const MAX_PLANS: usize = 1;
    fn decide(&mut self, view: &View<'_, U>) -> Result<Decision<U, Self::Output>, Self::Error>;

    /// Between two plans, with every lock let go: what the decision reads
    /// again before its next plan is locked (advice, never a decision: best
    /// available's statuses, which other instances move meanwhile), and the
    /// plan to lock. By default the plan it asked for, read nothing.
    fn replan(
        &mut self,
        next: Vec<(String, U::Key)>,
    ) -> impl std::future::Future<Output = Result<Vec<(String, U::Key)>, Self::Error>> + Send {
        async move { Ok(next) }
    }

    /// With the plan's streams locked, before the decision's `now` is
    /// taken: what the decision must know as of that instant and reads
    /// outside its streams (a hold's prices, read again when older than
    /// their freshness). By default nothing.
    fn prepare(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        async { Ok(()) }
    }
}

/// A decision on the checkout alone: a step of the drive recorded before
/// or after a provider call ([`Rounds::run_checkout`]).
pub trait DecidesCheckout {
    type Output;
    type Error: RoundError;
    fn decide(
        &mut self,
        checkout: &Checkout,
        now: DateTime<Utc>,
    ) -> Result<CheckoutDecision<Self::Output>, Self::Error>;
}

/// What a decision on the checkout alone comes to.
pub enum CheckoutDecision<T> {
    /// Append these checkout events, then answer `T`.
    Append(Vec<CheckoutEvent>, T),
    /// Nothing to write: answer `T`.
    Answer(T),
    /// The checkout as cached is past this step: answer `T` and read it
    /// from the store next time ([`Decision::Moved`]).
    Moved(T),
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

/// A [`Decide`] on the unit type a hold turned out to have.
struct OnUnits<'d, D>(&'d mut D);

impl<U: Unit, D: Decide> Decides<U> for OnUnits<'_, D> {
    type Output = D::Output;
    type Error = D::Error;
    fn decide(&mut self, view: &View<'_, U>) -> Result<Decision<U, D::Output>, D::Error> {
        self.0.decide(view)
    }
}

/// A [`DecidesCheckout`] as a round without units. The round is generic
/// over its unit type; with no units, which one is a formality, kept here.
struct CheckoutAlone<'d, D>(&'d mut D);

impl<D: DecidesCheckout> Decides<Seat> for CheckoutAlone<'_, D> {
    type Output = D::Output;
    type Error = D::Error;
    fn decide(&mut self, view: &View<'_, Seat>) -> Result<Decision<Seat, D::Output>, D::Error> {
        let checkout = view
            .checkout
            .ok_or_else(|| D::Error::bug("a checkout round without its checkout".into()))?;
        Ok(match self.0.decide(checkout, view.now)? {
            CheckoutDecision::Append(events, answer) => Decision::Append(
                Decided {
                    checkout: events,
                    ..Decided::units(Vec::new())
                },
                answer,
            ),
            CheckoutDecision::Answer(answer) => Decision::Answer(answer),
            CheckoutDecision::Moved(answer) => Decision::Moved(answer),
        })
    }
}

/// How one round of a command ended.
enum Ended<T, K> {
    Settled(Settled<T>),
    /// Refused at the append: another process got there first.
    Conflict,
    /// The decision asked for these streams instead.
    Replan(Vec<(String, K)>),
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

    /// Locks a show's waiting list (first in the order) and brings it up
    /// to date: the judge holds it across the rounds of one judgement.
    pub async fn lock_waitlist(&self, show_id: &ShowId) -> Result<WaitlistLock, StoreError> {
        let id = domain::waitlist::waitlist_stream_id(show_id);
        let mut locked = self
            .inventory
            .waitlists
            .lock(std::slice::from_ref(&id))
            .await;
        refresh_all(&self.log, &mut locked).await?;
        locked
            .pop()
            .ok_or_else(|| StoreError::Corrupt(format!("waiting list {id} was not locked")))
    }

    /// A checkout as the log has it now, without locking it (what a read
    /// answers: an order, while a request may be driving it).
    pub async fn read_checkout(&self, id: HoldId) -> Result<(Checkout, usize), StoreError> {
        self.read_checkout_through(id, usize::MAX).await
    }

    /// [`Self::read_checkout`] as of its `through`-th event (a webhook's
    /// order as of the event it tells of).
    pub async fn read_checkout_through(
        &self,
        id: HoldId,
        through: usize,
    ) -> Result<(Checkout, usize), StoreError> {
        let mut checkout = Checkout::default();
        let mut version = 0;
        let events = self
            .log
            .stream_events::<Checkout>(&id.to_string(), 0)
            .await?;
        for event in events.into_iter().take_while(|e| e.sequence <= through) {
            let payload: CheckoutEvent = serde_json::from_value(event.payload)
                .map_err(|e| StoreError::Corrupt(format!("event {id}#{}: {e}", event.sequence)))?;
            checkout.apply_event(&payload);
            version = event.sequence;
        }
        Ok((checkout, version))
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
        decision: &mut D,
    ) -> Result<Settled<D::Output>, D::Error> {
        match units {
            HoldUnits::Seats(units) => {
                self.run::<Seat, _>(round, units, &mut OnUnits(decision))
                    .await
            }
            HoldUnits::Pool(units) => {
                self.run::<PoolShard, _>(round, units, &mut OnUnits(decision))
                    .await
            }
        }
    }

    /// Runs `decision` on the round's checkout alone (see
    /// [`Round::with_checkout`]).
    pub async fn run_checkout<D: DecidesCheckout>(
        &self,
        round: Round<'_>,
        decision: &mut D,
    ) -> Result<Settled<D::Output>, D::Error> {
        self.run::<Seat, _>(round, Vec::new(), &mut CheckoutAlone(decision))
            .await
    }

    /// One command: locks the round's streams and `units` in the one order,
    /// brings them up to date, decides at one `now`, appends, and folds the
    /// events in; refused, it decides again, up to [`MAX_DECIDE_ROUNDS`]
    /// times; asked for other streams ([`Decision::Replan`]), it locks those
    /// and starts again, up to [`Decides::MAX_PLANS`] plans.
    pub async fn run<U: Stream, D: Decides<U>>(
        &self,
        mut round: Round<'_>,
        mut units: Vec<(String, U::Key)>,
        decision: &mut D,
    ) -> Result<Settled<D::Output>, D::Error> {
        U::sort(&mut units);
        let mut plans = 1;
        let mut conflicts = 0;
        while conflicts < MAX_DECIDE_ROUNDS {
            match self.once(&mut round, &units, decision).await? {
                Ended::Settled(settled) => return Ok(settled),
                Ended::Conflict => {
                    metrics::counter!("append_conflicts_total", "command" => round.command)
                        .increment(1);
                    conflicts += 1;
                }
                Ended::Replan(_) if plans >= D::MAX_PLANS => break,
                Ended::Replan(next) => {
                    // A new plan is a new command on other streams: its
                    // own conflicts are counted afresh.
                    plans += 1;
                    conflicts = 0;
                    units = decision.replan(next).await?;
                    U::sort(&mut units);
                }
            }
        }
        Err(D::Error::contended())
    }

    /// One round: lock, decide at one `now`, append. The locks are let go
    /// when it returns, whatever it came to.
    async fn once<U: Stream, D: Decides<U>>(
        &self,
        round: &mut Round<'_>,
        units: &[(String, U::Key)],
        decision: &mut D,
    ) -> Result<Ended<D::Output, U::Key>, D::Error> {
        let mut locked = self.lock(round, units).await?;
        decision.prepare().await?;
        let now = self.clock.now();
        let (decided, answer) = match self
            .decide(round, units, &mut locked, now, decision)
            .await?
        {
            Decision::Append(decided, answer) if !decided.is_empty() => (decided, answer),
            Decision::Append(_, answer) | Decision::Answer(answer) => {
                return Ok(Ended::Settled(Settled::Answered(answer)))
            }
            Decision::Moved(answer) => {
                Tracked::of(round, &mut locked).invalidate();
                return Ok(Ended::Settled(Settled::Answered(answer)));
            }
            Decision::Replan(next) => return Ok(Ended::Replan(next)),
            Decision::ReadAll => {
                return Err(D::Error::bug(format!(
                    "{}: asked to read streams it had read",
                    round.command
                )))
            }
        };
        Ok(
            match self.append(round, units, &mut locked, now, decided).await? {
                AppendOutcome::Appended => Ended::Settled(Settled::Appended(answer)),
                AppendOutcome::IdempotencyKeyTaken => Ended::Settled(Settled::KeyTaken),
                // Late: decided again at a later `now` (a price change's
                // instant moves with it).
                AppendOutcome::Conflict | AppendOutcome::CheckpointMoved | AppendOutcome::Late => {
                    Ended::Conflict
                }
            },
        )
    }

    /// Locks the buyer's allowance, then the units (in the order they are
    /// in), and brings them and the round's checkout up to date.
    async fn lock<U: Stream>(
        &self,
        round: &mut Round<'_>,
        units: &[(String, U::Key)],
    ) -> Result<Locked<U>, StoreError> {
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
        if !round.shards.is_empty()
            && std::any::type_name::<U>() == std::any::type_name::<PoolShard>()
        {
            return Err(StoreError::Corrupt(format!(
                "{}: shards beside shards would lock one twice",
                round.command
            )));
        }
        let shard_ids: Vec<String> = round.shards.iter().map(|(id, _)| id.clone()).collect();
        let mut shards = self.inventory.shards.lock(&shard_ids).await;
        refresh_all(&self.log, &mut shards).await?;
        if let Some(checkout) = round.checkout.as_deref_mut() {
            self.refresh_checkout(checkout).await?;
        }
        if let Some(list) = round.waitlist.as_deref_mut() {
            refresh_all(&self.log, std::slice::from_mut(list)).await?;
        }
        Ok(Locked {
            streams,
            shards,
            allowance,
        })
    }

    /// Runs the decision on the locked streams at `now`; when it asks, reads
    /// the streams only assumed new and runs it again.
    async fn decide<U: Stream, D: Decides<U>>(
        &self,
        round: &Round<'_>,
        units: &[(String, U::Key)],
        locked: &mut Locked<U>,
        now: DateTime<Utc>,
        decision: &mut D,
    ) -> Result<Decision<U, D::Output>, D::Error> {
        let limit = round.limit.as_ref().map(|l| l.limit);
        let mut assumed_new = locked.streams.iter().any(|s| !s.is_loaded());
        loop {
            let view = View {
                now,
                checkout: round.checkout.as_deref().map(LockedStream::aggregate),
                waitlist: round.waitlist.as_deref().map(LockedStream::aggregate),
                allowance: locked.allowance.as_ref().map(|a| a.aggregate()).zip(limit),
                units: locked
                    .streams
                    .iter()
                    .zip(units)
                    .map(|(stream, (_, key))| (stream.aggregate(), key))
                    .collect(),
                shards: locked
                    .shards
                    .iter()
                    .zip(&round.shards)
                    .map(|(stream, (_, key))| (stream.aggregate(), key))
                    .collect(),
                assumed_new,
            };
            match decision.decide(&view)? {
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
        units: &[(String, U::Key)],
        locked: &mut Locked<U>,
        now: DateTime<Utc>,
        decided: Decided<U>,
    ) -> Result<AppendOutcome, StoreError> {
        let batch = batch(round, units, now, &decided, locked)?;
        let outcome_mark = round.outcome.clone();
        let mut streams = Tracked::of(round, locked);
        streams.before_append();
        // From here the write may land whatever happens to this future:
        // a command's outcome is then awaited by the request timer, not cut
        // (a checkout's step is finished by recovery instead).
        if streams.checkout.is_none() && streams.waitlist.is_none() {
            outcome_mark.begin();
        }
        let log: &EventLog = &self.log;
        let outcome = log.append(&batch).await;
        match outcome {
            Ok(AppendOutcome::Appended) => streams.appended(decided),
            _ => streams.invalidate(),
        }
        outcome
    }
}

/// The streams of one round, locked and up to date: one for each of the
/// round's units, in the same order.
struct Locked<U: Stream> {
    streams: Vec<LockedStream<U>>,
    /// One for each of the round's shards beside its seats.
    shards: Vec<LockedStream<PoolShard>>,
    allowance: Option<LockedStream<Allowance>>,
}

/// The batch of a decision: the events of every stream at the versions they
/// were decided on, in the order waiting list, allowance, units, checkout, and the
/// rows they produce.
fn batch<U: Stream>(
    round: &Round<'_>,
    units: &[(String, U::Key)],
    now: DateTime<Utc>,
    decided: &Decided<U>,
    locked: &Locked<U>,
) -> Result<AppendBatch, StoreError> {
    let metadata = &round.metadata;
    let mut batch = AppendBatch::new(now);
    batch.idempotency = decided.idempotency.clone();
    batch.commit_by = decided.commit_by;
    push_line_and_allowance(&mut batch, round, decided, locked)?;
    let mut rows = Rows::default();
    let written = locked.streams.iter().zip(units).zip(&decided.units);
    for ((stream, (_, key)), events) in written {
        let version = stream.version();
        let show_id = U::show_id(key);
        batch.push_events::<U>(stream.id(), version, events, metadata, show_id)?;
        U::rows(&mut rows, key, stream.aggregate(), version, events);
    }
    let shards = locked.shards.iter().zip(&round.shards).zip(&decided.shards);
    for ((stream, (_, key)), events) in shards {
        let version = stream.version();
        let show_id = PoolShard::show_id(key);
        batch.push_events::<PoolShard>(stream.id(), version, events, metadata, show_id)?;
        PoolShard::rows(&mut rows, key, stream.aggregate(), version, events);
    }
    if let Some(checkout) = round.checkout.as_deref() {
        let events = &decided.checkout;
        let show_id = Rows::checkout_after(checkout.aggregate(), events)
            .show_id
            .ok_or_else(|| StoreError::Corrupt(format!("checkout {} of no show", checkout.id())))?;
        let version = checkout.version();
        batch.push_events::<Checkout>(checkout.id(), version, events, metadata, &show_id)?;
        rows.checkout(checkout.aggregate(), version, events, to_micros(now));
    }
    batch.rows = rows;
    Ok(batch)
}

/// The waiting list's and the allowance's events of a decision, first in its batch.
fn push_line_and_allowance<U: Stream>(
    batch: &mut AppendBatch,
    round: &Round<'_>,
    decided: &Decided<U>,
    locked: &Locked<U>,
) -> Result<(), StoreError> {
    let metadata = &round.metadata;
    if let Some(list) = round.waitlist.as_deref() {
        // The waiting list is one per show: its stream id is the show's.
        let show_id = ShowId::parse(list.id())
            .map_err(|e| StoreError::Corrupt(format!("waiting list {}: {e}", list.id())))?;
        batch.push_events::<Waitlist>(
            list.id(),
            list.version(),
            &decided.waitlist,
            metadata,
            &show_id,
        )?;
    }
    if let (Some(stream), Some(limit)) = (&locked.allowance, &round.limit) {
        batch.push_events::<Allowance>(
            stream.id(),
            stream.version(),
            &decided.allowance,
            metadata,
            &limit.show_id,
        )?;
    }
    Ok(())
}

/// The streams of one append, whose caches follow its outcome.
struct Tracked<'r, U: Stream> {
    units: &'r mut [LockedStream<U>],
    shards: &'r mut [LockedStream<PoolShard>],
    allowance: Option<&'r mut LockedStream<Allowance>>,
    checkout: Option<&'r mut CheckoutLock>,
    waitlist: Option<&'r mut WaitlistLock>,
}

impl<'r, U: Stream> Tracked<'r, U> {
    fn of(round: &'r mut Round<'_>, locked: &'r mut Locked<U>) -> Self {
        Self {
            units: &mut locked.streams,
            shards: &mut locked.shards,
            allowance: locked.allowance.as_mut(),
            checkout: round.checkout.as_deref_mut(),
            waitlist: round.waitlist.as_deref_mut(),
        }
    }

    fn before_append(&mut self) {
        self.units.iter_mut().for_each(LockedStream::before_append);
        self.shards.iter_mut().for_each(LockedStream::before_append);
        self.allowance.iter_mut().for_each(|s| s.before_append());
        self.checkout.iter_mut().for_each(|s| s.before_append());
        self.waitlist.iter_mut().for_each(|s| s.before_append());
    }

    /// Refused, or the outcome unknown: reload next time.
    fn invalidate(&mut self) {
        self.units.iter_mut().for_each(LockedStream::invalidate);
        self.shards.iter_mut().for_each(LockedStream::invalidate);
        self.allowance.iter_mut().for_each(|s| s.invalidate());
        self.checkout.iter_mut().for_each(|s| s.invalidate());
        self.waitlist.iter_mut().for_each(|s| s.invalidate());
    }

    /// Appended: fold the events into the caches.
    fn appended(self, decided: Decided<U>) {
        for (stream, events) in self.units.iter_mut().zip(decided.units) {
            stream.appended(events);
        }
        for (stream, events) in self.shards.iter_mut().zip(decided.shards) {
            stream.appended(events);
        }
        if let Some(stream) = self.allowance {
            stream.appended(decided.allowance);
        }
        if let Some(stream) = self.checkout {
            stream.appended(decided.checkout);
        }
        if let Some(stream) = self.waitlist {
            stream.appended(decided.waitlist);
        }
    }
}

/// The streams a decision is given in a unit test, without a store: read
/// (none assumed new), no allowance, no checkout unless added.
#[cfg(test)]
impl<'v, U: Stream> View<'v, U> {
    pub(crate) fn given(now: DateTime<Utc>, units: Vec<(&'v U, &'v U::Key)>) -> Self {
        Self {
            now,
            checkout: None,
            waitlist: None,
            allowance: None,
            units,
            shards: Vec::new(),
            assumed_new: false,
        }
    }

    pub(crate) fn with_waitlist(mut self, list: &'v Waitlist) -> Self {
        self.waitlist = Some(list);
        self
    }

    pub(crate) fn with_shards(mut self, shards: Vec<(&'v PoolShard, &'v ShardKey)>) -> Self {
        self.shards = shards;
        self
    }

    pub(crate) fn with_checkout(mut self, checkout: &'v Checkout) -> Self {
        self.checkout = Some(checkout);
        self
    }

    pub(crate) fn with_allowance(mut self, allowance: &'v Allowance, limit: u32) -> Self {
        self.allowance = Some((allowance, limit));
        self
    }

    pub(crate) fn assuming_new(mut self) -> Self {
        self.assumed_new = true;
        self
    }
}
