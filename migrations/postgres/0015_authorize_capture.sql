-- Authorize, convert, then capture (issue #21). The phases recovery
-- finishes are now these (domain::checkout::Phase::PENDING); a checkout
-- waiting on the buyer (3-D Secure) is looked at apart, in pages.
DROP INDEX checkouts_pending;
CREATE INDEX checkouts_pending ON checkouts (updated_at_us)
    WHERE phase IN ('requested', 'authorized', 'converted', 'void_requested',
                    'reversal_requested', 'captured', 'refund_requested', 'cancel_requested');
CREATE INDEX checkouts_waiting ON checkouts (updated_at_us, hold_id)
    WHERE phase = 'action_required';

-- The built-in simulator's payments, as a provider keeps them: created
-- under an idempotency key (one payment per key, found again after a
-- restart), then authorized, captured, cancelled or refunded.
CREATE TABLE sim_payments
(
    payment_id      text    PRIMARY KEY,
    idempotency_key text    NOT NULL UNIQUE,
    hold_id         text    NOT NULL,
    amount_minor    bigint NOT NULL,
    currency        text    NOT NULL,
    payment_method  text    NOT NULL,
    -- unconfirmed, requires_action, authorized, declined, captured, canceled
    status          text    NOT NULL,
    decline_code    text,
    -- pm_sim_3ds_<ms>: the buyer's authentication completes at this instant.
    action_until_us bigint,
    created_at_us   bigint NOT NULL,
    updated_at_us   bigint NOT NULL
);
CREATE TABLE sim_payment_refunds
(
    refund_id       text    PRIMARY KEY,
    idempotency_key text    NOT NULL UNIQUE,
    payment_id      text    NOT NULL REFERENCES sim_payments (payment_id),
    amount_minor    bigint NOT NULL,
    created_at_us   bigint NOT NULL
);
