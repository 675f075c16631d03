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
