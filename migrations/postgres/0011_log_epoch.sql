-- Positions that survive a move to another cluster. A position is
-- (xid + xid_offset) * 65536 + n. After a dump and restore into a new cluster
-- (or the promotion of a logical replica), transaction ids start low again,
-- so without an offset every new event would sort below every old one. At
-- start the service raises xid_offset, if needed, so that the positions of
-- new transactions sort above the highest position in the log
-- (booking_raise_epoch in sql/postgres/booking_append.sql). A tailing reader
-- reads below (xmin + xid_offset) * 65536: the late-commit rule, now stated
-- on positions instead of on the events' txid column, which after a move
-- holds the old cluster's ids.
CREATE TABLE log_epoch
(
    single     boolean PRIMARY KEY DEFAULT true CHECK (single),
    xid_offset bigint  NOT NULL
);
INSERT INTO log_epoch (xid_offset) VALUES (0);
