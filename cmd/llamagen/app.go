package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/llamaloop/llamaloop/logits"
)

// app is one run of the command with its standard streams; main fills it
// from the process, tests may fill it otherwise.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	stdinTerminal  bool
	stderrTerminal bool
	// interrupts delivers SIGINT.
	interrupts <-chan os.Signal
	// now is the clock of --max-time under beam search; nil is time.Now.
	now func() time.Time
}

// main runs the command and returns its exit status.
func (a *app) main(args []string) int {
	out := cli.NewOutput(a.stdout)
	a.stdout = out
	o, err := parseArgs(args, a.stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		err = nil
	case err == nil && o.version:
		fmt.Fprintln(a.stdout, cli.BuildVersion())
		fmt.Fprintln(a.stdout, "CPU backend:", llamacpp.CPUBackend())
	case err == nil:
		cli.LogWarnings(a.stderr, "llamagen", o.quiet)
		o.readFile = a.readFile
		err = a.run(o)
	}
	if err == nil {
		// Lost output is a failure, not a success with nothing to show.
		err = out.Err()
	}
	if err != nil {
		code := cli.ExitCode(err)
		switch code {
		case cli.ExitBrokenPipe:
			// The reader went away: end quietly, as other tools do.
		case cli.ExitInterrupted:
			fmt.Fprintln(a.stderr, "llamagen: interrupted")
		case cli.ExitUsage:
			fmt.Fprintf(a.stderr, "llamagen: %s (see llamagen --help)\n", cli.Message(err))
		default:
			fmt.Fprintf(a.stderr, "llamagen: %s\n", cli.Message(err))
		}
		return code
	}
	return cli.ExitOK
}

// untilInterrupt returns a context that the next SIGINT cancels, and a
// function that stops watching for SIGINT. Stopping does not cancel the
// context: llamacpp.Context arms its abort flag with a context.AfterFunc,
// and a context cancelled after its last decode can still raise the flag
// during the next context's decode, which then fails as aborted.
func (a *app) untilInterrupt() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	go func() {
		select {
		case <-a.interrupts:
			cancel()
		case <-stop:
		}
	}()
	var once sync.Once
	return ctx, func() { once.Do(func() { close(stop) }) }
}

// readFile reads a file that an option names; Ctrl-C ends a read that
// blocks (a FIFO that no one writes).
func (a *app) readFile(path string) ([]byte, error) {
	ctx, stop := a.untilInterrupt()
	defer stop()
	return cli.ReadFile(ctx, path)
}

// readStdin reads stdin to its end (-f -); Ctrl-C ends the wait.
func (a *app) readStdin() ([]byte, error) {
	ctx, stop := a.untilInterrupt()
	defer stop()
	return cli.ReadAll(ctx, a.stdin)
}

// session is a loaded model with the decoding settings of the command line.
type session struct {
	*app
	o     *options
	model *llamacpp.Model
	tok   llamabackend.Tokenizer
	cfg   *genconfig.Config
	// procs are the user processors of every request: the grammar of
	// --grammar, --json-schema or --any-json.
	procs []logits.Processor
	// seed is the first row's seed; seedShown makes the summary print it.
	seed      uint64
	seedShown bool
	// proj and media are --mmproj's projector and the decoded --image and
	// --audio files, or nil.
	proj  *llamacpp.Projector
	media []llamacpp.Media
}

func (a *app) run(o *options) error {
	threads, note := cli.ResolveThreads(o.threads)
	o.threads = threads
	if note != "" && !o.quiet {
		fmt.Fprintf(a.stderr, "llamagen: %s\n", note)
	}
	loadCtx, stop := a.untilInterrupt()
	var bar *cli.ProgressBar
	if a.stderrTerminal && !o.quiet {
		bar = cli.NewProgressBar(a.stderr, "loading "+shortName(o.model))
	}
	m, err := cli.LoadModel(loadCtx, o.model, o.gpuLayers, bar)
	stop()
	if err != nil {
		return err
	}
	defer m.Close()
	s := &session{app: a, o: o, model: m, tok: llamabackend.Tokenizer{Vocab: m.Vocab(), Template: o.template}}
	cfg, warnings, err := o.generationConfig(m.Vocab().Size())
	if err != nil {
		return err
	}
	s.cfg = cfg
	s.warn(warnings...)
	if o.seed >= 0 {
		s.seed = uint64(o.seed)
	} else {
		s.seed = uint64(rand.Int64N(1 << 31))
	}
	s.seedShown = cfg.DoSample || o.mirostat != 0
	if s.procs, err = o.constraint(m.Vocab()); err != nil {
		return err
	}

	if err := s.checkEncoderDecoder(); err != nil {
		return err
	}
	if len(o.media) > 0 {
		if s.proj, s.media, err = s.loadMedia(); err != nil {
			return err
		}
		defer s.proj.Close()
	}
	if o.demo {
		return s.demo()
	}
	if o.chat && o.prompt == "" && o.promptFile == "" && o.promptsFile == "" {
		return s.chat()
	}
	prompts, err := s.prompts()
	if err != nil {
		return err
	}
	ctx, stopWatching := a.untilInterrupt()
	defer stopWatching()
	if cfg.NumBeams > 1 {
		if o.assistantModel != "" {
			return cli.Usagef("--assistant-model: beam search (--num-beams %d) does not speculate", cfg.NumBeams)
		}
		return s.beamSearch(ctx, prompts)
	}
	return s.generate(ctx, prompts)
}

// prompts reads the prompts of -p, -f or --prompts.
func (s *session) prompts() ([]prompt, error) {
	switch {
	case s.o.promptsFile != "":
		data, err := s.readFile(s.o.promptsFile)
		if err != nil {
			return nil, fmt.Errorf("--prompts: %w", err)
		}
		ps, err := readPrompts(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("--prompts %s: %w", s.o.promptsFile, err)
		}
		return ps, nil
	case s.o.promptFile != "":
		read := s.readStdin
		if s.o.promptFile != "-" {
			read = func() ([]byte, error) { return s.readFile(s.o.promptFile) }
		}
		data, err := read()
		if err != nil {
			return nil, fmt.Errorf("prompt file: %w", err)
		}
		return []prompt{{Text: strings.TrimRight(string(data), "\r\n")}}, nil
	}
	return []prompt{{Text: s.o.prompt}}, nil
}

func (s *session) warn(warnings ...string) {
	if s.o.quiet {
		return
	}
	for _, w := range warnings {
		fmt.Fprintf(s.stderr, "llamagen: warning: %s\n", w)
	}
}

// tokenize returns the prompt tokens of req exactly as the generator
// evaluates them, before any context exists (to size the contexts).
func (s *session) tokenize(req *generation.Request) ([]int32, error) {
	sizer := generation.NewGenerator(backend.NewMemoryBackend(s.model.Vocab().Size(), 1, nil), s.tok)
	return sizer.PromptTokens(req)
}

// newBackend makes a llama.cpp context of slots sequences and its backend.
// Without a unified cache every sequence gets cells cells; with one, cells
// is the total.
func (s *session) newBackend(slots, cells int, unified bool) (*llamabackend.Backend, error) {
	// llama.cpp's t5 decoder has one KV stream.
	unified = unified || (s.model.HasEncoder() && slots > 1)
	size := cells
	if !unified {
		size = slots * roundUp(cells, 256)
	}
	ctx, err := cli.NewContext(s.model, s.sizeOptions(slots), llamacpp.ContextParams{
		ContextSize: size, Sequences: slots, UnifiedKV: unified, Threads: s.o.threads,
		BatchSize: s.o.batch, MicroBatchSize: s.o.ubatch,
	})
	if err != nil {
		return nil, err
	}
	var b *llamabackend.Backend
	if s.model.HasEncoder() {
		var e *llamabackend.EncoderDecoder
		if e, err = llamabackend.NewEncoderDecoder(ctx); err == nil {
			b = e.Backend
		}
	} else {
		b, err = llamabackend.New(ctx)
	}
	if err != nil {
		ctx.Close()
		return nil, err
	}
	return b, nil
}

// sizeOptions names, for an error, the options that set the size of the
// KV cache: --ctx, or the length it is computed from, and the sequences.
func (s *session) sizeOptions(slots int) string {
	var what string
	const auto = " (the cache holds the prompt and the new tokens; --ctx sets its size)"
	// the option, or the field of --generation-config, that set the length
	source := func(option, key string, n int) string {
		if _, ok := s.o.overrides[key]; ok || s.o.genConfig == "" {
			return fmt.Sprintf("%s %d", option, n)
		}
		return fmt.Sprintf("%s %d of --generation-config %s", key, n, s.o.genConfig)
	}
	switch {
	case s.o.ctx > 0:
		what = fmt.Sprintf("--ctx %d", s.o.ctx)
	case s.cfg.MaxNewTokens != nil:
		what = source("--max-new-tokens", "max_new_tokens", *s.cfg.MaxNewTokens) + auto
	default:
		what = source("--max-length", "max_length", s.cfg.MaxLength) + auto
	}
	if slots > 1 {
		what += fmt.Sprintf(", for %d sequences (--parallel, --num-beams)", slots)
	}
	return what
}

// overMaxTime returns what reports, after a token (or a step of a beam
// search), whether the config's max_time has passed since the call. As
// transformers' MaxTimeCriteria, it is checked between steps: a generation
// makes at least one, and which step it ends after depends on the clock
// alone. A limit beyond what a time.Duration holds (about 292 years) is no
// limit, rather than one that overflows into the past.
func (s *session) overMaxTime() func() bool {
	t := s.cfg.MaxTime
	if t == nil || *t >= maxSeconds {
		return func() bool { return false }
	}
	now := s.now
	if now == nil {
		now = time.Now
	}
	limit, start := time.Duration(*t*float64(time.Second)), now()
	return func() bool { return now().Sub(start) >= limit }
}

func closeBackend(b *llamabackend.Backend) {
	b.Close()
	b.Context().Close()
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// shortName is the file name of a path.
func shortName(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' || path[i] == '\\' {
			return path[i+1:]
		}
	}
	return path
}
