package logits

import (
	"fmt"
	"maps"
	"slices"
)

// NoRepeatNGram is transformers' NoRepeatNGramLogitsProcessor: no n-gram may occur twice in the row's
// history (prompt included). At cur_len >= n-1, every token that followed an earlier occurrence of
// the last n-1 tokens is set to -inf (by assignment, so NaN too); n = 1 bans every token seen.
// Each row keeps a table of its n-grams, extended as tokens are accepted.
type NoRepeatNGram struct {
	n int
}

// NewNoRepeatNGram returns the processor for no_repeat_ngram_size; n must be > 0.
func NewNoRepeatNGram(n int) (*NoRepeatNGram, error) {
	if n <= 0 {
		return nil, fmt.Errorf("logits: no_repeat_ngram_size has to be a strictly positive integer, got %d", n)
	}
	return &NoRepeatNGram{n: n}, nil
}

// Name returns "NoRepeatNGramLogitsProcessor".
func (*NoRepeatNGram) Name() string { return "NoRepeatNGramLogitsProcessor" }

// NewState returns the n-gram table of prompt.
func (p *NoRepeatNGram) NewState(prompt []int32, _ int) State {
	t := &ngramTable{n: p.n, head: map[uint64]int32{}}
	for end := p.n; end <= len(prompt); end++ {
		t.addWindow(prompt, end-p.n)
	}
	return t
}

// Process bans the tokens that would repeat an n-gram of the history.
func (p *NoRepeatNGram) Process(hist *History, scores []float32) {
	t, _ := hist.State().(*ngramTable)
	tokens := hist.Tokens()
	if t == nil || len(tokens)+1 < p.n {
		return
	}
	t.ban(tokens, tokens[len(tokens)-p.n+1:], scores)
}

// EncoderNoRepeatNGram is transformers' EncoderNoRepeatNGramLogitsProcessor with the prompt as the
// encoder input: a token is set to -inf when the last n-1 tokens of the row followed by it form an
// n-gram of the prompt. The prompt's n-grams are collected once per row.
type EncoderNoRepeatNGram struct {
	n int
}

// NewEncoderNoRepeatNGram returns the processor for encoder_no_repeat_ngram_size; n must be > 0.
func NewEncoderNoRepeatNGram(n int) (*EncoderNoRepeatNGram, error) {
	if n <= 0 {
		return nil, fmt.Errorf("logits: encoder_no_repeat_ngram_size has to be a strictly positive integer, got %d", n)
	}
	return &EncoderNoRepeatNGram{n: n}, nil
}

// Name returns "EncoderNoRepeatNGramLogitsProcessor".
func (*EncoderNoRepeatNGram) Name() string { return "EncoderNoRepeatNGramLogitsProcessor" }

// NewState returns the n-gram table of the prompt, which never changes.
func (p *EncoderNoRepeatNGram) NewState(prompt []int32, _ int) State {
	t := &ngramTable{n: p.n, head: map[uint64]int32{}, source: slices.Clone(prompt)}
	for end := p.n; end <= len(prompt); end++ {
		t.addWindow(prompt, end-p.n)
	}
	return &fixedState{v: t}
}

// Process bans the tokens that would complete an n-gram of the prompt.
func (p *EncoderNoRepeatNGram) Process(hist *History, scores []float32) {
	st, _ := hist.State().(*fixedState)
	tokens := hist.Tokens()
	// transformers slices input_ids[cur_len+1-n : cur_len]; a shorter key matches nothing.
	if st == nil || len(tokens) < p.n-1 {
		return
	}
	t := st.v.(*ngramTable)
	t.ban(t.source, tokens[len(tokens)-p.n+1:], scores)
}

// ngramTable indexes the n-token windows of a sequence by their first n-1 tokens: head maps the
// hash of a prefix to 1 + the start of the latest window with that hash, prev chains each window to
// the previous one with the same hash (0 ends the chain). Hash collisions are resolved by comparing
// the tokens.
type ngramTable struct {
	n      int
	head   map[uint64]int32
	prev   []int32
	source []int32 // the windows' sequence when it is not the row's history (encoder variant)
}

func hashTokens(ts []int32) uint64 {
	h := uint64(14695981039346656037)
	for _, t := range ts {
		h ^= uint64(uint32(t))
		h *= 1099511628211
		h ^= h >> 29
	}
	return h
}

// addWindow indexes the window seq[start : start+n]; windows must be added in order of start.
func (t *ngramTable) addWindow(seq []int32, start int) {
	h := hashTokens(seq[start : start+t.n-1])
	t.prev = append(t.prev, t.head[h])
	t.head[h] = int32(start + 1)
}

// ban sets to -inf every token that follows prefix in a window of seq.
func (t *ngramTable) ban(seq, prefix []int32, scores []float32) {
	for j := t.head[hashTokens(prefix)]; j != 0; j = t.prev[j-1] {
		start := int(j - 1)
		if slices.Equal(seq[start:start+t.n-1], prefix) {
			if next := seq[start+t.n-1]; next >= 0 && int(next) < len(scores) {
				scores[next] = negInf
			}
		}
	}
}

// Accept indexes the window that the accepted token completes.
func (t *ngramTable) Accept(history []int32) {
	if start := len(history) - t.n; start >= 0 {
		t.addWindow(history, start)
	}
}

// Clone returns an independent copy.
func (t *ngramTable) Clone() State {
	return &ngramTable{n: t.n, head: maps.Clone(t.head), prev: slices.Clone(t.prev), source: t.source}
}

// CopyFrom makes t equal to src, reusing t's storage.
func (t *ngramTable) CopyFrom(src State) {
	o := src.(*ngramTable)
	t.n, t.source = o.n, o.source
	clear(t.head)
	maps.Copy(t.head, o.head)
	t.prev = append(t.prev[:0], o.prev...)
}
