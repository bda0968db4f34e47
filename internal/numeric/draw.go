package numeric

// InverseCDF returns the index of the first probability whose running sum exceeds u times the
// total, for u in [0, 1): the inverse CDF of the distribution probs (non-negative, not necessarily
// normalized) in the order given, one uniform per draw. When rounding lifts u·total to the total,
// it is the last index with mass (0 when none has). Mirostat's samplers and the comparison
// samplers of its lab draw with it, so that one uniform gives the same token in both.
func InverseCDF(probs []float64, u float64) int {
	var total float64
	for _, p := range probs {
		total += p
	}
	target := u * total
	var cum float64
	for i, p := range probs {
		if cum += p; cum > target {
			return i
		}
	}
	return LastWithMass(probs)
}

// LastWithMass returns the index of the last positive entry of probs, or 0 when none is.
func LastWithMass(probs []float64) int {
	for i := len(probs) - 1; i > 0; i-- {
		if probs[i] > 0 {
			return i
		}
	}
	return 0
}
