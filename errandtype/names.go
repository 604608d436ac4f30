package errandtype

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// CheckName validates a kind or queue name: 1 to MaxNameBytes bytes of
// valid UTF-8, printable, without spaces, and not "." or "..".
func CheckName(field, s string) error {
	if err := CheckNameWith(field, s, "use printable characters without spaces"); err != nil {
		return err
	}
	if s == "." || s == ".." {
		return &InputError{Field: field, Message: fmt.Sprintf("%q cannot be addressed in a URL, where it means a directory; choose another name", s)}
	}
	return nil
}

// CheckNameWith checks what every name shares: 1 to MaxNameBytes bytes of
// valid UTF-8, printable, without spaces. advice says what a name may hold,
// as the end of a refusal.
func CheckNameWith(field, s, advice string) error {
	if s == "" {
		return &InputError{Field: field, Message: "is empty; name it, e.g. \"send_receipt\""}
	}
	if len(s) > MaxNameBytes {
		return &InputError{Field: field, Message: fmt.Sprintf("is %d bytes; use at most %d", len(s), MaxNameBytes)}
	}
	if !utf8.ValidString(s) {
		return &InputError{Field: field, Message: fmt.Sprintf("%q is not valid UTF-8; %s", s, advice)}
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return &InputError{Field: field, Message: fmt.Sprintf("%q contains a space or control character; %s", s, advice)}
		}
	}
	return nil
}
