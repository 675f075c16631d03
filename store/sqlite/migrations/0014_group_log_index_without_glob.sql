-- 0014: the group log's index conditioned on a BETWEEN, not a GLOB.
--
-- 0007 conditioned records_group_log on box GLOB 'GROUP_INBOX' because an
-- equality makes SQLite re-plan every statement comparing box with a bound
-- parameter. But a GLOB is a function call, which may fail, so SQLite gave
-- every multi-row insert into records a statement journal: a copy of each
-- index page the insert first changed, a sixth of the records' insert in
-- a 1,000-member fan-out (docs/benchmarks.md, twenty-fifth round). A
-- BETWEEN of constants calls no function and is no equality (no re-plan):
-- neither cost. The purge repeats it word for word (TestPurgePlans).
-- Building the index reads records once.
DROP INDEX records_group_log;
CREATE INDEX records_group_log ON records (updated_at_ms)
    WHERE box BETWEEN 'GROUP_INBOX' AND 'GROUP_INBOX';
