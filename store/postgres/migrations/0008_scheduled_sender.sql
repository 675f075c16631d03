-- 0008: a delayed message's sender, so that it can list what it sent.
--
-- Who may cancel a pending entry was worked out from its message (a
-- post_send's author) or its context (a dispatch's tunnel) one entry at a
-- time; listing them was for admins only. The sender is now a column,
-- indexed for "my pending messages, soonest first", and the entries
-- stored before are filled in the same way: the message's source, else
-- its from, for a post_send; the ingress context's tunnel_did for a
-- dispatch; '' when neither names anyone (a tunnel's dispatch without an
-- ingress context: only an admin can tell whose it is). Both are JSON the
-- server wrote, which may escape a NUL in a text as \u0000: PostgreSQL's
-- JSON types refuse that escape, and no DID holds a NUL, so it is read as
-- U+FFFD here.
ALTER TABLE scheduled ADD COLUMN sender TEXT COLLATE "C" NOT NULL DEFAULT '';
UPDATE scheduled sc SET sender = COALESCE(CASE sc.op
    WHEN 'dispatch' THEN replace(convert_from(sc.ctx, 'UTF8'), '\u0000', '\ufffd')::jsonb ->> 'tunnel_did'
    ELSE (SELECT COALESCE(NULLIF(x.j ->> 'source', ''), x.j ->> 'from')
          FROM (SELECT replace(convert_from(m.body, 'UTF8'), '\u0000', '\ufffd')::jsonb AS j
                FROM messages m WHERE m.msg_id = sc.msg_id AND length(m.body) > 0) x)
    END, '');
CREATE INDEX scheduled_sender ON scheduled (sender, due_at_ms, sched_id);
