package numeric

import (
	"math"
	"sync"

	"github.com/llamaloop/llamaloop/internal/parallel"
)

// expChunkLen is the fewest entries a chunk of ExpSumParallel takes, and
// expMinWorkers the fewest cores for which it splits a row: the sum itself
// stays sequential (about 4 cycles a term, the latency of an addition), so
// computing the terms apart pays only when several cores share them.
// Variables so that tests can split small rows on any machine.
var (
	expChunkLen   = 1 << 14
	expMinWorkers = 4
	expWorkers    = parallel.Workers
)

// expTerms holds the terms of one row, computed in chunks.
type expTerms struct {
	row   []float32
	m     float64
	buf   []float64
	parts int
	wg    sync.WaitGroup
}

var expTermsPool = sync.Pool{New: func() any { return new(expTerms) }}

// Do computes the terms of chunk p.
func (t *expTerms) Do(p int) {
	n := len(t.row)
	lo, hi := p*n/t.parts, (p+1)*n/t.parts
	fillTerms(t.buf[lo:hi], t.row[lo:hi], t.m)
}

// fillTerms sets dst[i] to Term(row[i] - m), inline as in AddTerms where
// Term does not clamp.
func fillTerms(dst []float64, row []float32, m float64) {
	shifter := math.Float64bits(ExpShifter)
	inv, sh, one, c1, c2, c3 := ExpTermVars[0], ExpTermVars[1], ExpTermVars[2], ExpTermVars[3], ExpTermVars[4], ExpTermVars[5]
	tab := &ExpTermTable
	dst = dst[:len(row)]
	for i, v := range row {
		x := float64(v)
		u := float64((x - m) * inv)
		kf := u + sh
		k := math.Float64bits(kf)
		f := u - (kf - sh)
		e := math.Float64frombits(tab[k&(ExpTableSize-1)]+k<<42) * (one + float64(f*(c1+float64(f*(c2+float64(f*c3))))))
		if shifter-k > floorSteps {
			e = Term(x - m) // clamped, masked (0) or NaN
		}
		dst[i] = e
	}
}

// ExpSumParallel returns ExpSum(row, m) to the last bit. On a machine with
// cores to spare it computes the terms of a wide row in chunks on several
// of them and adds them, in index order, on the caller's: a masked entry's
// term is 0, which adds nothing to a sum of non-negative terms.
func ExpSumParallel(row []float32, m float64) float64 {
	w := expWorkers()
	parts := min(w, len(row)/expChunkLen)
	if w < expMinWorkers || parts < 2 {
		return ExpSum(row, m)
	}
	t := expTermsPool.Get().(*expTerms)
	if cap(t.buf) < len(row) {
		t.buf = make([]float64, len(row))
	}
	t.row, t.m, t.buf, t.parts = row, m, t.buf[:len(row)], parts
	parallel.Run(parts, t, &t.wg)
	z := 0.0
	for _, e := range t.buf {
		z += e
	}
	t.row = nil
	expTermsPool.Put(t)
	return z
}
