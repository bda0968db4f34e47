package lab

import (
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func stepsWith(surprises []float64, kept []int) []mirostat.Step {
	out := make([]mirostat.Step, len(surprises))
	for i, s := range surprises {
		out[i] = mirostat.Step{Surprise: s, Kept: kept[i], Mu: float64(10 + i)}
	}
	return out
}

func TestTraceStatistics(t *testing.T) {
	steps := stepsWith([]float64{1, 4, 2, 5, 3}, []int{3, 1, 7, 2, 2})
	sum, err := Summarize(steps, 2.5)
	require.NoError(t, err)
	// mean 3, mean kept 3, |s - 2.5| = 1.5, 1.5, 0.5, 2.5, 0.5: mean 1.3.
	assert.Equal(t, 5, sum.Count)
	assert.InDelta(t, 3, sum.MeanSurprise, 1e-15)
	assert.InDelta(t, 3, sum.MeanKept, 1e-15)
	assert.InDelta(t, 1.3, sum.MeanAbsoluteError, 1e-15)
	assert.Equal(t, 14.0, sum.FinalMu)

	acc := TraceAccumulator{Target: 2.5}
	for _, st := range steps {
		require.NoError(t, acc.Add(st))
	}
	assert.Equal(t, sum, acc.Summary())
	assert.Equal(t, 5, acc.Count())
	assert.Error(t, acc.Add(mirostat.Step{Surprise: math.NaN(), Kept: 1}))

	sp, err := Spread(steps)
	require.NoError(t, err)
	// sorted 1 2 3 4 5: median index 2, p90 index floor(3.6) = 3;
	// variance (4+1+0+1+4)/5 = 2.
	assert.Equal(t, TraceSpread{Min: 1, Max: 5, Variance: 2, Median: 3, P90: 4, MinKept: 1, MaxKept: 7}, sp)
	sp, err = Spread(steps[:4]) // 1 2 4 5: lower middle 2
	require.NoError(t, err)
	assert.Equal(t, 2.0, sp.Median)

	assert.Equal(t, []float64{1, 2.5, 7.0 / 3, 3, 3}, RunningSurprise(steps))
	roll, err := RollingSurprise(steps, 2)
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 2.5, 3, 3.5, 4}, roll)

	_, err = Summarize(nil, 1)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = Spread(nil)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = RollingSurprise(steps, 0)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
}

func TestSurpriseWindow(t *testing.T) {
	w, err := NewSurpriseWindow(3)
	require.NoError(t, err)
	_, ok := w.Mean()
	assert.False(t, ok)
	for _, x := range []float64{1, 2, 3, 10} {
		require.NoError(t, w.Add(x))
	}
	mean, ok := w.Mean()
	assert.True(t, ok)
	assert.Equal(t, 5.0, mean, "1 was evicted: (2+3+10)/3")
	assert.Equal(t, 3, w.Len())
	assert.Equal(t, 3, w.Cap())
	assert.Error(t, w.Add(math.Inf(1)))
	w.Reset()
	assert.Equal(t, 0, w.Len())
	require.NoError(t, w.Add(4))
	mean, _ = w.Mean()
	assert.Equal(t, 4.0, mean)
	_, err = NewSurpriseWindow(0)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
}
