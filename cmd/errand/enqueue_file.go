package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"unicode/utf8"
)

// readEnqueueFile is the --file of errand batch enqueue and errand
// workflow enqueue: it decodes FILE (- for standard input), one JSON object
// without unknown fields, into req. pos are the arguments after enqueue,
// which must be none; what names the object and its help topic ("batch"),
// endpoint the API path that takes the same JSON.
func readEnqueueFile(pos []string, file, what, endpoint string, req any) error {
	if len(pos) > 0 {
		return usagef("unexpected argument %q; give the %s with --file FILE.json", pos[0], what)
	}
	if file == "" {
		return usagef("give --file FILE.json (or --file - for standard input): the %s as POST %s takes it", what, endpoint)
	}
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return usagef("--file: %v", err)
	}
	// The decoder would turn invalid UTF-8 into U+FFFD unseen, and a
	// kind, queue or id would be stored other than written.
	if !utf8.Valid(b) {
		return usagef("--file %s is not valid UTF-8; save the %s as UTF-8", file, what)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return usagef("--file %s is not a %s: %v; see errand help %s", file, what, err, what)
	}
	if _, err := dec.Token(); err != io.EOF {
		return usagef("--file %s holds more than one JSON value; give one %s object", file, what)
	}
	return nil
}
