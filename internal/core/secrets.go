package core

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Prefixes of generated secrets: readable, and recognisable by secret scanners.
const (
	KeyPrefix   = "sk-ep-"
	TokenPrefix = "svc_at_"
	// KeyDisplayLen is how much of a key's plaintext is kept for display.
	KeyDisplayLen = 12
)

// randomBase62 returns n characters drawn uniformly from base62 (rejection sampling keeps it unbiased);
// 43 characters carry 256 bits.
func randomBase62(n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/2)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the platform is broken; nothing safe to do
		}
		for _, b := range buf {
			if b < 248 { // 248 = 4*62: values above would bias the draw
				out = append(out, base62[b%62])
				if len(out) == n {
					break
				}
			}
		}
	}
	return string(out)
}

// NewKeyPlaintext returns a fresh API key: the prefix and 256 random bits.
func NewKeyPlaintext() string { return KeyPrefix + randomBase62(43) }

// NewToken returns a fresh bearer token for the management API.
func NewToken() string { return TokenPrefix + randomBase62(43) }

// HashSecret is how keys and tokens are stored: SHA-256 suffices because they carry 256 random bits.
func HashSecret(plaintext string) [32]byte { return edgemodel.HashSecret(plaintext) }

// sameHash compares two stored hashes in constant time.
func sameHash(a []byte, b [32]byte) bool { return subtle.ConstantTimeCompare(a, b[:]) == 1 }

// newID returns a prefixed random identifier; the time prefix keeps ids roughly sortable by creation.
func newID(prefix string) string {
	return prefix + "_" + fmt.Sprintf("%011x", time.Now().UnixMilli()) + randomBase62(10)
}

// NewUUID returns a random (version 4) UUID, the form of job ids.
func NewUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
