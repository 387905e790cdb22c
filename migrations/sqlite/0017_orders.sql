-- Orders (issue #34): an order's cancellation of lines is a phase recovery
-- finishes too (domain::checkout::Phase::PENDING), so the partial index
-- recovery's query uses names it. An order's checkout row is keyed by the
-- order's id (the column keeps its name: it holds the checkout's stream id).
DROP INDEX checkouts_pending;
CREATE INDEX checkouts_pending ON checkouts (updated_at_us)
    WHERE phase IN ('requested', 'authorized', 'converted', 'void_requested',
                    'reversal_requested', 'captured', 'refund_requested', 'cancel_requested',
                    'lines_cancel_requested');
