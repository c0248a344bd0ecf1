package strictjson

import "github.com/svcdev/svc/internal/bytememo"

// walkedArrays keeps the top-level arrays of the bodies Walk found valid (a request's messages or
// input items, its tools) as far as their last element, with the deepest nesting met in them. An
// agent sends its tools and its whole conversation again on every turn, and walking them again was
// most of what Walk cost a turn: a body whose array begins with the bytes of one kept, up to an
// element's end, is walked from there. The rules Walk applies inside a top-level member's value (valid
// JSON, no name written twice in an object, the bound on nesting) do not depend on what is around it,
// so those bytes are as valid there as they were before. Finding them costs no walk either
// (bytememo.Prefixed compares bytes). TestWalkRemembersArrays and FuzzWalk hold the walk with and
// without them together.
var walkedArrays = newWalkedArrays()

func newWalkedArrays() *bytememo.Prefixed[int] {
	return bytememo.NewPrefixed[int](walkedEntries, walkedBytes, walkedPerHead)
}

const (
	walkedEntries = 256
	walkedBytes   = 16 << 20
	walkedPerHead = 16
	// minWalked is the size of the smallest array kept: below it, walking costs less than looking.
	minWalked = 512
)

// anyArray takes any array kept.
func anyArray(int) bool { return true }
