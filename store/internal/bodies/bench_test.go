package bodies

import (
	"fmt"
	"testing"
)

// BenchmarkQueue is the cache's part of a send and its claim: a body put,
// then read back twice (the claim and the ack) by a consumer 5,000 bodies
// behind, which the default budget holds.
func BenchmarkQueue(b *testing.B) {
	const lag = 5000
	ids := make([]string, b.N+lag)
	for i := range ids {
		ids[i] = fmt.Sprintf("cymsg:%064d", i)
	}
	body := make([]byte, 1300)
	c := New(DefaultBytes)
	for i := range lag {
		c.Put(ids[i], body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c.Put(ids[i+lag], body)
		for range 2 {
			if _, gen, ok := c.Get(ids[i]); !ok {
				c.PutIfCurrent(gen, ids[i], body)
			}
		}
	}
}
