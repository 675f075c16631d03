package telegram

import (
	"strings"
	"testing"
)

// A text just over the limit whose tail is blank (answers often end in
// "\n") makes no piece of whitespace alone: Telegram would refuse it
// ("message text is empty") and the delivery would go DEAD after its
// first piece was sent.
func TestSplitMakesNoBlankPiece(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		strings.Repeat("x", 4096) + "\n",
		strings.Repeat("x", 4095) + "\n\n",
		strings.Repeat("x", 4000) + "\n" + strings.Repeat(" ", 200),
	} {
		for i, p := range split(text, maxText) {
			if strings.TrimSpace(p) == "" {
				t.Fatalf("text of %d runes: piece %d of %d is blank (%q)", len(text), i+1, len(split(text, maxText)), p)
			}
		}
	}
}
