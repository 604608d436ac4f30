package errand

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/errandhq/errand/errandtype"
)

// ParseScheduleFlag reads a schedule written on a command line, as errand
// work --cron and errand serve --cron take it:
//
//	NAME=SPEC KIND [JSON]
//
// for example
//
//	nightly=0 3 * * * cleanup {"days": 30}
//	heartbeat=@every 30s ping
//	report=CRON_TZ=Europe/Paris 0 9 * * MON-FRI send_report
//
// NAME is up to the first '='. JSON, when present, is the args: from the
// first '{' or '[' to the end, a JSON object or array. Of the words
// before it the last is KIND and the others are SPEC (see [NewSchedule]).
// The args are kept as given ([RawArgs]). opts are as for NewSchedule. Bad
// input is an *InputError that shows the form to use.
func ParseScheduleFlag(s string, opts *ScheduleOpts) (*Schedule, error) {
	const form = `write NAME=SPEC KIND [JSON], e.g. nightly=0 3 * * * cleanup {"days": 30}`
	name, rest, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return nil, &errandtype.InputError{Field: "schedule", Message: fmt.Sprintf("%q names no schedule; %s", s, form)}
	}
	var args json.RawMessage
	if i := strings.IndexAny(rest, "{["); i >= 0 {
		args = json.RawMessage(strings.TrimSpace(rest[i:]))
		rest = rest[:i]
		if !json.Valid(args) {
			return nil, &errandtype.InputError{Field: "schedule", Message: fmt.Sprintf("%q: the args %s are not valid JSON; %s", s, args, form)}
		}
	}
	words := strings.Fields(rest)
	if len(words) < 2 {
		return nil, &errandtype.InputError{Field: "schedule", Message: fmt.Sprintf("%q needs a spec and a kind; %s", s, form)}
	}
	spec, kind := strings.Join(words[:len(words)-1], " "), words[len(words)-1]
	sched, err := NewSchedule(name, spec, RawArgs{KindName: kind, JSON: args}, opts)
	if err != nil {
		if last := words[len(words)-1]; args == nil && json.Valid([]byte(last)) && len(words) > 2 {
			// "n=@hourly report 42": 42 was read as the kind.
			return nil, &errandtype.InputError{Field: "schedule", Message: fmt.Sprintf("%q: %s reads as JSON, but the args must be a JSON object or array, e.g. {\"n\": %s}; %s", s, last, last, form)}
		}
		return nil, fmt.Errorf("schedule %q: %w", s, err)
	}
	return sched, nil
}
