package reference

import (
	"fmt"
	"math"
)

// Embeddings: what llama.cpp's embeddings are, in float64. A token's
// embedding is the last hidden state after the output norm (the input of
// the output head, llama.cpp's t_embd), computed causally like the logits;
// pooling it is embedding.Pool.

// TokenEmbedding returns row tok of token_embd: the input vector a token id
// stands for, which given as an input embedding must give the token's own
// logits.
func (m *Model) TokenEmbedding(tok int32) ([]float64, error) {
	if tok < 0 || int(tok) >= m.NVocab {
		return nil, fmt.Errorf("%w: %d not in [0, %d)", ErrToken, tok, m.NVocab)
	}
	return append([]float64(nil), m.tokEmbd[int(tok)*m.NEmbd:(int(tok)+1)*m.NEmbd]...), nil
}

// Input is one position of a sequence: a token id, or, when Embd is not
// nil, an input embedding of NEmbd values in place of a token.
type Input struct {
	Token int32
	Embd  []float64
}

// EvalInputs appends inputs at the next positions and returns, per input,
// its logits and its output embedding (the hidden state after the output
// norm). On error the sequence is unchanged.
func (s *Sequence) EvalInputs(inputs []Input) (logits, embd [][]float64, err error) {
	pos := make([][4]int, len(inputs))
	for i := range pos {
		p := s.n + i
		pos[i] = [4]int{p, p, p, 0}
	}
	return s.EvalInputsAt(inputs, pos)
}

// EvalInputsAt is EvalInputs with each input's rotary position given:
// pos[i] holds the temporal, height, width and extra M-RoPE planes of
// input i (llama_batch.pos's four planes, as mtmd lays an image out); a
// llama model reads only pos[i][0]. The attention still spans every
// earlier input of the sequence.
func (s *Sequence) EvalInputsAt(inputs []Input, pos [][4]int) (logits, embd [][]float64, err error) {
	if len(pos) != len(inputs) {
		return nil, nil, fmt.Errorf("reference: %d positions for %d inputs", len(pos), len(inputs))
	}
	for i, in := range inputs {
		if err := s.checkInput(i, in); err != nil {
			return nil, nil, err
		}
	}
	logits, embd = make([][]float64, len(inputs)), make([][]float64, len(inputs))
	for i, in := range inputs {
		x := in.Embd
		if x == nil {
			x, _ = s.m.TokenEmbedding(in.Token)
		}
		embd[i] = s.hiddenAt(append([]float64(nil), x...), pos[i])
		logits[i] = matVec(s.m.output, embd[i], s.m.NVocab)
	}
	return logits, embd, nil
}

// EvalNonCausal is EvalInputs with the inputs attending to each other
// both ways, later ones included (and to every earlier position of the
// sequence): llama.cpp's decode of one micro-batch with causal attention
// off, as its mtmd helper decodes a Gemma 3 image.
func (s *Sequence) EvalNonCausal(inputs []Input) (logits, embd [][]float64, err error) {
	for i, in := range inputs {
		if err := s.checkInput(i, in); err != nil {
			return nil, nil, err
		}
	}
	xs, pos := make([][]float64, len(inputs)), make([][4]int, len(inputs))
	for i, in := range inputs {
		if in.Embd != nil {
			xs[i] = append([]float64(nil), in.Embd...)
		} else {
			xs[i], _ = s.m.TokenEmbedding(in.Token)
		}
		p := s.n + i
		pos[i] = [4]int{p, p, p, 0}
	}
	embd = s.hiddenBlock(xs, pos, true)
	logits = make([][]float64, len(inputs))
	for i, e := range embd {
		logits[i] = matVec(s.m.output, e, s.m.NVocab)
	}
	return logits, embd, nil
}

// checkInput refuses a token out of range or a malformed embedding.
func (s *Sequence) checkInput(i int, in Input) error {
	if in.Embd == nil {
		if in.Token < 0 || int(in.Token) >= s.m.NVocab {
			return fmt.Errorf("%w: %d not in [0, %d) at input %d", ErrToken, in.Token, s.m.NVocab, i)
		}
		return nil
	}
	if len(in.Embd) != s.m.NEmbd {
		return fmt.Errorf("reference: input %d is an embedding of %d values, the model's width is %d", i, len(in.Embd), s.m.NEmbd)
	}
	for _, v := range in.Embd {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("reference: input %d is an embedding holding %v", i, v)
		}
	}
	return nil
}

// Embeddings evaluates tokens as one sequence from position 0 and returns
// every position's output embedding.
func (m *Model) Embeddings(tokens []int32) ([][]float64, error) {
	in := make([]Input, len(tokens))
	for i, t := range tokens {
		in[i].Token = t
	}
	_, embd, err := m.NewSequence().EvalInputs(in)
	return embd, err
}
