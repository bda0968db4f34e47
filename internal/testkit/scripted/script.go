package scripted

import (
	"sync"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
)

// ForcedGap is how far below the forced token's logit (0) every other
// token's logit is in the rows of Writes: exp(-ForcedGap) is 0 in float32
// and float64, so sampling at any temperature cannot choose another token,
// and a logprob lists the others at about -ForcedGap.
const ForcedGap = 1e4

// Writes is the script of a model that writes tokens, then </s>, after
// any prompt, each with probability 1 (see ForcedGap); past the end it
// keeps asking for </s> (a request that bans it gets more of them or what
// its processors leave).
func Writes(vocab int, tokens ...int32) Script {
	tokens = append(append([]int32(nil), tokens...), testmodel.EOS)
	return func(_, generated []int32) []float32 {
		return forced(vocab, tokens[min(len(generated), len(tokens)-1)])
	}
}

// Says is Writes of the tokens that spell text (Spell): the text the
// server's reply holds, control tokens included.
func (t *Tokenizer) Says(text string) Script {
	return Writes(t.Vocab.Size(), t.Spell(text)...)
}

// Replies is the script of a model that writes reply(prompt) (spelled by
// Spell), then </s>, where prompt is the text of the sequence's prompt,
// control tokens included: a test checks the prompt a request rendered, or
// answers each prompt in its own way. reply is called once per prompt
// text and may be called from several engines at once.
func (t *Tokenizer) Replies(reply func(prompt string) string) Script {
	var mu sync.Mutex
	spelled := map[string][]int32{}
	return func(prompt, generated []int32) []float32 {
		text := t.Text(prompt)
		mu.Lock()
		toks, ok := spelled[text]
		mu.Unlock()
		if !ok {
			toks = append(t.Spell(reply(text)), testmodel.EOS)
			mu.Lock()
			spelled[text] = toks
			mu.Unlock()
		}
		return forced(t.Vocab.Size(), toks[min(len(generated), len(toks)-1)])
	}
}

func forced(vocab int, tok int32) []float32 {
	row := make([]float32, vocab)
	for i := range row {
		row[i] = -ForcedGap
	}
	row[tok] = 0
	return row
}

// Markov is the script of the Markov model m: the logits after the last
// token of the sequence, as the GGUF file m writes computes them
// (Markov.Logits).
func Markov(m *testmodel.Markov) Script {
	var mu sync.Mutex
	rows := map[int][]float32{} // by state
	return func(prompt, generated []int32) []float32 {
		last := testmodel.BOS
		switch {
		case len(generated) > 0:
			last = generated[len(generated)-1]
		case len(prompt) > 0:
			last = prompt[len(prompt)-1]
		}
		state := m.StateOf[last]
		mu.Lock()
		defer mu.Unlock()
		row, ok := rows[state]
		if !ok {
			l := m.Logits(last)
			row = make([]float32, len(l))
			for i, x := range l {
				row[i] = float32(x)
			}
			rows[state] = row
		}
		return row
	}
}
