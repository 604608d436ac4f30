package errand_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// TestAESGCMRefusesBadKeys: a keyring that could not seal or open is an
// *InputError naming the key to fix.
func TestAESGCMRefusesBadKeys(t *testing.T) {
	good := errand.CodecKey{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)}
	for _, tc := range []struct {
		name string
		keys []errand.CodecKey
		want string
	}{
		{"none", nil, "at least one key"},
		{"short secret", []errand.CodecKey{{ID: "k1", Secret: []byte("short")}}, "16, 24 or 32"},
		{"no id", []errand.CodecKey{{Secret: good.Secret}}, "Codec key 0 id"},
		{"id twice", []errand.CodecKey{good, good}, "given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := errand.AESGCM(tc.keys...)
			if !errors.Is(err, errandtype.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("AESGCM = %v; want an *InputError saying %q", err, tc.want)
			}
		})
	}
}

// TestAESGCMBindsWhatItSeals: a value opens only as what it was sealed as,
// with the key that sealed it.
func TestAESGCMBindsWhatItSeals(t *testing.T) {
	ring, err := errand.AESGCM(errand.CodecKey{ID: "k1", Secret: bytes.Repeat([]byte{1}, 16)})
	if err != nil {
		t.Fatal(err)
	}
	kid, ct, err := ring.Seal([]byte(`{"a":1}`), []byte("args"))
	if err != nil || kid != "k1" {
		t.Fatalf("Seal = %s, %v", kid, err)
	}
	if plain, err := ring.Open("k1", ct, []byte("args")); err != nil || string(plain) != `{"a":1}` {
		t.Fatalf("Open = %s, %v", plain, err)
	}
	if _, err := ring.Open("k1", ct, []byte("output")); !errors.Is(err, errand.ErrSealBroken) {
		t.Fatalf("Open as another field = %v; want ErrSealBroken", err)
	}
	if _, err := ring.Open("k9", ct, []byte("args")); !errors.Is(err, errand.ErrCodecKeyMissing) {
		t.Fatalf("Open with an unknown key = %v; want ErrCodecKeyMissing", err)
	}
}

// TestReadCodecKeys: the keys file keeps its order (the first seals) and
// says which line to fix.
func TestReadCodecKeys(t *testing.T) {
	keys, err := errand.ReadCodecKeys(strings.NewReader("# rotated 2026-12\nk2 = AgICAgICAgICAgICAgICAg==\n\nk1=AQEBAQEBAQEBAQEBAQEBAQ==\n"))
	if err != nil || len(keys) != 2 || keys[0].ID != "k2" || keys[1].ID != "k1" || len(keys[0].Secret) != 16 {
		t.Fatalf("ReadCodecKeys = %+v, %v; want k2 then k1, 16 bytes each", keys, err)
	}
	for _, bad := range []string{"k1\n", "k1=not base64!\n"} {
		if _, err := errand.ReadCodecKeys(strings.NewReader("# header\n" + bad)); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("ReadCodecKeys(%q) = %v; want an error naming line 2", bad, err)
		}
	}
}

// TestSealedLookingArgsRefused: args that would read as a sealed value are
// refused at enqueue, with or without a codec, and nothing is written.
func TestSealedLookingArgsRefused(t *testing.T) {
	st := openStore(t, nil)
	c := newClient(t, st, nil)
	args := errand.RawArgs{KindName: "task", JSON: []byte(`{"ct":"AAAA","kid":"k1","$errand_enc":"v1"}`)}
	if _, err := c.Enqueue(t.Context(), args, nil); !errors.Is(err, errandtype.ErrInvalid) || !strings.Contains(err.Error(), "sealed value") {
		t.Fatalf("Enqueue = %v; want an *InputError about a sealed value", err)
	}
	if js, err := c.List(t.Context(), nil); err != nil || len(js) != 0 {
		t.Fatalf("List = %v, %v; want no job", js, err)
	}
}

// TestSealedSearchRefused: a client that seals args refuses a search of
// args or output, which would match nothing in the database, and says so.
func TestSealedSearchRefused(t *testing.T) {
	ring, err := errand.AESGCM(errand.CodecKey{ID: "k1", Secret: bytes.Repeat([]byte{1}, 16)})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, openStore(t, nil), &errand.Config{Codec: ring})
	for _, opts := range []*errand.ListOpts{{ArgsHas: []byte(`{"user":42}`)}, {OutputHas: []byte(`{"ok":true}`)}} {
		if _, err := c.List(t.Context(), opts); !errors.Is(err, errandtype.ErrInvalid) || !strings.Contains(err.Error(), "cannot search them") {
			t.Errorf("List(%s%s) = %v; want an *InputError saying sealed values cannot be searched", opts.ArgsHas, opts.OutputHas, err)
		}
	}
	if _, err := c.List(t.Context(), &errand.ListOpts{Tags: []string{"t"}}); err != nil {
		t.Errorf("a tag search: %v", err)
	}
}

// TestRedactSealed: every sealed value inside a document, at any depth,
// becomes the key it needs; a document without one is kept byte for byte.
func TestRedactSealed(t *testing.T) {
	sealed := `{"$errand_enc":"v1","kid":"k1","ct":"AAAA"}`
	for _, tc := range []struct{ in, want string }{
		{`{"a": 1}`, `{"a": 1}`},
		{sealed, `"encrypted with key k1"`},
		{`{"old_args":` + sealed + `,"n":2}`, `{"n":2,"old_args":"encrypted with key k1"}`},
		{`[1,{"x":[` + sealed + `]}]`, `[1,{"x":["encrypted with key k1"]}]`},
		{`{"note":"$errand_enc"}`, `{"note":"$errand_enc"}`},
	} {
		if got := string(errand.RedactSealed([]byte(tc.in))); got != tc.want {
			t.Errorf("RedactSealed(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
