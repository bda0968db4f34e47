package beam

import (
	"fmt"

	"github.com/llamaloop/llamaloop/internal/numeric/parallel"
	"github.com/llamaloop/llamaloop/logits"
)

// parallelEntries is the number of logits entries (rows * vocabulary) of a
// step from which its rows are processed in parallel: a log-softmax costs
// about 10 ns per entry, a hand-off to a worker about a microsecond.
const parallelEntries = 1 << 15

// rowJob is one beam's row of a step: its logits, the buffer for its
// processed scores and its processors' state.
type rowJob struct {
	src, dst []float32
	hist     *logits.History
}

// rowWork processes the rows of a step, on the machine's cores once a step
// is large enough (internal/numeric/parallel).
type rowWork struct {
	s    *search
	jobs []rowJob
	run  parallel.Runner
}

// Do processes row i.
func (w *rowWork) Do(i int) { w.s.processRow(&w.jobs[i]) }

// processAll turns each live beam's logits into the scores its rule ranks:
// log-softmax (beam search) or a copy (greedy, sampling), then the
// processors with the beam's own history. Rows are independent (a
// Pipeline serves many rows at once), so a large step runs them in
// parallel; llama.cpp's vocabularies make this the search's main cost.
func (s *search) processAll() error {
	w := &s.work
	w.s, w.jobs = s, w.jobs[:0]
	for _, g := range s.groups {
		if g.prompt < 0 {
			continue
		}
		for j, b := range g.beams {
			src := s.backend.Logits(g.feed[j])
			if len(src) != s.vocab {
				return fmt.Errorf("%w: slot %d gave %d logits, want %d", ErrBadLogits, b.slot, len(src), s.vocab)
			}
			w.jobs = append(w.jobs, rowJob{src: src, dst: g.scores[j], hist: b.hist})
		}
	}
	if len(w.jobs)*s.vocab < parallelEntries {
		for i := range w.jobs {
			s.processRow(&w.jobs[i])
		}
	} else {
		w.run.Run(len(w.jobs), w)
	}
	if s.opts.OutputScores {
		for _, g := range s.groups {
			if g.prompt >= 0 {
				for j := range g.beams {
					s.keepScores(g, j, g.scores[j])
				}
			}
		}
	}
	return nil
}

func (s *search) processRow(job *rowJob) {
	if s.logSoftmax {
		logits.LogSoftmax(job.dst, job.src)
	} else {
		copy(job.dst, job.src)
	}
	s.pipe.Process(job.hist, job.dst)
}
