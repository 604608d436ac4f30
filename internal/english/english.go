// Package english writes counts as people read them: "1 job", "2 jobs",
// "0 batches", for the CLI's and the dashboard's sentences.
package english

import (
	"strconv"
	"strings"
)

// Count returns n and noun, made plural unless n is 1.
func Count[N ~int | ~int64](n N, noun string) string {
	s := strconv.FormatInt(int64(n), 10) + " "
	if n == 1 {
		return s + noun
	}
	return s + Plural(noun)
}

// Plural returns the plural of a regular English noun: "job" → "jobs",
// "batch" → "batches", "entry" → "entries".
func Plural(noun string) string {
	switch {
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"),
		strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"):
		return noun + "es"
	case strings.HasSuffix(noun, "y") && len(noun) > 1 && !strings.ContainsRune("aeiou", rune(noun[len(noun)-2])):
		return noun[:len(noun)-1] + "ies"
	}
	return noun + "s"
}
