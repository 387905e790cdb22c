//! What every stream of the domain has in common, written once.
//!
//! Each stream (seat, pool shard, checkout, allowance, waiting room, queue
//! entry) is a pure [`Decider`]: a fold of its events (`evolve`) and a
//! decision that turns a command into new events (`decide`). cqrs-es wants
//! the same thing as an `Aggregate` whose `handle` writes events to a sink,
//! and every event as a `DomainEvent` with a type name and a version. The
//! two macros here derive those impls from the `Decider` and from a table of
//! event names, so that no stream writes that glue by hand.
//!
//! The service appends decisions itself (it decides on a loaded stream and
//! appends at the version it read); `Aggregate::handle` exists for the
//! tests that load streams with a stock cqrs-es store.

/// A stream as a pure decision and fold.
pub trait Decider {
    /// What `decide` is given: the command with whatever it is decided
    /// with (the instant, a shard's capacity).
    type Command;
    type Event;
    type Error;

    /// The events `command` gives on the current state; none for a no-op.
    fn decide(&self, command: &Self::Command) -> Result<Vec<Self::Event>, Self::Error>;

    /// Folds one event into the state. Never fails: events are facts.
    fn evolve(&mut self, event: &Self::Event);
}

/// A command with the instant it is decided at, captured once per request so
/// that every seat of a multi-seat command sees the same `now`.
#[derive(Debug, Clone)]
pub struct Timed<C> {
    pub command: C,
    pub now: chrono::DateTime<chrono::Utc>,
}

/// Implements `cqrs_es::Aggregate` for a type that implements [`Decider`],
/// with `$type` as its `TYPE`, the aggregate type stored beside every event
/// of the stream (stored: never change it). `handle` writes the events
/// `decide` gives, in order, and `apply` is `evolve`.
///
/// `TYPE` is the macro's argument rather than a const of `Decider` so that
/// `Seat::TYPE` stays unambiguous wherever both traits are in scope. A macro
/// rather than a blanket `impl<T: Decider> Aggregate for T`: the orphan rule
/// refuses that impl outside cqrs-es, whose trait `Aggregate` is.
macro_rules! impl_aggregate {
    ($aggregate:ty, $type:literal) => {
        impl ::cqrs_es::Aggregate for $aggregate {
            const TYPE: &'static str = $type;
            type Command = <$aggregate as $crate::aggregate::Decider>::Command;
            type Event = <$aggregate as $crate::aggregate::Decider>::Event;
            type Error = <$aggregate as $crate::aggregate::Decider>::Error;
            type Services = ();

            async fn handle(
                &mut self,
                command: Self::Command,
                _services: &Self::Services,
                sink: &::cqrs_es::event_sink::EventSink<Self>,
            ) -> Result<(), Self::Error> {
                for event in $crate::aggregate::Decider::decide(self, &command)? {
                    sink.write(event, self).await;
                }
                Ok(())
            }

            fn apply(&mut self, event: Self::Event) {
                $crate::aggregate::Decider::evolve(self, &event);
            }
        }
    };
}
pub(crate) use impl_aggregate;

/// Gives an event enum its stored names: a `name()` per variant and the
/// `cqrs_es::DomainEvent` impl (`event_type` is the name, `event_version`
/// is [`crate::EVENT_VERSION`]). The names are stored with every event:
/// never change one. The table must list every variant (the `match` it
/// expands to is exhaustive).
macro_rules! event_names {
    ($event:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $event {
            /// The event's stored type name.
            pub fn name(&self) -> &'static str {
                match self {
                    $($event::$variant { .. } => $name,)+
                }
            }
        }

        impl ::cqrs_es::DomainEvent for $event {
            fn event_type(&self) -> String {
                self.name().to_owned()
            }

            fn event_version(&self) -> String {
                $crate::EVENT_VERSION.to_owned()
            }
        }
    };
}
pub(crate) use event_names;

#[cfg(test)]
mod tests {
    use cqrs_es::test::TestFramework;
    use cqrs_es::{Aggregate, DomainEvent};

    use super::Timed;
    use crate::allowance::Allowance;
    use crate::checkout::{Checkout, CheckoutEvent};
    use crate::ids::ShowId;
    use crate::pool::{PoolCommand, PoolError, PoolEvent, PoolShard};
    use crate::seat::{Seat, SeatCommand, SeatError, SeatEvent};
    use crate::waiting_room::{
        JoinQueue, QueueEntry, QueueEvent, RoomEvent, WaitingRoom, WaitingRoomSettings,
    };
    use crate::EVENT_VERSION;

    use crate::seat::tests::{buyer, hold, t};

    #[test]
    fn it_should_keep_the_stored_aggregate_types() {
        assert_eq!(<Seat as Aggregate>::TYPE, "Seat");
        assert_eq!(<PoolShard as Aggregate>::TYPE, "PoolShard");
        assert_eq!(<Checkout as Aggregate>::TYPE, "Checkout");
        assert_eq!(<Allowance as Aggregate>::TYPE, "Allowance");
        assert_eq!(<WaitingRoom as Aggregate>::TYPE, "WaitingRoom");
        assert_eq!(<QueueEntry as Aggregate>::TYPE, "QueueEntry");
    }

    #[test]
    fn it_should_keep_the_stored_event_names_and_version() {
        let paused = RoomEvent::Paused { at: t(0) };
        assert_eq!(paused.event_type(), "AdmissionsPaused");
        assert_eq!(paused.event_version(), EVENT_VERSION);
        let joined = QueueEvent::QueueJoined {
            show_id: ShowId::parse("s").unwrap(),
            buyer: buyer("alice"),
            at: t(0),
            early: false,
        };
        assert_eq!(joined.event_type(), "QueueJoined");
        let voided = CheckoutEvent::PaymentVoided {
            payment_id: "p".into(),
        };
        assert_eq!(voided.event_type(), "PaymentVoided");
    }

    #[test]
    fn it_should_handle_a_command_by_writing_what_decide_gives() {
        let placed = SeatEvent::HoldPlaced {
            hold_id: hold(1),
            buyer: buyer("alice"),
            expires_at: t(480),
            price: None,
            returns_to_waitlist: false,
            offer: false,
        };
        TestFramework::<Seat>::with(())
            .given(vec![placed.clone()])
            .when(Timed {
                command: SeatCommand::ReleaseHold { hold_id: hold(1) },
                now: t(5),
            })
            .then_expect_events(vec![SeatEvent::HoldReleased { hold_id: hold(1) }]);
        TestFramework::<Seat>::with(())
            .given(vec![placed])
            .when(Timed {
                command: SeatCommand::PlaceHold {
                    hold_id: hold(2),
                    buyer: buyer("bob"),
                    expires_at: t(960),
                    price: None,
                    channel: None,
                    role: crate::seat::WaitlistRole::None,
                },
                now: t(5),
            })
            .then_expect_error(SeatError::HeldByAnother);
    }

    #[test]
    fn it_should_hand_a_shard_its_capacity_and_instant() {
        let place = PoolCommand::PlaceHold {
            hold_id: hold(1),
            buyer: buyer("alice"),
            quantity: 3,
            expires_at: t(480),
            price: None,
            channel: None,
            role: crate::seat::WaitlistRole::None,
        };
        TestFramework::<PoolShard>::with(())
            .given_no_previous_events()
            .when((place.clone(), 2, t(0)))
            .then_expect_error(PoolError::NotEnough { available: 2 });
        TestFramework::<PoolShard>::with(())
            .given_no_previous_events()
            .when((place, 3, t(0)))
            .then_expect_events(vec![PoolEvent::PoolHoldPlaced {
                hold_id: hold(1),
                buyer: buyer("alice"),
                quantity: 3,
                expires_at: t(480),
                price: None,
                channel: None,
                returns_to_waitlist: false,
                offer: false,
            }]);
    }

    #[test]
    fn it_should_let_a_queue_entry_decide_without_its_room() {
        let show_id = ShowId::parse("s").unwrap();
        let join = JoinQueue {
            show_id: show_id.clone(),
            buyer: buyer("alice"),
            settings: WaitingRoomSettings {
                sale_starts_at: t(100),
                admit_per_minute: 60,
                admission_ttl_seconds: 600,
            },
        };
        TestFramework::<QueueEntry>::with(())
            .given_no_previous_events()
            .when(Timed {
                command: join,
                now: t(0),
            })
            .then_expect_events(vec![QueueEvent::QueueJoined {
                show_id,
                buyer: buyer("alice"),
                at: t(0),
                early: true,
            }]);
    }
}
