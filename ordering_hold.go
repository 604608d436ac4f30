package errand

import (
	"fmt"
	"strings"

	"github.com/errandhq/errand/errandtype"
)

// OrderingOnDead says what a job that ends dead does to the jobs behind it
// of its ordering key: release them (the default, so that one poison job
// does not stall its key) or hold them until an operator replays or
// cancels it (so that nothing of the key runs out of order: a ledger's
// entries, a customer's state changes).
type OrderingOnDead uint8

const (
	// OrderingOnDeadDefault takes the kind's choice ([KindOpts]), else
	// OrderingReleaseOnDead.
	OrderingOnDeadDefault OrderingOnDead = iota
	// OrderingReleaseOnDead: a dead job holds nothing back; the next job of
	// its key runs.
	OrderingReleaseOnDead
	// OrderingHoldOnDead: a dead job holds its ordering key, as if it were
	// still waiting first in line, until it is replayed (it then runs
	// before the rest) or cancelled (which releases the key). Retention
	// that prunes the dead job releases the key too.
	OrderingHoldOnDead
)

// String returns "default", "release" or "hold".
func (o OrderingOnDead) String() string {
	switch o {
	case OrderingOnDeadDefault:
		return "default"
	case OrderingReleaseOnDead:
		return "release"
	case OrderingHoldOnDead:
		return "hold"
	}
	return fmt.Sprintf("OrderingOnDead(%d)", uint8(o))
}

// ParseOrderingOnDead reads "release" or "hold" ("" and "default" are
// OrderingOnDeadDefault).
func ParseOrderingOnDead(s string) (OrderingOnDead, error) {
	switch strings.TrimSpace(s) {
	case "", "default":
		return OrderingOnDeadDefault, nil
	case "release":
		return OrderingReleaseOnDead, nil
	case "hold":
		return OrderingHoldOnDead, nil
	}
	return 0, &errandtype.InputError{Field: "ordering_on_dead", Message: fmt.Sprintf("%q is not a choice; use release or hold", s)}
}

// MarshalText implements encoding.TextMarshaler: the String.
func (o OrderingOnDead) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with
// ParseOrderingOnDead.
func (o *OrderingOnDead) UnmarshalText(b []byte) error {
	v, err := ParseOrderingOnDead(string(b))
	if err != nil {
		return err
	}
	*o = v
	return nil
}

// holds resolves o against the kind's choice: whether a dead job holds
// its ordering key.
func (o OrderingOnDead) holds(kindChoice OrderingOnDead) bool {
	if o == OrderingOnDeadDefault {
		o = kindChoice
	}
	return o == OrderingHoldOnDead
}
