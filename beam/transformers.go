package beam

import (
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/internal/numeric"
)

// finished is one of a prompt's NumBeams finished-hypothesis entries of
// transformers' beam search (sequences, beam_scores, is_sent_finished).
type finished struct {
	node  int32   // path, -1 for the initial placeholder
	score float32 // length-normalised score, with any -1e9 penalties
	sum   float32 // running score of the candidate
	done  bool    // a real hypothesis, not a placeholder
}

// outRow is one returned row of the Transformers rule, before padding.
type outRow struct {
	node  int32
	score float32
}

// stepBeam is one step of transformers 4.57's _beam_search for g's prompt.
func (s *search) stepBeam(g *group) (bool, error) {
	cands, err := s.candidates(g)
	if err != nil {
		return false, err
	}
	run, allHit := s.running(g, cands)
	denom := float32(math.Pow(float64(g.step+1), s.lp))
	fin := s.finished(g, cands, denom)
	// The next running beams, best first.
	g.children = g.children[:0]
	for _, i := range run {
		c := &cands[i]
		parent := int(c.beam)
		if g.step == 0 {
			parent = 0
		}
		g.children = append(g.children, child{parent: parent, token: c.token, node: s.candNode(g, c), score: c.tmp})
	}

	// Early-stop heuristic, with the new length.
	lh := g.step + 1
	if s.es == earlyNever && s.lp > 0 {
		lh = g.maxLen - g.promptLen
	}
	bestRunning := cands[run[0]].tmp / float32(math.Pow(float64(lh), s.lp))
	worst := fin[0].score
	for _, e := range fin {
		worst = min(worst, e.score)
	}
	improvable := false
	for _, e := range fin {
		w := neg
		if e.done {
			w = worst
		}
		if bestRunning > w {
			improvable = true
		}
	}
	g.unsat = g.unsat && improvable
	done := !g.unsat || (s.es == earlyTrue && allDone(fin)) || allHit

	if s.opts.Progress != nil {
		runScore := float64(cands[run[0]].tmp / denom)
		if fin[0].done && float64(fin[0].score) >= runScore || done {
			eos := fin[0].node >= 0 && s.isEOS(s.nodes[fin[0].node].token)
			s.report(g, fin[0].node, float64(fin[0].score), fin[0].done && eos)
		} else {
			s.report(g, g.children[0].node, runScore, false)
		}
	}
	if done {
		s.finishBeam(g)
	}
	return done, nil
}

// candidates returns the step's best candidates of g over all its beams.
func (s *search) candidates(g *group) ([]cand, error) {
	k := s.k
	tables := g.tables[:len(g.beams)]
	if g.step == 0 {
		tables = g.tables[:k]
	}
	for j := range tables {
		if g.step == 0 {
			// All beams hold the prompt; only beam 0 counts (-1e9 on the others).
			tables[j] = table{scores: g.scores[0], add: neg}
			if j == 0 {
				tables[j].add = 0
			}
		} else {
			tables[j] = table{scores: g.scores[j], add: g.beams[j].score}
		}
	}
	var cands []cand
	if s.cfg.DoSample {
		cands = s.topSampled(g.cands, &g.best, tables, s.c)
	} else {
		cands = topScores(g.cands, &g.best, tables, s.c, &g.tops)
	}
	g.cands = cands
	best := float32(math.Inf(-1))
	for _, c := range cands {
		best = max(best, c.score)
	}
	if !finite(best) {
		return nil, ErrNoFiniteScore
	}

	return cands, nil
}

// running marks the candidates that end (eos, or the last position), which leave the running
// set, and returns the indexes of the k best others, best first; allHit reports that every
// candidate ends.
func (s *search) running(g *group, cands []cand) (run []int, allHit bool) {
	k := s.k
	// Candidates that end (eos, or the last position) leave the running set.
	curLen := g.promptLen + g.step
	last := curLen+1 >= g.maxLen
	allHit = true
	for i := range cands {
		c := &cands[i]
		c.hit = last || s.isEOS(c.token)
		c.tmp = c.score
		if c.hit {
			c.tmp = c.score + neg
		} else {
			allHit = false
		}
	}
	run = g.running[:0]
	for i := range cands {
		if len(run) == k && !(cands[i].tmp > cands[run[k-1]].tmp) {
			continue
		}
		if len(run) == k {
			run = run[:k-1]
		}
		p := len(run)
		run = append(run, i)
		for p > 0 && cands[run[p-1]].tmp < cands[i].tmp {
			run[p] = run[p-1]
			p--
		}
		run[p] = i
	}
	g.running = run
	return run, allHit

}

// finished returns the k best finished hypotheses: only the first k candidates may finish, and
// they compete with the earlier ones for the k places.
func (s *search) finished(g *group, cands []cand, denom float32) []finished {
	k := s.k
	// Finished hypotheses: only the first k candidates may finish; they
	// compete with the earlier ones for the k places.
	full := s.es == earlyTrue && allDone(g.fin)
	fin := g.finNext[:0]
	for i := range k + len(cands) {
		var e finished
		if i < k {
			e = g.fin[i]
		} else {
			c := &cands[i-k]
			e = finished{score: c.score / denom, sum: c.score, done: c.hit && i-k < k, node: -1}
			if full {
				e.score += neg
			}
			if !g.unsat {
				e.score += neg
			}
			if !e.done {
				e.score += neg
			}
			if len(fin) == k && !(e.score > fin[k-1].score) {
				continue
			}
			e.node = s.candNode(g, c)
		}
		if len(fin) == k {
			if !(e.score > fin[k-1].score) {
				continue
			}
			fin = fin[:k-1]
		}
		p := len(fin)
		fin = append(fin, e)
		for p > 0 && fin[p-1].score < e.score {
			fin[p] = fin[p-1]
			p--
		}
		fin[p] = e
	}
	g.fin, g.finNext = fin, g.fin[:k]
	return fin

}

// candNode returns c's path node, making it on first use.
func (s *search) candNode(g *group, c *cand) int32 {
	if c.node < 0 {
		parent := int32(-1)
		scores := g.scores[0]
		if g.step > 0 {
			parent = g.beams[c.beam].node
			scores = g.scores[c.beam]
		}
		c.node = s.newNode(parent, c.token, g.prompt*s.k+int(c.beam), scores[c.token])
	}
	return c.node
}

func allDone(fin []finished) bool {
	for _, e := range fin {
		if !e.done {
			return false
		}
	}
	return true
}

// finishBeam records the prompt's first NumReturnSequences finished entries.
func (s *search) finishBeam(g *group) {
	r := s.cfg.NumReturnSequences
	rows := make([]outRow, r)
	hyps := make([]Hypothesis, r)
	for i, e := range g.fin[:r] {
		rows[i] = outRow{node: e.node, score: e.score}
		toks := s.path(nil, e.node)
		hyps[i] = Hypothesis{
			Tokens:   toks,
			LogProb:  float64(e.sum),
			Score:    float64(e.score),
			Finished: e.done && len(toks) > 0 && s.isEOS(toks[len(toks)-1]),
		}
	}
	s.rows[g.prompt] = rows
	s.res.Hypotheses[g.prompt] = hyps
}

// stepSample is one step of transformers' _sample for one beam: the
// processed logits, then the pipeline's chooser, the one the decoding loop
// uses (argmax, or a multinomial draw from the search's Source).
func (s *search) stepSample(g *group) (bool, error) {
	row := g.scores[0]
	b := g.beams[0]
	tok, err := s.choose.Choose(b.hist, row, &s.src)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrNoFiniteScore, err)
	}
	if !finite(row[tok]) {
		return false, ErrNoFiniteScore // +inf: no log-probability to sum
	}
	token := int32(tok)
	n := s.newNode(b.node, token, g.prompt, row[tok])
	logprob := b.logprob + float64(row[tok]) - numeric.LogSumExp(row)
	eos := s.isEOS(token)
	done := eos || g.promptLen+g.step+1 >= g.maxLen
	s.report(g, n, logprob, eos)
	if done {
		s.rows[g.prompt] = []outRow{{node: n}}
		s.res.Hypotheses[g.prompt] = []Hypothesis{{
			Tokens:   s.path(nil, n),
			LogProb:  logprob,
			Score:    logprob,
			Finished: eos,
		}}
		return true, nil
	}
	g.children = append(g.children[:0], child{parent: 0, token: token, node: n, logprob: logprob})
	return false, nil
}

// assemble builds generate()'s padded outputs from the returned rows.
func (s *search) assemble() {
	if s.opts.Rule != Transformers {
		return
	}
	width := 0
	for _, rows := range s.rows {
		for _, r := range rows {
			width = max(width, s.depth(r.node))
		}
	}
	n := len(s.prompts) * s.cfg.NumReturnSequences
	s.res.Sequences = make([][]int32, 0, n)
	s.res.TransitionScores = make([][]float32, 0, n)
	if s.k > 1 {
		s.res.SequencesScores = make([]float32, 0, n)
		s.res.BeamIndices = make([][]int32, 0, n)
	}
	for p, rows := range s.rows {
		for _, r := range rows {
			d := s.depth(r.node)
			seq := make([]int32, len(s.prompts[p])+width)
			copy(seq, s.prompts[p])
			trans := make([]float32, width)
			var bidx []int32
			if s.k > 1 {
				bidx = make([]int32, width)
				for i := range bidx {
					bidx[i] = -1
				}
			}
			for i := d; i < width; i++ {
				seq[len(s.prompts[p])+i] = s.fill
			}
			for i, n := d-1, r.node; n >= 0; i, n = i-1, s.nodes[n].parent {
				nd := s.nodes[n]
				seq[len(s.prompts[p])+i] = nd.token
				trans[i] = nd.score
				if bidx != nil {
					bidx[i] = nd.beam
				}
			}
			s.res.Sequences = append(s.res.Sequences, seq)
			s.res.TransitionScores = append(s.res.TransitionScores, trans)
			if s.k > 1 {
				s.res.SequencesScores = append(s.res.SequencesScores, r.score)
				s.res.BeamIndices = append(s.res.BeamIndices, bidx)
			}
		}
	}
}

// depth is the number of tokens of the path ending at n.
func (s *search) depth(n int32) int {
	d := 0
	for ; n >= 0; n = s.nodes[n].parent {
		d++
	}
	return d
}
