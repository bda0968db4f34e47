package lab

import (
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/mirostat"
)

// TraceSummary aggregates a sequence of steps against a target surprise.
type TraceSummary struct {
	Count             int
	MeanSurprise      float64 // bits
	MeanKept          float64
	MeanAbsoluteError float64 // mean |surprise - target|, bits
	FinalMu           float64
}

// TraceAccumulator computes a TraceSummary online, without keeping the
// steps. Set Target before the first Add; the zero value is ready to use.
type TraceAccumulator struct {
	Target float64 // bits

	count                    int
	surprise, kept, absError float64
	finalMu                  float64
}

// Add accounts for one successful step. A step with a non-finite surprise
// or mu, or fewer than one candidate, is rejected.
func (a *TraceAccumulator) Add(st mirostat.Step) error {
	if err := checkStep(st); err != nil {
		return err
	}
	a.count++
	a.surprise += st.Surprise
	a.kept += float64(st.Kept)
	a.absError += math.Abs(st.Surprise - a.Target)
	a.finalMu = st.Mu
	return nil
}

// Count returns the number of steps added.
func (a *TraceAccumulator) Count() int { return a.count }

// Summary returns the summary so far; all zero before the first Add.
func (a *TraceAccumulator) Summary() TraceSummary {
	if a.count == 0 {
		return TraceSummary{}
	}
	n := float64(a.count)
	return TraceSummary{
		Count:             a.count,
		MeanSurprise:      a.surprise / n,
		MeanKept:          a.kept / n,
		MeanAbsoluteError: a.absError / n,
		FinalMu:           a.finalMu,
	}
}

// Summarize returns the summary of steps against target (bits).
func Summarize(steps []mirostat.Step, target float64) (TraceSummary, error) {
	if !finite(target) {
		return TraceSummary{}, paramError("target must be finite, got %v", target)
	}
	if len(steps) == 0 {
		return TraceSummary{}, paramError("no steps to summarize")
	}
	a := TraceAccumulator{Target: target}
	for _, st := range steps {
		if err := a.Add(st); err != nil {
			return TraceSummary{}, err
		}
	}
	return a.Summary(), nil
}

// TraceSpread describes how the surprise and the candidate count of a trace
// scatter. Percentiles take the nearest lower rank: of n sorted values,
// the q-quantile is value number floor(q·(n-1)), so the median of an even
// count is the lower middle.
type TraceSpread struct {
	Min, Max         float64 // bits
	Variance         float64 // population variance, squared bits
	Median, P90      float64 // bits
	MinKept, MaxKept int
}

// Spread returns the spread of steps.
func Spread(steps []mirostat.Step) (TraceSpread, error) {
	if len(steps) == 0 {
		return TraceSpread{}, paramError("no steps to spread")
	}
	s := make([]float64, len(steps))
	var mean float64
	sp := TraceSpread{MinKept: math.MaxInt}
	for i, st := range steps {
		if err := checkStep(st); err != nil {
			return TraceSpread{}, err
		}
		s[i] = st.Surprise
		mean += st.Surprise
		sp.MinKept = min(sp.MinKept, st.Kept)
		sp.MaxKept = max(sp.MaxKept, st.Kept)
	}
	mean /= float64(len(s))
	for _, x := range s {
		sp.Variance += (x - mean) * (x - mean)
	}
	sp.Variance /= float64(len(s))
	slices.Sort(s)
	sp.Min, sp.Max = s[0], s[len(s)-1]
	sp.Median = s[(len(s)-1)/2]
	sp.P90 = s[int(math.Floor(0.9*float64(len(s)-1)))]
	return sp, nil
}

// RunningSurprise returns the mean surprise of steps[:i+1] for every i: the
// observed cross-entropy that Mirostat steers towards tau.
func RunningSurprise(steps []mirostat.Step) []float64 {
	out := make([]float64, len(steps))
	var sum float64
	for i, st := range steps {
		sum += st.Surprise
		out[i] = sum / float64(i+1)
	}
	return out
}

// RollingSurprise returns, for every i, the mean surprise of the last
// window steps up to i (fewer at the start).
func RollingSurprise(steps []mirostat.Step, window int) ([]float64, error) {
	if window < 1 {
		return nil, paramError("window must be >= 1, got %d", window)
	}
	w, err := NewSurpriseWindow(window)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(steps))
	for i, st := range steps {
		if err := w.Add(st.Surprise); err != nil {
			return nil, err
		}
		out[i], _ = w.Mean()
	}
	return out, nil
}

// SurpriseWindow holds the last Cap surprises for monitoring a long
// generation in constant memory.
type SurpriseWindow struct {
	values []float64
	next   int
	n      int
}

// NewSurpriseWindow returns an empty window of the given capacity, >= 1.
func NewSurpriseWindow(capacity int) (*SurpriseWindow, error) {
	if capacity < 1 {
		return nil, paramError("window capacity must be >= 1, got %d", capacity)
	}
	return &SurpriseWindow{values: make([]float64, capacity)}, nil
}

// Add records a surprise (finite, bits), evicting the oldest when full.
func (w *SurpriseWindow) Add(surprise float64) error {
	if !finite(surprise) {
		return paramError("surprise must be finite, got %v", surprise)
	}
	w.values[w.next] = surprise
	w.next = (w.next + 1) % len(w.values)
	w.n = min(w.n+1, len(w.values))
	return nil
}

// Mean returns the mean of the recorded surprises, and false when there are
// none. It sums the window afresh, so no rounding drift builds up.
func (w *SurpriseWindow) Mean() (float64, bool) {
	if w.n == 0 {
		return 0, false
	}
	var sum float64
	for _, x := range w.values[:w.n] {
		sum += x
	}
	return sum / float64(w.n), true
}

// Len returns the number of recorded surprises, at most Cap.
func (w *SurpriseWindow) Len() int { return w.n }

// Cap returns the capacity.
func (w *SurpriseWindow) Cap() int { return len(w.values) }

// Reset empties the window.
func (w *SurpriseWindow) Reset() { w.next, w.n = 0, 0 }

func checkStep(st mirostat.Step) error {
	if !finite(st.Surprise) || !finite(st.Mu) || st.Kept < 1 {
		return paramError("not a successful step: surprise %v, mu %v, kept %d", st.Surprise, st.Mu, st.Kept)
	}
	return nil
}
