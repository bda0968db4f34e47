package mirostat

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reference is a brute-force Mirostat step written straight from the paper:
// a full softmax with math.Exp, a full stable sort, the kept set by
// enumeration, the draw by a running sum. It shares no code with the
// package. ok is false when the case sits within rounding of a decision
// boundary (a surprise equal to mu, k at .5, u on a cumulative edge), where
// two correct implementations may differ.
type refStep struct {
	token, kept, k int
	prob, surprise float64
	ok             bool
}

func reference(logits []float32, v Version, mu float64, m int, u float64) refStep {
	n := len(logits)
	best := math.Inf(-1)
	for _, x := range logits {
		best = math.Max(best, float64(x))
	}
	p := make([]float64, n)
	var z float64
	for i, x := range logits {
		p[i] = math.Exp(float64(x) - best)
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return p[order[a]] > p[order[b]] })
	support := 0
	for _, x := range p {
		if x > 0 {
			support++
		}
	}
	ok := true
	var kept, k int
	switch v {
	case V2:
		for _, id := range order {
			s := -math.Log2(p[id])
			if math.Abs(s-mu) < 1e-9 {
				ok = false
			}
			if s <= mu {
				kept++
			}
		}
		kept = max(kept, 1)
	case V1:
		var num, den float64
		top := min(m, support)
		for i := 0; i+1 < top; i++ {
			t := math.Log(float64(i+2) / float64(i+1))
			b := math.Log(p[order[i]]) - math.Log(p[order[i+1]])
			num += t * b
			den += t * t
		}
		k = 1
		if top >= 2 {
			s := math.Max(num/den, 1e-3)
			eps := s - 1
			var kf float64
			if math.Abs(eps) < 1e-9 {
				kf = math.Pow(math.Pow(2, mu)/math.Log(float64(n)), 1/s)
			} else {
				kf = math.Pow(eps*math.Pow(2, mu)/(1-math.Pow(float64(n), -eps)), 1/s)
			}
			if f := kf - math.Floor(kf); math.Abs(f-0.5) < 1e-6 {
				ok = false
			}
			k = int(math.Min(math.Max(math.Round(kf), 1), float64(n)))
		}
		kept = min(k, support)
	}
	var mass float64
	for _, id := range order[:kept] {
		mass += p[id]
	}
	target := u * mass
	var cum float64
	token := order[kept-1]
	for _, id := range order[:kept] {
		cum += p[id]
		if math.Abs(cum-target) < 1e-9 {
			ok = false
		}
		if cum > target {
			token = id
			break
		}
	}
	return refStep{token: token, kept: kept, k: k, prob: p[token], surprise: -math.Log2(p[token]), ok: ok}
}

// randomRow draws logits of a random shape: Gaussian, Zipf-like, with ties
// and masked entries.
func randomRow(r *rand.Rand, n int) []float32 {
	row := make([]float32, n)
	scale := 0.5 + 4*r.Float64()
	zipf := r.IntN(2) == 0
	for i := range row {
		if zipf {
			row[i] = float32(-scale * math.Log(float64(1+r.IntN(n))))
		} else {
			row[i] = float32(scale * r.NormFloat64())
		}
		switch r.IntN(20) {
		case 0:
			row[i] = float32(math.Inf(-1))
		case 1:
			row[i] = float32(math.Round(float64(row[i]))) // ties
		}
	}
	row[r.IntN(n)] = 1 // never all masked
	return row
}

func TestMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	checked := 0
	for iter := 0; iter < 3000; iter++ {
		n := 1 + r.IntN(400)
		row := randomRow(r, n)
		v := Version(1 + r.IntN(2))
		cfg := Config{Version: v, Tau: 0.5 + 6*r.Float64(), Eta: r.Float64(), M: []int{0, 2, 5, 30}[r.IntN(4)]}
		s := mustNew(t, cfg)
		mu := s.Mu()
		u := r.Float64()
		want := reference(row, v, mu, s.Config().M, u)
		got, err := s.SampleLogits(row, u)
		require.NoError(t, err)
		if !want.ok {
			continue
		}
		checked++
		require.Equal(t, want.kept, got.Kept, "iter %d %v n=%d", iter, v, n)
		require.Equal(t, want.k, got.K, "iter %d", iter)
		require.Equal(t, int32(want.token), got.Token, "iter %d", iter)
		assert.InEpsilon(t, want.prob, got.Prob, 1e-12)
		assert.InDelta(t, want.surprise, got.Surprise, 1e-9)
		assert.InDelta(t, mu-cfg.Eta*(want.surprise-cfg.Tau), got.Mu, 1e-9)
	}
	assert.Greater(t, checked, 2900)
}
