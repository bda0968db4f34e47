package logits

import (
	"fmt"
	"math"
	"slices"
)

// MinLength is transformers' MinLengthLogitsProcessor: while cur_len (prompt included) is below
// min_length, every eos id is set to -inf (by assignment, so NaN too). min_length is a total length;
// when the config sets min_new_tokens, the pipeline uses prompt length + min_new_tokens per row, as
// generate() rewrites min_length. eos ids outside the row are ignored (transformers' isin mask).
type MinLength struct {
	minLength  int
	eos        []int32
	fromPrompt bool // minLength counts from the row's prompt length
}

// NewMinLength returns the processor for min_length (a total length, >= 0) and the eos ids.
func NewMinLength(minLength int, eos []int32) (*MinLength, error) {
	if minLength < 0 {
		return nil, fmt.Errorf("logits: min_length has to be a non-negative integer, got %d", minLength)
	}
	return &MinLength{minLength: minLength, eos: slices.Clone(eos)}, nil
}

// Name returns "MinLengthLogitsProcessor".
func (*MinLength) Name() string { return "MinLengthLogitsProcessor" }

// Process bans eos while the row is shorter than min_length.
func (p *MinLength) Process(hist *History, scores []float32) {
	limit := p.minLength
	if p.fromPrompt {
		limit += hist.PromptLen()
	}
	if hist.Len() < limit {
		setIDs(scores, p.eos, negInf)
	}
}

// MinNewTokensLength is transformers' MinNewTokensLengthLogitsProcessor: while fewer than
// min_new_tokens tokens follow the prompt (cur_len - P), every eos id is set to -inf.
type MinNewTokensLength struct {
	minNew int
	eos    []int32
}

// NewMinNewTokensLength returns the processor for min_new_tokens (>= 0) and the eos ids.
func NewMinNewTokensLength(minNewTokens int, eos []int32) (*MinNewTokensLength, error) {
	if minNewTokens < 0 {
		return nil, fmt.Errorf("logits: min_new_tokens has to be a non-negative integer, got %d", minNewTokens)
	}
	return &MinNewTokensLength{minNew: minNewTokens, eos: slices.Clone(eos)}, nil
}

// Name returns "MinNewTokensLengthLogitsProcessor".
func (*MinNewTokensLength) Name() string { return "MinNewTokensLengthLogitsProcessor" }

// Process bans eos while too few new tokens were generated.
func (p *MinNewTokensLength) Process(hist *History, scores []float32) {
	if hist.Len()-hist.PromptLen() < p.minNew {
		setIDs(scores, p.eos, negInf)
	}
}

// ForcedBOS is transformers' ForcedBOSTokenLogitsProcessor: when cur_len == 1 (a decoder-only row
// whose prompt is one token also qualifies), the whole row becomes -inf and the forced token 0.
type ForcedBOS struct {
	token int32
}

// NewForcedBOS returns the processor for forced_bos_token_id, which must be an id below vocabSize
// (when vocabSize > 0).
func NewForcedBOS(token int32, vocabSize int) (*ForcedBOS, error) {
	if token < 0 || (vocabSize > 0 && int(token) >= vocabSize) {
		return nil, fmt.Errorf("logits: forced_bos_token_id (=%d) is not a token id of the vocabulary (size %d)", token, vocabSize)
	}
	return &ForcedBOS{token: token}, nil
}

// Name returns "ForcedBOSTokenLogitsProcessor".
func (*ForcedBOS) Name() string { return "ForcedBOSTokenLogitsProcessor" }

// Process forces the token at cur_len == 1.
func (p *ForcedBOS) Process(hist *History, scores []float32) {
	if hist.Len() == 1 {
		fill(scores, negInf)
		setIDs(scores, []int32{p.token}, 0)
	}
}

// ForcedEOS is transformers' ForcedEOSTokenLogitsProcessor: when cur_len == max_length - 1 (the step
// that produces the last token), the whole row becomes -inf and every forced eos id 0. max_length is
// the row's resolved total length (see genconfig.Config.Resolve).
type ForcedEOS struct {
	maxLen lengthRule
	eos    []int32
}

// NewForcedEOS returns the processor for forced_eos_token_id with a total max_length; ids must be
// >= 0 and below vocabSize (when vocabSize > 0).
func NewForcedEOS(maxLength int, eos []int32, vocabSize int) (*ForcedEOS, error) {
	for _, id := range eos {
		if id < 0 || (vocabSize > 0 && int(id) >= vocabSize) {
			return nil, fmt.Errorf("logits: forced_eos_token_id %d is not a token id of the vocabulary (size %d)", id, vocabSize)
		}
	}
	return &ForcedEOS{maxLen: lengthRule{n: maxLength}, eos: slices.Clone(eos)}, nil
}

// Name returns "ForcedEOSTokenLogitsProcessor".
func (*ForcedEOS) Name() string { return "ForcedEOSTokenLogitsProcessor" }

// Process forces eos at the last step.
func (p *ForcedEOS) Process(hist *History, scores []float32) {
	if hist.Len() == p.maxLen.at(hist.PromptLen())-1 {
		fill(scores, negInf)
		setIDs(scores, p.eos, 0)
	}
}

// ExponentialDecayLengthPenalty is transformers' ExponentialDecayLengthPenalty: after
// start_index + P tokens (P the row's prompt length), at k = cur_len - (start_index + P) > 0, each eos
// score s becomes s + f32(|s| * f32(factor^k - 1)), factor^k - 1 computed in double, so eos grows
// more likely as the text gets longer. Like transformers, an eos score of -inf turns into NaN when
// factor > 1.
type ExponentialDecayLengthPenalty struct {
	start  int
	factor float64
	eos    []int32
}

// NewExponentialDecayLengthPenalty returns the processor for exponential_decay_length_penalty
// [startIndex, factor]; eos must not be empty.
func NewExponentialDecayLengthPenalty(startIndex int, factor float64, eos []int32) (*ExponentialDecayLengthPenalty, error) {
	if len(eos) == 0 {
		return nil, fmt.Errorf("logits: exponential_decay_length_penalty needs eos_token_id")
	}
	return &ExponentialDecayLengthPenalty{start: startIndex, factor: factor, eos: slices.Clone(eos)}, nil
}

// Name returns "ExponentialDecayLengthPenalty".
func (*ExponentialDecayLengthPenalty) Name() string { return "ExponentialDecayLengthPenalty" }

// Process raises the eos scores once the regulation has started.
func (p *ExponentialDecayLengthPenalty) Process(hist *History, scores []float32) {
	k := hist.Len() - (p.start + hist.PromptLen())
	if k <= 0 {
		return
	}
	c := f32(math.Pow(p.factor, float64(k)) - 1)
	for i, e := range p.eos {
		if e < 0 || int(e) >= len(scores) || slices.Contains(p.eos[:i], e) {
			continue
		}
		s := scores[e]
		scores[e] = s + float32(abs32(s)*c)
	}
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// setIDs assigns v to every listed id inside the row.
func setIDs(scores []float32, ids []int32, v float32) {
	for _, id := range ids {
		if id >= 0 && int(id) < len(scores) {
			scores[id] = v
		}
	}
}

func fill(scores []float32, v float32) {
	for i := range scores {
		scores[i] = v
	}
}
