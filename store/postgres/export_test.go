package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Internals the external tests check against.
const (
	SQLInsertMsg   = sqlInsertMsg
	TerminalStates = terminalStates
	SQLGetRecord   = sqlGetRecord
)

// SQLUpdate and SQLClaim are Update's and Claim's statements,
// SQLPurgeGroupLog retention's of groups' logs.
var SQLUpdate, SQLClaim, SQLPurgeGroupLog = sqlUpdate, sqlClaim, sqlPurgeGroupLog

// Pool is the store's connection pool, whose connections carry the
// store's session settings.
func Pool(s *Store) *pgxpool.Pool { return s.pool }

// SetEventWait changes how long ListEvents waits for event writers in
// flight (eventWait).
func SetEventWait(s *Store, d time.Duration) {
	s.events.mu.Lock()
	s.events.wait = d
	s.events.mu.Unlock()
}

// SetTokenClock replaces the clock of the store's token memory; call it
// before the store is used.
func SetTokenClock(s *Store, now func() time.Time) { s.tokens.Now = now }

// SetContactsClock replaces the clock of the store's memory of groups,
// routes and blocks; call it before the store is used.
func SetContactsClock(s *Store, now func() time.Time) { s.contacts.setClock(now) }

// StopUpkeep stops the store's background chores (folding unread deltas,
// analyzing grown tables), so a test decides when they run (FoldUnread,
// AnalyzeGrown). Close stops them again harmlessly.
func StopUpkeep(s *Store) { s.upkeep.stop() }

// AnalyzeGrown runs one look for grown tables, as the background chore
// does every analyzeEvery, and returns the tables it analyzed.
func AnalyzeGrown(ctx context.Context, s *Store) ([]string, error) { return s.analyzeGrown(ctx) }

// FoldUnread runs one folding of unread deltas, as the background folder
// does every foldEvery, and returns how many conversations it updated.
func FoldUnread(ctx context.Context, s *Store) (int64, error) { return s.foldUnread(ctx) }
