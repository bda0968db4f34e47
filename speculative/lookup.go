package speculative

import (
	"slices"

	"github.com/llamaloop/llamaloop/genconfig"
)

// Lookup is transformers' PromptLookupCandidateGenerator: the candidates
// continue the earliest earlier occurrence of the last n tokens of toks, for
// n from max_matching_ngram_size (2 when unset) down to 1, at most
// prompt_lookup_num_tokens and limit of them, cut before the first token of
// eos. It appends them to dst. Like transformers it scans the whole
// sequence: a step costs time proportional to its length.
func Lookup(dst, toks []int32, cfg *genconfig.Config, limit int, eos []int32) []int32 {
	maxN := 2
	if m := cfg.MaxMatchingNGramSize; m != nil && *m > 0 {
		maxN = *m
	}
	k := limit
	if cfg.PromptLookupNumTokens != nil {
		k = min(k, *cfg.PromptLookupNumTokens)
	}
	L := len(toks)
	if k <= 0 {
		return dst
	}
	for n := min(maxN, L-1); n > 0; n-- {
		tail := toks[L-n:]
		for i := 0; i+n < L; i++ {
			if !slices.Equal(toks[i:i+n], tail) {
				continue
			}
			c := toks[i+n : min(i+n+k, L)]
			for j, t := range c {
				if slices.Contains(eos, t) {
					return append(dst, c[:j]...)
				}
			}
			return append(dst, c...)
		}
	}
	return dst
}
