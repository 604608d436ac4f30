package jobjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"time"
)

// Time is a time in a request body: RFC 3339 text, such as
// "2026-12-04T10:00:00Z". Its decoding errors are *json.UnmarshalTypeError,
// to which a decoder adds the field's name, where time.Time's name no
// field.
type Time struct{ time.Time }

// UnmarshalJSON reads RFC 3339 text; null leaves t as it is.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		value := "JSON"
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			value = te.Value
		}
		return &json.UnmarshalTypeError{Value: value, Type: reflect.TypeFor[Time]()}
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: "string " + strconv.Quote(s), Type: reflect.TypeFor[Time]()}
	}
	t.Time = v
	return nil
}
