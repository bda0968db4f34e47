package llamaloop

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/grammar"
	"github.com/llamaloop/llamaloop/logits"
)

// GenerateOptions configure Generate, Stream, Chat, ChatStream and Beam.
// The zero value decodes greedily with genconfig.Default(): 20 new tokens.
type GenerateOptions struct {
	// Config is the generation config (transformers' GenerationConfig);
	// nil means genconfig.Default(), or ConfigFile. It is not modified.
	Config *genconfig.Config
	// ConfigFile is the path of a generation_config.json (a Hugging Face
	// model's defaults), read with genconfig.Load when Config is nil.
	ConfigFile string
	// MaxNewTokens, when positive, replaces the config's max_new_tokens.
	MaxNewTokens int
	// Seed seeds sampling (when the config samples: do_sample).
	Seed uint64
	// StopStrings end the text when it contains one of them (not Beam).
	StopStrings []string

	// JSONSchema constrains the text to JSON documents valid under this
	// schema (package grammar converts it to a grammar, or says which
	// keyword it cannot enforce). Grammar constrains it to a GBNF grammar
	// (llama.cpp's format). At most one of them.
	JSONSchema string
	Grammar    string
	// Processors are further logits processors, after the config's.
	Processors []logits.Processor
}

// Generate generates a continuation of prompt. The result holds the text,
// the tokens and why generation stopped (Finish: eos, stop, length). When
// the text could not end normally (the context filled up, ctx ended, a
// constraint left no token possible) it returns the result so far with an
// error that says what to do.
func (m *Model) Generate(ctx context.Context, prompt string, o GenerateOptions) (*generation.Result, error) {
	return m.generate(ctx, generation.Request{Text: prompt}, o)
}

// Stream generates a continuation of prompt and yields its text as it
// comes, piece by piece (never half a UTF-8 character; each piece is a new
// string). It ends with an error when the text could not end normally, as
// Generate does; breaking out of the loop stops generation.
func (m *Model) Stream(ctx context.Context, prompt string, o GenerateOptions) iter.Seq2[string, error] {
	return m.stream(ctx, generation.Request{Text: prompt}, o)
}

// Chat generates the assistant's answer to messages, rendered with the
// model's chat template (or Options.ChatTemplate) by llama.cpp.
func (m *Model) Chat(ctx context.Context, messages []Message, o GenerateOptions) (*generation.Result, error) {
	if err := m.checkChat(messages); err != nil {
		return nil, err
	}
	return m.generate(ctx, generation.Request{Messages: messages}, o)
}

// ChatStream is Chat, streamed as Stream streams.
func (m *Model) ChatStream(ctx context.Context, messages []Message, o GenerateOptions) iter.Seq2[string, error] {
	if err := m.checkChat(messages); err != nil {
		return func(yield func(string, error) bool) { yield("", err) }
	}
	return m.stream(ctx, generation.Request{Messages: messages}, o)
}

// checkChat renders messages once, so that a model without a template, or
// with one llama.cpp does not know, gets an error that says what to do.
func (m *Model) checkChat(messages []Message) error {
	if len(messages) == 0 {
		return errors.New("llamaloop: chat without messages")
	}
	if _, err := m.tok.ApplyChatTemplate(messages, true); err != nil {
		return fmt.Errorf("llamaloop: chat template: %w (set Options.ChatTemplate to a template llama.cpp knows, such as \"chatml\" or \"llama3\")", err)
	}
	return nil
}

func (m *Model) generate(ctx context.Context, req generation.Request, o GenerateOptions) (*generation.Result, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	gen, err := m.generator()
	if err != nil {
		return nil, err
	}
	if err := m.request(&req, o); err != nil {
		return nil, err
	}
	res, err := gen.Generate(ctx, []generation.Request{req})
	switch {
	case err != nil && len(res) == 1:
		return &res[0], fmt.Errorf("llamaloop: %w", err) // the output before a backend failure
	case err != nil:
		return nil, fmt.Errorf("llamaloop: %w", err)
	}
	r := &res[0]
	return r, m.finishError(r.Finish, r.Err, len(r.Tokens))
}

func (m *Model) stream(ctx context.Context, req generation.Request, o GenerateOptions) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if err := m.lock(); err != nil {
			yield("", err)
			return
		}
		defer m.mu.Unlock()
		gen, err := m.generator()
		if err == nil {
			err = m.request(&req, o)
		}
		if err != nil {
			yield("", err)
			return
		}
		n := 0
		for ev, err := range gen.Stream(ctx, []generation.Request{req}) {
			if err != nil {
				yield("", fmt.Errorf("llamaloop: %w", err))
				return
			}
			if ev.Token >= 0 {
				n++
			}
			if len(ev.Text) > 0 && !yield(ev.Text.String(), nil) {
				return
			}
			if err := m.finishError(ev.Finish, ev.Err, n); err != nil {
				yield("", err)
				return
			}
		}
	}
}

// finishError is the error of a request that ended with finish after n
// tokens, or nil when it ended normally.
func (m *Model) finishError(finish generation.FinishReason, err error, n int) error {
	switch finish {
	case generation.FinishContextFull:
		if err == nil {
			err = errors.New("context full")
		}
		return fmt.Errorf("llamaloop: the context of %d cells is full after %d new tokens: open the model with a larger Options.Context.ContextSize, or ask for fewer tokens (%w)",
			m.ctx.SequenceSize(), n, err)
	case generation.FinishCancelled:
		return fmt.Errorf("llamaloop: cancelled after %d new tokens: %w", n, err)
	case generation.FinishError:
		return fmt.Errorf("llamaloop: generation stopped after %d new tokens, no token being possible (a constraint that the config's processors contradict, or NaN logits): %w", n, err)
	}
	return nil
}

// request completes req with the options.
func (m *Model) request(req *generation.Request, o GenerateOptions) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	req.Config, req.Seed, req.StopStrings = cfg, o.Seed, o.StopStrings
	procs, err := m.constraint(o)
	if err != nil {
		return err
	}
	req.Processors = append(procs, o.Processors...)
	return nil
}

// config returns the options' generation config.
func (o *GenerateOptions) config() (*genconfig.Config, error) {
	cfg := o.Config
	switch {
	case cfg != nil && o.ConfigFile != "":
		return nil, errors.New("llamaloop: GenerateOptions has both Config and ConfigFile: set one")
	case o.ConfigFile != "":
		var err error
		if cfg, err = genconfig.Load(o.ConfigFile); err != nil {
			return nil, fmt.Errorf("llamaloop: GenerateOptions.ConfigFile: %w", err)
		}
	case cfg == nil:
		cfg = genconfig.Default()
	}
	if o.MaxNewTokens < 0 {
		return nil, fmt.Errorf("llamaloop: GenerateOptions.MaxNewTokens %d is negative (0 keeps the config's)", o.MaxNewTokens)
	}
	if o.MaxNewTokens > 0 {
		cfg = cfg.Clone()
		cfg.MaxNewTokens = new(o.MaxNewTokens)
	}
	return cfg, nil
}

// constraint returns the grammar processor of o's JSONSchema or Grammar,
// or none.
func (m *Model) constraint(o GenerateOptions) ([]logits.Processor, error) {
	var g *grammar.Grammar
	var err error
	switch {
	case o.JSONSchema != "" && o.Grammar != "":
		return nil, errors.New("llamaloop: GenerateOptions has both JSONSchema and Grammar: set one")
	case o.JSONSchema != "":
		if g, err = grammar.FromJSONSchema([]byte(o.JSONSchema)); err != nil {
			return nil, fmt.Errorf("llamaloop: GenerateOptions.JSONSchema: %w", err)
		}
	case o.Grammar != "":
		if g, err = grammar.Parse(o.Grammar); err != nil {
			return nil, fmt.Errorf("llamaloop: GenerateOptions.Grammar: %w", err)
		}
	default:
		return nil, nil
	}
	m.vocabOnce.Do(func() {
		v := m.model.Vocab()
		m.vocab, m.vocabErr = grammar.VocabularyFrom(v, v.Size())
	})
	if m.vocabErr != nil {
		return nil, fmt.Errorf("llamaloop: the model's vocabulary for a grammar: %w", m.vocabErr)
	}
	return []logits.Processor{grammar.NewProcessor(grammar.NewMatcher(g, m.vocab))}, nil
}
