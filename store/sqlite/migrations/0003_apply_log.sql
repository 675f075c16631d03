-- 0003: where the apply log stands (applylog.go). applied is the sequence
-- number of the last logged plan that a commit covers: after a crash,
-- replay starts after it, so no plan is applied twice.
CREATE TABLE apply_log (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    applied INTEGER NOT NULL
) STRICT;
INSERT INTO apply_log (id, applied) VALUES (1, 0);
