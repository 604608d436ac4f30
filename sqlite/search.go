package sqlite

import (
	"encoding/json"
	"strings"

	"github.com/errandhq/errand/errandstore"
)

// searchWhere adds p's search filters to a listing's conditions: each
// leaf of a containment filter (errandstore.ContainmentLeaves) is a JSON
// type and, for strings and numbers, a value at its path, as jsonb @>
// compares them; each tag is one of the job's tags. No index serves them:
// the list walks seqs.
func searchWhere(p *errandstore.JobListParams, where []string, args []any) ([]string, []any, error) {
	for _, f := range []struct {
		field, column string
		filter        json.RawMessage
	}{{"args_has", "j.args", p.ArgsHas}, {"output_has", "j.output", p.OutputHas}} {
		if f.filter == nil {
			continue
		}
		leaves, err := errandstore.ContainmentLeaves(f.field, f.filter)
		if err != nil {
			return nil, nil, err
		}
		for _, l := range leaves {
			path := `$."` + strings.Join(l.Path, `"."`) + `"`
			switch l.Type {
			case "string":
				where = append(where, "json_type("+f.column+", ?) = 'text' AND json_extract("+f.column+", ?) = ?")
				args = append(args, path, path, l.Value)
			case "number":
				where = append(where, "json_type("+f.column+", ?) IN ('integer', 'real') AND json_extract("+f.column+", ?) = ?")
				args = append(args, path, path, l.Value)
			default: // true, false and null are their own types
				where = append(where, "json_type("+f.column+", ?) = ?")
				args = append(args, path, l.Type)
			}
		}
	}
	for _, t := range p.Tags {
		where = append(where, "EXISTS (SELECT 1 FROM json_each(j.tags) WHERE value = ?)")
		args = append(args, t)
	}
	return where, args, nil
}
