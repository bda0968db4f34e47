package logits

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// SeedStream is the second word of the PCG generator of every [Source]; the first is the seed.
const SeedStream uint64 = 0x6c6c616d616c6f6f // "llamaloo"

// Source is the random source of one sequence's draws, and the one place where llamaloop turns
// random bits into the uniform numbers that choose tokens. The decoding loop (package generation),
// beam search's sampling (package beam) and Mirostat (package mirostat, given a Source as its
// UniformSource) all draw from it, so a request and a seed give the same tokens through the
// decoding loop and through beam search with one beam, and mirostat.Sampler.Stream given a Source
// draws what the loop's Mirostat requests draw.
//
// A Source is math/rand/v2's PCG seeded with (seed, [SeedStream]). Each draw takes exactly one
// 64-bit output x of it and uses the uniform u = (x >> 11) / 2^53 in [0, 1): the top 53 bits,
// exactly representable in a float64, so every u is a multiple of 2^-53 and each is equally
// likely. (math/rand/v2's Rand.Float64 keeps the low 53 bits instead, so a Rand over the same PCG
// draws other numbers.) A draw never takes a variable number of outputs, so the n-th draw of a
// sequence depends only on its seed and n.
//
// The zero Source is the PCG of (0, 0), not NewSource(0): seed it with [Source.Seed] or
// [NewSource]. A Source is a plain value: copying it copies its state. It is not safe for
// concurrent use.
type Source struct {
	pcg rand.PCG
}

// NewSource returns a Source seeded with seed.
func NewSource(seed uint64) *Source {
	s := new(Source)
	s.Seed(seed)
	return s
}

// Seed restarts s as NewSource(seed) does.
func (s *Source) Seed(seed uint64) { s.pcg.Seed(seed, SeedStream) }

// Float64 returns the next uniform u in [0, 1), as the type documentation derives it. It is the
// only draw of a Source; ExpFloat64 is made from it. Float64 makes *Source a
// mirostat.UniformSource.
func (s *Source) Float64() float64 { return float64(s.pcg.Uint64()>>11) * 0x1p-53 }

// ExpFloat64 returns an exponential variate of rate 1 made from one uniform u by inversion:
// -log(1-u), in [0, +inf). Beam sampling ranks its candidates with one such variate each, as
// torch.multinomial without replacement does.
func (s *Source) ExpFloat64() float64 { return -math.Log1p(-s.Float64()) }

// ErrNoChoice reports scores from which no token can be chosen: a NaN score, or no score above
// -inf. torch would pick the NaN (argmax) or fail (multinomial); a Chooser returns an error
// wrapping it.
var ErrNoChoice = errors.New("logits: the scores allow no choice")

// Chooser is the stage that ends a chain: it selects the next token from the scores the processors
// left, as llama.cpp's sampler chain ends in a stage that sets the selected token. [Greedy] and
// [Multinomial] are transformers' two choices for one beam (do_sample false and true);
// [Pipeline.Chooser] returns the one its config asks for. Mirostat is another chooser (the decoding
// loop wraps a mirostat.Sampler as one).
type Chooser interface {
	// Choose returns the index of the chosen token in scores, the next-token row of hist that the
	// pipeline just processed (hist may be nil for scores that no pipeline processed). A
	// chooser that samples draws exactly one uniform from src for each token it returns; one that
	// does not leaves src untouched. Choose must not keep scores; the built-in choosers do not
	// modify them. It returns an error wrapping ErrNoChoice when scores hold a NaN or no score
	// above -inf.
	Choose(hist *History, scores []float32, src *Source) (int, error)
}

// Greedy is greedy decoding: [Argmax] of the scores, the lowest index among equal maxima, as
// torch.argmax. It draws nothing.
type Greedy struct{}

// Choose implements Chooser.
func (Greedy) Choose(_ *History, scores []float32, _ *Source) (int, error) {
	i := Argmax(scores)
	if i < 0 {
		return -1, fmt.Errorf("%w: empty scores", ErrNoChoice)
	}
	if s := scores[i]; s != s {
		return -1, fmt.Errorf("%w: NaN score at %d", ErrNoChoice, i)
	} else if s == negInf {
		return -1, fmt.Errorf("%w: every score is -inf", ErrNoChoice)
	}
	return i, nil
}

// SampleReader is an optional interface of a [Chooser] that reads a processed row only through
// [Pipeline.Sample] ([Multinomial]): a loop whose chooser implements it, and which reads the row in
// no other way (no log-probabilities, no observer), may process the row with
// [Pipeline.ProcessForSample], whose top-k stage leaves the removed entries as they were. The
// candidate list that Sample then trusts is kept on the History for the row the pipeline last
// processed, which Sample recognises by its address and length: the row must not be copied or
// modified in between.
type SampleReader interface {
	Chooser
	// ReadsOnlySample marks the capability; it does nothing.
	ReadsOnlySample()
}

// ReadsOnlySample implements SampleReader.
func (Multinomial) ReadsOnlySample() {}

// Multinomial is multinomial sampling (do_sample true with one beam): one uniform u from the
// Source, then the index [SampleIndex] returns for u, the inverse CDF of softmax(scores) in index
// order. When the pipeline of the history bounded the candidates (top-k), it visits only those
// ([Pipeline.Sample]); the index is the same.
type Multinomial struct{}

// Choose implements Chooser.
func (Multinomial) Choose(hist *History, scores []float32, src *Source) (int, error) {
	if err := checkNaN(hist, scores); err != nil {
		return -1, err
	}
	u := src.Float64()
	var i int
	var ok bool
	if hist != nil && hist.p != nil {
		i, ok = hist.p.Sample(hist, scores, u)
	} else {
		i, ok = SampleIndex(scores, u)
	}
	if !ok {
		return -1, fmt.Errorf("%w: every score is -inf", ErrNoChoice)
	}
	return i, nil
}

// checkNaN returns an error wrapping ErrNoChoice that names the first NaN of scores, if any. When
// a top-k stage bounded the candidates, every other entry is -inf, so only the candidates are
// looked at: a pass over the whole row would cost as much as the top-k stage itself at a vocabulary
// of 128256. A NaN among them falls back to the whole row, so the error names the same index.
func checkNaN(hist *History, scores []float32) error {
	if hist != nil && hist.cand.describes(scores) {
		clean := true
		for _, i := range hist.cand.idx {
			if x := scores[i]; x != x {
				clean = false
				break
			}
		}
		if clean {
			return nil
		}
		hist.materialize(scores)
	}
	for i, x := range scores {
		if x != x {
			return fmt.Errorf("%w: NaN score at %d", ErrNoChoice, i)
		}
	}
	return nil
}

// Chooser returns the chooser that ends p's chain for its config: [Multinomial] when the config
// samples (do_sample), [Greedy] otherwise, and Greedy for a custom [Chain].
func (p *Pipeline) Chooser() Chooser {
	if p.sample {
		return Multinomial{}
	}
	return Greedy{}
}
