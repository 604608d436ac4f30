package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Human-readable output prints what jobs and workers put in the database:
// ids, kinds, keys, tags, error messages taken from a command's stderr,
// stacks, host names. A terminal acts on the control sequences in such text
// (clear the screen, retitle the window, move the cursor back over what was
// printed), so every string from the database goes through printable or
// printableLines before it is shown. JSON output must give back the stored
// strings exactly, so it only ever uses JSON's own escapes: encoding/json
// writes C0 controls as \u escapes, and jsonForTerminal the rest.

// printable returns s with every character a terminal would act on rather
// than show written as a Go escape: C0 controls (tab and newline too, which
// would break a table's columns or fake a line of output), DEL, C1
// controls (\u009b is a CSI of its own), the line and paragraph separators,
// Unicode's bidirectional controls (which make text display in another
// order than it is stored, so that one id can pass for another), and bytes
// that are not UTF-8. A backslash is left as it is: the escapes are for
// reading, and --json gives the exact value.
func printable(s string) string { return escapeControls(s, false) }

// printableLines is printable for text shown over several lines, such as an
// error message or a stack: newlines and tabs stay, as they only move the
// cursor forward.
func printableLines(s string) string { return escapeControls(s, true) }

func escapeControls(s string, keepLines bool) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if mustEscape(r, size, keepLines) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !mustEscape(r, size, keepLines):
			b.WriteString(s[i : i+size])
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// mustEscape reports whether the rune r, size bytes long, must not reach a
// terminal as it is.
func mustEscape(r rune, size int, keepLines bool) bool {
	switch {
	case r == utf8.RuneError && size == 1: // a byte that is not UTF-8
		return true
	case keepLines && (r == '\n' || r == '\t'):
		return false
	case r < 0x20 || r == 0x7f: // C0 and DEL
		return true
	case r >= 0x80 && r < 0xa0: // C1
		return true
	case r == '\u2028' || r == '\u2029':
		return true
	}
	return unicode.Is(unicode.Bidi_Control, r)
}

// jsonForTerminal rewrites, in encoded JSON, the characters a terminal acts
// on that encoding/json leaves as they are (DEL, C1 controls, Unicode's
// bidirectional controls) as \u escapes, which every decoder reads back as
// the same characters. Outside strings JSON has none of them, and inside a
// string an escape is always valid. Bytes that are not UTF-8 (only a raw
// JSON value such as a job's args can hold them) are left alone: no JSON
// escape stands for them.
func jsonForTerminal(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r) {
			if out == nil {
				out = append(make([]byte, 0, len(b)+16), b[:i]...)
			}
			out = fmt.Appendf(out, `\u%04x`, r)
		} else if out != nil {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	if out == nil {
		return b
	}
	return out
}
