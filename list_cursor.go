package errand

import (
	"fmt"
	"strconv"
	"strings"
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

// ParseListCursor decodes a cursor that ListCursor.String encoded.
func ParseListCursor(s string) (*ListCursor, error) {
	us, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, &InputError{Field: "cursor", Message: fmt.Sprintf("%q is not a cursor; pass the next_cursor of the previous page as it is", s)}
	}
	c := &ListCursor{CreatedAt: time.UnixMicro(n).UTC(), ID: id}
	if err := c.validate("cursor"); err != nil {
		return nil, err
	}
	return c, nil
}

// validate checks a cursor given as field; nil is none.
func (c *ListCursor) validate(field string) error {
	if c == nil {
		return nil
	}
	// A time outside the years every store keeps names no item: PostgreSQL
	// would refuse it as out of range, and SQLite compare it as a number.
	if c.ID == "" || c.CreatedAt.IsZero() || !StorableText(c.ID) || c.CreatedAt.Before(minRunAt) || c.CreatedAt.After(maxRunAt) {
		return &InputError{Field: field, Message: "names no position; give the CreatedAt and ID of the last item of the previous page"}
	}
	return nil
}
