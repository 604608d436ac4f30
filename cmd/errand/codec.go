package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/errandhq/errand"
)

// codecKeysEnv names the keys file of every command that opens a client,
// so that the CLI reads sealed jobs where the key is present.
const codecKeysEnv = "ERRAND_CODEC_KEYS_FILE"

// codecFlag is --codec-keys-file, of the commands that run or serve jobs.
func codecFlag(fs *flag.FlagSet) *string {
	return fs.String("codec-keys-file", "", "seal and open job args, outputs and checkpoints with the AES-GCM keys in `PATH`: lines of ID=BASE64, the sealing key first (default $"+codecKeysEnv+")")
}

// loadCodec returns the codec of the keys file at path, or at
// $ERRAND_CODEC_KEYS_FILE when path is empty; nil when neither names one.
func loadCodec(path string) (errand.Codec, error) {
	if path == "" {
		path = os.Getenv(codecKeysEnv)
	}
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("codec keys: %w; give --codec-keys-file (or %s) a readable file", err, codecKeysEnv)
	}
	defer f.Close()
	keys, err := errand.ReadCodecKeys(f)
	if err == nil {
		var ring *errand.AESGCMKeyring
		if ring, err = errand.AESGCM(keys...); err == nil {
			return ring, nil
		}
	}
	return nil, usagef("codec keys file %s: %v", path, err)
}
