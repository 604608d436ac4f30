package schedule

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/errandhq/errand/errandtype"
)

// ParseFlag reads a schedule written on a command line, NAME=SPEC KIND
// [JSON] (see errand.ParseScheduleFlag), and makes it with build. Bad input
// is an *InputError that shows the form to use.
func ParseFlag[S any](s string, build func(name, spec, kind string, args json.RawMessage) (S, error)) (S, error) {
	const form = `write NAME=SPEC KIND [JSON], e.g. nightly=0 3 * * * cleanup {"days": 30}`
	var none S
	name, rest, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return none, &errandtype.InputError{Field: "schedule", Message: fmt.Sprintf("%q names no schedule; %s", s, form)}
	}
	var args json.RawMessage
	if i := strings.IndexAny(rest, "{["); i >= 0 {
		args = json.RawMessage(strings.TrimSpace(rest[i:]))
		rest = rest[:i]
		if !json.Valid(args) {
			return none, &errandtype.InputError{Field: "schedule", Message: fmt.Sprintf("%q: the args %s are not valid JSON; %s", s, args, form)}
		}
	}
	words := strings.Fields(rest)
	if len(words) < 2 {
		return none, &errandtype.InputError{Field: "schedule", Message: fmt.Sprintf("%q needs a spec and a kind; %s", s, form)}
	}
	spec, kind := strings.Join(words[:len(words)-1], " "), words[len(words)-1]
	sched, err := build(name, spec, kind, args)
	if err != nil {
		if last := words[len(words)-1]; args == nil && json.Valid([]byte(last)) && len(words) > 2 {
			// "n=@hourly report 42": 42 was read as the kind.
			return none, &errandtype.InputError{Field: "schedule", Message: fmt.Sprintf("%q: %s reads as JSON, but the args must be a JSON object or array, e.g. {\"n\": %s}; %s", s, last, last, form)}
		}
		return none, fmt.Errorf("schedule %q: %w", s, err)
	}
	return sched, nil
}
