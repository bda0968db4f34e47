package speculative

import (
	"context"
	"slices"
)

// PromptLookup is transformers' PromptLookupCandidateGenerator: the
// candidates continue the earliest earlier occurrence of the sequence's last
// n tokens, for n from max_matching_ngram_size (2 when unset) down to 1, at
// most prompt_lookup_num_tokens of them, cut before the first EOS token.
// It keeps no state.
type PromptLookup struct{}

// Propose implements CandidateGenerator.
func (*PromptLookup) Propose(_ context.Context, seqs []*Sequence) error {
	for _, s := range seqs {
		n := 2
		if m := s.cfg.MaxMatchingNGramSize; m != nil && *m > 0 {
			n = *m
		}
		k := min(*s.cfg.PromptLookupNumTokens, s.maxCand)
		s.SetCandidates(lookup(s.Tokens(), n, k, s.eos), nil)
	}
	return nil
}

// lookup returns the continuation of the earliest match of toks' last
// n-gram, the longest n-gram first.
func lookup(toks []int32, maxN, k int, eos []int32) []int32 {
	L := len(toks)
	if k <= 0 {
		return nil
	}
	for n := min(maxN, L-1); n > 0; n-- {
		tail := toks[L-n:]
		for i := 0; i+n < L; i++ {
			if !slices.Equal(toks[i:i+n], tail) {
				continue
			}
			start := i + n
			end := min(start+k, L)
			c := toks[start:end]
			for j, t := range c {
				if slices.Contains(eos, t) {
					return c[:j]
				}
			}
			return c
		}
	}
	return nil
}

// Settle implements CandidateGenerator.
func (*PromptLookup) Settle([]*Sequence) error { return nil }

// Release implements CandidateGenerator.
func (*PromptLookup) Release(*Sequence) error { return nil }
