package reference

import (
	"fmt"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// tensorReq is a tensor a model reads: into dst, by name, with its shape;
// an optional one may be missing.
type tensorReq struct {
	dst      *[]float64
	name     string
	optional bool
	shape    []int
}

// loadTensors reads reqs from r, checking each shape, and fails when the
// file holds tensors that none of them uses (unsupported says which kinds
// of tensors that would be).
func loadTensors(r *gguf.Reader, reqs []tensorReq, unsupported string) error {
	used := 0
	for _, q := range reqs {
		t, ok := r.Tensor(q.name)
		if !ok {
			if q.optional {
				continue
			}
			return fmt.Errorf("reference: missing tensor %s", q.name)
		}
		if len(t.Shape) != len(q.shape) {
			return fmt.Errorf("reference: tensor %s has shape %v, want %v", q.name, t.Shape, q.shape)
		}
		for i, d := range q.shape {
			if t.Shape[i] != uint64(d) {
				return fmt.Errorf("reference: tensor %s has shape %v, want %v", q.name, t.Shape, q.shape)
			}
		}
		var err error
		if *q.dst, err = r.Float64s(q.name); err != nil {
			return err
		}
		used++
	}
	if used != len(r.Tensors) {
		return fmt.Errorf("reference: the file has %d tensors, the model uses %d (%s are not supported)", len(r.Tensors), used, unsupported)
	}
	return nil
}
