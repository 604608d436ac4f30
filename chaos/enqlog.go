package chaos

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// logEntry is one enqueue the store acknowledged. Only acknowledged enqueues
// are written, each fsynced before it counts, so the log is what errand owes.
type logEntry struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	MaxAttempts int    `json:"max_attempts"`
	Digest      string `json:"digest"`
	Via         string `json:"via"`
	// Scheduled marks a job enqueued to run after the run ends: it may
	// legitimately still be waiting.
	Scheduled bool `json:"scheduled,omitempty"`
	// Poison marks a job whose every delivery is refused.
	Poison bool `json:"poison,omitempty"`
}

type enqueueLog struct {
	mu sync.Mutex
	f  *os.File
	n  int
}

func createLog(path string) (*enqueueLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create the enqueue log: %w", err)
	}
	return &enqueueLog{f: f}, nil
}

// append writes e and fsyncs it; only then may the enqueue be counted.
func (l *enqueueLog) append(e logEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write the enqueue log: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("fsync the enqueue log: %w", err)
	}
	l.n++
	return nil
}

func (l *enqueueLog) close() error { return l.f.Close() }

// readLog reads the log back, as the invariants see it: the file, not memory.
// A job id logged twice (a duplicate enqueue) is one entry.
func readLog(path string) (map[string]logEntry, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	out := map[string]logEntry{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e logEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, nil, fmt.Errorf("enqueue log %s: %w", path, err)
		}
		if _, ok := out[e.ID]; !ok {
			order = append(order, e.ID)
		}
		out[e.ID] = e
	}
	return out, order, sc.Err()
}

// digest is the SHA-256 of args in a canonical form (keys sorted, no
// spaces), so that a store that normalizes JSON (jsonb) digests the same.
func digest(args json.RawMessage) string {
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		sum := sha256.Sum256(args)
		return hex.EncodeToString(sum[:])
	}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
