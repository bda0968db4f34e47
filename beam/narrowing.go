package beam

import (
	"cmp"
	"math"
	"slices"
)

// hypRef is a hypothesis of the Narrowing rule that left the beam.
type hypRef struct {
	node     int32
	length   int
	logprob  float64
	finished bool
}

// stepNarrowing is one step of the Narrowing rule: the k*V extensions of
// the live beams ranked together by summed log-probability, the best
// NumBeams-finished finite ones kept; eos finishes a hypothesis, which keeps
// its place, so the beam narrows.
func (s *search) stepNarrowing(g *group) (bool, error) {
	tables := g.tables[:len(g.beams)]
	for j, b := range g.beams {
		tables[j] = table{scores: g.scores[j], base: b.logprob}
	}
	cands := topLogProbs(g.cands, &g.best, tables, s.k-len(g.done))
	g.cands = cands
	if len(cands) == 0 {
		return false, ErrNoFiniteScore
	}
	length := g.step + 1
	g.children = g.children[:0]
	for _, c := range cands {
		b := g.beams[c.beam]
		n := s.newNode(b.node, c.token, g.prompt*s.k+int(c.beam), g.scores[c.beam][c.token])
		if s.isEOS(c.token) {
			g.done = append(g.done, hypRef{node: n, length: length, logprob: c.key, finished: true})
		} else {
			g.children = append(g.children, child{parent: int(c.beam), token: c.token, node: n, logprob: c.key})
		}
	}
	done := len(g.children) == 0 || g.promptLen+length >= g.maxLen
	if s.opts.Progress != nil {
		s.reportNarrowing(g, length)
	}
	if done {
		for _, c := range g.children {
			g.done = append(g.done, hypRef{node: c.node, length: length, logprob: c.logprob})
		}
		s.finishNarrowing(g)
	}
	return done, nil
}

func (s *search) narrowScore(logprob float64, length int) float64 {
	return logprob / math.Pow(float64(length), s.lp)
}

func (s *search) reportNarrowing(g *group, length int) {
	var best hypRef
	bestScore := math.Inf(-1)
	for _, h := range g.done {
		if sc := s.narrowScore(h.logprob, h.length); sc > bestScore {
			best, bestScore = h, sc
		}
	}
	if len(g.children) > 0 {
		c := g.children[0]
		if sc := s.narrowScore(c.logprob, length); sc > bestScore {
			best, bestScore = hypRef{node: c.node, length: length, logprob: c.logprob}, sc
		}
	}
	s.report(g, best.node, bestScore, best.finished)
}

// finishNarrowing ranks the prompt's hypotheses by score, best first; equal
// scores keep the order in which the hypotheses left the beam.
func (s *search) finishNarrowing(g *group) {
	hyps := make([]Hypothesis, len(g.done))
	for i, h := range g.done {
		hyps[i] = Hypothesis{
			Tokens:   s.path(make([]int32, 0, h.length), h.node),
			LogProb:  h.logprob,
			Score:    s.narrowScore(h.logprob, h.length),
			Finished: h.finished,
		}
	}
	slices.SortStableFunc(hyps, func(a, b Hypothesis) int { return cmp.Compare(b.Score, a.Score) })
	s.res.Hypotheses[g.prompt] = hyps
}
