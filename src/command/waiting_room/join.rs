//! The decision that joins a buyer to a show's queue: once (a second join
//! writes nothing), refused by a closed room.

use domain::waiting_room::{self, JoinQueue, QueueEntry, QueueError, WaitingRoom};

use super::WaitingRoomError;
use crate::command::round::{Decided, Decides, Decision, View};

/// Joining: `command` on the buyer's entry as locked, with the room as the
/// queue book last read it. Answers whether this decision joined.
pub(super) struct Joining<'a> {
    pub(super) room: &'a WaitingRoom,
    pub(super) command: &'a JoinQueue,
}

impl Decides<QueueEntry> for Joining<'_> {
    type Output = bool;
    type Error = WaitingRoomError;

    fn decide(
        &mut self,
        view: &View<'_, QueueEntry>,
    ) -> Result<Decision<QueueEntry, bool>, WaitingRoomError> {
        let Some(&(entry, _)) = view.units.first() else {
            return Err(WaitingRoomError::Bug("a join without its entry".into()));
        };
        match waiting_room::join(entry, self.room, self.command, view.now) {
            Ok(events) => {
                let joined = !events.is_empty();
                Ok(Decision::Append(Decided::units(vec![events]), joined))
            }
            Err(QueueError::SoldOut) => Err(WaitingRoomError::SoldOut),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Duration, Utc};
    use domain::ids::{BuyerId, ShowId};
    use domain::waiting_room::{QueueEntry, WaitingRoomSettings};

    use super::*;
    use crate::command::waiting_room::EntryKey;

    fn now() -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_900_000_000, 0).expect("a valid instant")
    }

    pub(crate) fn settings() -> WaitingRoomSettings {
        WaitingRoomSettings {
            sale_starts_at: now() - Duration::minutes(1),
            admit_per_minute: 60,
            admission_ttl_seconds: 300,
        }
    }

    #[test]
    fn it_should_join_once() {
        let show_id = ShowId::parse("show").expect("a show id");
        let buyer = BuyerId::parse("buyer-1").expect("a buyer");
        let command = JoinQueue {
            show_id: show_id.clone(),
            buyer: buyer.clone(),
            settings: settings(),
        };
        let (room, entry) = (WaitingRoom::default(), QueueEntry::default());
        let key = EntryKey { show_id, buyer };
        let mut joining = Joining {
            room: &room,
            command: &command,
        };
        let Ok(Decision::Append(decided, true)) =
            joining.decide(&View::given(now(), vec![(&entry, &key)]))
        else {
            panic!("a buyer not in the queue joins");
        };
        let mut joined = QueueEntry::default();
        for events in decided.units {
            for event in events {
                cqrs_es::Aggregate::apply(&mut joined, event);
            }
        }
        let again = joining.decide(&View::given(now(), vec![(&joined, &key)]));
        assert!(matches!(again, Ok(Decision::Append(_, false))));
    }
}
