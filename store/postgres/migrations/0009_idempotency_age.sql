-- 0009: idempotency keys go after a while.
--
-- A key was kept for ever, one row per send that carried one: a tunnel
-- that keys every dispatch with its platform's update id grew the table
-- by one row per message for good. Retention now deletes keys bound
-- longer ago than the longest record period (core/retention.go), oldest
-- first along this index, which new keys extend at its end.
CREATE INDEX idempotency_age ON idempotency (created_at_ms);
