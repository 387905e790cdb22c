-- Fewer bytes per hold (issue #15). A hold's seat row update was never HOT:
-- changed_txid, stamped by a BEFORE UPDATE trigger, was indexed (0007, 0008),
-- so every update added an entry to each of the table's three indexes, and
-- the trigger made PostgreSQL lock the row first (a WAL record of its own).
-- Measured: 290 of 1,763 WAL bytes per hold. The availability cache now
-- finds changed seats in the log instead (events_show_position: the seat
-- events of the show since its watermark, a log position), so the column,
-- its trigger and its index go; with no indexed column changing, and room
-- on the page (fill factor 70, 0006), a seat's update is a HOT update.
--
-- Rows can also change without an event: the projector repairing a row a
-- crash or another writer left behind, a replay rewriting them. Such a write
-- (a document without events, in booking_apply) stamps the show with a
-- position of its transaction, and a cache whose watermark is at or below
-- it reads the show whole again.
DROP TRIGGER seat_availability_changed ON seat_availability;
DROP FUNCTION seat_availability_changed();
DROP INDEX seat_availability_changes;
ALTER TABLE seat_availability DROP COLUMN changed_txid;
ALTER TABLE shows ADD COLUMN rows_rewritten_at bigint NOT NULL DEFAULT 0;
-- A held seat's row is about twice an available one's (hold id, buyer,
-- expiry): at fill factor 70 a page has room for the new versions of only a
-- few of its rows before an update must go to another page (not HOT).
-- Measured after the change above: 44% of seat updates still were not HOT.
-- Half of each page free keeps a hold's update on its page; the price is
-- a show's seat rows on more pages (a whole-show read, rare now, scans them).
ALTER TABLE seat_availability SET (fillfactor = 50);
