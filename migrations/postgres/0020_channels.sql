-- Sales channels and reports (issue #35). A seat row says which channel the
-- seat is allocated to (NULL: public sale) and what its current hold or
-- booking costs (the ticket type and price its HoldPlaced fixed), so a show's
-- report is one read of its rows, like its availability. A pool shard keeps
-- the places allocated to each channel and what its bookings sold (JSON
-- text, as holds.items); a pool hold's part says its channel and price.
ALTER TABLE seat_availability
    ADD COLUMN channel     text,
    ADD COLUMN ticket_type text,
    ADD COLUMN price_cents bigint;
ALTER TABLE pool_shards
    ADD COLUMN allocated text NOT NULL DEFAULT '{}',
    ADD COLUMN sales     text NOT NULL DEFAULT '[]';
ALTER TABLE pool_holds
    ADD COLUMN channel     text,
    ADD COLUMN ticket_type text,
    ADD COLUMN price_cents bigint;
