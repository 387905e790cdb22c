-- A seat hold's seats move into its own row (issue #23): a hold's seats are
-- placed together, in one append, and read together, and a row of their own
-- for each cost every hold a second insert and two more index entries.
-- `seat_ids` is a JSON array of seat ids in text (the same column on
-- PostgreSQL); a pool hold's is empty.
ALTER TABLE holds ADD COLUMN seat_ids text NOT NULL DEFAULT '[]';

UPDATE holds
SET seat_ids = (SELECT json_group_array(seat_id)
                FROM (SELECT seat_id FROM hold_seats s WHERE s.hold_id = holds.hold_id ORDER BY seat_id))
WHERE hold_id IN (SELECT hold_id FROM hold_seats);

DROP TABLE hold_seats;
