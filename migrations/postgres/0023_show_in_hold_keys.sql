-- Every unique key of a hold's rows names its show (#49): a database
-- sharded by show (Citus, distribution column show_id) refuses a unique key
-- without it, and a statement that names the show is sent to the one shard
-- that owns it. The show goes last, so a lookup by hold id alone (GET
-- /v1/holds/{id}, a booking's checkout) still walks the key's index.
-- Nothing that was unique stops being so: a hold id names one hold of one
-- show (a buyer's idempotency key is unique across shows, and so is the id
-- it stands for), and its checkout, its pool parts and its booking id with
-- it. The statements that write these rows name the show in their
-- conflict targets and predicates (sql/postgres/booking_apply.sql,
-- booking_append_group.sql, booking_upsert_checkouts.sql).
ALTER TABLE holds DROP CONSTRAINT holds_pkey, ADD PRIMARY KEY (hold_id, show_id);
ALTER TABLE pool_holds DROP CONSTRAINT pool_holds_pkey, ADD PRIMARY KEY (hold_id, shard, show_id);
ALTER TABLE checkouts DROP CONSTRAINT checkouts_pkey, ADD PRIMARY KEY (hold_id, show_id);
DROP INDEX checkouts_booking;
CREATE UNIQUE INDEX checkouts_booking ON checkouts (booking_id, show_id) WHERE booking_id IS NOT NULL;
