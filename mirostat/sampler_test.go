package mirostat

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logitsOf returns ln(p) for each p: the softmax of the result is p.
func logitsOf(p ...float64) []float32 {
	out := make([]float32, len(p))
	for i, x := range p {
		out[i] = float32(math.Log(x))
	}
	return out
}

func mustNew(t testing.TB, cfg Config) *Sampler {
	t.Helper()
	s, err := New(cfg)
	require.NoError(t, err)
	return s
}

// The three-token row p = (0.5, 0.3, 0.2), worked on paper. Surprises are
// -log2 p = (1, 1.736966, 2.321928) bits.
//
// V2, mu = 2 (tau 1, eta 0.1): tokens 0 and 1 have surprise <= 2, token 2 does
// not. Renormalized: (0.625, 0.375). u = 0.7 passes 0.625 and stops at token
// 1, whose surprise under the original row is 1.736966 (not -log2 0.375).
// mu := 2 - 0.1*(1.736966 - 1) = 1.926303.
func TestV2ThreeTokensByHand(t *testing.T) {
	s := mustNew(t, Config{Version: V2, Tau: 1, Eta: 0.1})
	require.Equal(t, 2.0, s.Mu())
	st, err := s.SampleLogits(logitsOf(0.5, 0.3, 0.2), 0.7)
	require.NoError(t, err)
	assert.Equal(t, int32(1), st.Token)
	assert.Equal(t, 2, st.Kept)
	assert.Equal(t, 0, st.K)
	assert.InDelta(t, 0.3, st.Prob, 1e-7)
	assert.InDelta(t, 1.736966, st.Surprise, 1e-6)
	assert.InDelta(t, 1.926303, st.Mu, 1e-6)
	assert.Equal(t, 2.0, st.MuBefore)
	assert.Equal(t, st.Mu, s.Mu())
	assert.Equal(t, 1, s.Steps())

	// u = 0.6 < 0.625 picks token 0, surprise 1: mu rises by 0.1*(1-1) = 0.
	st, err = s.SampleLogits(logitsOf(0.5, 0.3, 0.2), 0.6)
	require.NoError(t, err)
	assert.Equal(t, int32(0), st.Token)
	assert.InDelta(t, 1.926303, st.Mu, 1e-6)
}

// V1, tau 0.5 (mu = 1), eta 0.1, on the same row. Top-3 ratios:
// t = (ln 2, ln 1.5), b = (ln(0.5/0.3), ln(0.3/0.2)) give
// ŝ = Σtb/Σt² = 0.804025; ε = -0.195975; k = (ε·2^1/(1-3^-ε))^(1/ŝ) = 1.838,
// rounded to 2. Kept: tokens 0 and 1; u = 0.7 picks token 1 as in V2.
// mu := 1 - 0.1*(1.736966 - 0.5) = 0.876303.
func TestV1ThreeTokensByHand(t *testing.T) {
	s := mustNew(t, Config{Version: V1, Tau: 0.5, Eta: 0.1})
	st, err := s.SampleLogits(logitsOf(0.5, 0.3, 0.2), 0.7)
	require.NoError(t, err)
	assert.Equal(t, int32(1), st.Token)
	assert.Equal(t, 2, st.K)
	assert.Equal(t, 2, st.Kept)
	assert.InDelta(t, 0.804025, st.S, 1e-6)
	assert.InDelta(t, 1.736966, st.Surprise, 1e-6)
	assert.InDelta(t, 0.876303, st.Mu, 1e-6)

	// mu = 2 gives k = 4.353 -> 4, clamped to the vocabulary: 3.
	s = mustNew(t, Config{Version: V1, Tau: 1, Eta: 0.1})
	st, err = s.SampleLogits(logitsOf(0.5, 0.3, 0.2), 0.95)
	require.NoError(t, err)
	assert.Equal(t, 3, st.K)
	assert.Equal(t, 3, st.Kept)
	assert.Equal(t, int32(2), st.Token)
	assert.InDelta(t, 2.321928, st.Surprise, 1e-6)
}

func TestErrorsLeaveStateUnchanged(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		s := mustNew(t, Config{Version: v, Tau: 3, Eta: 0.5})
		before := s.State()
		nan := float32(math.NaN())
		inf := float32(math.Inf(1))
		ninf := float32(math.Inf(-1))
		cases := []struct {
			row  []float32
			u    float64
			want error
		}{
			{nil, 0.5, ErrEmptyRow},
			{[]float32{ninf, ninf}, 0.5, ErrAllMasked},
			{[]float32{1, nan, 2}, 0.5, ErrNonFiniteLogit},
			{[]float32{1, 2, inf}, 0.5, ErrNonFiniteLogit},
			{[]float32{1, 2}, 1, ErrInvalidUniform},
			{[]float32{1, 2}, -0.1, ErrInvalidUniform},
			{[]float32{1, 2}, math.NaN(), ErrInvalidUniform},
		}
		for _, c := range cases {
			_, err := s.SampleLogits(c.row, c.u)
			require.ErrorIs(t, err, c.want, "%v %v", c.row, c.u)
			assert.Equal(t, before, s.State())
		}
		_, err := s.SampleLogits([]float32{ninf, 3, nan}, 0.5)
		var ie *IndexError
		require.True(t, errors.As(err, &ie))
		assert.Equal(t, 2, ie.Index)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := Config{Version: V2, Tau: 5, Eta: 0.1}
	require.NoError(t, valid.Validate())
	for name, c := range map[string]Config{
		"version 0":    {Tau: 5, Eta: 0.1},
		"version 3":    {Version: 3, Tau: 5, Eta: 0.1},
		"tau 0":        {Version: V1, Eta: 0.1},
		"tau NaN":      {Version: V1, Tau: math.NaN(), Eta: 0.1},
		"tau +Inf":     {Version: V1, Tau: math.Inf(1), Eta: 0.1},
		"eta negative": {Version: V1, Tau: 5, Eta: -0.1},
		"eta NaN":      {Version: V1, Tau: 5, Eta: math.NaN()},
		"mu NaN":       {Version: V1, Tau: 5, Mu: math.NaN()},
		"m 1":          {Version: V1, Tau: 5, M: 1},
		"m negative":   {Version: V1, Tau: 5, M: -3},
		"2tau inf":     {Version: V1, Tau: math.MaxFloat64},
	} {
		err := c.Validate()
		assert.ErrorIs(t, err, ErrInvalidParameter, name)
		_, err = New(c)
		assert.ErrorIs(t, err, ErrInvalidParameter, name)
	}
	s := mustNew(t, Config{Version: V1, Tau: 3})
	assert.Equal(t, Config{Version: V1, Tau: 3, Mu: 6, M: DefaultM}, s.Config())
	s = mustNew(t, Config{Version: V1, Tau: 3, Mu: -1, M: 7})
	assert.Equal(t, -1.0, s.Mu())
	assert.Equal(t, 7, s.Config().M)
}

// Equal probabilities rank by the smaller id: with four equal logits and
// everything kept, u in [i/4, (i+1)/4) picks token i.
func TestTiesRankBySmallerID(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		for i, u := range []float64{0, 0.3, 0.6, 0.99} {
			s := mustNew(t, Config{Version: v, Tau: 10, Eta: 0.1})
			st, err := s.SampleLogits([]float32{2, 2, 2, 2}, u)
			require.NoError(t, err)
			assert.Equal(t, 4, st.Kept)
			assert.Equal(t, int32(i), st.Token, "%v u=%v", v, u)
			assert.InDelta(t, 2.0, st.Surprise, 1e-12)
		}
	}
	// Ranked {3: 0.4, 0: 0.2, 1: 0.2, 2: 0.2}: u = 0.45 passes token 3 (0.4)
	// and lands on token 0, the smallest of the tied ids.
	s := mustNew(t, Config{Version: V2, Tau: 10, Eta: 0.1})
	st, err := s.SampleWeights([]float64{1, 1, 1, 2}, 0.45)
	require.NoError(t, err)
	assert.Equal(t, int32(0), st.Token)
}

func TestMaskedTokensAreNeverKept(t *testing.T) {
	ninf := float32(math.Inf(-1))
	for _, v := range []Version{V1, V2} {
		s := mustNew(t, Config{Version: v, Tau: 100, Eta: 0}) // mu 200: keep everything unmasked
		for _, u := range []float64{0, 0.5, 0.999999} {
			st, err := s.SampleLogits([]float32{ninf, 1, ninf, 1, ninf}, u)
			require.NoError(t, err)
			assert.Equal(t, 2, st.Kept)
			assert.Contains(t, []int32{1, 3}, st.Token)
			if v == V1 {
				assert.Equal(t, 5, st.K, "k is clamped to the vocabulary, kept to the unmasked")
			}
			st, err = s.SampleWeights([]float64{0, 3, 0, 1, 0}, u)
			require.NoError(t, err)
			assert.Equal(t, 2, st.Kept)
			assert.Contains(t, []int32{1, 3}, st.Token)
		}
	}
}

// A weights row and the logits row ln(weights) are the same distribution.
func TestWeightsMatchLogits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 500; iter++ {
		n := 1 + r.IntN(200)
		w := make([]float64, n)
		l := make([]float32, n)
		for i := range w {
			w[i] = float64(1 + r.IntN(1000)) // ties, and exact logs don't matter
			l[i] = float32(math.Log(w[i]))
		}
		v := Version(1 + r.IntN(2))
		cfg := Config{Version: v, Tau: 0.5 + 5*r.Float64(), Eta: 0.3}
		a, b := mustNew(t, cfg), mustNew(t, cfg)
		u := r.Float64()
		sw, err := a.SampleWeights(w, u)
		require.NoError(t, err)
		ref := reference(l, v, b.Mu(), b.Config().M, u)
		if !ref.ok {
			continue
		}
		// float32 logs perturb probabilities by ~1e-7; decisions agree
		// unless that crosses a boundary, which this seed avoids.
		assert.Equal(t, int32(ref.token), sw.Token, "iter %d", iter)
		assert.Equal(t, ref.kept, sw.Kept, "iter %d", iter)
		assert.InDelta(t, -math.Log2(w[sw.Token]/sum(w)), sw.Surprise, 1e-12)
		assert.InDelta(t, w[sw.Token]/sum(w), sw.Prob, 1e-15)
	}
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// A prepared row gives exactly the steps of the row itself, over a run in
// which mu moves.
func TestPreparedMatchesDirect(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 300; iter++ {
		n := 1 + r.IntN(500)
		row := randomRow(r, n)
		cfg := Config{Version: Version(1 + r.IntN(2)), Tau: 0.5 + 5*r.Float64(), Eta: 0.5, M: []int{0, 3, 50}[r.IntN(3)]}
		p, err := PrepareLogits(row)
		require.NoError(t, err)
		a, b := mustNew(t, cfg), mustNew(t, cfg)
		for range 20 {
			u := r.Float64()
			want, err := a.SampleLogits(row, u)
			require.NoError(t, err)
			got, err := b.Sample(p, u)
			require.NoError(t, err)
			require.Equal(t, want, got, "iter %d", iter)
			pa, err := a.Preview(Logits(row))
			require.NoError(t, err)
			pb, err := b.Preview(p)
			require.NoError(t, err)
			require.Equal(t, pa, pb)
		}
		// Its probabilities are the samplers' own: the normalizer of logitStats.
		st, err := logitStats(row, nil)
		require.NoError(t, err)
		for tok := range n {
			want := 0.0
			if !math.IsInf(float64(row[tok]), -1) {
				want = st.prob(float64(row[tok]))
			}
			got, err := p.Probability(int32(tok))
			require.NoError(t, err)
			require.Equal(t, want, got)
		}
	}
	w := []float64{0, 2, 1, 1}
	p, err := PrepareWeights(w)
	require.NoError(t, err)
	var toks []int32
	var probs []float64
	for tok, q := range p.Ranked() {
		toks = append(toks, tok)
		probs = append(probs, q)
	}
	assert.Equal(t, []int32{1, 2, 3}, toks)
	assert.InDeltaSlice(t, []float64{0.5, 0.25, 0.25}, probs, 1e-15)
	_, err = p.Probability(4)
	assert.ErrorIs(t, err, ErrInvalidParameter)
}

func TestCandidatesObservePreview(t *testing.T) {
	row := logitsOf(0.5, 0.3, 0.2)
	s := mustNew(t, Config{Version: V2, Tau: 1, Eta: 0.1}) // mu 2: tokens 0, 1
	c, err := s.Candidates(Logits(row))
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1}, c.Tokens)
	assert.InDeltaSlice(t, []float64{0.5, 0.3}, c.Original, 1e-7)
	assert.InDeltaSlice(t, []float64{0.625, 0.375}, c.Renormalized, 1e-7)
	assert.Equal(t, 2.0, c.Mu)
	assert.Equal(t, 1, c.Index(1))
	assert.Equal(t, -1, c.Index(2))

	pv, err := s.Preview(Logits(row))
	require.NoError(t, err)
	// E = 0.625*1 + 0.375*1.736966 = 1.276362
	assert.Equal(t, Preview{Vocabulary: 3, Kept: 2, RetainedMass: pv.RetainedMass, ExpectedSurprise: pv.ExpectedSurprise, Mu: 2}, pv)
	assert.InDelta(t, 0.8, pv.RetainedMass, 1e-7)
	assert.InDelta(t, 1.276362, pv.ExpectedSurprise, 1e-6)
	assert.Equal(t, 0, s.Steps(), "candidates and preview do not step")

	_, err = s.Observe(Logits(row), 2)
	assert.ErrorIs(t, err, ErrNotCandidate)
	_, err = s.Observe(Logits(row), 3)
	assert.ErrorIs(t, err, ErrInvalidParameter)
	assert.Equal(t, 2.0, s.Mu())

	st, err := s.Observe(Logits(row), 1)
	require.NoError(t, err)
	want, err := mustNew(t, Config{Version: V2, Tau: 1, Eta: 0.1}).SampleLogits(row, 0.7)
	require.NoError(t, err)
	assert.Equal(t, want, st, "observing token 1 is drawing it")
	assert.Equal(t, 1, s.Steps())
}

func TestCheckpointRestoreCloneReset(t *testing.T) {
	cfg := Config{Version: V2, Tau: 3, Eta: 0.2}
	r := rand.New(rand.NewPCG(1, 1))
	rows := make([][]float32, 30)
	draws := make([]float64, 30)
	for i := range rows {
		rows[i] = randomRow(r, 100)
		draws[i] = r.Float64()
	}
	s := mustNew(t, cfg)
	_, err := s.Replay(rows[:10], draws[:10])
	require.NoError(t, err)
	cp := s.Checkpoint()
	fork := s.Clone()
	tail, err := s.Replay(rows[10:], draws[10:])
	require.NoError(t, err)

	// The fork behaves like the original did from the fork point.
	forkTail, err := fork.Replay(rows[10:], draws[10:])
	require.NoError(t, err)
	assert.Equal(t, tail, forkTail)

	// Restore rewinds; replaying again gives the same steps.
	require.NoError(t, s.Restore(cp))
	assert.Equal(t, cp.State, s.State())
	again, err := s.Replay(rows[10:], draws[10:])
	require.NoError(t, err)
	assert.Equal(t, tail, again)

	other := mustNew(t, Config{Version: V1, Tau: 3, Eta: 0.2})
	assert.ErrorIs(t, other.Restore(cp), ErrInvalidParameter)
	assert.ErrorIs(t, s.SetState(State{Mu: math.Inf(1)}), ErrInvalidParameter)
	assert.ErrorIs(t, s.SetState(State{Mu: 1, Steps: -1}), ErrInvalidParameter)

	resumed, err := NewFromState(cfg, cp.State)
	require.NoError(t, err)
	fromState, err := resumed.Replay(rows[10:], draws[10:])
	require.NoError(t, err)
	assert.Equal(t, tail, fromState)

	s.Reset()
	assert.Equal(t, State{Mu: 6}, s.State())
}

func TestSampleLogitsDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	row := randomRow(r, 5000)
	for _, v := range []Version{V1, V2} {
		s := mustNew(t, Config{Version: v, Tau: 5, Eta: 0.1})
		pm := &ParkMiller{}
		for range 50 { // grow the scratch
			_, err := s.SampleLogits(row, pm.Float64())
			require.NoError(t, err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := s.SampleLogits(row, pm.Float64()); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "%v", v)
	}
}
