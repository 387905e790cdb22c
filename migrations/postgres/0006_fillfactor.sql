-- Rows that are updated in place (a seat's status, a hold's state, a
-- checkout's phase) get room on their page, so that most updates are HOT:
-- a new row version on the same page and no index entries to add.
ALTER TABLE seat_availability SET (fillfactor = 70);
ALTER TABLE pool_shards SET (fillfactor = 70);
ALTER TABLE checkouts SET (fillfactor = 80);
