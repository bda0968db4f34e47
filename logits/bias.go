package logits

import (
	"fmt"
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/genconfig"
)

// SequenceBiasProcessor is transformers' SequenceBiasLogitsProcessor: a bias for the last token of each
// listed sequence, applied when the tokens before it end the row's history. Biases of one-token
// sequences always apply. Per token, the biases are summed in float32 (one-token bias first, then the
// longer sequences in list order, each rounded to float32) and added to the score once. A sequence
// longer than the history is skipped. Duplicate sequences keep the last bias at the first position,
// as the dict transformers builds from the list does.
type SequenceBiasProcessor struct {
	name    string
	targets []biasTarget
}

// biasTarget collects every bias that can land on one token.
type biasTarget struct {
	token     int32
	hasSingle bool
	single    float32
	multi     []biasSeq // in dict order
}

type biasSeq struct {
	prefix []int32
	bias   float32
}

// NewSequenceBias returns the processor for sequence_bias (list form). Every id must be positive
// (transformers' rule for the list form) and below vocabSize when vocabSize > 0; the list must not be
// empty.
func NewSequenceBias(entries []genconfig.SequenceBias, vocabSize int) (*SequenceBiasProcessor, error) {
	if len(entries) == 0 {
		return nil, fmt.Errorf("logits: sequence_bias must be a non-empty list, got %v", entries)
	}
	keys := make([][]int32, 0, len(entries))
	biases := make([]float64, 0, len(entries))
	for _, e := range entries {
		if len(e.Tokens) == 0 {
			return nil, fmt.Errorf("logits: sequence_bias: each entry needs a non-empty list of token ids")
		}
		for _, id := range e.Tokens {
			if id <= 0 || (vocabSize > 0 && int(id) >= vocabSize) {
				return nil, fmt.Errorf("logits: sequence_bias: token id %d in %v is not a positive id of the vocabulary (size %d)",
					id, e.Tokens, vocabSize)
			}
		}
		if e.IntBias() {
			return nil, fmt.Errorf("logits: sequence_bias: the bias of %v must be a float, got the integer %g", e.Tokens, e.Bias)
		}
		keys, biases = addKey(keys, biases, e.Tokens, e.Bias)
	}
	return newSequenceBias("SequenceBiasLogitsProcessor", keys, biases), nil
}

// addKey adds a key with dict semantics: a repeated key keeps its position and takes the new value.
func addKey(keys [][]int32, biases []float64, key []int32, bias float64) ([][]int32, []float64) {
	for i, k := range keys {
		if slices.Equal(k, key) {
			biases[i] = bias
			return keys, biases
		}
	}
	return append(keys, slices.Clone(key)), append(biases, bias)
}

func newSequenceBias(name string, keys [][]int32, biases []float64) *SequenceBiasProcessor {
	p := &SequenceBiasProcessor{name: name}
	target := func(tok int32) *biasTarget {
		for i := range p.targets {
			if p.targets[i].token == tok {
				return &p.targets[i]
			}
		}
		p.targets = append(p.targets, biasTarget{token: tok})
		return &p.targets[len(p.targets)-1]
	}
	for i, k := range keys {
		t := target(k[len(k)-1])
		if len(k) == 1 {
			t.hasSingle, t.single = true, f32(biases[i])
		} else {
			t.multi = append(t.multi, biasSeq{prefix: k[:len(k)-1], bias: f32(biases[i])})
		}
	}
	return p
}

// Name returns "SequenceBiasLogitsProcessor".
func (p *SequenceBiasProcessor) Name() string { return p.name }

// Process adds the biases that apply to the row's history.
func (p *SequenceBiasProcessor) Process(hist *History, scores []float32) {
	tokens := hist.Tokens()
	for i := range p.targets {
		t := &p.targets[i]
		if int(t.token) >= len(scores) {
			continue
		}
		var b float32
		hit := t.hasSingle
		if hit {
			b += t.single
		}
		for _, s := range t.multi {
			// transformers skips a sequence longer than the context (len(ids) > cur_len).
			if len(s.prefix)+1 > len(tokens) {
				continue
			}
			if slices.Equal(tokens[len(tokens)-len(s.prefix):], s.prefix) {
				b += s.bias
				hit = true
			}
		}
		if hit {
			scores[t.token] += b
		}
	}
}

// NoBadWords is transformers' NoBadWordsLogitsProcessor, a [SequenceBiasProcessor] of -inf for
// each bad word.
type NoBadWords struct {
	SequenceBiasProcessor
}

// NewNoBadWords returns the NoBadWordsLogitsProcessor for bad_words_ids: a sequence bias
// of -inf for each word, so a one-token word is always banned and a longer word only loses its last
// token when the history ends with the others (the model can always start a bad word). A one-token
// word equal to an eos id is dropped; duplicates collapse. The -inf is added, so +inf becomes NaN.
// The list must not be empty, ids must be >= 0 and below vocabSize when vocabSize > 0.
func NewNoBadWords(words [][]int32, eos []int32, vocabSize int) (*NoBadWords, error) {
	if len(words) == 0 {
		return nil, fmt.Errorf("logits: bad_words_ids has to be a non-empty list, got %v", words)
	}
	var keys [][]int32
	var biases []float64
	for _, w := range words {
		if len(w) == 0 {
			return nil, fmt.Errorf("logits: bad_words_ids: each entry must be a non-empty list of token ids")
		}
		for _, id := range w {
			if id < 0 || (vocabSize > 0 && int(id) >= vocabSize) {
				return nil, fmt.Errorf("logits: bad_words_ids: token id %d in %v is not an id of the vocabulary (size %d)",
					id, w, vocabSize)
			}
		}
		if len(w) == 1 && slices.Contains(eos, w[0]) {
			continue
		}
		keys, biases = addKey(keys, biases, w, math.Inf(-1))
	}
	return &NoBadWords{*newSequenceBias("NoBadWordsLogitsProcessor", keys, biases)}, nil
}
