-- The sweeper prunes idempotency keys older than the retention
-- (BOOKING_IDEMPOTENCY_RETENTION_HOURS), oldest first in bounded batches:
-- without this index each batch would scan the whole table. The price is
-- one more index entry per key written, in the hold's own transaction.
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at_us);
