// Package ids makes the identifiers errand writes: time-ordered job ids and
// unguessable lease tokens.
package ids

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/google/uuid"
)

// NewJobID returns a UUIDv7, whose text sorts by creation time.
func NewJobID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// NewToken returns 128 random bits in hex, for lease tokens. crypto/rand
// never fails on supported platforms.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
