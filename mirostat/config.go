package mirostat

import (
	"fmt"
	"math"
)

// Version selects one of the paper's two algorithms.
type Version int

const (
	// V1 estimates the Zipf exponent of the row from its top M probabilities
	// and keeps the adaptive top k of Basu et al.'s Algorithm 1.
	V1 Version = 1
	// V2 keeps every token whose surprise is at most mu (Algorithm 2), and
	// always the most probable one.
	V2 Version = 2
)

// String returns "v1", "v2", or "Version(n)" for anything else.
func (v Version) String() string {
	switch v {
	case V1:
		return "v1"
	case V2:
		return "v2"
	}
	return fmt.Sprintf("Version(%d)", int(v))
}

// DefaultM is the number of top probabilities V1 uses when Config.M is 0, as
// in the paper's experiments.
const DefaultM = 100

// Config holds the parameters of one Mirostat session. Tau, Mu and every
// surprise are in bits.
type Config struct {
	// Version is V1 or V2. The zero value is invalid.
	Version Version
	// Tau is the target surprise in bits; finite and > 0.
	Tau float64
	// Eta is the learning rate of the feedback mu := mu - Eta*(surprise - Tau);
	// finite and >= 0 (0 freezes mu).
	Eta float64
	// Mu is the initial mu in bits; 0 means 2*Tau. Any other finite value is
	// used as given.
	Mu float64
	// M is the number of top probabilities V1 uses to estimate the Zipf
	// exponent (M-1 adjacent ratios); 0 means DefaultM, otherwise >= 2.
	// V2 ignores it, but it is validated all the same.
	M int
}

// Validate reports the first invalid field as an error wrapping
// ErrInvalidParameter, or nil.
func (c Config) Validate() error {
	switch {
	case c.Version != V1 && c.Version != V2:
		return paramError("version must be V1 or V2, got %d", int(c.Version))
	case !finite(c.Tau) || c.Tau <= 0:
		return paramError("tau must be finite and > 0, got %v", c.Tau)
	case !finite(c.Eta) || c.Eta < 0:
		return paramError("eta must be finite and >= 0, got %v", c.Eta)
	case !finite(c.Mu):
		return paramError("mu must be finite, got %v", c.Mu)
	case c.M < 0 || c.M == 1:
		return paramError("m must be 0 (default %d) or >= 2, got %d", DefaultM, c.M)
	case c.Mu == 0 && math.IsInf(2*c.Tau, 0):
		return paramError("default mu 2*tau overflows for tau %v", c.Tau)
	}
	return nil
}

// withDefaults returns c with Mu and M resolved.
func (c Config) withDefaults() Config {
	if c.Mu == 0 {
		c.Mu = 2 * c.Tau
	}
	if c.M == 0 {
		c.M = DefaultM
	}
	return c
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
