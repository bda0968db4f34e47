package logits

import (
	"fmt"
	"slices"
)

// RepetitionPenalty is transformers' RepetitionPenaltyLogitsProcessor: for every distinct token t
// of the row's history (prompt included), s = scores[t] becomes s*f32(penalty) when s < 0 and
// s/f32(penalty) otherwise (true division; 0 stays 0, -inf stays -inf), once per distinct token.
// A penalty above 1 discourages repetition. The set of seen tokens is kept per row and grows as
// tokens are accepted; ids outside the row are ignored.
type RepetitionPenalty struct {
	penalty float32
}

// NewRepetitionPenalty returns the processor for repetition_penalty; penalty must be > 0.
func NewRepetitionPenalty(penalty float64) (*RepetitionPenalty, error) {
	if !(penalty > 0) {
		return nil, fmt.Errorf("logits: repetition_penalty has to be a strictly positive float, got %v", penalty)
	}
	return &RepetitionPenalty{penalty: f32(penalty)}, nil
}

// Name returns "RepetitionPenaltyLogitsProcessor".
func (*RepetitionPenalty) Name() string { return "RepetitionPenaltyLogitsProcessor" }

// NewState returns the set of distinct tokens of prompt.
func (*RepetitionPenalty) NewState(prompt []int32, vocabSize int) State {
	s := &tokenSet{limit: int32(vocabSize)}
	for _, t := range prompt {
		s.add(t)
	}
	return s
}

// Process applies the penalty to the row's seen tokens.
func (p *RepetitionPenalty) Process(hist *History, scores []float32) {
	set, _ := hist.State().(*tokenSet)
	if set == nil {
		return
	}
	penalize(scores, set.list, p.penalty)
}

// penalize divides positive scores and multiplies negative ones by pen, for each listed token.
func penalize(scores []float32, tokens []int32, pen float32) {
	for _, t := range tokens {
		if int(t) >= len(scores) {
			continue
		}
		s := scores[t]
		if s < 0 {
			scores[t] = s * pen
		} else {
			scores[t] = s / pen
		}
	}
}

// tokenSet is the set of distinct tokens of a history that lie in [0, limit), in first-seen order,
// with a bitset for membership.
type tokenSet struct {
	list  []int32
	bits  []uint64
	limit int32
}

func (s *tokenSet) add(t int32) {
	if t < 0 || t >= s.limit {
		return
	}
	w := int(t) >> 6
	if w >= len(s.bits) {
		s.bits = append(s.bits, make([]uint64, w+1-len(s.bits))...)
	}
	if s.bits[w]&(1<<(uint(t)&63)) != 0 {
		return
	}
	s.bits[w] |= 1 << (uint(t) & 63)
	s.list = append(s.list, t)
}

// Accept adds the accepted token.
func (s *tokenSet) Accept(history []int32) { s.add(history[len(history)-1]) }

// Clone returns an independent copy.
func (s *tokenSet) Clone() State {
	return &tokenSet{list: slices.Clone(s.list), bits: slices.Clone(s.bits), limit: s.limit}
}

// CopyFrom makes s equal to src, reusing s's storage.
func (s *tokenSet) CopyFrom(src State) {
	o := src.(*tokenSet)
	for _, t := range s.list {
		s.bits[int(t)>>6] = 0
	}
	s.list = append(s.list[:0], o.list...)
	s.limit = o.limit
	if len(s.bits) < len(o.bits) {
		s.bits = append(s.bits, make([]uint64, len(o.bits)-len(s.bits))...)
	}
	for _, t := range s.list {
		s.bits[int(t)>>6] |= 1 << (uint(t) & 63)
	}
}

// EncoderRepetitionPenalty is transformers' EncoderRepetitionPenaltyLogitsProcessor with the prompt
// as the encoder input (transformers enables it for decoder-only models too): with q = 1/penalty in
// double, for every distinct prompt token s becomes s*f32(q) when s < 0 and s/f32(q) otherwise, so a
// penalty above 1 favours tokens of the prompt. Unlike transformers, whose processor holds the
// batch's B prompts and so under beam search penalises only the first B of the B*num_beams rows,
// every row uses its own prompt, also under beam search.
type EncoderRepetitionPenalty struct {
	inv float32
}

// NewEncoderRepetitionPenalty returns the processor for encoder_repetition_penalty; penalty must be > 0.
func NewEncoderRepetitionPenalty(penalty float64) (*EncoderRepetitionPenalty, error) {
	if !(penalty > 0) {
		return nil, fmt.Errorf("logits: encoder_repetition_penalty has to be a strictly positive float, got %v", penalty)
	}
	return &EncoderRepetitionPenalty{inv: f32(1 / penalty)}, nil
}

// Name returns "EncoderRepetitionPenaltyLogitsProcessor".
func (*EncoderRepetitionPenalty) Name() string { return "EncoderRepetitionPenaltyLogitsProcessor" }

// NewState returns the distinct tokens of the prompt; it does not change afterwards.
func (*EncoderRepetitionPenalty) NewState(prompt []int32, vocabSize int) State {
	s := &tokenSet{limit: int32(vocabSize)}
	for _, t := range prompt {
		s.add(t)
	}
	return &fixedState{v: s.list}
}

// Process applies the inverse penalty to the prompt's tokens.
func (p *EncoderRepetitionPenalty) Process(hist *History, scores []float32) {
	st, _ := hist.State().(*fixedState)
	if st == nil {
		return
	}
	penalize(scores, st.v.([]int32), p.inv)
}

// fixedState is a per-row state computed once from the prompt and never changed, so copies share it.
type fixedState struct{ v any }

// Accept does nothing: the state depends on the prompt only.
func (*fixedState) Accept([]int32) {}

// Clone returns s itself: it is immutable.
func (s *fixedState) Clone() State { return s }
