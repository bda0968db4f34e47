package beam

import (
	"fmt"
	"runtime"
	"sync"

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

// rowWork processes the rows of a step, in parallel on workers that live
// as long as the search once a step is large enough.
type rowWork struct {
	jobs []rowJob
	next chan int // indexes into jobs
	wg   sync.WaitGroup
}

// processAll turns each live beam's logits into the scores its rule ranks:
// log-softmax (beam search) or a copy (greedy, sampling), then the
// processors with the beam's own history. Rows are independent (a
// Pipeline serves many rows at once), so a large step runs them in
// parallel; llama.cpp's vocabularies make this the search's main cost.
func (s *search) processAll() error {
	w := &s.work
	w.jobs = w.jobs[:0]
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
	workers := min(runtime.GOMAXPROCS(0), len(w.jobs))
	if workers < 2 || len(w.jobs)*s.vocab < parallelEntries {
		for i := range w.jobs {
			s.processRow(&w.jobs[i])
		}
	} else {
		if w.next == nil {
			w.next = make(chan int, len(s.slot))
			for range workers - 1 {
				go func() {
					for i := range w.next {
						s.processRow(&w.jobs[i])
						w.wg.Done()
					}
				}()
			}
		}
		w.wg.Add(len(w.jobs))
		for i := range w.jobs {
			w.next <- i
		}
		// The search's goroutine works too.
		for {
			select {
			case i := <-w.next:
				s.processRow(&w.jobs[i])
				w.wg.Done()
				continue
			default:
			}
			break
		}
		w.wg.Wait()
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

// stop ends the workers.
func (w *rowWork) stop() {
	if w.next != nil {
		close(w.next)
		w.next = nil
	}
}
