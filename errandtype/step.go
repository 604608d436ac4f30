package errandtype

import (
	"encoding/json"
	"time"
)

// Step is one recorded step of a durable handler (see errand.Step): work
// that the job's later attempts find done and do not run again.
type Step struct {
	// Index is the step's place in the handler's order, from 0.
	Index int    `json:"index"`
	Name  string `json:"name"`
	// Result is the step's value as JSON; empty when the step ended with
	// Error.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the permanent error the step ended with, which every later
	// attempt gets back from it.
	Error string `json:"error,omitempty"`
	// Attempt is the job's attempt that recorded the step.
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
}

// Signal is a value sent to a job (errand.WaitFor reads it).
type Signal struct {
	Name   string          `json:"name"`
	Value  json.RawMessage `json:"value"`
	SentAt time.Time       `json:"sent_at"`
}

// Event is a value a job's handler published under a key (errand.SetEvent).
type Event struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
	SetAt time.Time       `json:"set_at"`
}

// Chunk is one write to a job's output stream (errand.Stream).
type Chunk struct {
	Index int       `json:"index"`
	Data  string    `json:"data"`
	At    time.Time `json:"at"`
}
