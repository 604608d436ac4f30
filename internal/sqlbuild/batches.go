package sqlbuild

import (
	"strings"

	"github.com/errandhq/errand/errandstore"

	"github.com/errandhq/errand/errandtype"
)

// BatchList lists the columns of the batches in state (every batch when
// empty), newest first, at most parameter 1 of them; with before, only
// those before the position (parameters 2 and 3), a creation time and an
// id. It reads an index on created_at: errand_batches_open for open
// batches, errand_batches_created otherwise.
func (d Dialect) BatchList(columns string, state errandtype.BatchState, before bool) string {
	var where []string
	switch state {
	case errandtype.BatchOpen:
		where = append(where, `completed_at IS NULL`)
	case errandtype.BatchCompleted:
		where = append(where, `completed_at IS NOT NULL`)
	}
	if before {
		where = append(where, `(created_at, id) < (`+d.Param(2)+`, `+d.Param(3)+`)`)
	}
	q := `SELECT ` + columns + ` FROM ` + d.Table("batches")
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	return q + ` ORDER BY created_at DESC, id DESC LIMIT ` + d.Param(1)
}

// BatchListArgs are the arguments of BatchList's statement for p: the
// limit (100 when zero) and p.Before's position, if any.
func (d Dialect) BatchListArgs(p *errandstore.BatchListParams) []any {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	args := []any{limit}
	if c := p.Before; c != nil {
		args = append(args, d.Time(c.CreatedAt), c.ID)
	}
	return args
}
