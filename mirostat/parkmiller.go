package mirostat

// ParkMiller is the Park–Miller "minimal standard" generator,
// state := 16807·state mod (2^31 - 1), computed with Schrage's method so
// that no intermediate exceeds 31 bits: the same sequence on every platform
// and in every language, for reproducible examples and fixtures. It is not
// suitable where quality or unpredictability matters; pass draws from
// math/rand/v2 there. The zero value is the generator seeded with 1.
type ParkMiller struct {
	state int32
}

const (
	pmModulus    = 1<<31 - 1
	pmMultiplier = 16807
	pmQuotient   = pmModulus / pmMultiplier // 127773
	pmRemainder  = pmModulus % pmMultiplier // 2836
)

// NewParkMiller returns a generator seeded with seed, which must be in
// [1, 2^31 - 2]. A generator's State is a valid seed: it resumes the sequence.
func NewParkMiller(seed int64) (*ParkMiller, error) {
	if seed < 1 || seed >= pmModulus {
		return nil, paramError("park-miller seed must be in [1, %d], got %d", pmModulus-1, seed)
	}
	return &ParkMiller{state: int32(seed)}, nil
}

// State returns the current state, in [1, 2^31 - 2].
func (r *ParkMiller) State() int64 {
	if r.state == 0 {
		return 1
	}
	return int64(r.state)
}

// Next advances the generator and returns the new state, in [1, 2^31 - 2].
func (r *ParkMiller) Next() int64 {
	s := int32(r.State())
	hi, lo := s/pmQuotient, s%pmQuotient
	s = pmMultiplier*lo - pmRemainder*hi
	if s <= 0 {
		s += pmModulus
	}
	r.state = s
	return int64(s)
}

// Float64 advances the generator and returns state/(2^31 - 1), strictly
// inside (0, 1).
func (r *ParkMiller) Float64() float64 { return float64(r.Next()) / pmModulus }
