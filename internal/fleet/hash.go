package fleet

import (
	"encoding/binary"
	"math/bits"
)

// BlockSize is the length in bytes of the prompt blocks hashed as a chain. vLLM caches 16-token
// blocks (about 64 bytes of English); a coarser block keeps the index small and a lookup short while
// still telling a growing session from a new one.
const BlockSize = 256

// Seeds and multipliers of the block hash; fixed, so that every edge computes the same chain and
// rendezvous hashing sends a new prefix to the same replica from any process.
const (
	k0 = 0x9e3779b97f4a7c15
	k1 = 0xbf58476d1ce4e5b9
	k2 = 0x94d049bb133111eb
)

// mix64 is splitmix64's finaliser: every input bit reaches every output bit.
func mix64(h uint64) uint64 {
	h ^= h >> 30
	h *= k1
	h ^= h >> 27
	h *= k2
	h ^= h >> 31
	return h
}

// hashBytes hashes b on top of h, eight bytes at a time.
func hashBytes(h uint64, b []byte) uint64 {
	n := uint64(len(b))
	for len(b) >= 8 {
		h = bits.RotateLeft64(h^binary.LittleEndian.Uint64(b)*k1, 31) * k2
		b = b[8:]
	}
	var tail uint64
	for i := len(b) - 1; i >= 0; i-- {
		tail = tail<<8 | uint64(b[i])
	}
	h = bits.RotateLeft64(h^tail*k1, 31) * k2
	return mix64(h ^ n)
}

// AppendBlocks appends to dst the chain hashes of prompt's full blocks of BlockSize bytes: each
// block's hash includes the previous one's, so equal hashes at position i mean equal prompts up to the
// end of block i. A prompt shorter than one block gets one hash of all of it, so that it still has a
// first block for rendezvous hashing. seed separates caches that never share entries (an adapter's
// KV cache is not its base model's): pass the adapter name, or "" for the base model. With dst's
// capacity large enough it does not allocate.
func AppendBlocks(dst []uint64, seed string, prompt []byte) []uint64 {
	h := hashString(k0, seed)
	if len(prompt) < BlockSize {
		if len(prompt) == 0 {
			return dst
		}
		return append(dst, nonZero(hashBytes(h, prompt)))
	}
	for len(prompt) >= BlockSize {
		h = nonZero(hashBytes(h, prompt[:BlockSize]))
		dst = append(dst, h)
		prompt = prompt[BlockSize:]
	}
	return dst
}

// hashString hashes s on top of h without converting it to a byte slice.
func hashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 0x100000001b3
	}
	return mix64(h ^ uint64(len(s)))
}

// nonZero keeps 0 free to mean an empty slot of the index.
func nonZero(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}
