package errandstore

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/plainjson"
)

// CheckMetadata returns a job's metadata as the stores keep it: compact,
// its numbers written as PostgreSQL writes them, nil for none (empty, null
// or {}). It refuses anything but a JSON object of at most
// MaxMetadataBytes.
func CheckMetadata(m json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(m)) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, m); err != nil {
		return nil, &errandtype.InputError{Field: "metadata", Message: "is not valid JSON; give an object such as {\"traceparent\": \"00-...\"}"}
	}
	b := buf.Bytes()
	if string(b) == "null" || string(b) == "{}" {
		return nil, nil
	}
	if err := checkMetadataText(b); err != nil {
		return nil, err
	}
	rewrite, err := plainjson.Check("metadata", b, MaxMetadataBytes)
	if err != nil {
		return nil, err
	}
	if rewrite {
		b = plainjson.Plain(b)
	}
	return json.RawMessage(b), nil
}

// checkMetadataText checks what Validate requires of metadata a store is
// given: nil, or a JSON object within MaxMetadataBytes.
func checkMetadataText(m json.RawMessage) error {
	if m == nil {
		return nil
	}
	if len(m) > MaxMetadataBytes {
		return &errandtype.InputError{Field: "metadata", Message: fmt.Sprintf("is %d bytes; keep metadata under %d bytes: ids and a trace context, not documents", len(m), MaxMetadataBytes)}
	}
	if !json.Valid(m) {
		return &errandtype.InputError{Field: "metadata", Message: "is not valid JSON; give an object such as {\"traceparent\": \"00-...\"}"}
	}
	if b := bytes.TrimLeft(m, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return &errandtype.InputError{Field: "metadata", Message: "is not a JSON object; give an object such as {\"traceparent\": \"00-...\"}"}
	}
	return nil
}
