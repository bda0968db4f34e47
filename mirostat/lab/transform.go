package lab

import (
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
)

// Row transforms to apply before sampling. Mirostat measures surprise on the row it is given, so
// whatever a transform does shows in the feedback: keep them explicit. Each is the logits
// processor named in its doc, applied to a copy: it returns a new row and leaves its input
// untouched. The input must be a valid row (no NaN or +Inf), and so must the result, with at least
// one token left (ErrNumerical, ErrAllMasked).

// Mask keeps the tokens whose allowed entry is true and masks the others (-Inf): logits'
// AllowTokens over the allowed ids. allowed must be as long as row.
func Mask(row []float32, allowed []bool) ([]float32, error) {
	if len(allowed) != len(row) {
		return nil, paramError("mask of %d entries for a row of %d", len(allowed), len(row))
	}
	var ids []int
	for i, ok := range allowed {
		if ok {
			ids = append(ids, i)
		}
	}
	return Allow(row, ids)
}

// Allow masks every token not listed in ids: logits' AllowTokens.
func Allow(row []float32, ids []int) ([]float32, error) {
	if err := checkLogits(row); err != nil {
		return nil, err
	}
	if err := checkIDs(ids, len(row)); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, mirostat.ErrAllMasked // AllowTokens refuses an empty list: nothing would be left
	}
	p, err := logits.NewAllowTokens(int32s(ids), len(row))
	if err != nil {
		return nil, rejected(err)
	}
	return transform(row, nil, p)
}

// Block masks every token listed in ids; repeats are harmless: logits' BlockTokens.
func Block(row []float32, ids []int) ([]float32, error) {
	if err := checkLogits(row); err != nil {
		return nil, err
	}
	if err := checkIDs(ids, len(row)); err != nil {
		return nil, err
	}
	p, err := logits.NewBlockTokens(int32s(ids), len(row))
	if err != nil {
		return nil, rejected(err)
	}
	return transform(row, nil, p)
}

// Bias adds bias[id] to the logit of each listed token in float32: logits' LogitBias. A bias may
// not be NaN; -Inf masks the token, and masked tokens stay masked.
func Bias(row []float32, bias map[int]float32) ([]float32, error) {
	if err := checkLogits(row); err != nil {
		return nil, err
	}
	b := make(map[int32]float32, len(bias))
	for id, x := range bias {
		if id < 0 || id >= len(row) {
			return nil, paramError("token %d outside vocabulary of %d", id, len(row))
		}
		b[int32(id)] = x
	}
	p, err := logits.NewLogitBias(b, len(row))
	if err != nil {
		return nil, rejected(err)
	}
	return transform(row, nil, p)
}

// PenalizeRepetition applies the CTRL repetition penalty (Keskar et al., 2019) once to every token
// that occurs in history, as transformers' RepetitionPenaltyLogitsProcessor does (logits'
// RepetitionPenalty): a positive logit is divided by f32(penalty), a negative one multiplied.
// penalty must be > 0; 1 changes nothing.
func PenalizeRepetition(row []float32, history []int, penalty float64) ([]float32, error) {
	p, err := logits.NewRepetitionPenalty(penalty)
	if err != nil {
		return nil, rejected(err)
	}
	return withHistory(row, history, p)
}

// PenalizeCounts subtracts f32(frequency) once per occurrence and f32(presence) once from every
// token that occurs in history (OpenAI's presence and frequency penalties, logits'
// PresenceFrequencyPenalty over the whole history). Negative values reward repetition; neither may
// be NaN.
func PenalizeCounts(row []float32, history []int, presence, frequency float64) ([]float32, error) {
	p, err := logits.NewPresenceFrequencyPenalty(float32(presence), float32(frequency), 0)
	if err != nil {
		return nil, rejected(err)
	}
	return withHistory(row, history, p)
}

// WithTemperature divides every logit by f32(t), t > 0 and finite: logits' Temperature.
func WithTemperature(row []float32, t float64) ([]float32, error) {
	p, err := logits.NewTemperature(t)
	if err != nil {
		return nil, rejected(err)
	}
	if err := checkLogits(row); err != nil {
		return nil, err
	}
	return transform(row, nil, p)
}

// withHistory is transform for a processor that reads the row's history.
func withHistory(row []float32, history []int, p logits.Processor) ([]float32, error) {
	if err := checkLogits(row); err != nil {
		return nil, err
	}
	if err := checkIDs(history, len(row)); err != nil {
		return nil, err
	}
	return transform(row, int32s(history), p)
}

// transform applies p to a copy of the valid row, whose history is history, and checks that the
// result is a valid row: an overflow to +Inf (or a NaN) is ErrNumerical, and a row with nothing
// left is ErrAllMasked.
func transform(row []float32, history []int32, p logits.Processor) ([]float32, error) {
	pipe, err := logits.Chain(len(row), p)
	if err != nil {
		return nil, rejected(err)
	}
	out := slices.Clone(row)
	pipe.Process(pipe.NewHistory(history), out)
	live := false
	for _, x := range out {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 1) {
			return nil, mirostat.ErrNumerical
		}
		live = live || !math.IsInf(float64(x), -1)
	}
	if !live {
		return nil, mirostat.ErrAllMasked
	}
	return out, nil
}

func int32s(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
