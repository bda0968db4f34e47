package logits

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/llamaloop/llamaloop/genconfig"
)

// Options complete what a config alone does not say.
type Options struct {
	// VocabSize is the width of a scores row (required, > 0). Token ids of the config are checked
	// against it.
	VocabSize int
	// BeamSearch makes min_tokens_to_keep = len(eos)+1 (2 without eos) for the warpers, as
	// transformers does when num_beams > 1. It is implied by cfg.NumBeams > 1.
	BeamSearch bool
	// User processors are inserted where transformers merges the logits_processor argument of
	// generate(): after SuppressTokensAtBegin, before the warpers. A user processor of the same Go
	// type as a built-in one replaces it in place, as transformers replaces a default processor by a
	// custom one of the same class.
	User []Processor
}

// Pipeline is the ordered processor list that transformers 4.57's
// GenerationMixin._get_logits_processor builds for a config, or a custom chain from [Chain]. It is
// immutable after construction and safe for concurrent use by many rows; per-sequence state lives
// in [History].
//
// A pipeline serves sequences of different prompt lengths: wherever transformers uses the prompt
// length P (max_new_tokens -> max_length, min_new_tokens, the exponential decay start, the
// begin-suppress step, forced EOS at max_length-1), the stage takes P from [History.PromptLen] of
// the history it processes a row for.
type Pipeline struct {
	vocab  int
	names  []string
	stages []Processor // execution order; a fused stage stands for two names
	aware  []bool      // stage works on and maintains the candidate list
	sparse []bool      // stage reads nothing of a row but its candidates (a stale row is fine)
	sample bool        // the config samples (do_sample): Chooser is Multinomial
}

// candidateStage marks the built-in warpers that keep a row's candidate list valid (-inf stays -inf
// and they only remove candidates), so that they and Pipeline.Sample can skip the rest of the row.
type candidateStage interface{ keepsCandidates() }

// sparseStage marks the warpers that, given a row's candidates, read and write nothing else of it,
// even where they give up (a NaN or +inf candidate): a stale row may pass through them.
type sparseStage interface{ readsCandidatesOnly() }

// NewPipeline builds the processor list of transformers' _get_logits_processor for cfg (decoder-only,
// the prompt as encoder input), in this order, each only when its condition holds:
//
//	SequenceBias, EncoderRepetitionPenalty, RepetitionPenalty, NoRepeatNGram, EncoderNoRepeatNGram,
//	NoBadWords, MinLength, MinNewTokensLength, ForcedBOS, ForcedEOS, InfNanRemove,
//	ExponentialDecayLengthPenalty, SuppressTokens, SuppressTokensAtBegin, [opts.User...],
//	then only when do_sample: Temperature, TopK, TopP, MinP, Typical, Epsilon, Eta,
//	then LogitNormalization (renormalize_logits).
//
// cfg may be resolved ([genconfig.Config.Resolve]) or not; per-row lengths follow the rules of
// Resolve with each row's prompt length. cfg is checked with Validate(opts.VocabSize) and its errors
// returned; warnings are not reported here.
func NewPipeline(cfg *genconfig.Config, opts Options) (*Pipeline, error) {
	if opts.VocabSize <= 0 {
		return nil, fmt.Errorf("logits: Options.VocabSize must be positive, got %d", opts.VocabSize)
	}
	if _, err := cfg.Validate(opts.VocabSize); err != nil {
		return nil, err
	}
	c := cfg
	eos := c.EOSTokenID
	var list []Processor
	var buildErr error
	add := func(p Processor, err error) {
		if err != nil {
			buildErr = cmp.Or(buildErr, err)
			return
		}
		list = append(list, p)
	}
	if c.SequenceBias != nil {
		add(NewSequenceBias(c.SequenceBias, opts.VocabSize))
	}
	if c.EncoderRepetitionPenalty != 1 {
		add(NewEncoderRepetitionPenalty(c.EncoderRepetitionPenalty))
	}
	if c.RepetitionPenalty != 1 {
		add(NewRepetitionPenalty(c.RepetitionPenalty))
	}
	if c.NoRepeatNGramSize > 0 {
		add(NewNoRepeatNGram(c.NoRepeatNGramSize))
	}
	if c.EncoderNoRepeatNGramSize > 0 {
		add(NewEncoderNoRepeatNGram(c.EncoderNoRepeatNGramSize))
	}
	if c.BadWordsIDs != nil {
		add(NewNoBadWords(c.BadWordsIDs, eos, opts.VocabSize))
	}
	if len(eos) > 0 {
		if c.MinNewTokens != nil {
			list = append(list, &MinLength{minLength: *c.MinNewTokens, eos: slices.Clone(eos), fromPrompt: true})
		} else if c.MinLength > 0 {
			add(NewMinLength(c.MinLength, eos))
		}
		if c.MinNewTokens != nil && *c.MinNewTokens > 0 {
			add(NewMinNewTokensLength(*c.MinNewTokens, eos))
		}
	}
	if c.ForcedBOSTokenID != nil {
		add(NewForcedBOS(*c.ForcedBOSTokenID, opts.VocabSize))
	}
	if c.ForcedEOSTokenID != nil {
		list = append(list, &ForcedEOS{maxLen: lengthRuleOf(c), eos: slices.Clone(c.ForcedEOSTokenID)})
	}
	if c.RemoveInvalidValues {
		list = append(list, InfNanRemove{})
	}
	if d := c.ExponentialDecayLengthPenalty; d != nil {
		add(NewExponentialDecayLengthPenalty(int(d[0]), d[1], eos))
	}
	if c.SuppressTokens != nil {
		list = append(list, NewSuppressTokens(c.SuppressTokens))
	}
	if c.BeginSuppressTokens != nil {
		list = append(list, &SuppressTokensAtBegin{tokens: slices.Clone(c.BeginSuppressTokens),
			afterForcedBOS: c.ForcedBOSTokenID != nil})
	}
	list = mergeUser(list, opts.User)

	if c.DoSample {
		// Beam methods keep one non-eos token beside every eos: len(eos)+1, or 2 without eos.
		minKeep := 1
		if opts.BeamSearch || c.NumBeams > 1 {
			minKeep = max(len(eos)+1, 2)
		}
		if c.Temperature != 1 {
			add(NewTemperature(c.Temperature))
		}
		if c.TopK != 0 {
			add(NewTopK(c.TopK, minKeep))
		}
		if c.TopP < 1 {
			add(NewTopP(c.TopP, minKeep))
		}
		if c.MinP != nil {
			add(NewMinP(*c.MinP, minKeep))
		}
		if c.TypicalP < 1 {
			add(NewTypical(c.TypicalP, minKeep))
		}
		if c.EpsilonCutoff > 0 && c.EpsilonCutoff < 1 {
			add(NewEpsilon(c.EpsilonCutoff, minKeep))
		}
		if c.EtaCutoff > 0 && c.EtaCutoff < 1 {
			add(NewEta(c.EtaCutoff, minKeep))
		}
	}
	if c.RenormalizeLogits {
		list = append(list, LogitNormalization{})
	}
	if buildErr != nil {
		return nil, buildErr
	}
	p := newPipeline(opts.VocabSize, list)
	p.sample = c.DoSample
	return p, nil
}

// Chain returns a pipeline that runs procs in the given order on rows of vocabSize scores: a custom
// chain outside transformers' list (for example presence penalties and a logit bias before TopK).
func Chain(vocabSize int, procs ...Processor) (*Pipeline, error) {
	if vocabSize <= 0 {
		return nil, fmt.Errorf("logits: vocabSize must be positive, got %d", vocabSize)
	}
	for i, p := range procs {
		if p == nil {
			return nil, errors.New("logits: Chain: processor " + fmt.Sprint(i) + " is nil")
		}
	}
	return newPipeline(vocabSize, slices.Clone(procs)), nil
}

func newPipeline(vocab int, list []Processor) *Pipeline {
	p := &Pipeline{vocab: vocab}
	for i := 0; i < len(list); i++ {
		p.names = append(p.names, list[i].Name())
		stage := list[i]
		// Temperature followed by TopK runs as one pass (same values, see temperatureTopK).
		if t, ok := stage.(*Temperature); ok && i+1 < len(list) {
			if k, ok := list[i+1].(*TopK); ok {
				p.names = append(p.names, k.Name())
				stage = &temperatureTopK{t: t, k: k}
				i++
			}
		}
		p.stages = append(p.stages, stage)
		_, aware := stage.(candidateStage)
		p.aware = append(p.aware, aware)
		_, sparse := stage.(sparseStage)
		p.sparse = append(p.sparse, sparse)
	}
	return p
}

// mergeUser inserts user processors as transformers' _merge_criteria_processor_list does: a user
// processor of the same type as a default one replaces it in place; the others are appended.
func mergeUser(list, user []Processor) []Processor {
	used := make([]bool, len(user))
	for i, d := range list {
		for j, u := range user {
			if u != nil && reflect.TypeOf(u) == reflect.TypeOf(d) {
				list[i], used[j] = u, true
				break
			}
		}
	}
	for j, u := range user {
		if u != nil && !used[j] {
			list = append(list, u)
		}
	}
	return list
}

// Names returns the processors' names in application order (transformers' class names for the
// built-in ones).
func (p *Pipeline) Names() []string { return slices.Clone(p.names) }

// Len returns the number of processors.
func (p *Pipeline) Len() int { return len(p.names) }

// VocabSize returns the row width the pipeline was built for.
func (p *Pipeline) VocabSize() int { return p.vocab }

// NewHistory returns the history of a sequence that starts as prompt (copied), with the state of
// every stage of p: its prompt length P is len(prompt).
func (p *Pipeline) NewHistory(prompt []int32) *History { return p.newHistory(prompt, nil) }

// NewEncoderHistory is NewHistory for the decoder of an encoder-decoder model: prompt is the
// decoder prompt (decoder_start_token_id, usually alone), which the length rules count, and
// encoder (copied) is the encoder input, which EncoderRepetitionPenalty and EncoderNoRepeatNGram
// see instead of the prompt, as transformers gives them the encoder's input_ids.
func (p *Pipeline) NewEncoderHistory(prompt, encoder []int32) *History {
	return p.newHistory(prompt, slices.Clone(encoder))
}

func (p *Pipeline) newHistory(prompt, encoder []int32) *History {
	r := &History{p: p, tokens: slices.Clone(prompt), promptLen: len(prompt), encoder: encoder}
	r.states = make([]State, len(p.stages))
	for i, s := range p.stages {
		if sp, ok := s.(StatefulProcessor); ok {
			in := prompt
			if _, ok := s.(encoderProcessor); ok && encoder != nil {
				in = encoder
			}
			r.states[i] = sp.NewState(in, p.vocab)
		}
	}
	return r
}

// encoderProcessor marks the processors whose state comes from the encoder input.
type encoderProcessor interface{ readsEncoderInput() }

func (*EncoderRepetitionPenalty) readsEncoderInput() {}
func (*EncoderNoRepeatNGram) readsEncoderInput()     {}

// Process applies every stage in order to scores, the next-token row of history r, in place. It
// does not allocate in steady state. r should come from p.NewHistory; a history of another pipeline
// is re-initialised from its tokens first.
func (p *Pipeline) Process(r *History, scores []float32) {
	p.process(r, scores, false)
}

// ProcessForSample is Process for a row that only [Pipeline.Sample] reads afterwards (the chain of a
// sampling loop): a top-k stage may leave the scores it removes as they were instead of writing
// -inf over them (at a vocabulary of 128256, a third of the chain's time), so that the row's
// entries outside the candidates are unspecified until Sample, which draws the same index as after
// Process. Use Process when anything else reads the row.
func (p *Pipeline) ProcessForSample(r *History, scores []float32) {
	p.process(r, scores, true)
}

func (p *Pipeline) process(r *History, scores []float32, forSample bool) {
	if r.p != p || len(r.states) != len(p.stages) {
		p.adopt(r)
	}
	r.running, r.forSample = true, forSample
	r.cand.valid, r.cand.stale = false, false
	for i, s := range p.stages {
		r.stage = i
		if !p.sparse[i] {
			r.materialize(scores)
		}
		if !p.aware[i] {
			r.cand.valid = false
		}
		s.Process(r, scores)
	}
	r.running, r.forSample = false, false
}

// adopt rebuilds r's states for p from r's history.
func (p *Pipeline) adopt(r *History) {
	tokens := r.tokens
	fresh := p.newHistory(tokens[:r.promptLen], r.encoder)
	for _, t := range tokens[r.promptLen:] {
		fresh.Accept(t)
	}
	r.p, r.states = p, fresh.states
}

// Sample draws the next token from scores as [SampleIndex] does (same index for the same u), but
// when the last stages of p.Process bounded the candidates (top-k), it visits only those. scores must
// be the slice that Process (or ProcessForSample) just processed for r, unchanged since.
func (p *Pipeline) Sample(r *History, scores []float32, u float64) (index int, ok bool) {
	if !r.cand.describes(scores) {
		return SampleIndex(scores, u)
	}
	m := negInf
	nInf := false
	for _, i := range r.cand.idx {
		x := scores[i]
		if x > m {
			m = x
		}
		nInf = nInf || x > maxFloat32
	}
	if m == negInf || nInf {
		r.materialize(scores)
		return SampleIndex(scores, u)
	}
	return sampleFrom(scores, r.cand.idx, m, u)
}

// lengthRule is a length that may depend on the row's prompt length (Resolve's rules, per row).
type lengthRule struct {
	n          int
	fromPrompt bool
}

func (l lengthRule) at(promptLen int) int {
	if l.fromPrompt {
		return promptLen + l.n
	}
	return l.n
}

// lengthRuleOf is max_length of c per row, as Resolve computes it.
func lengthRuleOf(c *genconfig.Config) lengthRule {
	switch {
	case c.MaxNewTokens != nil:
		return lengthRule{n: *c.MaxNewTokens, fromPrompt: true}
	case c.MaxLength == 20:
		return lengthRule{n: 20, fromPrompt: true}
	}
	return lengthRule{n: c.MaxLength}
}
