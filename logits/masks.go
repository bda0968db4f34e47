package logits

import (
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/internal/numeric"
)

// InfNanRemove is transformers' InfNanRemoveLogitsProcessor (remove_invalid_values): NaN becomes 0,
// +inf the largest float32 and -inf the lowest float32. It runs after ForcedEOS, so the -inf that
// earlier processors wrote become finite while later ones (suppression, warpers) still write -inf.
type InfNanRemove struct{}

// Name returns "InfNanRemoveLogitsProcessor".
func (InfNanRemove) Name() string { return "InfNanRemoveLogitsProcessor" }

// Process replaces the non-finite scores.
func (InfNanRemove) Process(_ *History, scores []float32) {
	for i, x := range scores {
		if math.Float32bits(x)&0x7f800000 != 0x7f800000 {
			continue // finite
		}
		switch {
		case x != x:
			scores[i] = 0
		case x > 0:
			scores[i] = maxFloat32
		default:
			scores[i] = -maxFloat32
		}
	}
}

// SuppressTokens is transformers' SuppressTokensLogitsProcessor: the listed ids are set to -inf at
// every step. Ids outside the row are ignored, as transformers' isin mask ignores them; an empty list
// is a no-op.
type SuppressTokens struct {
	tokens []int32
}

// NewSuppressTokens returns the processor for suppress_tokens.
func NewSuppressTokens(tokens []int32) *SuppressTokens {
	return &SuppressTokens{tokens: slices.Clone(tokens)}
}

// Name returns "SuppressTokensLogitsProcessor".
func (*SuppressTokens) Name() string { return "SuppressTokensLogitsProcessor" }

// Process bans the listed tokens.
func (p *SuppressTokens) Process(_ *History, scores []float32) { setIDs(scores, p.tokens, negInf) }

// SuppressTokensAtBegin is transformers' SuppressTokensAtBeginLogitsProcessor: the listed ids are set
// to -inf only at the first generated step, cur_len == begin_index, where begin_index is the row's
// prompt length P, or P+1 when P <= 1 and a forced BOS token takes the first step.
type SuppressTokensAtBegin struct {
	tokens         []int32
	afterForcedBOS bool
}

// NewSuppressTokensAtBegin returns the processor for begin_suppress_tokens; afterForcedBOS is true
// when forced_bos_token_id is set.
func NewSuppressTokensAtBegin(tokens []int32, afterForcedBOS bool) *SuppressTokensAtBegin {
	return &SuppressTokensAtBegin{tokens: slices.Clone(tokens), afterForcedBOS: afterForcedBOS}
}

// Name returns "SuppressTokensAtBeginLogitsProcessor".
func (*SuppressTokensAtBegin) Name() string { return "SuppressTokensAtBeginLogitsProcessor" }

// Process bans the listed tokens at the beginning step.
func (p *SuppressTokensAtBegin) Process(hist *History, scores []float32) {
	begin := hist.PromptLen()
	if p.afterForcedBOS && begin <= 1 {
		begin++
	}
	if hist.Len() == begin {
		setIDs(scores, p.tokens, negInf)
	}
}

// LogitNormalization is transformers' LogitNormalization (renormalize_logits): the scores become
// their log_softmax ([LogSoftmax]). It is always the last processor.
type LogitNormalization struct{}

// Name returns "LogitNormalization".
func (LogitNormalization) Name() string { return "LogitNormalization" }

func (LogitNormalization) keepsCandidates() {}

// Process replaces the scores by their log-softmax.
func (LogitNormalization) Process(hist *History, scores []float32) {
	if hist == nil || !hist.trustCandidates(scores) {
		LogSoftmax(scores, scores)
		return
	}
	// Only the candidates are finite: same values as LogSoftmax over the whole row.
	m := negInf
	for _, i := range hist.cand.idx {
		if x := scores[i]; x > m {
			m = x
		} else if x != x {
			LogSoftmax(scores, scores)
			return
		}
	}
	if math.IsInf(float64(m), 0) {
		LogSoftmax(scores, scores)
		return
	}
	logSum := float32(math.Log(numeric.ExpSumAt(scores, hist.cand.idx, float64(m))))
	for _, i := range hist.cand.idx {
		scores[i] = (scores[i] - m) - logSum
	}
}
