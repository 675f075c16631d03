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
