-- 0006: a box's counter is written when its records go, not when they come.
--
-- The last seq handed out in a box is the highest seq of its records, or,
-- once records are deleted, possibly that of one that is gone. box_seqs
-- used to be advanced by every insert: a thousand rows written per
-- fan-out to a thousand members, as much of its time as any of the
-- records' owner-keyed indexes (docs/benchmarks.md, twenty-second round).
-- Now the records' own (owner, box, seq) index answers for the live ones,
-- and box_seqs keeps only what a deletion would otherwise take with it:
-- every deleted record leaves its seq there if it is the highest yet. A
-- box's last seq is the larger of the two (bulk.go's bulkSeqs, boxLastSeq),
-- so seqs are never handed out twice, whatever retention deletes.
--
-- The counters written before this migration stay: they are at most the
-- highest seq ever handed out, which is what the larger of the two needs.
--
-- Seqs are never handed out twice only while this trigger exists and sees
-- every deletion: a migration that rebuilds records (as 0005 did) drops
-- it with the table and must create it again, and records must not be
-- written with REPLACE, whose deletions fire no trigger here
-- (TestSeqTriggerInPlace).
CREATE TRIGGER records_keep_seq AFTER DELETE ON records BEGIN
    INSERT INTO box_seqs (owner, box, last_seq) VALUES (OLD.owner, OLD.box, OLD.seq)
        ON CONFLICT (owner, box) DO UPDATE SET last_seq = excluded.last_seq
        WHERE excluded.last_seq > last_seq;
END;
