package genconfig

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
)

// Config holds the decoding fields of transformers 4.57's GenerationConfig, each with the default of
// GenerationConfig(). Pointer fields are "None" when nil. A field that transformers disables with
// None and that has no pointer here (top_k, temperature, top_p, typical_p, repetition_penalty, ...)
// takes its neutral value when the JSON holds null: top_k 0, the others 1.0.
//
// A config is plain data: build one with [Default], [Parse] or [Load], change fields or apply JSON
// overrides with [Config.Update], check it with [Config.Validate], and turn it into processors with
// logits.NewPipeline.
type Config struct {
	// Lengths. MaxLength is a total length (prompt included); transformers treats the default 20 as
	// "unset" and then allows 20 new tokens. MaxNewTokens, when set, wins over MaxLength.
	MaxLength    int  // max_length, default 20
	MaxNewTokens *int // max_new_tokens
	MinLength    int  // min_length (total length), default 0
	MinNewTokens *int // min_new_tokens: rewrites MinLength to prompt length + MinNewTokens
	MaxTime      *float64
	StopStrings  []string // stop_strings: a string or a list of strings

	// Strategy.
	EarlyStopping      EarlyStopping // early_stopping: true, false or "never"
	DoSample           bool          // do_sample
	NumBeams           int           // num_beams, default 1
	NumReturnSequences int           // num_return_sequences, default 1

	// Warpers (applied only when DoSample is true).
	Temperature   float64  // temperature, default 1.0
	TopK          int      // top_k, default 50; 0 disables it
	TopP          float64  // top_p, default 1.0
	MinP          *float64 // min_p
	TypicalP      float64  // typical_p, default 1.0
	EpsilonCutoff float64  // epsilon_cutoff, default 0
	EtaCutoff     float64  // eta_cutoff, default 0

	// Processors.
	RepetitionPenalty             float64        // repetition_penalty, default 1.0
	EncoderRepetitionPenalty      float64        // encoder_repetition_penalty, default 1.0 (the prompt is the encoder input)
	LengthPenalty                 float64        // length_penalty, default 1.0 (beam search)
	NoRepeatNGramSize             int            // no_repeat_ngram_size
	EncoderNoRepeatNGramSize      int            // encoder_no_repeat_ngram_size
	BadWordsIDs                   [][]int32      // bad_words_ids
	ForcedBOSTokenID              *int32         // forced_bos_token_id
	ForcedEOSTokenID              []int32        // forced_eos_token_id, int or list in JSON
	RemoveInvalidValues           bool           // remove_invalid_values
	ExponentialDecayLengthPenalty *[2]float64    // exponential_decay_length_penalty: [start_index, decay_factor]
	SuppressTokens                []int32        // suppress_tokens
	BeginSuppressTokens           []int32        // begin_suppress_tokens
	SequenceBias                  []SequenceBias // sequence_bias, list form [[[ids...], bias], ...]
	RenormalizeLogits             bool           // renormalize_logits
	GuidanceScale                 *float64       // guidance_scale (classifier-free guidance; not supported by NewPipeline)
	TokenHealing                  bool           // token_healing

	// Special tokens.
	EOSTokenID           []int32 // eos_token_id, int or list in JSON; nil when unset
	PadTokenID           *int32  // pad_token_id
	BOSTokenID           *int32  // bos_token_id
	DecoderStartTokenID  *int32  // decoder_start_token_id
	UseCache             bool    // use_cache, default true
	OutputScores         bool    // output_scores
	OutputLogits         bool    // output_logits
	ReturnDictInGenerate bool    // return_dict_in_generate

	// Modes that transformers 4.57 only runs as Hub-hosted code (trust_remote_code); Validate rejects
	// the settings that select them.
	NumBeamGroups    int      // num_beam_groups, default 1
	DiversityPenalty float64  // diversity_penalty, default 0
	PenaltyAlpha     *float64 // penalty_alpha (contrastive search)

	// Assisted generation and prompt lookup (speculation in package generation): a draft model's schedule and
	// confidence stop, or the n-gram lookup in the text so far.
	NumAssistantTokens           int     // num_assistant_tokens, default 20
	NumAssistantTokensSchedule   string  // num_assistant_tokens_schedule: "constant" (default), "heuristic", "heuristic_transient"
	AssistantConfidenceThreshold float64 // assistant_confidence_threshold, default 0.4
	PromptLookupNumTokens        *int    // prompt_lookup_num_tokens
	MaxMatchingNGramSize         *int    // max_matching_ngram_size (prompt lookup uses 2 when unset)

	// Extra keeps every other JSON field (transformers_version, watermarking_config, dola_layers, ...)
	// as it was read. Decoding ignores them, except the few that select a mode we do not run, which
	// Validate reports.
	Extra map[string]json.RawMessage

	// jsonInts records the float fields that the JSON gave as integers, with their value: transformers
	// rejects an integer temperature or penalty ("2" rather than "2.0") when it builds the processor.
	jsonInts map[string]float64
}

// Default returns GenerationConfig() of transformers 4.57: max_length 20, top_k 50,
// num_beams 1, temperature, top_p, typical_p and the penalties 1.0, everything else unset.
func Default() *Config {
	return &Config{
		MaxLength:                20,
		NumBeams:                 1,
		NumReturnSequences:       1,
		Temperature:              1,
		TopK:                     50,
		TopP:                     1,
		TypicalP:                 1,
		RepetitionPenalty:        1,
		EncoderRepetitionPenalty: 1,
		LengthPenalty:            1,
		UseCache:                 true,
		NumBeamGroups:            1,

		NumAssistantTokens:           20,
		NumAssistantTokensSchedule:   ScheduleConstant,
		AssistantConfidenceThreshold: 0.4,
	}
}

// Parse reads a generation_config.json document: transformers' defaults, then every
// field the JSON sets (GenerationConfig.from_dict). Unknown fields are kept in Extra. A field of the
// wrong JSON type is an error naming it; values are checked later by Validate.
func Parse(data []byte) (*Config, error) {
	c := Default()
	if err := c.Update(data); err != nil {
		return nil, err
	}
	return c, nil
}

// Load reads a generation_config.json file with Parse.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("genconfig: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return c, nil
}

// Update sets every field that the JSON object overrides holds, as transformers'
// GenerationConfig.update(**kwargs) does: the caller's settings win over the model's. Fields that
// the object does not name keep their value. On error c is unchanged.
func (c *Config) Update(overrides []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(overrides, &fields); err != nil {
		return fmt.Errorf("genconfig: generation config: %w", jsonError(overrides, err))
	}
	if fields == nil {
		return fmt.Errorf("genconfig: generation config: want a JSON object, got %.40s", overrides)
	}
	next := c.Clone()
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[name]
		f, known := configFields[name]
		if !known {
			if next.Extra == nil {
				next.Extra = map[string]json.RawMessage{}
			}
			next.Extra[name] = slices.Clone(raw)
			continue
		}
		if err := f.set(next, jsonValue{name: name, field: f.goName, raw: raw}); err != nil {
			return err
		}
	}
	*c = *next
	return nil
}

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	d := *c
	d.MaxNewTokens = clonePtr(c.MaxNewTokens)
	d.MinNewTokens = clonePtr(c.MinNewTokens)
	d.MaxTime = clonePtr(c.MaxTime)
	d.StopStrings = slices.Clone(c.StopStrings)
	d.MinP = clonePtr(c.MinP)
	d.BadWordsIDs = cloneWords(c.BadWordsIDs)
	d.ForcedBOSTokenID = clonePtr(c.ForcedBOSTokenID)
	d.ForcedEOSTokenID = slices.Clone(c.ForcedEOSTokenID)
	d.ExponentialDecayLengthPenalty = clonePtr(c.ExponentialDecayLengthPenalty)
	d.SuppressTokens = slices.Clone(c.SuppressTokens)
	d.BeginSuppressTokens = slices.Clone(c.BeginSuppressTokens)
	if c.SequenceBias != nil {
		d.SequenceBias = make([]SequenceBias, len(c.SequenceBias))
		for i, sb := range c.SequenceBias {
			d.SequenceBias[i] = sb
			d.SequenceBias[i].Tokens = slices.Clone(sb.Tokens)
		}
	}
	d.GuidanceScale = clonePtr(c.GuidanceScale)
	d.EOSTokenID = slices.Clone(c.EOSTokenID)
	d.PadTokenID = clonePtr(c.PadTokenID)
	d.BOSTokenID = clonePtr(c.BOSTokenID)
	d.DecoderStartTokenID = clonePtr(c.DecoderStartTokenID)
	d.PenaltyAlpha = clonePtr(c.PenaltyAlpha)
	d.PromptLookupNumTokens = clonePtr(c.PromptLookupNumTokens)
	d.MaxMatchingNGramSize = clonePtr(c.MaxMatchingNGramSize)
	if c.Extra != nil {
		d.Extra = make(map[string]json.RawMessage, len(c.Extra))
		for k, v := range c.Extra {
			d.Extra[k] = slices.Clone(v)
		}
	}
	d.jsonInts = maps.Clone(c.jsonInts)
	return &d
}

// PadToken returns the pad id that generate() uses: pad_token_id, or eos[0] when it is unset and an
// eos exists (transformers' _prepare_special_tokens; the config field itself stays unset). ok is
// false when neither is set.
func (c *Config) PadToken() (id int32, ok bool) {
	if c.PadTokenID != nil {
		return *c.PadTokenID, true
	}
	if len(c.EOSTokenID) > 0 {
		return c.EOSTokenID[0], true
	}
	return 0, false
}

// isJSONInt reports whether field was read from JSON as an integer and still holds that value.
func (c *Config) isJSONInt(field string, v float64) bool {
	w, ok := c.jsonInts[field]
	return ok && w == v
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneWords(w [][]int32) [][]int32 {
	if w == nil {
		return nil
	}
	out := make([][]int32, len(w))
	for i, ids := range w {
		out[i] = slices.Clone(ids)
	}
	return out
}
