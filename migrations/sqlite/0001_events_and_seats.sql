-- The event log: the table sqlite-es reads and writes (its column names and
-- primary key, unchanged: sqlite-es maps only a primary-key violation, code
-- 1555, to a conflict), plus the columns DESIGN.md §6 asks for.
CREATE TABLE events
(
    aggregate_type text                          NOT NULL,
    aggregate_id   text                          NOT NULL,
    sequence       integer CHECK (sequence >= 0) NOT NULL,
    event_type     text                          NOT NULL,
    event_version  text                          NOT NULL,
    payload        text                          NOT NULL,
    metadata       text                          NOT NULL,
    -- Global order: copied from the rowid by the trigger below. SQLite has one
    -- writer and we never delete events, so rowids increase in commit order.
    -- (The rowid itself is not stable across VACUUM; this copy is.)
    position       integer,
    recorded_at_us integer NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)),
    show_id        text,
    PRIMARY KEY (aggregate_type, aggregate_id, sequence)
) STRICT;
CREATE UNIQUE INDEX events_position ON events (position);
CREATE INDEX events_show_position ON events (show_id, position) WHERE show_id IS NOT NULL;
CREATE TRIGGER events_assign_position AFTER INSERT ON events WHEN NEW.position IS NULL
BEGIN
    UPDATE events SET position = NEW.rowid WHERE rowid = NEW.rowid;
END;

CREATE TABLE shows
(
    show_id       text    PRIMARY KEY,
    definition    text    NOT NULL,
    created_at_us integer NOT NULL
) STRICT;

CREATE TABLE seat_availability
(
    show_id       text    NOT NULL,
    seat_id       text    NOT NULL,
    ordinal       integer NOT NULL,
    section       text    NOT NULL,
    status        text    NOT NULL DEFAULT 'available',
    hold_id       text,
    buyer         text,
    expires_at_us integer,
    booking_id    text,
    last_seq      integer NOT NULL DEFAULT 0,
    PRIMARY KEY (show_id, seat_id)
) STRICT;
CREATE UNIQUE INDEX seat_availability_order ON seat_availability (show_id, ordinal);

CREATE TABLE holds
(
    hold_id       text    PRIMARY KEY,
    show_id       text    NOT NULL,
    buyer         text    NOT NULL,
    expires_at_us integer NOT NULL,
    state         text    NOT NULL
) STRICT;
CREATE TABLE hold_seats
(
    hold_id text NOT NULL,
    seat_id text NOT NULL,
    PRIMARY KEY (hold_id, seat_id)
) STRICT;

CREATE TABLE idempotency_keys
(
    buyer         text    NOT NULL,
    key           text    NOT NULL,
    request_hash  text    NOT NULL,
    hold_id       text    NOT NULL,
    created_at_us integer NOT NULL,
    PRIMARY KEY (buyer, key)
) STRICT;
