package fleet

import "math/bits"

// placeKV is affinity's pick for a conversation's next turn where the replicas publish KV events
// (Config.KV): each candidate is credited with the tokens of the conversation's last prompt it holds
// now as a leading run (exact, evictions included), and the candidate within the load bound (one call
// above it, as place lets any replica) holding the most wins (kvindex.Most, a binary search over the
// prompt's blocks); ties go by the conversation's rendezvous weight, so that every edge, seeing the same
// events, places it alike (a tie broken by load instead placed turns no better on the simulator: 0.41-0.42x
// the ideal cache against 0.41-0.44x, four runs each, and load differs per edge). nil when the session's last prompt is not known (not yet tokenized) or a candidate's
// state is not (no event yet, a replica quiet for kvindex.StaleAfter after calls): the routed chains
// decide then. prefill is the blocks the winner must prefill.
func (f *Fleet) placeKV(cand uint64, limit int, req *Request) (r *Replica, reason Reason, prefill int) {
	var within uint64 // the index slots of the candidates within the load bound
	for c := cand; c != 0; c &= c - 1 {
		x := f.replicas[bits.TrailingZeros64(c)]
		if x.kvSlot < 0 {
			return nil, 0, -1
		}
		if x.inflight <= limit {
			within |= 1 << x.kvSlot
		}
	}
	most, run, known, tokens, size, ok := f.cfg.KV.Most(req.Session, within)
	if !ok || known != within || within == 0 || tokens == 0 {
		return nil, 0, -1
	}
	var best *Replica
	bestW := uint64(0)
	for c := cand; c != 0; c &= c - 1 {
		x := f.replicas[bits.TrailingZeros64(c)]
		if most&(1<<x.kvSlot) == 0 {
			continue
		}
		if w := mix64(req.Session ^ x.seed); best == nil || w > bestW {
			best, bestW = x, w
		}
	}
	n := len(req.Blocks) + 1
	credit := min(credit(run, tokens, size), n-1)
	reason = ReasonLoad
	if credit > 0 {
		reason = ReasonAffinity
	}
	return best, reason, n - credit
}

// credit converts tokens held into the picker's blocks of BlockSize bytes, by the bytes a token took
// in the prompt they came from (size, its length as hashed; 4 bytes a token when not given).
func credit(held, tokens, size int) int {
	if held <= 0 {
		return 0
	}
	if size <= 0 || tokens <= 0 {
		return held * 4 / BlockSize
	}
	return int(int64(held) * int64(size) / int64(tokens) / BlockSize)
}
