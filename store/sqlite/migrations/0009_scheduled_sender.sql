-- 0009: a delayed message's sender, so that it can list what it sent.
--
-- Who may cancel a pending entry was worked out from its message (a
-- post_send's author) or its context (a dispatch's tunnel) one entry at a
-- time; listing them was for admins only. The sender is now a column,
-- indexed for "my pending messages, soonest first", and the entries
-- stored before are filled in the same way: the message's source, else
-- its from, for a post_send; the ingress context's tunnel_did for a
-- dispatch; '' when neither names anyone.
ALTER TABLE scheduled ADD COLUMN sender TEXT NOT NULL DEFAULT '';
UPDATE scheduled SET sender = COALESCE(CASE op
    WHEN 'dispatch' THEN
        CASE WHEN json_valid(CAST(ctx AS TEXT)) THEN json_extract(CAST(ctx AS TEXT), '$.tunnel_did') END
    ELSE (SELECT CASE WHEN json_valid(CAST(m.body AS TEXT)) THEN
            COALESCE(NULLIF(json_extract(CAST(m.body AS TEXT), '$.source'), ''), json_extract(CAST(m.body AS TEXT), '$.from'))
        END FROM messages m WHERE m.msg_id = scheduled.msg_id)
    END, '');
CREATE INDEX scheduled_sender ON scheduled (sender, due_at_ms, sched_id);
