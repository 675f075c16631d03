package telegram

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		text string
		n    int
		want []int // rune counts of the pieces
	}{
		{"short", "hello", 10, []int{5}},
		{"exact", strings.Repeat("é", 10), 10, []int{10}},
		{"no line break", strings.Repeat("日", 25), 10, []int{10, 10, 5}},
		{"break in the second half", strings.Repeat("a", 7) + "\n" + strings.Repeat("b", 7), 10, []int{8, 7}},
		{"break too early is ignored", "ab\n" + strings.Repeat("c", 12), 10, []int{10, 5}},
		{"emoji count twice", strings.Repeat("😀", 7), 10, []int{5, 2}},
		{"an emoji is not cut", "abcdefghi😀", 10, []int{9, 1}},
	} {
		parts := split(tc.text, tc.n)
		var got []int
		for _, p := range parts {
			if !utf8.ValidString(p) {
				t.Fatalf("%s: a piece cuts a character: %q", tc.name, p)
			}
			got = append(got, utf8.RuneCountInString(p))
		}
		if strings.Join(parts, "") != tc.text || len(got) != len(tc.want) {
			t.Fatalf("%s: pieces %v, want %v", tc.name, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("%s: pieces %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}
