package errandstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// AuditListParams filter and page the audit. Zero fields do not filter.
type AuditListParams struct {
	JobID  string
	Action errandtype.AuditAction
	// Since and Until keep records with Since <= at < Until.
	Since time.Time
	Until time.Time
	// BeforeID pages: only records with a smaller id. Pass the last id of
	// a page to get the next one.
	BeforeID int64
	// Limit bounds the page: 0 means DefaultAuditLimit; more than
	// MaxAuditLimit is clamped to it.
	Limit int
}

// Validate checks the times of a listing: a store keeps none outside the
// years 1 to 9999, and PostgreSQL refuses to compare with one.
func (p *AuditListParams) Validate() error {
	if err := checkTime("since", p.Since); err != nil {
		return err
	}
	return checkTime("until", p.Until)
}

// Bounds of one page of the audit.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// AuditLimit is the page size a store uses for limit: DefaultAuditLimit
// for 0, clamped to 1..MaxAuditLimit.
func AuditLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultAuditLimit
	case limit > MaxAuditLimit:
		return MaxAuditLimit
	}
	return limit
}

// ReplayArgsDetails is the details of an [errandtype.AuditReplayArgs] record: the
// job's args before and after the replay.
func ReplayArgsDetails(oldArgs, newArgs json.RawMessage) json.RawMessage {
	return mustJSON(struct {
		OldArgs json.RawMessage `json:"old_args"`
		NewArgs json.RawMessage `json:"new_args"`
	}{CompactJSON(oldArgs), CompactJSON(newArgs)})
}

// compactJSON returns b without insignificant space, so that every store
// keeps a document inside another alike (PostgreSQL's jsonb would
// normalise it anyway).
func CompactJSON(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("errand: encode audit details: %v", err))
	}
	return b
}
