//! The decision that changes a show's room: the seed drawn, the rate
//! changed, admissions paused or resumed, the room closed.

use domain::waiting_room::{self, RoomCommand, RoomError, WaitingRoom};

use super::WaitingRoomError;
use crate::command::round::{Decided, Decides, Decision, View};

/// Changing the room: `command` on the room stream as locked. Answers the
/// room's version once the change is appended, which the queue book is
/// then waited for.
pub(super) struct WaitingRoomChange<'a> {
    pub(super) command: &'a RoomCommand,
}

impl Decides<WaitingRoom> for WaitingRoomChange<'_> {
    type Output = u64;
    type Error = WaitingRoomError;

    fn decide(
        &mut self,
        view: &View<'_, WaitingRoom>,
    ) -> Result<Decision<WaitingRoom, u64>, WaitingRoomError> {
        let Some(&(room, _)) = view.units.first() else {
            return Err(WaitingRoomError::Bug(
                "a room change without its room".into(),
            ));
        };
        match waiting_room::decide(room, self.command) {
            Ok(events) => {
                let version = room.version + events.len() as u64;
                Ok(Decision::Append(Decided::units(vec![events]), version))
            }
            Err(RoomError::Settings(e)) => Err(WaitingRoomError::Invalid(e.to_string())),
            Err(RoomError::Closed) => Err(WaitingRoomError::SoldOut),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use domain::ids::ShowId;
    use domain::waiting_room::CloseReason;

    use super::*;
    use crate::command::waiting_room::WaitingRoomKey;

    fn now() -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_900_000_000, 0).expect("a valid instant")
    }

    fn apply(room: &mut WaitingRoom, decision: Decision<WaitingRoom, u64>) -> u64 {
        let Decision::Append(decided, version) = decision else {
            panic!("the change is appended");
        };
        for event in decided.units.into_iter().flatten() {
            cqrs_es::Aggregate::apply(room, event);
        }
        version
    }

    #[test]
    fn it_should_pause_a_room_and_answer_its_new_version() {
        let key = WaitingRoomKey {
            show_id: ShowId::parse("show").expect("a show id"),
        };
        let mut room = WaitingRoom::default();
        let pause = RoomCommand::Pause { at: now() };
        let decided = WaitingRoomChange { command: &pause }
            .decide(&View::given(now(), vec![(&room, &key)]))
            .expect("an open room pauses");
        let version = apply(&mut room, decided);
        assert!(room.is_paused());
        assert_eq!(version, room.version);
    }

    #[test]
    fn it_should_refuse_to_change_a_closed_room() {
        let key = WaitingRoomKey {
            show_id: ShowId::parse("show").expect("a show id"),
        };
        let mut room = WaitingRoom::default();
        let close = RoomCommand::Close {
            at: now(),
            reason: CloseReason::SoldOut,
        };
        let decided = WaitingRoomChange { command: &close }
            .decide(&View::given(now(), vec![(&room, &key)]))
            .expect("an open room closes");
        apply(&mut room, decided);
        let resume = RoomCommand::Resume { at: now() };
        let refused =
            WaitingRoomChange { command: &resume }.decide(&View::given(now(), vec![(&room, &key)]));
        assert!(matches!(refused, Err(WaitingRoomError::SoldOut)));
    }
}
