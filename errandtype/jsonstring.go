package errandtype

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
)

// UnmarshalJSONString reads b, a JSON string, with parse, for the
// UnmarshalJSON method of T, a type whose JSON is a string (a Duration, a
// time). Its errors are *json.UnmarshalTypeError naming T, to which a
// decoder adds the field's name, and the value it refused.
func UnmarshalJSONString[T, V any](b []byte, parse func(string) (V, error)) (V, error) {
	var zero V
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		value := "JSON"
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			value = te.Value
		}
		return zero, &json.UnmarshalTypeError{Value: value, Type: reflect.TypeFor[T]()}
	}
	v, err := parse(s)
	if err != nil {
		return zero, &json.UnmarshalTypeError{Value: "string " + strconv.Quote(s), Type: reflect.TypeFor[T]()}
	}
	return v, nil
}
