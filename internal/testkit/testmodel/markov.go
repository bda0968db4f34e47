package testmodel

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// LogProbFloor is the log-probability stored for impossible transitions: the
// output head must hold finite values (a zero times -Inf in the matrix
// product would be NaN), and e^-30 is negligible next to any real one.
const LogProbFloor = -30.0

// Markov is an oracle model whose next-token distribution depends only on the
// last token, and is known exactly.
//
// Construction: token t embeds as the one-hot vector of its state StateOf[t];
// one layer whose attention and feed-forward weights are all zero adds
// nothing to the residual; the output norm weight NormWeight cancels RMSNorm's
// scaling up to its epsilon; column s of the output head holds the floored
// float32 log-probabilities of the tokens after state s. So the logits after
// token t are Scale() * LogProbs[StateOf[t]].
type Markov struct {
	// Spec describes the written model: NEmbd is the state count rounded up
	// to a multiple of 64 (heads of 64), one layer, F32 weights.
	Spec Spec
	// StateOf maps each token id to its state.
	StateOf []int
	// LogProbs[s][v] is the stored log-probability of token v after a token
	// of state s: max(log p, LogProbFloor) rounded to the nearest float16
	// value (a relative error below 2^-11), stored as float32.
	LogProbs [][]float32
	// NormWeight is the output norm weight of the state dimensions:
	// sqrt(1/NEmbd + eps) rounded to float32.
	NormWeight float32
}

// NewMarkov returns the Markov oracle over vocabulary v with
// transitions[a][b] the probability of token b after token a. Each row must
// have v.Size() non-negative entries with a positive sum; rows are normalised.
func NewMarkov(name string, v *Vocab, transitions [][]float64) (*Markov, error) {
	if len(transitions) != v.Size() {
		return nil, fmt.Errorf("testmodel: %d transition rows for %d tokens", len(transitions), v.Size())
	}
	states := make([]int, v.Size())
	for i := range states {
		states[i] = i
	}
	return newMarkov(name, v, states, transitions)
}

// newMarkov builds a Markov oracle whose rows are per state.
func newMarkov(name string, v *Vocab, stateOf []int, rows [][]float64) (*Markov, error) {
	if len(stateOf) != v.Size() {
		return nil, fmt.Errorf("testmodel: %d states for %d tokens", len(stateOf), v.Size())
	}
	for t, s := range stateOf {
		if s < 0 || s >= len(rows) {
			return nil, fmt.Errorf("testmodel: token %d has state %d of %d", t, s, len(rows))
		}
	}
	nEmbd := (len(rows) + 63) / 64 * 64
	spec := Spec{
		Name: name, NEmbd: nEmbd, NLayer: 1, NHead: nEmbd / 64, NHeadKV: nEmbd / 64, NFF: 64, NCtxTrain: 4096,
		RopeFreqBase: 10000, RMSEps: 1e-5, WeightType: gguf.TensorF32, Vocab: v,
	}
	m := &Markov{Spec: spec, StateOf: stateOf, LogProbs: make([][]float32, len(rows))}
	for s, row := range rows {
		if len(row) != v.Size() {
			return nil, fmt.Errorf("testmodel: transition row %d has %d entries for %d tokens", s, len(row), v.Size())
		}
		sum := 0.0
		for _, p := range row {
			if !(p >= 0) || math.IsInf(p, 0) {
				return nil, fmt.Errorf("testmodel: transition row %d has the invalid probability %v", s, p)
			}
			sum += p
		}
		if !(sum > 0) || math.IsInf(sum, 0) {
			return nil, fmt.Errorf("testmodel: transition row %d sums to %v", s, sum)
		}
		m.LogProbs[s] = make([]float32, len(row))
		for i, p := range row {
			// Values with 11 significant bits survive the conversion to
			// float16 or TF32 that GPU matrix products apply, so llama.cpp's
			// GPU logits are as exact as its CPU ones.
			l := float32(max(math.Log(p/sum), LogProbFloor))
			m.LogProbs[s][i] = gguf.Float16ToFloat32(gguf.Float32ToFloat16(l))
		}
	}
	eps := float64(spec.RMSEps)
	m.NormWeight = float32(math.Sqrt(1/float64(nEmbd) + eps))
	return m, nil
}

// Scale returns the factor between the stored log-probabilities and the
// logits: NormWeight / sqrt(1/NEmbd + eps), which is 1 up to float32
// rounding.
func (m *Markov) Scale() float64 {
	return float64(m.NormWeight) / math.Sqrt(1/float64(m.Spec.NEmbd)+float64(m.Spec.RMSEps))
}

// Logits returns the exact logits the model computes at a position holding
// token prev (nil if prev is out of range).
func (m *Markov) Logits(prev int32) []float64 {
	if prev < 0 || int(prev) >= len(m.StateOf) {
		return nil
	}
	row := m.LogProbs[m.StateOf[prev]]
	c := m.Scale()
	out := make([]float64, len(row))
	for i, l := range row {
		out[i] = c * float64(l)
	}
	return out
}

// NextLogProbs returns the exact next-token log-probabilities (the log-softmax of
// Logits) after token prev (nil if prev is out of range).
func (m *Markov) NextLogProbs(prev int32) []float64 {
	logits := m.Logits(prev)
	if logits == nil {
		return nil
	}
	return LogSoftmax(logits)
}

// LogSoftmax returns log(softmax(x)) computed stably in float64.
func LogSoftmax(x []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = max(mx, v)
	}
	sum := 0.0
	for _, v := range x {
		sum += math.Exp(v - mx)
	}
	lse := mx + math.Log(sum)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v - lse
	}
	return out
}

// Write writes the model to path.
func (m *Markov) Write(path string) error {
	s := m.Spec
	d, v := s.NEmbd, s.Vocab.Size()
	w := map[string][]float32{}
	embd := make([]float32, v*d)
	for t, st := range m.StateOf {
		embd[t*d+st] = 1
	}
	w[nameTokEmbd] = embd
	ones := make([]float32, d)
	for i := range ones {
		ones[i] = 1
	}
	norm := make([]float32, d)
	for i := range norm {
		norm[i] = m.NormWeight
	}
	w[nameOutputNorm] = norm
	out := make([]float32, v*d)
	for st, row := range m.LogProbs {
		for tok, l := range row {
			out[tok*d+st] = l
		}
	}
	w[nameOutput] = out
	kv := s.NEmbdKV()
	// Every layer adds zero to the residual (see Deeper); they share their
	// zero matrices.
	zq, zkv, zff := make([]float32, d*d), make([]float32, d*kv), make([]float32, d*s.NFF)
	for l := range max(1, s.NLayer) {
		w[blk(l, "attn_norm")] = ones
		w[blk(l, "ffn_norm")] = ones
		w[blk(l, "attn_q")] = zq
		w[blk(l, "attn_k")] = zkv
		w[blk(l, "attn_v")] = zkv
		w[blk(l, "attn_output")] = zq
		w[blk(l, "ffn_gate")] = zff
		w[blk(l, "ffn_up")] = zff
		w[blk(l, "ffn_down")] = zff
	}
	tensors, err := matrixTensors(s, w)
	if err != nil {
		return err
	}
	return writeModel(path, s, m.Fingerprint(), tensors)
}

// RandomTransitions returns a seeded random transition matrix over n tokens
// with visible structure: from each token, a few (2 to 6) favourite
// successors share most of the probability in unequal parts, the rest is
// spread thinly, and tokens listed in never get probability 0 (so samplers
// must never pick them).
func RandomTransitions(n int, seed uint64, never ...int32) ([][]float64, error) {
	if n <= len(never)+6 {
		return nil, errors.New("testmodel: too few tokens for random transitions")
	}
	banned := map[int]bool{}
	for _, t := range never {
		if t < 0 || int(t) >= n {
			return nil, fmt.Errorf("testmodel: token %d out of range", t)
		}
		banned[int(t)] = true
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d61726b6f76))
	rows := make([][]float64, n)
	for a := range rows {
		row := make([]float64, n)
		for b := range row {
			if !banned[b] {
				row[b] = 0.05 / float64(n) * (0.5 + rng.Float64())
			}
		}
		favourites := 2 + rng.IntN(5)
		weight := 0.95
		for k := 0; k < favourites; k++ {
			b := rng.IntN(n)
			for banned[b] {
				b = rng.IntN(n)
			}
			share := weight * (0.3 + 0.5*rng.Float64())
			if k == favourites-1 {
				share = weight
			}
			row[b] += share
			weight -= share
		}
		rows[a] = row
	}
	return rows, nil
}
