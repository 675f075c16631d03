-- 0002: durable consumers and retention.

-- A durable consumer: a named subscription of owner to one source box. Its
-- own box is 'CONSUMER:' || name in the owner's records. filter is the
-- model.ConsumerFilter as JSON text, decoded by the driver (text, like the
-- other JSON columns: it keeps the bytes the core wrote).
CREATE TABLE consumers (
    owner         TEXT COLLATE "C" NOT NULL,
    name          TEXT COLLATE "C" NOT NULL,
    source_owner  TEXT COLLATE "C" NOT NULL,
    source_box    TEXT COLLATE "C" NOT NULL,
    filter        TEXT   NOT NULL DEFAULT '{}',
    source_seq    BIGINT NOT NULL DEFAULT 0,
    acked_seq     BIGINT NOT NULL DEFAULT 0,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (owner, name)
);
-- "Which consumers read this box, and how far have they looked?": the
-- fan-out's lookup, and the guard every purge checks per record.
CREATE INDEX consumers_source ON consumers (source_owner, source_box, source_seq);

-- Retention walks terminal records oldest first. Partial, so the index
-- costs nothing for records still being worked; the driver's query repeats
-- this exact predicate so the planner can use it.
CREATE INDEX records_terminal ON records (updated_at_ms)
    WHERE state IN ('READED', 'SENT', 'DEAD', 'ARCHIVED', 'DELETED');

-- When the body was last stored or reused: every write that stores a body
-- (Apply, Schedule) upserts it with ON CONFLICT DO UPDATE SET ref_at_ms,
-- instead of DO NOTHING. Two effects protect a body that a transaction in
-- flight is about to refer to from a concurrent orphan purge:
--   - The upsert locks the row (even when its WHERE skips the update) until
--     the writer commits. The purge locks candidate bodies FOR UPDATE SKIP
--     LOCKED, so it passes over a body being reused, and a writer that comes
--     later waits for the purge and then inserts the body anew.
--   - When the purge had read the row before the writer touched it, its
--     locking re-check (EvalPlanQual, under READ COMMITTED) evaluates
--     GREATEST(created_at_ms, ref_at_ms) < cutoff on the updated row, which
--     the refreshed time now fails.
-- The purge then deletes, in a later statement (a fresh snapshot, taken
-- after its locks were granted), only the locked bodies that still have no
-- record and no scheduled entry. See deleteOrphanBodies in purge.go.
ALTER TABLE messages ADD COLUMN ref_at_ms BIGINT NOT NULL DEFAULT 0;

-- "Is a scheduled entry still waiting for this body?"
CREATE INDEX scheduled_msg ON scheduled (msg_id);

-- Event retention deletes by age.
CREATE INDEX events_at ON events (at_ms);
