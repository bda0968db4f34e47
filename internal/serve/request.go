package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/grammar"
	"github.com/llamaloop/llamaloop/internal/quote"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
)

// Limits of the OpenAI API that the server keeps.
const (
	maxStops       = 4  // stop strings per request
	maxTopLogprobs = 20 // chat top_logprobs; completions logprobs allows 5
	maxN           = 128
)

// apiRequest is the body of /v1/completions and /v1/chat/completions: the
// OpenAI fields, then the extensions. Pointers tell a field that is absent
// (or null) from its zero value.
type apiRequest struct {
	Model               string             `json:"model"`
	Prompt              json.RawMessage    `json:"prompt"`   // completions
	Messages            []apiMessage       `json:"messages"` // chat
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"` // chat
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	N                   *int               `json:"n"`
	Stream              bool               `json:"stream"`
	StreamOptions       *streamOptions     `json:"stream_options"`
	Logprobs            json.RawMessage    `json:"logprobs"` // completions: a number; chat: a boolean
	TopLogprobs         *int               `json:"top_logprobs"`
	Echo                bool               `json:"echo"`
	Stop                json.RawMessage    `json:"stop"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	BestOf              *int               `json:"best_of"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	Seed                *int64             `json:"seed"`
	Suffix              *string            `json:"suffix"`
	ResponseFormat      *responseFormat    `json:"response_format"`
	User                string             `json:"user"`
	Tools               []json.RawMessage  `json:"tools"` // chat
	ToolChoice          json.RawMessage    `json:"tool_choice"`
	ParallelToolCalls   *bool              `json:"parallel_tool_calls"`

	// Extensions: Mirostat, under the names of llama.cpp's server.
	Mirostat    *int     `json:"mirostat"`
	MirostatTau *float64 `json:"mirostat_tau"`
	MirostatEta *float64 `json:"mirostat_eta"`
	// ParseSpecial (chat) reads the text of control tokens in the messages
	// as those tokens, as tokenizing the rendered chat whole would; by
	// default only the chat template's own markers are control tokens, so
	// that a message cannot open a turn of another role.
	ParseSpecial bool `json:"parse_special"`
	// ReasoningFormat (chat), llama-server's name: "auto" (the default)
	// returns the thinking of a model whose template has reasoning
	// markers (<think>...</think>) apart from its answer, as
	// reasoning_content ("deepseek" says the same); "none" leaves it
	// inline in the content, markers and all.
	ReasoningFormat string `json:"reasoning_format"`
	// Grammar, llama-server's extension, constrains the reply to a GBNF
	// grammar (llama.cpp's grammar format), as response_format does to a
	// JSON Schema; it takes neither response_format nor a forced tool
	// call beside it.
	Grammar string `json:"grammar"`
	// ChatTemplateKwargs (chat), llama-server's and vLLM's: the
	// template's enable_thinking (or thinking, DeepSeek V3.1's), a
	// boolean; false asks a model that thinks not to. Other keys are
	// refused.
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`

	// thinking, when set, is the template's enable_thinking: the other
	// APIs' switches (Ollama's think, Anthropic's thinking) map onto it.
	thinking *bool

	// config holds the transformers GenerationConfig fields of the body,
	// applied with genconfig.Config.Update.
	config map[string]json.RawMessage
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// apiMessage is a chat message; Content is a string or an array of text
// parts.
type apiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name"`
	// ReasoningContent is an assistant's thinking, as a reply gave it
	// (reasoning_content); templates that think read it.
	ReasoningContent string `json:"reasoning_content"`
	// ToolCalls are an assistant's calls; ToolCallID the call a tool
	// message answers. FunctionCall, OpenAI's deprecated form, is refused
	// unless null.
	ToolCalls    json.RawMessage `json:"tool_calls"`
	ToolCallID   string          `json:"tool_call_id"`
	FunctionCall json.RawMessage `json:"function_call"`
}

// The fields OpenAI defines for each endpoint (openai-go's
// ChatCompletionNewParams and CompletionNewParams, and stream), by what the
// server does with them.
var (
	// commonFields are implemented on both endpoints (user is read and
	// ignored: it only identifies the end user to OpenAI).
	commonFields = []string{"model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options",
		"logprobs", "stop", "presence_penalty", "frequency_penalty", "logit_bias", "seed", "user", "response_format",
		"mirostat", "mirostat_tau", "mirostat_eta", "grammar"}
	completionFields = []string{"prompt", "echo", "best_of", "suffix"}
	chatFields       = []string{"messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls", "parse_special", "reasoning_format", "chat_template_kwargs"}
	// ignoredChatFields change nothing here, whatever their value: OpenAI's
	// storage, billing, caching, routing and reasoning controls, the
	// predicted output (a speed-up that does not change the reply) and
	// web search (there is none).
	ignoredChatFields = []string{"metadata", "store", "service_tier", "safety_identifier", "prompt_cache_key",
		"prompt_cache_retention", "prompt_cache_options", "reasoning_effort", "verbosity",
		"prediction", "web_search_options"}
)

// checkedChatFields are chat fields accepted when their value asks for
// nothing the server lacks (null, or the value that means "none"); each
// check returns the reason of a refusal.
var checkedChatFields = map[string]func(raw json.RawMessage) string{
	"modalities": func(raw json.RawMessage) string {
		var m []string
		if json.Unmarshal(raw, &m) != nil {
			return "modalities must be an array of strings"
		}
		for _, x := range m {
			if x != "text" {
				return fmt.Sprintf("modalities %s: this server generates text only (modalities [\"text\"])", quote.String(x))
			}
		}
		return ""
	},
	"audio": func(raw json.RawMessage) string {
		return "audio output is not supported: this server generates text only"
	},
	"moderation": func(raw json.RawMessage) string {
		return "moderation is not available on this server: it has no moderation model"
	},
	"functions":     refuseNonEmptyList("functions"),
	"function_call": refuseToolChoice("function_call"),
}

// errNoFunctions is the reason OpenAI's deprecated functions are refused.
const errNoFunctions = "functions and function_call are deprecated by OpenAI: send tools and tool_choice"

// refuseNonEmptyList refuses a list of tools that is not empty.
func refuseNonEmptyList(name string) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return name + " must be an array"
		}
		if len(list) > 0 {
			return name + ": " + errNoFunctions
		}
		return ""
	}
}

// refuseToolChoice accepts the function_call choices that call no
// function, "none" and "auto" (without functions, auto calls none).
func refuseToolChoice(name string) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) == nil && (s == "none" || s == "auto") {
			return ""
		}
		return fmt.Sprintf("%s %s: %s", name, quote.Value(raw), errNoFunctions)
	}
}

// configFields are the transformers GenerationConfig fields a request may
// set beside the OpenAI ones (the extensions). The lengths, beam search and
// the fields OpenAI names otherwise (temperature, top_p, stop) are not
// among them.
var configFields = []string{
	"do_sample", "top_k", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff",
	"repetition_penalty", "encoder_repetition_penalty", "no_repeat_ngram_size",
	"encoder_no_repeat_ngram_size", "bad_words_ids", "sequence_bias", "suppress_tokens",
	"begin_suppress_tokens", "forced_bos_token_id", "forced_eos_token_id",
	"exponential_decay_length_penalty", "min_new_tokens", "min_length",
	"remove_invalid_values", "renormalize_logits", "eos_token_id",
	// speculative decoding: prompt lookup, and the draft model's settings
	"prompt_lookup_num_tokens", "max_matching_ngram_size", "num_assistant_tokens",
	"num_assistant_tokens_schedule", "assistant_confidence_threshold",
}

// requestError is an error of the client's request: status 400 unless set,
// with the OpenAI error's param and code.
type requestError struct {
	status int
	param  string
	code   string
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *requestError {
	return &requestError{status: 400, param: param, msg: fmt.Sprintf(format, args...)}
}

// decodeRequest reads body as the request of an endpoint (chat or not):
// bad JSON, invalid UTF-8 and unknown fields are errors; the first field in
// the body's order that the server refuses is named.
func decodeRequest(body []byte, chat bool) (*apiRequest, error) {
	req := &apiRequest{config: map[string]json.RawMessage{}}
	table := completionsTable
	if chat {
		table = chatTable
	}
	if err := table.decode(body, req, req.config); err != nil {
		return nil, err
	}
	return req, nil
}

// unmarshalFields decodes a request body whose keys were checked into req;
// a value of the wrong JSON type is refused naming its field.
func unmarshalFields(body []byte, req any) *requestError {
	if err := json.Unmarshal(body, req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badRequest(te.Field, "field %q: a JSON %s cannot be %s", te.Field, te.Value, te.Type)
		}
		return badRequest("", "%v", err)
	}
	return nil
}

// objectKeys lists the keys of the JSON object body in their order.
func objectKeys(body []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil {
		return nil, err
	} else if t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, ok := t.(string)
		if !ok {
			return nil, errors.New("a key is not a string")
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// plan is a request made ready for the engine: one generation.Request per
// choice, in the order of the response's choice indexes.
type plan struct {
	reqs         []generation.Request
	stops        []string
	logprobs     bool
	topLogprobs  int
	includeUsage bool
	tools        *toolPlan // nil: no tool may be called
	template     string    // the chat template that made the prompt: "jinja" or "builtin"
	// reasoning is how the replies' thinking is read: nil, not at all
	// (completions, a template without reasoning markers, or
	// reasoning_format none).
	reasoning *reasoningPlan
}

// params are what the server adds to a request.
type params struct {
	base     *genconfig.Config // the defaults of every request
	formats  *formats          // response_format's grammars
	vocab    int
	slotSize int // tokens per sequence
	tok      backend.Tokenizer
	chat     *ChatTemplate // the model's Jinja chat template; nil: llama.cpp's
	limits   Limits
	media    MediaPrompter // nil: no projector
	logf     func(format string, args ...any)
}

// plan checks req and builds the engine's requests.
func (p *params) plan(ctx context.Context, req *apiRequest, chat bool) (*plan, error) {
	out := &plan{}
	if req.StreamOptions != nil {
		if !req.Stream {
			return nil, badRequest("stream_options", "stream_options needs stream")
		}
		out.includeUsage = req.StreamOptions.IncludeUsage
	}
	switch {
	case req.Echo:
		return nil, badRequest("echo", "echo is not supported")
	case req.BestOf != nil && *req.BestOf != 1:
		return nil, badRequest("best_of", "best_of %d is not supported (only 1)", *req.BestOf)
	case req.Suffix != nil && *req.Suffix != "":
		return nil, badRequest("suffix", "suffix is not supported")
	}
	n := 1
	if req.N != nil {
		n = *req.N
		if n < 1 || n > maxN {
			return nil, badRequest("n", "n %d: must be in [1, %d]", n, maxN)
		}
	}
	stops, err := parseStop(req.Stop)
	if err != nil {
		return nil, err
	}
	out.stops = stops
	if err := p.logprobs(req, chat, out); err != nil {
		return nil, err
	}
	cfg, err := p.config(req, chat)
	if err != nil {
		return nil, err
	}
	miro, err := mirostatConfig(req)
	if err != nil {
		return nil, err
	}
	procs, err := p.processors(req)
	if err != nil {
		return nil, err
	}
	var prompts []generation.Request
	if chat {
		media := &mediaReader{limits: p.limits, media: p.media}
		msgs, err := parseMessages(req.Messages, media)
		if err != nil {
			return nil, err
		}
		if out.tools, err = parseTools(req, p.limits); err != nil {
			return nil, err
		}
		var prompt generation.Request
		var tail string
		thinking, err := req.templateThinking()
		if err != nil {
			return nil, err
		}
		if prompt, out.template, tail, err = p.chatPrompt(ctx, msgs, media.items, out.tools, req.ParseSpecial, thinking); err != nil {
			return nil, err
		}
		if out.reasoning, err = p.reasoningPlan(req.ReasoningFormat, out.template, tail); err != nil {
			return nil, err
		}
		prompts = []generation.Request{prompt}
	} else if prompts, err = parsePrompt(req.Prompt); err != nil {
		return nil, err
	}
	if procs, err = p.constraints(req, out.tools, procs); err != nil {
		return nil, err
	}
	var seed uint64
	if req.Seed != nil {
		seed = uint64(*req.Seed)
	} else {
		seed = rand.Uint64()
	}

	for _, pr := range prompts {
		for j := range n {
			r := pr
			r.Config = cfg
			r.Seed = seed + uint64(j)
			r.Mirostat = miro
			r.StopStrings = stops
			r.Logprobs = out.logprobs
			r.TopLogprobs = out.topLogprobs
			r.Processors = procs
			// The families' call markers and reasoning markers may be
			// special tokens ([TOOL_CALLS], <|python_tag|>, <think>): a
			// request whose reply is read gets their text (the end
			// token's is dropped).
			r.RenderSpecial = out.tools != nil || out.reasoning != nil
			out.reqs = append(out.reqs, r)
		}
	}
	return out, nil
}

// mirostatConfig is the request's Mirostat sampler (mirostat, mirostat_tau, mirostat_eta), or
// nil.
func mirostatConfig(req *apiRequest) (*mirostat.Config, error) {
	var miro *mirostat.Config
	if req.Mirostat != nil && *req.Mirostat != 0 {
		miro = &mirostat.Config{Version: mirostat.Version(*req.Mirostat), Tau: 5, Eta: 0.1}
		if req.MirostatTau != nil {
			miro.Tau = *req.MirostatTau
		}
		if req.MirostatEta != nil {
			miro.Eta = *req.MirostatEta
		}
		if err := miro.Validate(); err != nil {
			return nil, badRequest("mirostat", "mirostat: %v", err)
		}
	}
	return miro, nil
}

// constraints appends to procs the processor that constrains the reply: the grammar of a tool
// call that tool_choice forces (tools), or else the response_format's.
func (p *params) constraints(req *apiRequest, tools *toolPlan, procs []logits.Processor) ([]logits.Processor, error) {
	forced := false // a tool call's grammar constrains the output
	if tp := tools; tp != nil {
		src, err := tp.callGBNF(grammar.SchemaToGBNF)
		if err != nil {
			return nil, err
		}
		if src != "" {
			if p.formats == nil {
				return nil, badRequest("tool_choice", "tool_choice %s is not available on this server: it cannot constrain the reply", tp.mode)
			}
			proc, err := p.formats.gbnfProcessor(src)
			if err != nil {
				return nil, err
			}
			procs = append(procs, proc)
			forced = true
		}
	}
	if req.Grammar != "" {
		switch {
		case forced:
			return nil, badRequest("grammar", "grammar cannot constrain a reply that tool_choice makes a tool call")
		case req.ResponseFormat != nil && req.ResponseFormat.Type != "text":
			return nil, badRequest("grammar", "grammar and response_format each constrain the reply: send one")
		case p.formats == nil:
			return nil, badRequest("grammar", "grammar is not available on this server")
		case len(req.Grammar) > p.limits.MaxSchemaBytes:
			return nil, &requestError{status: http.StatusBadRequest, param: "grammar", code: "grammar_too_large",
				msg: fmt.Sprintf("grammar: %d bytes, more than the %d a request may have (llamaserve --max-schema-bytes)", len(req.Grammar), p.limits.MaxSchemaBytes)}
		}
		proc, err := p.formats.gbnf(req.Grammar, "grammar", "grammar", "the grammar")
		if err != nil {
			return nil, err
		}
		return append(procs, proc), nil
	}
	if forced {
		if req.ResponseFormat != nil && req.ResponseFormat.Type != "text" {
			return nil, badRequest("response_format", "response_format cannot constrain a reply that tool_choice makes a tool call")
		}
	} else if p.formats != nil {
		proc, err := p.formats.processor(req.ResponseFormat)
		if err != nil {
			return nil, err
		}
		if proc != nil {
			procs = append(procs, proc)
		}
	} else if req.ResponseFormat != nil && req.ResponseFormat.Type != "text" {
		return nil, badRequest("response_format", "response_format is not available on this server")
	}
	return procs, nil
}

// logprobs reads logprobs (and top_logprobs for chat).
func (p *params) logprobs(req *apiRequest, chat bool, out *plan) error {
	raw := bytes.TrimSpace(req.Logprobs)
	if len(raw) == 0 || string(raw) == "null" {
		if req.TopLogprobs != nil && *req.TopLogprobs != 0 {
			return badRequest("top_logprobs", "top_logprobs needs logprobs true")
		}
		return nil
	}
	if chat {
		if err := json.Unmarshal(raw, &out.logprobs); err != nil {
			return badRequest("logprobs", "logprobs must be true or false")
		}
		if req.TopLogprobs != nil {
			k := *req.TopLogprobs
			switch {
			case k < 0 || k > maxTopLogprobs:
				return badRequest("top_logprobs", "top_logprobs %d: must be in [0, %d]", k, maxTopLogprobs)
			case k > 0 && !out.logprobs:
				return badRequest("top_logprobs", "top_logprobs needs logprobs true")
			}
			out.topLogprobs = k
		}
		return nil
	}
	var k int
	if err := json.Unmarshal(raw, &k); err != nil || k < 0 || k > 5 {
		return badRequest("logprobs", "logprobs %s: must be an integer in [0, 5]", raw)
	}
	out.logprobs, out.topLogprobs = true, k
	return nil
}

// config makes the request's generation config: the server's base, the
// OpenAI fields, then the transformers fields.
func (p *params) config(req *apiRequest, chat bool) (*genconfig.Config, error) {
	cfg := p.base.Clone()
	maxTokens := req.MaxTokens
	if chat && req.MaxCompletionTokens != nil {
		maxTokens = req.MaxCompletionTokens
	}
	switch {
	case maxTokens != nil:
		if *maxTokens < 1 || *maxTokens > genconfig.MaxTokens {
			return nil, badRequest("max_tokens", "max_tokens %d: must be from 1 to %d", *maxTokens, genconfig.MaxTokens)
		}
		cfg.MaxNewTokens = maxTokens
	case !chat && cfg.MaxNewTokens == nil:
		n := 16 // OpenAI's default for completions
		cfg.MaxNewTokens = &n
	case cfg.MaxNewTokens == nil:
		// A chat reply runs until its end or the end of its sequence.
		n := p.slotSize
		cfg.MaxNewTokens = &n
	}
	if t := req.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return nil, badRequest("temperature", "temperature %g: must be in [0, 2]", *t)
		}
		// Temperature 0 is greedy decoding, as OpenAI's API has it.
		cfg.DoSample = *t > 0
		if *t > 0 {
			cfg.Temperature = *t
		}
	}
	if tp := req.TopP; tp != nil {
		if *tp <= 0 || *tp > 1 {
			return nil, badRequest("top_p", "top_p %g: must be in (0, 1]", *tp)
		}
		cfg.TopP = *tp
	}
	if len(req.config) > 0 {
		data, err := json.Marshal(req.config)
		if err != nil {
			return nil, err
		}
		if err := cfg.Update(data); err != nil {
			return nil, configError(err)
		}
	}
	if _, err := cfg.Validate(p.vocab); err != nil {
		return nil, configError(err)
	}
	return cfg, nil
}

// maxPenalty bounds presence_penalty and frequency_penalty, as OpenAI does.
const maxPenalty = 2

// processors are the request's logit processors beside its config:
// presence_penalty and frequency_penalty, then logit_bias (the response
// format's grammar comes after them).
func (p *params) processors(req *apiRequest) ([]logits.Processor, error) {
	var procs []logits.Processor
	var presence, frequency float64
	for _, f := range []struct {
		name  string
		value *float64
		out   *float64
	}{{"presence_penalty", req.PresencePenalty, &presence}, {"frequency_penalty", req.FrequencyPenalty, &frequency}} {
		if f.value == nil {
			continue
		}
		if v := *f.value; !(v >= -maxPenalty && v <= maxPenalty) {
			return nil, badRequest(f.name, "%s %g: must be in [-%d, %d]", f.name, v, maxPenalty, maxPenalty)
		}
		*f.out = *f.value
	}
	if presence != 0 || frequency != 0 {
		pen, err := logits.NewPresenceFrequencyPenalty(float32(presence), float32(frequency), 0)
		if err != nil {
			return nil, badRequest("presence_penalty", "%v", err)
		}
		procs = append(procs, generatedPenalty{pen})
	}
	if len(req.LogitBias) > 0 {
		bias, err := p.logitBias(req.LogitBias)
		if err != nil {
			return nil, err
		}
		procs = append(procs, bias)
	}
	return procs, nil
}

// generatedPenalty is OpenAI's presence and frequency penalty: the counts
// are those of the tokens generated so far, not of the prompt's, so that
// the state starts empty (logits' processor, as llama.cpp's sampler, would
// count the prompt too).
type generatedPenalty struct {
	*logits.PresenceFrequencyPenalty
}

// NewState starts the counts empty, whatever the prompt.
func (g generatedPenalty) NewState(prompt []int32, vocabSize int) logits.State {
	return g.PresenceFrequencyPenalty.NewState(nil, vocabSize)
}

// logitBias is OpenAI's logit_bias (token id -> bias in [-100, 100]) as a
// processor that adds each bias to its token's logit.
func (p *params) logitBias(m map[string]float64) (logits.Processor, error) {
	keys := slices.Sorted(maps.Keys(m))
	bias := make(map[int32]float32, len(m))
	for _, k := range keys {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 || int(id) >= p.vocab {
			return nil, badRequest("logit_bias", "logit_bias: %s is not a token id in [0, %d)", quote.String(k), p.vocab)
		}
		b := m[k]
		if !(b >= -100 && b <= 100) {
			return nil, badRequest("logit_bias", "logit_bias of %s: %g is outside [-100, 100]", k, b)
		}
		bias[int32(id)] = float32(b)
	}
	proc, err := logits.NewLogitBias(bias, p.vocab)
	if err != nil {
		return nil, badRequest("logit_bias", "%s", strings.TrimPrefix(err.Error(), "logits: "))
	}
	return proc, nil
}

// configError names the fields a generation config rejects.
func configError(err error) error {
	fes := genconfig.FieldErrors(err)
	if len(fes) == 0 {
		return badRequest("", "%s", strings.TrimPrefix(err.Error(), "genconfig: "))
	}
	msgs := make([]string, len(fes))
	for i, fe := range fes {
		msgs[i] = strings.TrimPrefix(fe.Error(), "genconfig: ")
	}
	return badRequest(fes[0].JSON, "%s", strings.Join(msgs, "; "))
}

// parseStop reads stop: a string or an array of at most 4 strings.
func parseStop(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "stop must be a string or an array of strings")
	}
	if len(many) > maxStops {
		return nil, badRequest("stop", "stop: %d strings, at most %d", len(many), maxStops)
	}
	many = slices.DeleteFunc(many, func(s string) bool { return s == "" })
	return many, nil
}

// parsePrompt reads a completion prompt: a string, an array of strings, an
// array of token ids or an array of such arrays.
func parsePrompt(raw json.RawMessage) ([]generation.Request, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("prompt", "prompt is required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []generation.Request{{Text: text}}, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) > 0 {
		out := make([]generation.Request, len(texts))
		for i, s := range texts {
			out[i] = generation.Request{Text: s}
		}
		return out, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return []generation.Request{{Prompt: ids}}, nil
	}
	var lists [][]int32
	if json.Unmarshal(raw, &lists) == nil && len(lists) > 0 {
		out := make([]generation.Request, len(lists))
		for i, l := range lists {
			if len(l) == 0 {
				return nil, badRequest("prompt", "prompt %d is empty", i)
			}
			out[i] = generation.Request{Prompt: l}
		}
		return out, nil
	}
	return nil, badRequest("prompt", "prompt must be a string, an array of strings, an array of token ids or an array of such arrays")
}
