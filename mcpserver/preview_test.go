package mcpserver

import (
	"strings"
	"testing"
)

// check_inbox's max_text bounds every part of a message, not its text
// alone: a long title is cut, and a machine payload longer than the bound
// (a Mail's carries every part whole) is left out, each saying so.
func TestPreviewBoundsEveryPart(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 50)
	for _, c := range []struct {
		name        string
		in          Message
		title, text string
		machine     bool
		truncated   bool
	}{
		{"short", Message{Title: "t", Text: "hi", Machine: map[string]any{"k": 1}}, "t", "hi", true, false},
		{"long text", Message{Text: long}, "", strings.Repeat("é", 10) + "…", false, true},
		{"long title", Message{Title: long, Text: "hi"}, strings.Repeat("é", 10) + "…", "hi", false, true},
		{"long machine", Message{Text: "hi", Machine: map[string]any{"parts": []any{long}}}, "", "hi", false, true},
	} {
		m := c.in
		preview(&m, 10)
		if m.Title != c.title || m.Text != c.text || (m.Machine != nil) != c.machine || m.Truncated != c.truncated {
			t.Errorf("%s: preview = title %q text %q machine %v truncated %v", c.name, m.Title, m.Text, m.Machine, m.Truncated)
		}
	}
}
