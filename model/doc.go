// Package model defines msgcenter's data model: records and the boxes they
// live in, the record state machine, read receipts, contacts, conversations
// and events, plus the sentinel errors every layer shares.
//
// It holds no behaviour beyond the rules that must be identical everywhere
// (the transition table, record id derivation), so that the core, the store
// drivers, the HTTP API and the Go SDK all speak exactly the same types.
package model
