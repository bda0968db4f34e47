package logits

import (
	"fmt"
	"math"
)

// Temperature is transformers' TemperatureLogitsWarper: every score becomes x / f32(T), a true
// float32 division as torch does on CPU. T < 1 sharpens the distribution, T > 1 flattens it.
type Temperature struct {
	t float32
	r float64 // 1/t in float64, see quotient
}

// NewTemperature returns the warper for temperature T > 0; T = 0 is an error (use greedy decoding).
func NewTemperature(t float64) (*Temperature, error) {
	if !(t > 0) || math.IsInf(t, 1) {
		msg := fmt.Sprintf("logits: temperature (=%v) has to be a strictly positive float", t)
		if t == 0 {
			msg += "; for greedy decoding set do_sample=false instead of temperature 0"
		}
		return nil, fmt.Errorf("%s", msg)
	}
	t32 := f32(t)
	return &Temperature{t: t32, r: 1 / float64(t32)}, nil
}

// Name returns "TemperatureLogitsWarper".
func (*Temperature) Name() string { return "TemperatureLogitsWarper" }

// Process divides every score by the temperature.
func (p *Temperature) Process(_ *History, scores []float32) {
	r := p.r
	for i, x := range scores {
		scores[i] = quotient(x, r)
	}
}

// quotient returns x / t in float32, bit for bit, given r = 1/t computed in float64, with a multiply
// instead of a (slower) division. It is exact because the float64 product is within 2^-52 (relative)
// of x/t, while a quotient of two float32 is never closer than 2^-49 to a rounding boundary of float32
// (a midpoint between two float32 has 25 significant bits; x = m·t would need the product of an odd
// 25-bit and a 24-bit significand to fit in 24 bits), so both round to the same float32.
func quotient(x float32, r float64) float32 { return float32(float64(x) * r) }
