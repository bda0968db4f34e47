package logits

import (
	"fmt"
	"maps"
	"slices"
)

// The processors in this file are not part of transformers' list: NewPipeline never builds them. Add
// them explicitly with Options.User (they run after SuppressTokensAtBegin, before the warpers) or in
// a [Chain].

// PresenceFrequencyPenalty applies the presence and frequency penalties of the OpenAI API and of
// llama.cpp's penalties sampler: with c_t the number of occurrences of token t in the window,
// scores[t] -= f32(c_t * frequency) + presence for every token with c_t > 0 (float32 arithmetic, as
// llama.cpp computes it). The window is the last LastN tokens of the history (prompt included, as
// llama.cpp counts the tokens its sampler accepted), or the whole history when LastN is 0. Counts are
// kept per row and updated as tokens are accepted.
type PresenceFrequencyPenalty struct {
	presence, frequency float32
	lastN               int
}

// NewPresenceFrequencyPenalty returns the processor; lastN >= 0 (0: the whole history).
func NewPresenceFrequencyPenalty(presence, frequency float32, lastN int) (*PresenceFrequencyPenalty, error) {
	if lastN < 0 {
		return nil, fmt.Errorf("logits: presence/frequency penalty window must be >= 0, got %d", lastN)
	}
	if presence != presence || frequency != frequency {
		return nil, fmt.Errorf("logits: presence/frequency penalty must be numbers, got %v and %v", presence, frequency)
	}
	return &PresenceFrequencyPenalty{presence: presence, frequency: frequency, lastN: lastN}, nil
}

// Name returns "PresenceFrequencyPenalty".
func (*PresenceFrequencyPenalty) Name() string { return "PresenceFrequencyPenalty" }

// NewState counts the tokens of the prompt's window.
func (p *PresenceFrequencyPenalty) NewState(prompt []int32, vocabSize int) State {
	s := &tokenCounts{counts: map[int32]int32{}, lastN: p.lastN, limit: int32(vocabSize)}
	for i := range prompt {
		s.Accept(prompt[:i+1])
	}
	return s
}

// Process subtracts the penalties.
func (p *PresenceFrequencyPenalty) Process(hist *History, scores []float32) {
	s, _ := hist.State().(*tokenCounts)
	if s == nil {
		return
	}
	for t, c := range s.counts {
		if int(t) < len(scores) {
			scores[t] -= float32(float32(c)*p.frequency) + p.presence
		}
	}
}

// tokenCounts counts the tokens of the last lastN accepted tokens (all when 0) that lie in
// [0, limit).
type tokenCounts struct {
	counts map[int32]int32
	lastN  int
	limit  int32
}

// Accept counts the new token and forgets the one that left the window.
func (s *tokenCounts) Accept(history []int32) {
	if t := history[len(history)-1]; t >= 0 && t < s.limit {
		s.counts[t]++
	}
	if s.lastN > 0 && len(history) > s.lastN {
		if old := history[len(history)-1-s.lastN]; old >= 0 && old < s.limit {
			if s.counts[old]--; s.counts[old] <= 0 {
				delete(s.counts, old)
			}
		}
	}
}

// Clone returns an independent copy.
func (s *tokenCounts) Clone() State {
	return &tokenCounts{counts: maps.Clone(s.counts), lastN: s.lastN, limit: s.limit}
}

// CopyFrom makes s equal to src, reusing s's map.
func (s *tokenCounts) CopyFrom(src State) {
	o := src.(*tokenCounts)
	clear(s.counts)
	maps.Copy(s.counts, o.counts)
	s.lastN, s.limit = o.lastN, o.limit
}

// LogitBias adds a fixed bias to the score of each listed token (float32 addition), as the OpenAI
// API's logit_bias and llama.cpp's logit-bias sampler do. A bias of -inf bans the token.
type LogitBias struct {
	ids    []int32
	biases []float32
}

// NewLogitBias returns the processor for a map from token id to bias; every id must lie in
// [0, vocabSize) and no bias may be NaN.
func NewLogitBias(bias map[int32]float32, vocabSize int) (*LogitBias, error) {
	p := &LogitBias{}
	for _, id := range slices.Sorted(maps.Keys(bias)) {
		if id < 0 || int(id) >= vocabSize {
			return nil, fmt.Errorf("logits: logit bias: token id %d is outside the vocabulary (size %d)", id, vocabSize)
		}
		if b := bias[id]; b != b {
			return nil, fmt.Errorf("logits: logit bias: the bias of token %d is NaN", id)
		}
		p.ids = append(p.ids, id)
		p.biases = append(p.biases, bias[id])
	}
	return p, nil
}

// Name returns "LogitBias".
func (*LogitBias) Name() string { return "LogitBias" }

// Process adds the biases.
func (p *LogitBias) Process(_ *History, scores []float32) {
	for k, id := range p.ids {
		if int(id) < len(scores) {
			scores[id] += p.biases[k]
		}
	}
}

// AllowTokens keeps only the listed tokens: every other score becomes -inf.
type AllowTokens struct {
	ids []int32 // sorted, distinct
}

// NewAllowTokens returns the allow-list processor; ids must lie in [0, vocabSize) and the list must
// not be empty (it would ban every token).
func NewAllowTokens(ids []int32, vocabSize int) (*AllowTokens, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("logits: allow-list of tokens is empty")
	}
	if err := checkIDs("allow-list", ids, vocabSize); err != nil {
		return nil, err
	}
	s := slices.Clone(ids)
	slices.Sort(s)
	return &AllowTokens{ids: slices.Compact(s)}, nil
}

// Name returns "AllowTokens".
func (*AllowTokens) Name() string { return "AllowTokens" }

// Process bans every token outside the list.
func (p *AllowTokens) Process(_ *History, scores []float32) {
	from := 0
	for _, id := range p.ids {
		if int(id) >= len(scores) {
			break
		}
		fill(scores[from:id], negInf)
		from = int(id) + 1
	}
	fill(scores[min(from, len(scores)):], negInf)
}

// BlockTokens sets the listed tokens to -inf at every step, like SuppressTokens, but with ids checked
// against the vocabulary.
type BlockTokens struct {
	ids []int32
}

// NewBlockTokens returns the block-list processor; ids must lie in [0, vocabSize).
func NewBlockTokens(ids []int32, vocabSize int) (*BlockTokens, error) {
	if err := checkIDs("block-list", ids, vocabSize); err != nil {
		return nil, err
	}
	return &BlockTokens{ids: slices.Clone(ids)}, nil
}

// Name returns "BlockTokens".
func (*BlockTokens) Name() string { return "BlockTokens" }

// Process bans the listed tokens.
func (p *BlockTokens) Process(_ *History, scores []float32) { setIDs(scores, p.ids, negInf) }

func checkIDs(what string, ids []int32, vocabSize int) error {
	for _, id := range ids {
		if id < 0 || int(id) >= vocabSize {
			return fmt.Errorf("logits: %s: token id %d is outside the vocabulary (size %d)", what, id, vocabSize)
		}
	}
	return nil
}
