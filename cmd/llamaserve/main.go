// Command llamaserve serves a GGUF model over HTTP with OpenAI's API:
// /v1/completions and /v1/chat/completions (streamed or not), /v1/models,
// /health and Prometheus /metrics. llama.cpp evaluates the model; llamaloop
// decodes every request in one continuously batched loop.
//
//	llamaserve -m model.gguf
//	llamaserve -m model.gguf --addr 0.0.0.0:8080 --parallel 8 --ctx 4096
//
// Run llamaserve --help for every option with its default.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/internal/jinja"
	"github.com/llamaloop/llamaloop/internal/serve"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/llamaloop/llamaloop/prefixcache"
)

// options is the parsed command line.
type options struct {
	model         string
	alias         string
	addr          string
	template      string
	templateLim   string // --template-limits
	mmproj        string // the projector file
	genConfig     string
	parallel      int
	ctx           int
	batch         int
	ubatch        int
	promptChunk   int
	draft         string // --assistant-model
	promptLookup  int
	threads       int
	poll          int
	gpuLayers     int
	cacheType     string
	invariant     bool
	prefixCache   bool
	cacheSlots    int
	cacheCells    int
	maxBody       int64
	shutdownWait  time.Duration
	maxConcurrent int
	writeTimeout  time.Duration
	maxBuffer     int64
	limits        serve.Limits
	apiKey        string
	corsOrigins   []string
	embeddings    bool
	pooling       string
	matryoshka    bool
	version       bool
	help          bool
}

const usageHead = `llamaserve serves a GGUF model with OpenAI's HTTP API, through llama.cpp and llamaloop.

Usage:
  llamaserve -m MODEL.gguf [options]

Endpoints: POST /v1/completions, POST /v1/chat/completions (stream: true for
server-sent events), POST /v1/responses (OpenAI's Responses API), GET
/v1/models, POST /v1/embeddings (with --embeddings) (each also without
/v1), POST /v1/messages and /v1/messages/count_tokens (Anthropic's
Messages API), POST /tokenize and /detokenize (as llama.cpp's server has
them), GET /health, GET /metrics (Prometheus).
Chat prompts are the model's Jinja chat template rendered with the tools;
replies carry tool_calls. Requests take OpenAI's fields, and transformers'
GenerationConfig fields (top_k, min_p, repetition_penalty, ...) and
mirostat, mirostat_tau, mirostat_eta as extensions. Requests join the
running batch as they come (continuous batching); --parallel requests run at
once, the others wait.
SIGINT or SIGTERM stops the server after the requests in progress (at most
--shutdown-timeout; then they are cut).
`

var usageGroups = []cli.Group{
	{Title: "Model", Flags: []string{"m,model", "alias", "chat-template", "template-limits", "generation-config", "mmproj"}},
	{Title: "Server", Flags: []string{"addr", "max-body", "max-concurrent", "write-timeout", "max-buffer", "shutdown-timeout", "api-key", "cors-origin"}},
	{Title: "Request limits", Flags: []string{"max-tools", "max-schema-bytes", "max-embedding-inputs", "max-embedding-tokens", "max-media", "max-media-bytes", "max-media-pixels"}},
	{Title: "Runtime", Flags: []string{"parallel", "ctx", "batch", "ubatch", "prompt-chunk", "cache-type", "batch-invariant", "threads", "poll", "gpu-layers"}},
	{Title: "Prefix cache", Flags: []string{"prefix-cache", "cache-slots", "cache-cells"}},
	{Title: "Embeddings", Flags: []string{"embeddings", "pooling", "matryoshka"}},
	{Title: "Other", Flags: []string{"version", "h,help"}},
}

func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("llamaserve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, n := range []string{"m", "model"} {
		fs.StringVar(&o.model, n, "", "the GGUF model `FILE` (required)")
	}
	fs.StringVar(&o.alias, "alias", "", "the model's `NAME` in the API")
	fs.Lookup("alias").DefValue = "the file name without .gguf"
	fs.StringVar(&o.template, "chat-template", "", "chat template replacing the model's: a llama.cpp built-in `NAME` (chatml, llama3, ...) or Jinja text")
	fs.StringVar(&o.templateLim, "template-limits", "", "bounds of the Jinja chat template's compile and of every render, as `Name=N,...` with the names of internal/jinja's Limits (MaxSteps=10000000,MaxOutputBytes=16777216,MaxCallDepth=100,...; unnamed ones keep their defaults, listed in README); over a limit a chat request gets a 500 chat_template_limit naming it")
	fs.StringVar(&o.genConfig, "generation-config", "", "the defaults of every request from a transformers generation_config.json `FILE` (without it: OpenAI's, sampling at temperature 1)")
	fs.StringVar(&o.mmproj, "mmproj", "", "the model's projector `FILE` (an mmproj GGUF, llama.cpp's mtmd): chat messages may then hold images and audio (without it: 400)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen on `HOST:PORT` (port 0: any free port, printed at start)")
	fs.Int64Var(&o.maxBody, "max-body", serve.DefaultMaxBodyBytes, "the largest request body in `BYTES` (larger: 413)")
	fs.DurationVar(&o.shutdownWait, "shutdown-timeout", 30*time.Second, "on SIGINT or SIGTERM, how long the replies in progress may run on (`DURATION`); then they are cut, a stream with an error event")
	fs.IntVar(&o.maxConcurrent, "max-concurrent", serve.DefaultMaxConcurrent, "the most sequences (choices) of requests in progress, running or waiting (`N`; more: 429); a reply counts until its generation ends, not until it is written")
	fs.DurationVar(&o.writeTimeout, "write-timeout", serve.DefaultWriteTimeout, "cut a connection whose client reads nothing of its reply for `DURATION`")
	fs.Int64Var(&o.maxBuffer, "max-buffer", serve.DefaultMaxBufferedBytes, "cut a stream whose events waiting for a slow client exceed `BYTES`")
	fs.IntVar(&o.limits.MaxTools, "max-tools", serve.DefaultMaxTools, "the most tools of a request (`N`; more: 400 too_many_tools)")
	fs.IntVar(&o.limits.MaxSchemaBytes, "max-schema-bytes", serve.DefaultMaxSchemaBytes, "the largest response_format schema, and tool parameters of a request together, in `BYTES` (larger: 400 schema_too_large); their grammar takes about a second per MB to compile")
	fs.IntVar(&o.limits.MaxEmbeddingInputs, "max-embedding-inputs", serve.DefaultMaxEmbeddingInputs, "the most inputs of an embeddings request (`N`; more: 400 too_many_inputs)")
	fs.IntVar(&o.limits.MaxEmbeddingTokens, "max-embedding-tokens", serve.DefaultMaxEmbeddingTokens, "the most tokens of an embeddings request's inputs together (`N`; more: 400 too_many_tokens)")
	fs.IntVar(&o.limits.MaxMedia, "max-media", serve.DefaultMaxMedia, "the most images and audio clips of a request together (`N`; more: 400 too_many_media)")
	fs.IntVar(&o.limits.MaxMediaBytes, "max-media-bytes", serve.DefaultMaxMediaBytes, "the largest image or audio file of a request, decoded from base64, in `BYTES` (larger: 400 media_too_large); the body holds it as base64, a third larger, within --max-body")
	fs.IntVar(&o.limits.MaxMediaPixels, "max-media-pixels", serve.DefaultMaxMediaPixels, "the most pixels of an image, read from its header before it is decoded (`N`; more: 400 image_too_large)")
	fs.StringVar(&o.apiKey, "api-key", "", "require `KEY` as a Bearer token or an x-api-key header on every endpoint but /health and /metrics (401 otherwise); also read from $LLAMASERVE_API_KEY, which keeps it out of the process list")
	fs.Func("cors-origin", "let pages of `ORIGIN` call the server from a browser (CORS; * for any origin; repeat it or give a comma-separated list); without it, same-origin only", func(v string) error {
		for _, origin := range strings.Split(v, ",") {
			if origin = strings.TrimSuffix(strings.TrimSpace(origin), "/"); origin != "" {
				o.corsOrigins = append(o.corsOrigins, origin)
			}
		}
		return nil
	})
	fs.IntVar(&o.parallel, "parallel", 4, "sequences decoded together in the running batch (`N`)")
	fs.IntVar(&o.ctx, "ctx", 2048, "KV cache cells per sequence (`N`, rounded up to a multiple of 256; the start-up line says how many): the longest prompt plus reply; llama-server's -c is the cells of all --parallel sequences together")
	fs.IntVar(&o.batch, "batch", 512, "the most tokens of one llama_decode (`N`)")
	fs.IntVar(&o.ubatch, "ubatch", 0, "the most tokens llama.cpp computes at once (`N`, 1 to --batch; llama.cpp's n_ubatch)")
	fs.Lookup("ubatch").DefValue = "--batch"
	fs.IntVar(&o.promptChunk, "prompt-chunk", generation.DefaultPromptChunk, "the most prompt tokens evaluated per step (`N`), so that long prompts do not stall the replies being generated (-1: no limit)")
	fs.StringVar(&o.draft, "assistant-model", "", "speculative decoding: the draft model `FILE` (GGUF, the same vocabulary) proposes tokens that the model verifies, for every request")
	fs.IntVar(&o.promptLookup, "prompt-lookup", 0, "speculative decoding: by default, propose `N` tokens per step copied from the text so far (prompt lookup; a request's prompt_lookup_num_tokens overrides it; 0: none)")
	fs.IntVar(&o.threads, "threads", 0, "CPU `THREADS`, 1 to 512")
	fs.Lookup("threads").DefValue = cli.ThreadsDefault
	fs.IntVar(&o.poll, "poll", 50, "how long llama.cpp's worker threads spin waiting for the next decode before they sleep, as llama.cpp's --poll `LEVEL` (1 to 100: up to LEVEL*131072 pauses, llama.cpp's default 50; 0: they sleep at once, leaving the cores to other work between decodes, faster on a machine busy with other work, slower on a quiet one)")
	fs.IntVar(&o.gpuLayers, "gpu-layers", -1, "layers to offload to a GPU (`N`, -1: all); ignored without a GPU backend")
	fs.StringVar(&o.cacheType, "cache-type", "f16", "KV cache element `TYPE`, f16 or f32 (f32, without flash attention: logits within about 1e-5 of float64 arithmetic)")
	fs.BoolVar(&o.invariant, "batch-invariant", false, "shape every llama_decode so that a reply is bit for bit what its request gives alone, whatever runs beside it (CPU backend; costs a second row per step)")
	fs.BoolVar(&o.prefixCache, "prefix-cache", true, "reuse prompt prefixes: a finished request's cells stay in its sequence until a new request needs the room, and a new request starts from the one it shares the longest prefix with, evaluating only the rest (as llama-server's prompt cache; no memory beyond --parallel's sequences); an image or a sound matches only itself at the same place; --prefix-cache=false evaluates every prompt whole")
	fs.IntVar(&o.cacheSlots, "cache-slots", 0, "more sequences, beside --parallel, only for keeping finished requests (`N`; more memory, more prefixes kept while every --parallel sequence is busy)")
	fs.IntVar(&o.cacheCells, "cache-cells", 0, "the most tokens the prefix cache keeps in all (`N`; 0: as many as the sequences hold)")
	fs.BoolVar(&o.embeddings, "embeddings", false, "also answer POST /v1/embeddings, from a second context of --batch cells (generation requests are served as without it)")
	fs.StringVar(&o.pooling, "pooling", "model", "the pooling of --embeddings: `TYPE` model (the GGUF key <arch>.pooling_type), mean, cls or last")
	fs.BoolVar(&o.matryoshka, "matryoshka", false, "the model was trained for its embeddings to be truncated (Matryoshka): /v1/embeddings then takes dimensions")
	cli.CommonFlags(fs, &o.version, &o.help)
	return fs
}

func parseArgs(args []string, out io.Writer) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	args, err := cli.TranslateLlamaFlags(cli.Llamaserve, fs, args)
	if err != nil {
		return nil, err
	}
	if err := cli.Parse(fs, args, &o.help, out, usageHead, usageGroups); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(out, cli.LlamaFlagsHelp(cli.Llamaserve))
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := cli.ThreadsGiven(fs); err != nil && !o.version {
		return nil, err
	}
	switch {
	case o.version:
	case o.model == "":
		return nil, cli.Usagef("no model: give one with -m FILE.gguf")
	case o.parallel < 1:
		return nil, cli.Usagef("--parallel %d: must be at least 1", o.parallel)
	case o.ctx < 1 || o.ctx > cli.MaxCells:
		return nil, cli.Usagef("--ctx %d: must be from 1 to %d cells", o.ctx, cli.MaxCells)
	case o.cacheSlots < 0:
		return nil, cli.Usagef("--cache-slots %d: must be 0 or more", o.cacheSlots)
	case !o.prefixCache && (o.cacheSlots > 0 || o.cacheCells > 0):
		return nil, cli.Usagef("--cache-slots and --cache-cells tune the prefix cache, which --prefix-cache=false turns off")
	case o.cacheCells < 0:
		return nil, cli.Usagef("--cache-cells %d: must be 0 (no bound) or more", o.cacheCells)
	case o.batch < 1:
		return nil, cli.Usagef("--batch %d: must be at least 1", o.batch)
	case o.ubatch < 0 || o.ubatch > o.batch:
		return nil, cli.Usagef("--ubatch %d: must be from 1 to --batch (%d)", o.ubatch, o.batch)
	case !o.embeddings && (o.pooling != "model" || o.matryoshka):
		return nil, cli.Usagef("--pooling and --matryoshka need --embeddings")
	case o.poll < 0 || o.poll > 100:
		return nil, cli.Usagef("--poll %d: must be from 0 to 100", o.poll)
	case o.promptLookup < 0:
		return nil, cli.Usagef("--prompt-lookup %d: must be 0 (none) or more", o.promptLookup)
	case o.promptChunk == 0 || o.promptChunk < -1:
		return nil, cli.Usagef("--prompt-chunk %d: must be positive, or -1 for no limit", o.promptChunk)
	case o.shutdownWait <= 0:
		return nil, cli.Usagef("--shutdown-timeout %v: must be positive", o.shutdownWait)
	case o.maxBody < 1:
		return nil, cli.Usagef("--max-body %d: must be at least 1", o.maxBody)
	case o.cacheType != "f16" && o.cacheType != "f32":
		return nil, cli.Usagef("--cache-type %s: must be f16 or f32", o.cacheType)
	case o.maxConcurrent < 1:
		return nil, cli.Usagef("--max-concurrent %d: must be at least 1", o.maxConcurrent)
	case o.writeTimeout <= 0:
		return nil, cli.Usagef("--write-timeout %v: must be positive", o.writeTimeout)
	case o.maxBuffer < 1:
		return nil, cli.Usagef("--max-buffer %d: must be at least 1", o.maxBuffer)
	case o.limits.MaxTools < 1:
		return nil, cli.Usagef("--max-tools %d: must be at least 1", o.limits.MaxTools)
	case o.limits.MaxSchemaBytes < 1:
		return nil, cli.Usagef("--max-schema-bytes %d: must be at least 1", o.limits.MaxSchemaBytes)
	case o.limits.MaxEmbeddingInputs < 1:
		return nil, cli.Usagef("--max-embedding-inputs %d: must be at least 1", o.limits.MaxEmbeddingInputs)
	case o.limits.MaxEmbeddingTokens < 1:
		return nil, cli.Usagef("--max-embedding-tokens %d: must be at least 1", o.limits.MaxEmbeddingTokens)
	case o.mmproj != "" && o.draft != "":
		return nil, cli.Usagef("--mmproj with --assistant-model: the draft model cannot read the embeddings of images and sounds (--prompt-lookup speculates with them)")
	case o.mmproj != "" && o.invariant:
		return nil, cli.Usagef("--mmproj with --batch-invariant: the batch-invariant decode takes no input embeddings")
	case o.limits.MaxMedia < 1:
		return nil, cli.Usagef("--max-media %d: must be at least 1", o.limits.MaxMedia)
	case o.limits.MaxMediaBytes < 1:
		return nil, cli.Usagef("--max-media-bytes %d: must be at least 1", o.limits.MaxMediaBytes)
	case o.limits.MaxMediaPixels < 1:
		return nil, cli.Usagef("--max-media-pixels %d: must be at least 1", o.limits.MaxMediaPixels)
	}
	if o.apiKey == "" {
		o.apiKey = os.Getenv("LLAMASERVE_API_KEY")
	}
	return o, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	}
	if err == nil && o.version {
		fmt.Fprintln(stdout, cli.BuildVersion())
		return cli.ExitOK
	}
	if err == nil {
		err = serveModel(o, stderr)
	}
	switch code := cli.ExitCode(err); code {
	case cli.ExitOK:
		return code
	case cli.ExitUsage:
		fmt.Fprintf(stderr, "llamaserve: %s (see llamaserve --help)\n", cli.Message(err))
		return code
	default:
		fmt.Fprintf(stderr, "llamaserve: %s\n", cli.Message(err))
		return code
	}
}

// serveModel loads the model, serves it until SIGINT or SIGTERM, and frees
// everything.
func serveModel(o *options, stderr io.Writer) error {
	cli.LogWarnings(stderr, "llamaserve", false)
	threads, note := cli.ResolveThreads(o.threads)
	o.threads = threads
	if note != "" {
		fmt.Fprintf(stderr, "llamaserve: %s\n", note)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(stop)
	m, err := loadModel(o, stderr, stop)
	if m == nil || err != nil {
		return err
	}
	defer m.Close()

	base, err := baseConfig(o, m)
	if err != nil {
		return err
	}
	lim, err := jinja.ParseLimits(o.templateLim)
	if err != nil {
		return cli.Usagef("--template-limits: %v", err)
	}
	chat, builtin, chatNote := chatTemplate(m, o.template, lim)
	tok, chatNote := engineTokenizer(m, llamabackend.Tokenizer{Vocab: m.Vocab(), Template: builtin}, o, chatNote)

	seqSize := (o.ctx + 255) / 256 * 256
	if o.invariant && m.HasEncoder() && o.parallel+o.cacheSlots > 1 {
		return cli.Usagef("--batch-invariant does not combine with an encoder-decoder model of several sequences: llama.cpp's t5 decoder has one KV stream for all of them")
	}
	p := contextParams(o, m, seqSize)
	lctx, err := cli.NewContext(m, fmt.Sprintf("--parallel %d --cache-slots %d --ctx %d", o.parallel, o.cacheSlots, o.ctx), p)
	if err != nil {
		return err
	}
	defer lctx.Close()
	lb, b, err := newBackend(m, lctx, o)
	if err != nil {
		return err
	}
	defer lb.Close()
	// The engine's backend: the llama.cpp sequences, under the prefix cache
	// (its first --parallel slots serve requests, the others keep finished
	// ones; finished ones also stay in the first until they are needed).
	// An encoder-decoder model's prompt is its encoder input, which the
	// cache does not hold: it gets one only when asked for.
	var cache serve.CacheStats
	if o.prefixCache && (o.cacheSlots > 0 || !m.HasEncoder()) {
		pc, err := prefixcache.New(lb, prefixcache.Options{CacheSlots: o.cacheSlots, MaxCells: o.cacheCells})
		if err != nil {
			return err
		}
		b, cache = pc, pc
	}
	eopts := generation.EngineOptions{PromptChunk: o.promptChunk}
	if o.draft != "" {
		draft, closeDraft, err := draftBackend(context.Background(), o, seqSize)
		if err != nil {
			return err
		}
		defer closeDraft()
		eopts.Draft = draft
	}
	engine, err := generation.NewEngine(b, tok, eopts)
	if err != nil {
		return err
	}
	defer engine.Close()

	var media serve.MediaPrompter
	if o.mmproj != "" {
		pp, err := newProjectorPrompter(o.mmproj, m, o.threads)
		if err != nil {
			return err
		}
		defer pp.Close()
		media = pp
	}

	var emb serve.Embedder
	if o.embeddings {
		e, err := newEmbedder(m, o)
		if err != nil {
			return err
		}
		defer e.Close()
		emb = e
	}

	id := o.alias
	if id == "" {
		id = strings.TrimSuffix(filepath.Base(o.model), ".gguf")
	}
	logger := log.New(stderr, "llamaserve: ", log.LstdFlags)
	handler := serve.New(serve.Config{
		Engine: engine, Tokenizer: tok, ModelID: id, Base: base, SequenceSize: b.Room(0),
		MaxBodyBytes: o.maxBody, MaxConcurrent: o.maxConcurrent, WriteTimeout: o.writeTimeout,
		MaxBufferedBytes: o.maxBuffer, Cache: cache, Log: logger, ChatTemplate: chat,
		APIKey: o.apiKey, CORSOrigins: o.corsOrigins, Embedder: emb, Matryoshka: o.matryoshka,
		Limits: o.limits, Details: modelDetails(m, o), Media: media,
	})
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", o.addr, err)
	}
	// An idle keep-alive connection is closed after a while, as one that
	// reads nothing is cut after --write-timeout.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleTimeout, ErrorLog: logger}
	fmt.Fprintf(stderr, "llamaserve: chat template: %s\n", chatNote)
	fmt.Fprintf(stderr, "llamaserve: %s, %s, %d sequences of %d tokens; listening on http://%s\n",
		id, cli.DeviceSummary(o.gpuLayers, m.Info().Layers), o.parallel, b.Room(0), ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-stop:
	}
	fmt.Fprintln(stderr, "llamaserve: shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), o.shutdownWait)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		// The requests still running are cut: streams get an error event,
		// replies not yet written 503, within abortGrace; then the
		// connections close.
		handler.Abort()
		ctx, cancel := context.WithTimeout(context.Background(), abortGrace)
		defer cancel()
		srv.Shutdown(ctx)
		srv.Close()
	}
	return nil
}

// Timeouts of the HTTP server beside the options.
const (
	idleTimeout = 2 * time.Minute // a keep-alive connection waiting for its next request
	abortGrace  = 5 * time.Second // past --shutdown-timeout, for the cut requests' last words
)

// chatTemplate is the Jinja chat template chat prompts are rendered with:
// --chat-template's when it is one, else the model's; nil (llama.cpp's
// built-in templates) for a model without one, a template that does not
// compile or fails on a small fixed chat under lim (said at start-up), or
// --chat-template naming a built-in template. builtin is the
// template llama.cpp's formatting is given (the flag; chatml for a model
// without a template, as llama-server has it). The note says which it is.
func chatTemplate(m *llamacpp.Model, flag string, lim jinja.Limits) (t *serve.ChatTemplate, builtin, note string) {
	src, from := flag, "--chat-template's"
	switch {
	case flag != "" && !serve.IsJinja(flag):
		return nil, flag, fmt.Sprintf("llama.cpp's built-in %q (--chat-template)", flag)
	case flag == "":
		var ok bool
		if src, ok = m.ChatTemplate(""); !ok {
			return nil, "chatml", `llama.cpp's built-in "chatml" (the model has no tokenizer.chat_template)`
		}
		from = "the model's"
	}
	v := m.Vocab()
	piece := func(t int32) string {
		if t < 0 {
			return ""
		}
		p, err := v.Piece(t, true)
		if err != nil {
			return ""
		}
		return p
	}
	t, err := serve.NewChatTemplateLimits(src, piece(v.BOS()), piece(v.EOS()), lim)
	if err != nil {
		return nil, flag, fmt.Sprintf("llama.cpp's built-in (%s Jinja template does not compile: %v)", from, err)
	}
	if err := t.Check(); err != nil {
		return nil, flag, fmt.Sprintf("llama.cpp's built-in (%s Jinja template fails on a one-message test chat: %v)", from, err)
	}
	tools := ""
	if !t.TakesTools() {
		tools = ", which does not render tools: they are described in the system message"
	}
	return t, flag, fmt.Sprintf("%s, rendered as Jinja (tool calls read as %s%s)", from, t.Family(), tools)
}

// draftBackend loads --assistant-model with a context of --parallel
// sequences of seqSize cells: the draft model of the engine's slots.
func draftBackend(ctx context.Context, o *options, seqSize int) (*llamabackend.Backend, func(), error) {
	dm, err := cli.LoadModel(ctx, o.draft, o.gpuLayers, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("--assistant-model: %w", err)
	}
	dctx, err := cli.NewContext(dm, fmt.Sprintf("--assistant-model, --parallel %d --ctx %d", o.parallel, o.ctx),
		llamacpp.ContextParams{ContextSize: o.parallel * seqSize, Sequences: o.parallel, BatchSize: o.batch, MicroBatchSize: o.ubatch, Threads: o.threads})
	if err != nil {
		dm.Close()
		return nil, nil, err
	}
	draft, err := llamabackend.New(dctx)
	if err != nil {
		dctx.Close()
		dm.Close()
		return nil, nil, fmt.Errorf("--assistant-model: %w", err)
	}
	return draft, func() { draft.Close(); dctx.Close(); dm.Close() }, nil
}

// loadModel loads -m, drawing a progress bar on a terminal; a signal on stop during the load
// ends it, and loadModel then returns a nil model and no error.
func loadModel(o *options, stderr io.Writer, stop <-chan os.Signal) (*llamacpp.Model, error) {
	loadCtx, cancelLoad := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
			cancelLoad()
		case <-loadCtx.Done():
		}
	}()
	var bar *cli.ProgressBar
	if f, ok := stderr.(*os.File); ok && cli.IsTerminal(f.Fd()) {
		bar = cli.NewProgressBar(stderr, "loading "+filepath.Base(o.model))
	}
	m, err := cli.LoadModel(loadCtx, o.model, o.gpuLayers, bar)
	interrupted := loadCtx.Err() != nil
	cancelLoad()
	if err != nil {
		return nil, err
	}
	if interrupted {
		m.Close()
		return nil, nil
	}
	return m, nil
}

// baseConfig is the generation config every request starts from: --generation-config, with
// --prompt-lookup's prompt_lookup_num_tokens; nil for the server's defaults.
func baseConfig(o *options, m *llamacpp.Model) (*genconfig.Config, error) {
	var base *genconfig.Config
	if o.genConfig != "" {
		var err error
		if base, err = genconfig.Load(o.genConfig); err != nil {
			return nil, fmt.Errorf("--generation-config: %w", err)
		}
		if _, err := base.Validate(m.Vocab().Size()); err != nil {
			return nil, fmt.Errorf("--generation-config %s: %w", o.genConfig, err)
		}
	}
	if o.promptLookup > 0 {
		if base == nil {
			base = serve.OpenAIBase()
		}
		base.PromptLookupNumTokens = &o.promptLookup
	}
	if (o.draft != "" || o.promptLookup > 0) && m.HasEncoder() {
		return nil, cli.Usagef("--assistant-model and --prompt-lookup need a decoder-only model; %s is an encoder-decoder", filepath.Base(o.model))
	}
	return base, nil
}

// contextParams are the parameters of the engine's llama.cpp context: --parallel plus
// --cache-slots sequences of seqSize cells.
func contextParams(o *options, m *llamacpp.Model, seqSize int) llamacpp.ContextParams {
	sequences := o.parallel + o.cacheSlots
	p := llamacpp.ContextParams{
		ContextSize: sequences * seqSize, Sequences: sequences, BatchSize: o.batch, MicroBatchSize: o.ubatch, Threads: o.threads,
		BatchInvariant: o.invariant, Poll: o.poll,
		// llama.cpp's t5 decoder has one KV stream.
		UnifiedKV: m.HasEncoder() && sequences > 1,
	}
	if o.poll == 0 {
		p.Poll = llamacpp.NoPoll
	}
	if o.cacheType == "f32" {
		p.TypeK, p.TypeV, p.FlashAttention = llamacpp.KVF32, llamacpp.KVF32, llamacpp.FlashAttentionOff
	}
	return p
}
