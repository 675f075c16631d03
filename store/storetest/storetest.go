// Package storetest is the conformance suite every store.Store driver must
// pass. It is ordinary (non-test) code so that each driver's own tests can
// import it and run the identical suite:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := mydriver.Open(...)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Every test runs as a parallel subtest against a fresh, empty store from the
// factory, so tests never see each other's data. The factory is responsible
// for closing the store (t.Cleanup). The assertions follow the doc comments
// of store.Store, which are the contract; time is always passed in, so the
// suite uses fixed timestamps and never sleeps.
package storetest

import (
	"testing"

	"github.com/msgcenter/msgcenter/store"
)

// testCase is one conformance test, run against a fresh store.
type testCase struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

// group is a named set of tests, run as t.Run(group, t.Run(test)).
type group struct {
	name  string
	tests []testCase
}

func groups() []group {
	return []group{
		{"Apply", applyTests()},
		{"RecordIDs", recordIDTests()},
		{"Conversations", conversationTests()},
		{"Claim", claimTests()},
		{"Leases", leaseTests()},
		{"Update", updateTests()},
		{"UpdateThenClaim", updateClaimTests()},
		{"ListRecords", listTests()},
		{"Sync", syncTests()},
		{"CountRecords", countTests()},
		{"Schedule", scheduleTests()},
		{"Contacts", contactTests()},
		{"Receipts", receiptTests()},
		{"Events", eventTests()},
		{"Tokens", tokenTests()},
		{"Consumers", consumerTests()},
		{"Mail", mailTests()},
		{"Purge", purgeTests()},
		{"Concurrency", concurrencyTests()},
	}
}

// Run runs the whole conformance suite. newStore must return a new, empty
// store each time it is called and arrange for it to be closed when t ends.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					s := newStore(t)
					if s == nil {
						t.Fatal("storetest: newStore returned nil")
					}
					tc.fn(t, s)
				})
			}
		})
	}
}
