package api

import (
	"fmt"
	"unicode/utf8"

	"github.com/msgcenter/msgcenter/model"
)

// checkText refuses a JSON body that encoding/json would change as it
// decodes: bytes that are not UTF-8, and \u escapes of a lone UTF-16
// surrogate, both of which it turns into U+FFFD without a word. A message
// is stored under the hash of what was decoded, so a client that hashes
// what it sent would never find its own message. body must be JSON that
// decoded.
func checkText(body []byte) error {
	if !utf8.Valid(body) {
		return model.Invalid("", "request body is not valid UTF-8")
	}
	if at := loneSurrogate(body); at >= 0 {
		return model.Invalid("", fmt.Sprintf("a JSON string escapes a lone UTF-16 surrogate (%s at byte %d), which is not a character", body[at:at+6], at))
	}
	return nil
}

// loneSurrogate returns the offset of the first \u escape in a string of
// body that is a surrogate without its pair, or -1.
func loneSurrogate(body []byte) int {
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(body):
			if body[i+1] != 'u' {
				i++ // the escaped character, which may be a quote
				continue
			}
			r, ok := hex4(body, i+2)
			if !ok {
				i++
				continue
			}
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				if lo, ok := hex4(body, i+8); ok && body[i+6] == '\\' && body[i+7] == 'u' && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 11 // the pair
					continue
				}
				return i
			case r >= 0xDC00 && r <= 0xDFFF:
				return i
			}
			i += 5
		}
	}
	return -1
}

// hex4 reads the four hex digits at b[at:], if they are there.
func hex4(b []byte, at int) (rune, bool) {
	if at < 0 || at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
