package sqlbuild

import (
	"strings"

	"github.com/errandhq/errand/errandstore"
)

// ReplayMany renders the part from FROM on of a bulk replay's select of
// the dead jobs of p: those after parameter 1 (p.AfterSeq) that held
// selects (or, unless p.Held, does not), that match p.Filter, by seq, at
// most the last parameter (p.Limit) of them; and its arguments. classOf
// is the dialect's expression for the class in last_error.
func (d Dialect) ReplayMany(p *errandstore.JobReplayManyParams, held, classOf string) (string, []any) {
	if !p.Held {
		held = `NOT ` + held
	}
	// Every dead job has a finished_at: saying so lets the planner read
	// them from the finished index, where PostgreSQL has no index of states.
	where := []string{"state = 'dead'", "finished_at IS NOT NULL", held}
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+d.Param(len(args)))
	}
	add("seq > ", p.AfterSeq)
	f := p.Filter
	if f.Kind != "" {
		add("kind = ", f.Kind)
	}
	if f.Queue != "" {
		add("queue = ", f.Queue)
	}
	if f.Class != "" {
		add(classOf+" = ", f.Class)
	}
	if !f.DiedSince.IsZero() {
		add("finished_at >= ", d.Time(f.DiedSince))
	}
	if !f.DiedUntil.IsZero() {
		add("finished_at < ", d.Time(f.DiedUntil))
	}
	args = append(args, p.Limit)
	return ` FROM ` + d.Table("jobs") + ` WHERE ` + strings.Join(where, " AND ") + ` ORDER BY seq LIMIT ` + d.Param(len(args)), args
}

// Prefixed qualifies each column of a column list with alias, keeping a
// column's cast (args::text becomes j.args::text).
func Prefixed(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}
