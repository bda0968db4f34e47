package refbackend

import (
	"context"
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
)

// EvalAll implements backend.AllLogits: the reference computes every
// position's logits anyway.
func (b *Backend) EvalAll(ctx context.Context, feeds []backend.Feed) error {
	b.rows = b.rows[:0]
	b.all = b.all[:0]
	for i, f := range feeds {
		if err := ctx.Err(); err != nil {
			return err
		}
		if f.Slot < 0 || f.Slot >= len(b.seqs) {
			return fmt.Errorf("refbackend: slot %d", f.Slot)
		}
		out, err := b.eval(feeds, i)
		if err != nil {
			return err
		}
		rows := make([][]float32, len(out))
		for j, r := range out {
			rows[j] = make([]float32, len(r))
			for k, v := range r {
				rows[j][k] = float32(v)
			}
		}
		b.all = append(b.all, rows)
		b.rows = append(b.rows, rows[len(rows)-1])
	}
	return nil
}

// LogitsAt implements backend.AllLogits.
func (b *Backend) LogitsAt(i, j int) []float32 {
	if i < 0 || i >= len(b.all) || j < 0 || j >= len(b.all[i]) {
		return nil
	}
	return b.all[i][j]
}

var _ backend.AllLogits = (*Backend)(nil)
