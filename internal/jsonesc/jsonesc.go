// Package jsonesc reads the \u escapes of JSON text, which encoding/json
// decodes without a word when they cannot stand for a character: an
// escaped half of a UTF-16 surrogate pair without its other half becomes
// U+FFFD.
package jsonesc

import "unicode/utf16"

// Unit returns the UTF-16 code unit of the escape \uXXXX at b[i], or -1
// when there is none.
func Unit(b []byte, i int) rune {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[i+2 : i+6] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(d)
	}
	return r
}

// Pair reports whether the escapes at b[i] and b[i+6] are a whole
// surrogate pair, high then low.
func Pair(b []byte, i int) bool {
	hi, lo := Unit(b, i), Unit(b, i+6)
	return utf16.IsSurrogate(hi) && hi < 0xdc00 && utf16.IsSurrogate(lo) && lo >= 0xdc00
}

// LoneSurrogate returns the offset in the JSON text b of the first escape
// in a string that is half of a surrogate pair without its other half, or
// -1 when there is none.
func LoneSurrogate(b []byte) int {
	in := false // inside a string
	for i := 0; i < len(b); {
		switch {
		case b[i] == '"':
			in = !in
			i++
		case in && b[i] == '\\' && i+1 < len(b) && b[i+1] == 'u':
			switch r := Unit(b, i); {
			case Pair(b, i):
				i += 12
			case utf16.IsSurrogate(r):
				return i
			default:
				i += 6
			}
		case in && b[i] == '\\':
			i += 2 // the escaped character, so "\\u" is no escape
		default:
			i++
		}
	}
	return -1
}
