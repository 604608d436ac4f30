package errandtype

import "fmt"

// DebounceMode says which enqueue of a debounce key wins while a job of
// the key is pending.
type DebounceMode uint8

const (
	// DebounceLastWins (debounce): a new enqueue replaces the pending
	// job's args with its own and pushes its start to a window from now,
	// so a burst runs once, with the newest args, after it goes quiet.
	DebounceLastWins DebounceMode = iota
	// DebounceFirstWins (throttle): a new enqueue within a window of the
	// key's last job is absorbed by that job, which keeps its args.
	DebounceFirstWins
)

// String returns the mode's name, as the CLI and the HTTP API spell it.
func (m DebounceMode) String() string {
	switch m {
	case DebounceLastWins:
		return "last_wins"
	case DebounceFirstWins:
		return "first_wins"
	}
	return fmt.Sprintf("DebounceMode(%d)", uint8(m))
}

// ParseDebounceMode reads a mode's name; empty is DebounceLastWins.
func ParseDebounceMode(s string) (DebounceMode, error) {
	switch s {
	case "", "last_wins":
		return DebounceLastWins, nil
	case "first_wins":
		return DebounceFirstWins, nil
	}
	return 0, &InputError{Field: "debounce_mode", Message: fmt.Sprintf("%q is not a mode; use last_wins (debounce) or first_wins (throttle)", s)}
}

// MarshalText implements encoding.TextMarshaler: the mode's String.
func (m DebounceMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseDebounceMode.
func (m *DebounceMode) UnmarshalText(b []byte) error {
	v, err := ParseDebounceMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
