package generation_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
)

// words is a toy tokenizer: token i is the text words[i]; token 0 ends
// generation.
type words []string

func (w words) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	var toks []int32
	for _, f := range strings.Fields(text) {
		i := -1
		for j, s := range w {
			if s == " "+f {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("unknown word %q", f)
		}
		toks = append(toks, int32(i))
	}
	return toks, nil
}

func (w words) AppendPiece(dst []byte, token int32, special bool) ([]byte, error) {
	if token == 0 && !special {
		return dst, nil
	}
	return append(dst, w[token]...), nil
}

func (words) IsEOG(token int32) bool { return token == 0 }
func (words) EOGTokens() []int32     { return []int32{0} }
func (words) AddsBOS() bool          { return false }

// A batch of two prompts streamed token by token. Each row leaves the batch
// when it ends: at its end-of-generation token or at max_new_tokens.
func Example() {
	vocab := words{"</s>", " the", " cat", " dog", " sat", " ran", " away", " down"}
	// A toy model: after each word, the next word of a fixed chain.
	next := map[int32]int32{2: 4, 4: 7, 7: 0, 3: 5, 5: 6, 6: 1, 1: 3}
	model := func(history []int32) ([]float32, error) {
		row := make([]float32, len(vocab))
		row[next[history[len(history)-1]]] = 5
		return row, nil
	}
	b := backend.NewMemoryBackend(len(vocab), 2, model)
	g := generation.NewGenerator(b, vocab)

	cfg := genconfig.Default()
	cfg.MaxNewTokens = new(6)
	reqs := []generation.Request{
		{Text: "the cat", Config: cfg},
		{Text: "the dog", Config: cfg, Logprobs: true},
	}
	for ev, err := range g.Stream(context.Background(), reqs) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("request %d: %q", ev.Request, ev.Text)
		if reqs[ev.Request].Logprobs {
			fmt.Printf(" logprob %.3f", ev.Logprob)
		}
		if ev.Finish != generation.NotFinished {
			fmt.Printf(" [%s]", ev.Finish)
		}
		fmt.Println()
	}
	// Output:
	// request 0: " sat"
	// request 1: " ran" logprob -0.046
	// request 0: " down"
	// request 1: " away" logprob -0.046
	// request 0: "" [eos]
	// request 1: " the" logprob -0.046
	// request 1: " dog" logprob -0.046
	// request 1: " ran" logprob -0.046
	// request 1: " away" logprob -0.046 [length]
}
