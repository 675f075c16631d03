package postgres

import "time"

// Internals the external tests check against.
const (
	SQLInsertMsg   = sqlInsertMsg
	TerminalStates = terminalStates
)

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

// HoldChanges makes the change writer call before(n) before it runs each
// batch of n calls; set it before the store is used.
func HoldChanges(s *Store, before func(n int)) { s.changes.before = before }

// ChangeGroups reports how many change groups committed, how many calls
// they carried, and how many calls are on their way to the writer.
func ChangeGroups(s *Store) (groups, grouped, handing int64) {
	c := s.changes
	return c.groups.Load(), c.grouped.Load(), c.handing.Load()
}

// ChangeWriters is how many change writers the store runs.
func ChangeWriters(s *Store) int { return groupWriters(s.pool.Config().MaxConns) }
