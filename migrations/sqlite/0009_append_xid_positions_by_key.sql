-- (PostgreSQL only: booking_append's second version.)
SELECT 1;
