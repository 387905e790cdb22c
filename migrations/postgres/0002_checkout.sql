-- The booking a converted hold became.
ALTER TABLE holds ADD COLUMN booking_id text;

-- Checkout read model: one row per hold's purchase, written with the
-- Checkout stream's events and guarded by last_seq. Bookings are read from
-- it; recovery finds the purchases left half way by phase.
CREATE TABLE checkouts
(
    hold_id       text   PRIMARY KEY,
    show_id       text   NOT NULL,
    buyer         text   NOT NULL,
    phase         text   NOT NULL,
    booking_id    text,
    charge_id     text,
    refund_id     text,
    refund_reason text,
    amount_cents  bigint,
    last_seq      bigint NOT NULL,
    updated_at_us bigint NOT NULL
);
CREATE UNIQUE INDEX checkouts_booking ON checkouts (booking_id) WHERE booking_id IS NOT NULL;
CREATE INDEX checkouts_pending ON checkouts (updated_at_us)
    WHERE phase IN ('requested', 'captured', 'refund_requested', 'cancel_requested');

-- The built-in payment simulator's ledger. It behaves like a provider's own
-- records: durable, one charge per idempotency key, found by key after a restart.
CREATE TABLE sim_charges
(
    charge_id       text   PRIMARY KEY,
    idempotency_key text   NOT NULL UNIQUE,
    amount_cents    bigint NOT NULL,
    payment_method  text   NOT NULL,
    outcome         text   NOT NULL, -- 'captured' or 'declined'
    created_at_us   bigint NOT NULL
);
CREATE TABLE sim_refunds
(
    refund_id       text   PRIMARY KEY,
    idempotency_key text   NOT NULL UNIQUE,
    charge_id       text   NOT NULL REFERENCES sim_charges (charge_id),
    amount_cents    bigint NOT NULL,
    created_at_us   bigint NOT NULL
);
