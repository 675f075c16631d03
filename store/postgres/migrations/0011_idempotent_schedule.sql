-- 0011: a delayed send's idempotency key remembers the entry it made.
--
-- A repeat of a keyed delayed send found its entry by (op, msg_id) while it
-- was pending. Once it had come due (or was cancelled) there was none, and
-- the repeat scheduled the message again: a second message.scheduled, a
-- second delivery if retention had taken the first one's records, and an
-- answer naming a time still to come for what was delivered already. The
-- key now keeps the entry's id and due time, and a repeat answers those.
-- Keys bound by an immediate send, or before this migration, keep zeros.
ALTER TABLE idempotency
    ADD COLUMN sched_id  BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN due_at_ms BIGINT NOT NULL DEFAULT 0;
