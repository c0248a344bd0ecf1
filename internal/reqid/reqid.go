// Package reqid names requests: the caller's X-Request-Id when it is sane, else a new random id.
package reqid

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
)

// Header is the header that carries request ids, both ways.
const Header = "X-Request-Id"

// From keeps a caller's id when it is 1–128 printable ASCII characters, else makes a new one.
func From(given string) string {
	if n := len(given); n > 0 && n <= 128 {
		ok := true
		for i := 0; i < n; i++ {
			if c := given[i]; c < 0x21 || c > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return given
		}
	}
	return New()
}

// New returns a new random id. Ids need to be unique, not secret: the runtime's fast generator
// (math/rand/v2) is enough, and it costs no system call per request.
func New() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return "req_" + hex.EncodeToString(b[:])
}
