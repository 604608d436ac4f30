package errand

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// A Codec encrypts what a job carries (its args, its output, its
// checkpoint) before errand stores it, and decrypts it when a worker claims
// the job or a reader with the codec reads it (see [Config].Codec and
// docs/encryption.md). [AESGCM] is errand's.
type Codec interface {
	// Seal encrypts plaintext, bound to aad, and returns the id of the key
	// it used with the ciphertext.
	Seal(plaintext, aad []byte) (keyID string, ciphertext []byte, err error)
	// Open decrypts ciphertext that Seal returned with keyID, bound to aad.
	// It returns an error wrapping ErrCodecKeyMissing when it holds no key
	// keyID, and one wrapping ErrSealBroken when the ciphertext does not
	// open (altered, or sealed with other key material under that id).
	Open(keyID string, ciphertext, aad []byte) ([]byte, error)
}

var (
	// ErrCodecKeyMissing: a value is sealed with a key the reader does not
	// hold, or the reader has no codec at all.
	ErrCodecKeyMissing = errors.New("codec key missing")
	// ErrSealBroken: a sealed value failed authentication.
	ErrSealBroken = errors.New("sealed value does not open")
)

// Classes of an attempt given back because its job's sealed values did not
// open. Neither counts an attempt: the job waits CodecRetryDelay for a
// worker that can open it, and nothing is dead-lettered for want of a key.
const (
	// ClassCodecKeyMissing: the worker has no codec or not the job's key.
	ClassCodecKeyMissing = "codec_key_missing"
	// ClassSealBroken: the worker holds the key id, but the value fails
	// authentication: altered at rest, or a key with that id but other
	// bytes.
	ClassSealBroken = "seal_broken"
)

// CodecRetryDelay is how long a job whose sealed values a worker could not
// open waits before it is claimable again.
const CodecRetryDelay = time.Minute

// SealedVersion is the value of the field that marks a sealed JSON value:
// {"$errand_enc": "v1", "kid": KEY ID, "ct": BASE64 of nonce and ciphertext}.
const SealedVersion = "v1"

// sealedMark is the field that marks a sealed value; reserved at the top
// level of args.
const sealedMark = errandstore.SealedMark

// sealedEnvelope is the stored form of a sealed value: a JSON object, so
// that a jsonb column keeps it, and errand may set fields beside it (a
// workflow's "workflow").
type sealedEnvelope struct {
	Version    string `json:"$errand_enc"`
	KeyID      string `json:"kid"`
	Ciphertext []byte `json:"ct"`
}

// SealedKeyID returns the id of the key that sealed raw, and whether raw
// is a sealed value: what a reader without the key shows instead of it
// ("encrypted with key k1").
func SealedKeyID(raw json.RawMessage) (string, bool) {
	env, _, ok := parseSealed(raw)
	if !ok {
		return "", false
	}
	return env.KeyID, true
}

// parseSealed returns the envelope of raw and the fields set beside it,
// when raw is a sealed value. Values without the mark cost one scan.
func parseSealed(raw []byte) (*sealedEnvelope, map[string]json.RawMessage, bool) {
	if !bytes.Contains(raw, []byte(`"`+sealedMark+`"`)) {
		return nil, nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, nil, false
	}
	var env sealedEnvelope
	if json.Unmarshal(raw, &env) != nil || env.Version != SealedVersion || env.KeyID == "" {
		return nil, nil, false
	}
	for _, f := range []string{sealedMark, "kid", "ct"} {
		delete(m, f)
	}
	return &env, m, true
}

// SealError is why a sealed value did not open: the field, the key that
// sealed it, and an error wrapping ErrCodecKeyMissing or ErrSealBroken.
type SealError struct {
	Field string
	KeyID string
	Err   error
}

func (e *SealError) Error() string {
	if errors.Is(e.Err, ErrCodecKeyMissing) {
		return fmt.Sprintf("%s sealed with key %s, which this process's codec does not hold; give it that key (Config.Codec, or ERRAND_CODEC_KEYS_FILE for the errand command)", e.Field, e.KeyID)
	}
	return fmt.Sprintf("%s sealed with key %s does not open (%v); it was altered at rest, or this process's key %s is not the one that sealed it", e.Field, e.KeyID, e.Err, e.KeyID)
}

func (e *SealError) Unwrap() error { return e.Err }

// class is the class of an attempt given back for e.
func (e *SealError) class() string {
	if errors.Is(e.Err, ErrCodecKeyMissing) {
		return ClassCodecKeyMissing
	}
	return ClassSealBroken
}

// seal returns plain sealed by the client's codec, as field; plain itself
// without a codec.
func (c *engine) seal(field string, plain []byte) ([]byte, error) {
	if c.codec == nil {
		return plain, nil
	}
	kid, ct, err := c.codec.Seal(plain, []byte(field))
	if err != nil {
		return nil, fmt.Errorf("seal %s: %w", field, err)
	}
	return json.Marshal(&sealedEnvelope{Version: SealedVersion, KeyID: kid, Ciphertext: ct})
}

// sealArgs seals b, a job's checked args, and checks that the sealed form
// still fits the bound of args.
func (c *engine) sealArgs(b []byte) ([]byte, error) {
	if env, _, ok := parseSealed(b); ok {
		return nil, &errandtype.InputError{Field: "args", Message: fmt.Sprintf("are a sealed value (key %s); pass the plain args, and errand seals them with the client's codec", env.KeyID)}
	}
	sealed, err := c.seal("args", b)
	if err != nil {
		return nil, err
	}
	if len(sealed) > errandstore.MaxArgsBytes {
		return nil, &errandtype.InputError{Field: "args", Message: fmt.Sprintf("are %d bytes once sealed; keep sealed args under %d bytes (about %d plain) and pass ids, not documents", len(sealed), errandstore.MaxArgsBytes, errandstore.MaxArgsBytes*3/4-64)}
	}
	return sealed, nil
}

// open returns raw opened, when it is a sealed value of field, with the
// fields errand set beside the envelope merged back; raw as it is
// otherwise. Its error is a *SealError.
func (c *engine) open(field string, raw []byte) ([]byte, error) {
	env, extra, ok := parseSealed(raw)
	if !ok {
		return raw, nil
	}
	if c.codec == nil {
		return nil, &SealError{Field: field, KeyID: env.KeyID, Err: ErrCodecKeyMissing}
	}
	plain, err := c.codec.Open(env.KeyID, env.Ciphertext, []byte(field))
	if err != nil {
		return nil, &SealError{Field: field, KeyID: env.KeyID, Err: err}
	}
	for name, v := range extra {
		if plain, err = errandstore.SetArgsField(plain, name, v); err != nil {
			return nil, &SealError{Field: field, KeyID: env.KeyID, Err: fmt.Errorf("%w: field %s set beside sealed %s that are not an object", ErrSealBroken, name, field)}
		}
	}
	return plain, nil
}

// openJob opens job's sealed args, output and checkpoint in place, and the
// sealed outputs of a workflow step's dependencies in its args. It stops
// at the first that does not open, with a *SealError.
func (c *engine) openJob(job *errandtype.Job) error {
	var err error
	if job.Args, err = c.open("args", job.Args); err != nil {
		return err
	}
	if job.WorkflowID != nil {
		if job.Args, err = c.openWorkflowOutputs(job.Args); err != nil {
			return err
		}
	}
	if job.Output, err = c.open("output", job.Output); err != nil {
		return err
	}
	job.Progress, err = c.open("progress", job.Progress)
	return err
}

// openForReader opens what it can of jobs for a reader (Get, List, a
// remote worker's Claim): a value the codec cannot open stays sealed,
// for the reader to show as such.
func (c *engine) openForReader(jobs ...*errandtype.Job) {
	for _, j := range jobs {
		if a, err := c.open("args", j.Args); err == nil {
			j.Args = a
			if j.WorkflowID != nil {
				if a, err := c.openWorkflowOutputs(j.Args); err == nil {
					j.Args = a
				}
			}
		}
		if o, err := c.open("output", j.Output); err == nil {
			j.Output = o
		}
		if p, err := c.open("progress", j.Progress); err == nil {
			j.Progress = p
		}
	}
}

// openWorkflowForReader opens what it can of the outputs of ws' steps.
func (c *engine) openWorkflowForReader(ws ...*errandtype.Workflow) {
	for _, w := range ws {
		for i := range w.Steps {
			if o, err := c.open("output", w.Steps[i].Output); err == nil {
				w.Steps[i].Output = o
			}
		}
	}
}

// openAuditForReader opens what it can of the args kept in rs' details
// (a replay's old and new args); the others stay sealed.
func (c *engine) openAuditForReader(rs []errandtype.AuditRecord) {
	for i := range rs {
		d := rs[i].Details
		if rs[i].Action != errandtype.AuditReplayArgs || !bytes.Contains(d, []byte(`"`+sealedMark+`"`)) {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(d, &m) != nil {
			continue
		}
		for _, f := range []string{"old_args", "new_args"} {
			if plain, err := c.open("args", m[f]); err == nil && m[f] != nil {
				m[f] = plain
			}
		}
		if b, err := json.Marshal(m); err == nil {
			rs[i].Details = b
		}
	}
}

// RedactSealed returns raw with each sealed value inside it (see
// [SealedKeyID]) replaced by the string "encrypted with key K": what a
// reader without the key shows of a document holding sealed values, such
// as an audit record's details. raw is returned as it is when it holds
// none.
func RedactSealed(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"`+sealedMark+`"`)) {
		return raw
	}
	if kid, ok := SealedKeyID(raw); ok {
		b, _ := json.Marshal("encrypted with key " + kid)
		return b
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil {
		for k, v := range m {
			m[k] = RedactSealed(v)
		}
		if b, err := json.Marshal(m); err == nil {
			return b
		}
		return raw
	}
	var a []json.RawMessage
	if json.Unmarshal(raw, &a) == nil {
		for i, v := range a {
			a[i] = RedactSealed(v)
		}
		if b, err := json.Marshal(a); err == nil {
			return b
		}
	}
	return raw
}

// openWorkflowOutputs opens the sealed outputs that a workflow's store set
// in the field "workflow" of args.
func (c *engine) openWorkflowOutputs(args []byte) ([]byte, error) {
	if !bytes.Contains(args, []byte(`"`+sealedMark+`"`)) {
		return args, nil
	}
	var m map[string]json.RawMessage
	var wc errandstore.WorkflowContext
	if json.Unmarshal(args, &m) != nil || json.Unmarshal(m["workflow"], &wc) != nil {
		return args, nil
	}
	for step, out := range wc.Outputs {
		plain, err := c.open("output", out)
		if err != nil {
			return nil, err
		}
		wc.Outputs[step] = plain
	}
	return errandstore.SetArgsField(args, "workflow", &wc)
}

// CodecKey is one key of an [AESGCM] keyring.
type CodecKey struct {
	// ID names the key in every value it seals, so that the keyring finds
	// it again after a rotation: a short name such as "k2" or "2026-12".
	ID string
	// Secret is 16, 24 or 32 bytes (AES-128, -192, -256).
	Secret []byte
}

// AESGCMKeyring is a [Codec] sealing with AES-GCM under the first of its
// keys and opening with any of them.
type AESGCMKeyring struct {
	first string
	aeads map[string]cipher.AEAD
}

// AESGCM returns a codec that seals with keys[0] and opens values sealed
// with any of keys. To rotate, put the new key first and keep the old ones
// until no stored value needs them.
func AESGCM(keys ...CodecKey) (*AESGCMKeyring, error) {
	if len(keys) == 0 {
		return nil, &errandtype.InputError{Field: "Codec", Message: "AESGCM needs at least one key; the first seals"}
	}
	k := &AESGCMKeyring{first: keys[0].ID, aeads: make(map[string]cipher.AEAD, len(keys))}
	for i, key := range keys {
		field := fmt.Sprintf("Codec key %d", i)
		if err := errandstore.CheckName(field+" id", key.ID); err != nil {
			return nil, err
		}
		if k.aeads[key.ID] != nil {
			return nil, &errandtype.InputError{Field: field + " id", Message: fmt.Sprintf("%q is given twice; give each key its own id", key.ID)}
		}
		block, err := aes.NewCipher(key.Secret)
		if err != nil {
			return nil, &errandtype.InputError{Field: field + " secret", Message: fmt.Sprintf("is %d bytes; give 16, 24 or 32 random bytes", len(key.Secret))}
		}
		if k.aeads[key.ID], err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// Seal implements [Codec]: a random nonce, then the ciphertext and tag.
func (k *AESGCMKeyring) Seal(plaintext, aad []byte) (string, []byte, error) {
	aead := k.aeads[k.first]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, err
	}
	return k.first, aead.Seal(nonce, nonce, plaintext, aad), nil
}

// Open implements [Codec].
func (k *AESGCMKeyring) Open(keyID string, ciphertext, aad []byte) ([]byte, error) {
	aead := k.aeads[keyID]
	if aead == nil {
		return nil, fmt.Errorf("key %s: %w", keyID, ErrCodecKeyMissing)
	}
	if len(ciphertext) < aead.NonceSize() {
		return nil, fmt.Errorf("ciphertext shorter than a nonce: %w", ErrSealBroken)
	}
	n := aead.NonceSize()
	plain, err := aead.Open(nil, ciphertext[:n], ciphertext[n:], aad)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrSealBroken)
	}
	return plain, nil
}

// ReadCodecKeys reads an [AESGCM] keyring's keys from r, one a line as
// ID=BASE64 (standard encoding of 16, 24 or 32 bytes), the sealing key
// first; blank lines and lines starting with # are skipped.
func ReadCodecKeys(r io.Reader) ([]CodecKey, error) {
	var keys []CodecKey
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, b64, ok := strings.Cut(line, "=")
		if !ok {
			return nil, &errandtype.InputError{Field: fmt.Sprintf("codec keys line %d", n), Message: "is not ID=BASE64; write one key a line, such as k1=" + strings.Repeat("A", 43) + "="}
		}
		secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			return nil, &errandtype.InputError{Field: fmt.Sprintf("codec keys line %d", n), Message: "the secret is not standard base64; make one with: head -c 32 /dev/urandom | base64"}
		}
		keys = append(keys, CodecKey{ID: strings.TrimSpace(id), Secret: secret})
	}
	return keys, sc.Err()
}
