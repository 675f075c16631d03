-- 0002: durable consumers and retention.

-- A consumer is a named subscription of one DID (owner) to a source box.
-- source_seq is how far the source has been examined, acked_seq the
-- cursor in the consumer's own box ("CONSUMER:" || name). filter is the
-- model.ConsumerFilter as JSON text.
CREATE TABLE consumers (
    owner         TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    source_owner  TEXT    NOT NULL,
    source_box    TEXT    NOT NULL,
    filter        TEXT    NOT NULL DEFAULT '{}',
    source_seq    INTEGER NOT NULL DEFAULT 0,
    acked_seq     INTEGER NOT NULL DEFAULT 0,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (owner, name)
) STRICT, WITHOUT ROWID;
-- "Which consumers read this box?": fan-out, and retention's guard that
-- keeps a record some consumer has not examined yet.
CREATE INDEX consumers_source ON consumers (source_owner, source_box);

-- Retention walks terminal records oldest first. Partial, so the hot
-- unread/held records cost the index nothing. The state list must stay
-- identical to the one in purge.go (terminalStates) for the planner to use
-- it; a driver test checks both against model.State.IsTerminal.
CREATE INDEX records_retention ON records (updated_at_ms)
    WHERE state IN ('READED', 'SENT', 'DEAD', 'ARCHIVED', 'DELETED');

-- Retention deletes a body only if no scheduled entry refers to it.
CREATE INDEX scheduled_msg ON scheduled (msg_id);
