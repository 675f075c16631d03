package sqlite

import (
	"slices"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/model"
)

// A state listed again is bound once, so the query texts kept prepared
// stay as few as the states, however long a caller's list.
func TestStateFilterBindsEachStateOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		states   []model.State
		wantSQL  string
		wantArgs []any
	}{
		{nil, "", []any{"o"}},
		{[]model.State{model.Unread}, " AND state IN (?)", []any{"o", "UNREAD"}},
		{[]model.State{model.Unread, model.Readed, model.Unread, model.Readed, model.Unread},
			" AND state IN (?, ?)", []any{"o", "UNREAD", "READED"}},
		{slices.Repeat([]model.State{model.Reading}, 10_000), " AND state IN (?)", []any{"o", "READING"}},
	} {
		var b strings.Builder
		args := stateFilter(&b, []any{"o"}, c.states)
		if b.String() != c.wantSQL || !slices.Equal(args, c.wantArgs) {
			t.Errorf("stateFilter(%d states) = %q %v, want %q %v", len(c.states), b.String(), args, c.wantSQL, c.wantArgs)
		}
	}
}
