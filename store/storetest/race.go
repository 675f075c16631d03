//go:build race

package storetest

// raceEnabled is true under the race detector, which slows pure-Go SQLite
// (and anything else heavily instrumented) by an order of magnitude: the
// big concurrent tests shrink to keep the suite fast.
const raceEnabled = true
