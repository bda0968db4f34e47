package logits

// MarshalBinary returns the state of s (its generator's), from which
// UnmarshalBinary resumes the same draws: a request saved between two
// tokens continues elsewhere with the draws it would have made.
func (s *Source) MarshalBinary() ([]byte, error) { return s.pcg.MarshalBinary() }

// UnmarshalBinary restores a state that MarshalBinary returned.
func (s *Source) UnmarshalBinary(data []byte) error { return s.pcg.UnmarshalBinary(data) }
