package errandtype

import (
	"strconv"
	"time"
)

// ListCursor continues a listing that runs newest first (batches,
// workflows) past the last item of a page, created at CreatedAt with id ID:
// the next page holds what was created before it, and, of what was created
// at the same instant, the smaller ids. A cursor names a position, not a
// row, so it stays good after retention deletes the row it came from.
type ListCursor struct {
	CreatedAt time.Time
	ID        string
}

// String encodes c for a URL's cursor parameter (see ParseListCursor):
// the creation time in Unix microseconds, a dot, and the id.
func (c ListCursor) String() string {
	return strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "." + c.ID
}

// Validate checks a cursor given as field; nil is none.
func (c *ListCursor) Validate(field string) error {
	if c == nil {
		return nil
	}
	// A time outside the years every store keeps names no item: PostgreSQL
	// would refuse it as out of range, and SQLite compare it as a number.
	if c.ID == "" || c.CreatedAt.IsZero() || !StorableText(c.ID) || c.CreatedAt.Before(MinRunAt) || c.CreatedAt.After(MaxRunAt) {
		return &InputError{Field: field, Message: "names no position; give the CreatedAt and ID of the last item of the previous page"}
	}
	return nil
}
