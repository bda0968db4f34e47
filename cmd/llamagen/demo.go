package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
)

// Demo defaults, for any option the command line leaves unset.
const (
	demoPrompt      = "The model"
	demoMaxNew      = 40
	demoTemperature = 0.8
	demoTopP        = 0.95
	demoBeams       = 4
	demoSeed        = 1
)

// demoMethod is one decoding method of --demo and its outcome.
type demoMethod struct {
	name, settings string
	row            *row
	elapsed        time.Duration
}

// demo runs greedy decoding, sampling, Mirostat, beam search and greedy
// speculative decoding on the same prompt and prints them one under the other, the method and its
// settings beside each text.
func (s *session) demo() error {
	text := s.o.prompt
	if text == "" {
		text = demoPrompt
	}
	base := s.cfg.Clone()
	if !setsLength(s.o.overrides) {
		n := demoMaxNew
		base.MaxNewTokens = &n
	}
	if s.o.seed < 0 {
		s.seed = demoSeed
	}
	set := func(key string) bool { _, ok := s.o.overrides[key]; return ok }

	// One sequence per method: --num-beams and --num-return-sequences
	// are the beam search row's.
	base.NumBeams, base.NumReturnSequences = 1, 1
	// and --prompt-lookup is the speculative row's.
	lookup := base.PromptLookupNumTokens
	base.PromptLookupNumTokens = nil
	greedy := base.Clone()
	greedy.DoSample = false

	sampling := base.Clone()
	sampling.DoSample = true
	if !set("temperature") {
		sampling.Temperature = demoTemperature
	}
	if !set("top_p") {
		sampling.TopP = demoTopP
	}

	miro := greedy.Clone()
	miroCfg := s.o.mirostatConfig()
	if s.o.mirostat == 0 {
		miroCfg.Version = 2
	}

	beams := base.Clone()
	beams.DoSample = false
	beams.NumBeams = s.cfg.NumBeams
	if !set("num_beams") || beams.NumBeams < 2 {
		beams.NumBeams = demoBeams
	}
	if !set("early_stopping") {
		beams.EarlyStopping = genconfig.EarlyStoppingTrue
	}
	beams.NumReturnSequences = 1

	p := prompt{Text: text}
	req := p.request(false, "", false)
	toks, err := s.tokenize(&req)
	if err != nil {
		return err
	}
	methods := []*demoMethod{
		{name: "greedy", settings: "do_sample false"},
		{name: "sampling", settings: fmt.Sprintf("temperature %g, top-k %d, top-p %g, seed %d", sampling.Temperature, sampling.TopK, sampling.TopP, s.seed)},
		{name: fmt.Sprintf("Mirostat v%d", miroCfg.Version), settings: fmt.Sprintf("tau %g, eta %g, seed %d", miroCfg.Tau, miroCfg.Eta, s.seed)},
		{name: "beam search", settings: fmt.Sprintf("%d beams, length penalty %g, early stopping %s", beams.NumBeams, beams.LengthPenalty, beams.EarlyStopping)},
	}

	ctx, stopWatching := s.untilInterrupt()
	defer stopWatching()
	lb, err := s.newBackend(1, greedy.Resolve(len(toks)).MaxLength, false)
	if err != nil {
		return err
	}
	gen := generation.NewGenerator(lb, s.tok)
	reqs := []generation.Request{
		{Prompt: toks, Config: greedy},
		{Prompt: toks, Config: sampling, Seed: s.seed},
		{Prompt: toks, Config: miro, Seed: s.seed, Mirostat: miroCfg},
	}
	for i, req := range reqs {
		m := methods[i]
		m.row = &row{index: i, promptIndex: 0, sequences: 1, prompt: p, promptTokens: len(toks), method: m.name}
		start := time.Now()
		_, err := s.stream(ctx, gen, []generation.Request{req}, []*row{m.row}, 1, nopPrinter{})
		m.elapsed = time.Since(start)
		if err != nil {
			closeBackend(lb)
			return err
		}
	}
	closeBackend(lb)

	start := time.Now()
	res, _, err := s.runBeams(ctx, beams, [][]int32{toks}, nil, nil, 0, 1, nil)
	if err != nil {
		return err
	}
	m := methods[3]
	m.elapsed = time.Since(start)
	m.row = s.beamRows(res, []*row{{prompt: p, promptTokens: len(toks)}}, "")[0]
	m.row.index, m.row.method = 3, m.name

	specCfg := greedy.Clone()
	specCfg.PromptLookupNumTokens = lookup
	spec, err := s.demoSpeculative(ctx, specCfg, toks, p)
	if err != nil {
		return err
	}
	methods = append(methods, spec)

	if s.o.json {
		jp := newJSONPrinter(s.stdout, s.model.Vocab(), false)
		for _, m := range methods {
			jp.finish(m.row)
		}
		return nil
	}
	s.printDemo(s.stdout, text, methods)
	return nil
}

// printDemo lays the methods out as a two-column table: method and
// settings on the left, the prompt and its continuation on the right.
func (s *session) printDemo(w io.Writer, text string, methods []*demoMethod) {
	const left, right = 28, 50
	fmt.Fprintf(w, "prompt %q, %s, %s, %s\n\n", text, shortName(s.o.model), deviceWord(s), threads(s.o.threads))
	for _, m := range methods {
		leftLines := append([]string{m.name}, wrapWords(m.settings, left-2)...)
		rightLines := wrapWords(text+string(m.row.text), right)
		note := fmt.Sprintf("(%s; %.0f ms", finishNote(m.row), float64(m.elapsed.Microseconds())/1000)
		if sec := m.elapsed.Seconds(); sec > 0 {
			note += fmt.Sprintf(", %.0f tokens/s", float64(len(m.row.tokens))/sec)
		}
		rightLines = append(rightLines, note+")")
		for i := range max(len(leftLines), len(rightLines)) {
			l, r := "", ""
			if i < len(leftLines) {
				l = leftLines[i]
			}
			if i < len(rightLines) {
				r = rightLines[i]
			}
			fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("%-*s| %s", left, l, r), " "))
		}
		fmt.Fprintln(w)
	}
}

func deviceWord(s *session) string {
	return strings.SplitN(cli.DeviceSummary(s.o.gpuLayers, s.model.Info().Layers), " (", 2)[0]
}

// wrapWords breaks text into lines of at most width characters (a longer
// word gets a line of its own).
func wrapWords(text string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, w := range strings.Fields(text) {
		if cur.Len() > 0 && cur.Len()+1+len(w) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(w)
	}
	if cur.Len() > 0 || len(lines) == 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

// nopPrinter discards the stream (the demo prints whole results).
type nopPrinter struct{}

func (nopPrinter) token(*row, *generation.Event) {}
func (nopPrinter) finish(*row)                   {}
func (nopPrinter) close()                        {}
