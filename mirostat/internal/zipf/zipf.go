// Package zipf holds the two formulas of Mirostat's Algorithm 1 (Basu et al., 2021), so that the
// sampler (package mirostat) and its diagnostics (package mirostat/lab) share one implementation:
// the least-squares Zipf exponent of a row's top tokens and the adaptive k that follows from it.
package zipf

import "math"

// MinExponent replaces a fitted exponent below it: a flat top (every ratio 1) fits s = 0, where
// k's formula divides by zero. In that limit k is 1 or the whole vocabulary, and so it is with this
// floor.
const MinExponent = 1e-3

// regressors holds t_i = ln((i+2)/(i+1)), the regressors of the fit.
var regressors = func() (t [1024]float64) {
	for i := range t {
		t[i] = regressor(i)
	}
	return t
}()

func regressor(i int) float64 { return math.Log1p(1 / float64(i+1)) }

// Exponent fits ŝ by least squares through the origin over the adjacent log-ratios of the top
// tokens in rank order (paper, eq. 30): ŝ = Σ t_i b_i / Σ t_i², with b_i = lv_i - lv_{i+1} =
// ln(p_i/p_{i+1}) and t_i = ln((i+2)/(i+1)), where lv holds their log-probabilities (up to a common
// shift). It returns 0 when lv holds fewer than two tokens, and at least MinExponent otherwise.
func Exponent(lv []float64) float64 {
	if len(lv) < 2 {
		return 0
	}
	var num, den float64
	for i := range len(lv) - 1 {
		t := 0.0
		if i < len(regressors) {
			t = regressors[i]
		} else {
			t = regressor(i)
		}
		num += t * (lv[i] - lv[i+1])
		den += t * t
	}
	return max(num/den, MinExponent)
}

// K is V1's k for surprise target mu (bits), Zipf exponent s and vocabulary n (paper, eq. 34):
// k = (ε·2^mu / (1 - n^-ε))^(1/s) with ε = s-1, rounded to the nearest integer and clamped to
// [1, n]. Near s = 1 the factor ε/(1 - n^-ε) takes its limit 1/ln n; the power is taken in log
// space, so a large mu saturates at n instead of overflowing. ok is false when the arithmetic
// fails (NaN).
func K(mu, s float64, n int) (k int, ok bool) {
	if n <= 1 || s == 0 {
		return 1, true
	}
	lnN := math.Log(float64(n))
	eps := s - 1
	x := eps * lnN
	var lnFactor float64
	if math.Abs(x) < 1e-8 {
		lnFactor = -math.Log(lnN) + x/2
	} else {
		lnFactor = math.Log(eps / -math.Expm1(-x))
	}
	lnK := (lnFactor + mu*math.Ln2) / s
	switch {
	case math.IsNaN(lnK):
		return 0, false
	case lnK >= lnN:
		return n, true
	}
	return int(max(1, math.Round(math.Exp(lnK)))), true
}
