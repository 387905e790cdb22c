-- Positions per show (#49): an event's place in the log is its show and a
-- number that only grows within that show, in commit order. Each show's
-- head is a row of log_heads, moved by every append that writes the show's
-- events and locked until that append commits (booking_take_positions,
-- sql/postgres/booking_apply.sql): so a show's events commit in the order
-- of their positions, and a reader that follows the show never passes one
-- that commits late. Positions come no longer from transaction ids, which
-- are each server's own: on a database sharded by show (Citus) every show
-- lives on one worker, with its head beside its events.
--
-- A show's positions go on from its last one: every position a client
-- holds (a history page's `next_after`, a live stream's Last-Event-ID) is
-- still a place in that show's order. A show new from here starts at 1.
CREATE TABLE log_heads
(
    show_id  text   PRIMARY KEY,
    position bigint NOT NULL
);
INSERT INTO log_heads (show_id, position)
SELECT show_id, max(position) FROM events GROUP BY show_id;

-- Readers of every show (the projector, the webhooks dispatcher) keep a
-- position per show: `shows`, a JSON object of show to the last position
-- read. `position` stays their compare-and-set: it counts their moves.
-- Until now a checkpoint was one position of the whole log, below which
-- every event was read (the late-commit rule made it final): each show's
-- position is then its last event at or below it.
ALTER TABLE projector_checkpoints ADD COLUMN shows text NOT NULL DEFAULT '{}';
UPDATE projector_checkpoints c
SET shows = coalesce((SELECT jsonb_object_agg(show_id, last)::text
                      FROM (SELECT show_id, max(position) AS last FROM events
                            WHERE position <= c.position GROUP BY show_id) s), '{}');

-- An endpoint is owed the events after the log's head when it was made:
-- now the heads of every show then (a show it does not name is owed from
-- its start).
ALTER TABLE webhook_endpoints ADD COLUMN after_shows text NOT NULL DEFAULT '{}';
UPDATE webhook_endpoints w
SET after_shows = coalesce((SELECT jsonb_object_agg(show_id, last)::text
                            FROM (SELECT show_id, max(position) AS last FROM events
                                  WHERE position <= w.after_position GROUP BY show_id) s), '{}');

-- The epoch that kept transaction-id positions growing after a move to a
-- new cluster: heads move with the data, so positions need nothing.
DROP TABLE log_epoch;
