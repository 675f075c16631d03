//go:build race

package core

// raceEnabled: the race detector slows the embedded SQLite driver (pure Go,
// all of it instrumented) about thirtyfold, so the heaviest property tests
// draw shorter runs under it.
const raceEnabled = true
