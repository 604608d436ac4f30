package errandtype

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	// MaxNameBytes bounds a kind or a queue name.
	MaxNameBytes = 128
)

const (
	// MaxAttemptsLimit bounds a job's attempt budget.
	MaxAttemptsLimit = math.MaxInt32
)

// Times a job may be scheduled at: within the years that every store and
// RFC 3339 can represent.
var (
	MinRunAt = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	MaxRunAt = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)
)

// StorableText reports whether every store can keep s as text: valid UTF-8
// without NUL. A lookup by an id that is not storable finds nothing on any
// store.
func StorableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
