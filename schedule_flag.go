package errand

import (
	"encoding/json"

	"github.com/errandhq/errand/internal/schedule"
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
	return schedule.ParseFlag(s, func(name, spec, kind string, args json.RawMessage) (*Schedule, error) {
		return NewSchedule(name, spec, RawArgs{KindName: kind, JSON: args}, opts)
	})
}
