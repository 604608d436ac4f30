// Package plainjson checks JSON text for what every store can keep and
// writes its numbers as PostgreSQL's jsonb writes them, so that SQLite and
// PostgreSQL keep the same text. The stores' checks and the Client's
// rewriting share it.
package plainjson

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/jsonesc"
)

// Check validates a JSON document, already known to be valid JSON, for
// every store; what it refuses is an *errandtype.InputError naming field.
// SQLite keeps JSON as text; PostgreSQL's jsonb refuses some valid JSON:
// the escape \u0000, an escaped half of a UTF-16 surrogate pair without
// its other half, and a number beyond its numeric type (see
// numberProblem). jsonb also writes every number out in full (see
// [Plain]): the document must fit max bytes (when max > 0) as it does, so
// that 1e131071, 8 bytes given and 131072 kept, cannot turn a small
// document into one PostgreSQL cannot read back. It reports whether b
// holds a number Plain would rewrite.
func Check(field string, b []byte, max int) (rewrite bool, err error) {
	if !utf8.Valid(b) {
		return false, &errandtype.InputError{Field: field, Message: "is not valid UTF-8; encode the text as UTF-8"}
	}
	plain := int64(len(b))
	var grown []byte // the first number that grows, for the message
	for i := 0; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			end, msg := scanString(b, i+1)
			if msg != "" {
				return false, &errandtype.InputError{Field: field, Message: msg}
			}
			i = end
		case c == '-' || '0' <= c && c <= '9':
			end := numberEnd(b, i)
			num := b[i:end]
			if msg := numberProblem(num); msg != "" {
				return false, &errandtype.InputError{Field: field, Message: msg}
			}
			if notPlain(num) {
				rewrite = true
				n := parseNumber(num).plainLen()
				if n > int64(len(num)) && grown == nil {
					grown = num
				}
				plain += n - int64(len(num))
			}
			i = end
		default:
			i++
		}
	}
	switch {
	case max <= 0 || plain <= int64(max):
	case grown == nil:
		return false, &errandtype.InputError{Field: field, Message: fmt.Sprintf("is %d bytes; use at most %d", plain, max)}
	default:
		return false, &errandtype.InputError{Field: field, Message: fmt.Sprintf("is %d bytes with its numbers written out in full, as PostgreSQL keeps them (%s has %d digits); use at most %d, and send such a number as a string",
			plain, shorten(grown), parseNumber(grown).plainLen(), max)}
	}
	return rewrite, nil
}

// numberEnd returns the index just past the JSON number that starts at
// b[i].
func numberEnd(b []byte, i int) int {
	end := i + 1
	for end < len(b) && strings.IndexByte("0123456789+-.eE", b[end]) >= 0 {
		end++
	}
	return end
}

// notPlain reports whether jsonb writes the number num otherwise than as
// given: it has an exponent, or it is a negative zero.
func notPlain(num []byte) bool {
	if bytes.IndexAny(num, "eE") >= 0 {
		return true
	}
	return num[0] == '-' && len(bytes.Trim(num[1:], "0.")) == 0
}

// number is a JSON number as PostgreSQL's numeric keeps it: its
// digits, where its decimal point falls among them once the exponent is
// applied (before the first digit at 0, possibly outside them), and how
// many digits it shows after the point.
type number struct {
	neg    bool
	digits string
	exp    int64 // the exponent as written; past 10 digits, maxExponent+1
	point  int64
	scale  int64
	first  int // index of the first digit that is not zero; -1 for zero
}

// parseNumber reads num, a valid JSON number. Only one within
// numberProblem's bounds may be written out (appendPlain).
func parseNumber(num []byte) number {
	s := string(num)
	var n number
	if s[0] == '-' {
		n.neg, s = true, s[1:]
	}
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	var e int64
	if exp != "" {
		digits := strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
		if len(digits) > 10 {
			e = maxExponent + 1
		} else {
			for _, c := range digits {
				e = e*10 + int64(c-'0')
			}
		}
		if exp[0] == '-' {
			e = -e
		}
	}
	n.exp = e
	n.digits = intPart + frac
	n.point = int64(len(intPart)) + e
	n.scale = max(0, int64(len(frac))-e)
	n.first = strings.IndexFunc(n.digits, func(r rune) bool { return r != '0' })
	if n.first < 0 {
		n.neg = false // numeric has no negative zero
	}
	return n
}

// intDigits returns the range of digits before the point that jsonb
// writes, empty when it writes "0".
func (n number) intDigits() (from, to int64) {
	if n.first < 0 || int64(n.first) >= n.point {
		return 0, 0
	}
	return int64(n.first), n.point
}

// plainLen returns the length of n as jsonb writes it.
func (n number) plainLen() int64 {
	l := int64(1) // "0"
	if from, to := n.intDigits(); to > from {
		l = to - from
	}
	if n.neg {
		l++
	}
	if n.scale > 0 {
		l += 1 + n.scale
	}
	return l
}

// digit returns the digit at index i, counted as n.digits are, with zeros
// on either side of them.
func (n number) digit(i int64) byte {
	if i < 0 || i >= int64(len(n.digits)) {
		return '0'
	}
	return n.digits[i]
}

// appendPlain appends n as jsonb writes it.
func (n number) appendPlain(dst []byte) []byte {
	if n.neg {
		dst = append(dst, '-')
	}
	from, to := n.intDigits()
	if to == from {
		dst = append(dst, '0')
	}
	for i := from; i < to; i++ {
		dst = append(dst, n.digit(i))
	}
	if n.scale > 0 {
		dst = append(dst, '.')
		for i := n.point; i < n.point+n.scale; i++ {
			dst = append(dst, n.digit(i))
		}
	}
	return dst
}

// scanString scans the JSON string whose text starts at b[i], just
// after its opening quote, and returns the index just past its closing
// quote, or what in it not every store can keep.
func scanString(b []byte, i int) (end int, problem string) {
	for i < len(b) {
		switch b[i] {
		case '"':
			return i + 1, ""
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				r := jsonesc.Unit(b, i)
				switch {
				case r == 0:
					return 0, `contains \u0000, which not every store can keep; remove the NUL character`
				case jsonesc.Pair(b, i):
					i += 12 // a whole pair
					continue
				case utf16.IsSurrogate(r):
					return 0, fmt.Sprintf(`contains %s, half of a UTF-16 surrogate pair without its other half, which not every store can keep; escape the whole character, or write it unescaped`, b[i:i+6])
				}
				i += 6
				continue
			}
			i += 2 // the escaped character, so "\\u0000" is no escape
		default:
			i++
		}
	}
	return len(b), ""
}

// PostgreSQL's numeric type, which jsonb keeps numbers in, holds up to
// 131072 digits before the decimal point and 16383 after it, and refuses
// an exponent of 2^30 - 1 or more either way, even on zero.
const (
	maxIntDigits  = 131072
	maxFracDigits = 16383
	maxExponent   = 1<<30 - 2
)

// numberProblem says why a JSON number is beyond what every store can
// keep, or returns "". Its digits after the decimal point count as written,
// trailing zeros too (1.50 has two), less the exponent.
func numberProblem(num []byte) string {
	if len(num) <= maxFracDigits && bytes.IndexAny(num, "eE") < 0 {
		return "" // too short to pass either limit without an exponent
	}
	n := parseNumber(num)
	// lead is the power of ten of the first digit that is not zero.
	if lead := n.point - 1 - int64(n.first); n.exp > maxExponent || n.exp < -maxExponent ||
		n.scale > maxFracDigits || n.first >= 0 && lead >= maxIntDigits {
		return fmt.Sprintf("holds the number %s, beyond what every store can keep (up to %d digits before the decimal point and %d after); send it as a string", shorten(num), maxIntDigits, maxFracDigits)
	}
	return ""
}

// Plain returns b, a document Check accepts, with every number
// written as PostgreSQL's jsonb writes it: in full, without an exponent
// (1e2 as 100, 1.5E-3 as 0.0015, 2.50e1 as 25.0, keeping the digits after
// the point as written less the exponent), and zero without a sign. SQLite
// keeps a document as given, so a Client writes this form to both stores,
// and every reader, a handler decoding 1e2 into an int among them, finds
// the same text on either. It returns b itself when no number changes.
func Plain(b []byte) []byte {
	var out []byte
	last := 0 // b[:last] is in out
	for i := 0; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			end, _ := scanString(b, i+1)
			i = end
		case c == '-' || '0' <= c && c <= '9':
			end := numberEnd(b, i)
			if num := b[i:end]; notPlain(num) {
				if out == nil {
					out = make([]byte, 0, len(b)+16)
				}
				out = append(out, b[last:i]...)
				out = parseNumber(num).appendPlain(out)
				last = end
			}
			i = end
		default:
			i++
		}
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// shorten returns num, a JSON number and so ASCII, cut to 40 bytes for a
// message, with a note of how much was cut.
func shorten(num []byte) string {
	const keep = 40
	if len(num) <= keep {
		return string(num)
	}
	return string(num[:keep]) + fmt.Sprintf("… (%d more bytes cut)", len(num)-keep)
}
