package replay

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/llamaloop/llamaloop/backend"
)

// modelRows is how many distinct rows the fixed random model has.
const modelRows = 16

// Backend is a backend.Backend whose Eval waits as long as its profile says
// the device takes and returns rows of a fixed random model: the next-token
// logits after a history depend on its last token and length only. Each row
// is Zipf-shaped (p ∝ rank^-1.1, ranks shuffled over the ids, a little
// noise), the shape language models' distributions have, so that top-k,
// top-p and Mirostat keep as many tokens as they do on a real model.
//
// The wait runs from the start of Eval to a deadline: the copy of the rows
// into the output buffers happens inside it, as a device's copy does. How
// the thread waits is Wait: parked in the kernel, or running at the deadline
// as CUDA's default schedule has it.
type Backend struct {
	// Wait is how Eval waits for the device: Sleep (the zero value) or Spin.
	Wait Wait

	prof  ModelProfile
	lens  []int
	rows  [modelRows][]float32
	out   [][]float32
	nOut  int
	evals int
}

// Wait is how an Eval's thread waits for the profiled device.
type Wait int

const (
	// Sleep parks the thread in the kernel (see sleepUntil), so the machine's
	// cores stay free for the Go side, as they are while a GPU computes; the
	// thread, and its cache, may then take a while to come back.
	Sleep Wait = iota
	// Spin keeps the thread running when the device finishes, as CUDA
	// does while a kernel runs (its default schedule, cudaDeviceScheduleAuto,
	// spins when the host has more cores than active contexts): the Go side
	// resumes at once, on a warm core. It sleeps until spinLead before the
	// deadline and polls the clock from there: a thread that spun through
	// the whole wait would, on a machine whose cores other work shares, lose
	// its core to that work as a CPU-bound thread, where a thread woken from
	// sleep gets it back first.
	Spin
)

// spinLead is how long before the deadline a spinning wait stops sleeping:
// longer than a wake-up from sleep on a busy machine takes.
const spinLead = 200 * time.Microsecond

// String names the mode as llamabench's table does.
func (w Wait) String() string {
	if w == Spin {
		return "spinning"
	}
	return "sleeping"
}

// spinUntil returns at deadline: it sleeps until spinLead before it, then
// polls the clock.
func spinUntil(deadline time.Time) {
	sleepUntil(deadline.Add(-spinLead))
	for time.Now().Before(deadline) {
	}
}

// New returns a replay backend of slots slots over the model profile m.
func New(m ModelProfile, slots int) (*Backend, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if slots < 1 {
		return nil, fmt.Errorf("replay: %d slots", slots)
	}
	b := &Backend{prof: m, lens: make([]int, slots)}
	for r := range b.rows {
		b.rows[r] = zipfRow(m.VocabSize, uint64(r))
	}
	return b, nil
}

// zipfRow is row seed of the fixed random model.
func zipfRow(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(uint64(n), seed))
	row := make([]float32, n)
	for i, rank := range rng.Perm(n) {
		row[i] = float32(-1.1*math.Log(float64(rank+1)) + 0.01*rng.NormFloat64())
	}
	return row
}

// Profile is the backend's model profile.
func (b *Backend) Profile() ModelProfile { return b.prof }

// Evals counts the calls of Eval.
func (b *Backend) Evals() int { return b.evals }

// VocabSize implements backend.Backend.
func (b *Backend) VocabSize() int { return b.prof.VocabSize }

// Slots implements backend.Backend.
func (b *Backend) Slots() int { return len(b.lens) }

// Room implements backend.Backend: slots have no limit.
func (b *Backend) Room(slot int) int {
	if slot < 0 || slot >= len(b.lens) {
		return 0
	}
	return math.MaxInt
}

// Duration is the wall time the profile gives an Eval of feeds: the prompt
// tokens (feeds of more than one token) at the prompt speed, plus one decode
// step of the one-token feeds' row count.
func (b *Backend) Duration(feeds []backend.Feed) time.Duration {
	prompt, rows := 0, 0
	for _, f := range feeds {
		if len(f.Tokens) > 1 {
			prompt += len(f.Tokens)
		} else {
			rows++
		}
	}
	var d time.Duration
	if prompt > 0 {
		d += b.prof.PromptDuration(prompt)
	}
	if rows > 0 {
		d += b.prof.StepDuration(rows)
	}
	return d
}

// Eval implements backend.Backend.
func (b *Backend) Eval(ctx context.Context, feeds []backend.Feed) error {
	start := time.Now()
	b.evals++
	b.nOut = 0
	for i, f := range feeds {
		if f.Slot < 0 || f.Slot >= len(b.lens) {
			return fmt.Errorf("replay: feed %d: slot %d outside [0, %d)", i, f.Slot, len(b.lens))
		}
		if len(f.Tokens) == 0 {
			return fmt.Errorf("replay: feed %d is empty", i)
		}
		for _, t := range f.Tokens {
			if t < 0 || int(t) >= b.prof.VocabSize {
				return fmt.Errorf("replay: feed %d: %w: %d not in [0, %d)", i, backend.ErrTokenOutOfRange, t, b.prof.VocabSize)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline := start.Add(b.Duration(feeds))
	for len(b.out) < len(feeds) {
		b.out = append(b.out, make([]float32, b.prof.VocabSize))
	}
	for i, f := range feeds {
		b.lens[f.Slot] += len(f.Tokens)
		last := uint64(f.Tokens[len(f.Tokens)-1])
		r := (last*0x9e3779b97f4a7c15 + uint64(b.lens[f.Slot])) >> 32 % modelRows
		copy(b.out[i], b.rows[r])
	}
	if b.Wait == Spin {
		spinUntil(deadline)
	} else {
		sleepUntil(deadline)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.nOut = len(feeds)
	return nil
}

// Logits implements backend.Backend; nil for an index that was not a feed of
// the last successful Eval.
func (b *Backend) Logits(i int) []float32 {
	if i < 0 || i >= b.nOut {
		return nil
	}
	return b.out[i]
}

// Copy implements backend.Backend.
func (b *Backend) Copy(dst, src int) error {
	if dst < 0 || dst >= len(b.lens) || src < 0 || src >= len(b.lens) {
		return fmt.Errorf("replay: copy %d to %d: slot outside [0, %d)", src, dst, len(b.lens))
	}
	b.lens[dst] = b.lens[src]
	b.nOut = 0
	return nil
}

// Truncate implements backend.Backend.
func (b *Backend) Truncate(slot, n int) error {
	if slot < 0 || slot >= len(b.lens) || n < 0 || n > b.lens[slot] {
		return fmt.Errorf("replay: truncate slot %d to %d tokens: out of range", slot, n)
	}
	b.lens[slot] = n
	b.nOut = 0
	return nil
}

// Clear implements backend.Backend.
func (b *Backend) Clear(slot int) error {
	if slot < 0 || slot >= len(b.lens) {
		return fmt.Errorf("replay: clear %d: slot outside [0, %d)", slot, len(b.lens))
	}
	b.lens[slot] = 0
	b.nOut = 0
	return nil
}

var _ backend.Backend = (*Backend)(nil)
