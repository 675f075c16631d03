//go:build race

package sqlite

// raceEnabled: the race detector slows this pure-Go SQLite about
// thirtyfold; size checks that need many writes shrink under it.
const raceEnabled = true
