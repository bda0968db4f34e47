package mirostat

// Replay samples rows[i] with draws[i] in order and returns the steps. It
// fails before any step when the lengths differ. When row i fails it returns
// the steps of rows 0..i-1, which stay committed, and a *RowError for row i.
// ReplayAtomic is the all-or-nothing variant.
func (s *Sampler) Replay(rows [][]float32, draws []float64) ([]Step, error) {
	if len(rows) != len(draws) {
		return nil, paramError("%d rows but %d draws", len(rows), len(draws))
	}
	steps := make([]Step, 0, len(rows))
	for i, row := range rows {
		st, err := s.SampleLogits(row, draws[i])
		if err != nil {
			return steps, &RowError{Row: i, Err: err}
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// ReplayAtomic is Replay as one transaction: when a row fails, the sampler
// is restored to its state before the call and no steps are returned.
func (s *Sampler) ReplayAtomic(rows [][]float32, draws []float64) ([]Step, error) {
	before := s.State()
	steps, err := s.Replay(rows, draws)
	if err != nil {
		s.mu, s.steps = before.Mu, before.Steps
		return nil, err
	}
	return steps, nil
}

// SampleBatch draws one token for each of several sessions, session i
// sampling rows[i] with uniforms[i], and appends the steps to dst. The
// slices must align. When session i fails, sessions before it keep their
// steps (appended to dst) and the error is a *RowError for i; see
// SampleBatchAtomic. Each entry should be a distinct session: a sampler that
// appears twice steps twice, in order.
func SampleBatch(dst []Step, samplers []*Sampler, rows [][]float32, uniforms []float64) ([]Step, error) {
	if err := checkBatch(samplers, len(rows), len(uniforms)); err != nil {
		return dst, err
	}
	for i, s := range samplers {
		st, err := s.SampleLogits(rows[i], uniforms[i])
		if err != nil {
			return dst, &RowError{Row: i, Err: err}
		}
		dst = append(dst, st)
	}
	return dst, nil
}

// SampleBatchAtomic is SampleBatch as one transaction: when any session
// fails, every sampler is restored and dst is returned unchanged. It
// allocates nothing beyond dst's growth.
func SampleBatchAtomic(dst []Step, samplers []*Sampler, rows [][]float32, uniforms []float64) ([]Step, error) {
	n := len(dst)
	out, err := SampleBatch(dst, samplers, rows, uniforms)
	if err != nil {
		rollback(samplers, out[n:])
		return dst[:n], err
	}
	return out, nil
}

// SampleShared draws one token for each session from one shared prepared
// row, session i with uniforms[i], and appends the steps to dst. It is
// atomic: when any session fails, every sampler is restored.
func SampleShared(dst []Step, samplers []*Sampler, row *PreparedRow, uniforms []float64) ([]Step, error) {
	if row == nil {
		return dst, paramError("nil prepared row")
	}
	if err := checkBatch(samplers, len(samplers), len(uniforms)); err != nil {
		return dst, err
	}
	n := len(dst)
	for i, s := range samplers {
		st, err := s.Sample(row, uniforms[i])
		if err != nil {
			rollback(samplers, dst[n:])
			return dst[:n], &RowError{Row: i, Err: err}
		}
		dst = append(dst, st)
	}
	return dst, nil
}

func checkBatch(samplers []*Sampler, rows, uniforms int) error {
	if len(samplers) != rows || rows != uniforms {
		return paramError("batch of %d samplers, %d rows, %d uniforms", len(samplers), rows, uniforms)
	}
	for i, s := range samplers {
		if s == nil {
			return paramError("sampler %d is nil", i)
		}
	}
	return nil
}

// rollback undoes committed steps, last first, so that a sampler listed twice
// ends where it began.
func rollback(samplers []*Sampler, done []Step) {
	for i := len(done) - 1; i >= 0; i-- {
		s := samplers[i]
		s.mu = done[i].MuBefore
		s.steps--
	}
}
