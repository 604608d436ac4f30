package errand

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// ParseListCursor decodes a cursor that ListCursor.String encoded.
func ParseListCursor(s string) (*errandtype.ListCursor, error) {
	us, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, &errandtype.InputError{Field: "cursor", Message: fmt.Sprintf("%q is not a cursor; pass the next_cursor of the previous page as it is", s)}
	}
	c := &errandtype.ListCursor{CreatedAt: time.UnixMicro(n).UTC(), ID: id}
	if err := c.Validate("cursor"); err != nil {
		return nil, err
	}
	return c, nil
}
