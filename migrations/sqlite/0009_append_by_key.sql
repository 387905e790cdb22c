-- (PostgreSQL only: booking_append updates rows by key for command-sized batches.)
SELECT 1;
