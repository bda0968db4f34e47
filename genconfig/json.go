package genconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// EarlyStopping is transformers' early_stopping for beam search: true, false or "never". JSON 1 and 0
// are accepted as transformers' validation accepts them (Python set membership), and both behave as
// false, because _beam_search tests `early_stopping is True`.
type EarlyStopping int

const (
	// EarlyStoppingFalse is the default heuristic: stop once the best running beam, normalised by
	// the current length, cannot beat the worst finished hypothesis.
	EarlyStoppingFalse EarlyStopping = iota
	// EarlyStoppingTrue stops a prompt as soon as it has num_beams finished hypotheses.
	EarlyStoppingTrue
	// EarlyStoppingNever normalises the best running beam by the maximum length when
	// length_penalty > 0: the canonical beam search stopping rule.
	EarlyStoppingNever
)

// String returns the JSON spelling: "false", "true" or "never".
func (e EarlyStopping) String() string {
	switch e {
	case EarlyStoppingTrue:
		return "true"
	case EarlyStoppingNever:
		return "never"
	case EarlyStoppingFalse:
		return "false"
	}
	return fmt.Sprintf("EarlyStopping(%d)", int(e))
}

// MarshalJSON writes true, false or "never".
func (e EarlyStopping) MarshalJSON() ([]byte, error) {
	switch e {
	case EarlyStoppingTrue:
		return []byte("true"), nil
	case EarlyStoppingNever:
		return []byte(`"never"`), nil
	case EarlyStoppingFalse:
		return []byte("false"), nil
	}
	return nil, fmt.Errorf("genconfig: early_stopping: invalid value %d", int(e))
}

// UnmarshalJSON reads true, false, "never", 1 or 0 (null is false); anything else is an error, as in
// GenerationConfig.validate.
func (e *EarlyStopping) UnmarshalJSON(data []byte) error {
	switch string(bytes.TrimSpace(data)) {
	case "true":
		*e = EarlyStoppingTrue
	case "false", "null", "0", "1":
		*e = EarlyStoppingFalse
	case `"never"`:
		*e = EarlyStoppingNever
	default:
		return &FieldError{Field: "EarlyStopping", JSON: "early_stopping", Value: json.RawMessage(data),
			Reason: `must be true, false or "never"`}
	}
	return nil
}

// SequenceBias is one entry of sequence_bias in its list form [[token, ...], bias]: the bias is
// added to the score of the last token whenever the tokens before it end the sequence
// (SequenceBiasLogitsProcessor).
type SequenceBias struct {
	Tokens []int32
	Bias   float64
	// intBias records a JSON integer bias, which transformers rejects ("must be a float").
	intBias bool
}

// IntBias reports whether the JSON wrote the bias as an integer ("2" rather than "2.0"), which
// transformers' SequenceBiasLogitsProcessor rejects ("must be a float").
func (s SequenceBias) IntBias() bool { return s.intBias }

// MarshalJSON writes the list form [[ids...], bias].
func (s SequenceBias) MarshalJSON() ([]byte, error) {
	ids := s.Tokens
	if ids == nil {
		ids = []int32{}
	}
	return json.Marshal([]any{ids, s.Bias})
}

// UnmarshalJSON reads the list form [[ids...], bias]. An integer bias is kept, and rejected by
// Validate as transformers rejects it.
func (s *SequenceBias) UnmarshalJSON(data []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(data, &pair); err != nil || len(pair) != 2 {
		return sequenceBiasValue(data).errorf("a list of [[token ids...], bias] entries")
	}
	ids, err := sequenceBiasValue(pair[0]).ints()
	if err != nil {
		return err
	}
	bias, isInt, err := sequenceBiasValue(pair[1]).float()
	if err != nil {
		return err
	}
	*s = SequenceBias{Tokens: ids, Bias: bias, intBias: isInt}
	return nil
}

// sequenceBiasValue is raw read as (a part of) the sequence_bias field.
func sequenceBiasValue(raw json.RawMessage) jsonValue {
	return jsonValue{name: "sequence_bias", field: "SequenceBias", raw: raw}
}

// jsonValue is one field of a generation_config.json object, named (in JSON and in Go) for its
// errors.
type jsonValue struct {
	name, field string
	raw         json.RawMessage
}

// part returns the value raw read as a part of v (an item of a list, an entry of a pair).
func (v jsonValue) part(raw json.RawMessage) jsonValue {
	return jsonValue{name: v.name, field: v.field, raw: raw}
}

func (v jsonValue) isNull() bool { return string(bytes.TrimSpace(v.raw)) == "null" }

// errorf is the error of a value that is not of the JSON type the field wants.
func (v jsonValue) errorf(want string) error {
	return &FieldError{Field: v.field, JSON: v.name, Value: v.raw, Reason: "must be " + want}
}

// integer reads a JSON integer; a number with a fraction or an exponent is a Python float, which
// transformers' int fields reject.
func (v jsonValue) integer() (int, error) {
	s := string(bytes.TrimSpace(v.raw))
	n, err := strconv.ParseInt(s, 10, 32)
	if errors.Is(err, strconv.ErrRange) {
		// An integer, but not one that a config field (an int32) can hold.
		return 0, v.errorf(fmt.Sprintf("an integer in [%d, %d]", math.MinInt32, math.MaxInt32))
	}
	if err != nil {
		return 0, v.errorf("an integer")
	}
	return int(n), nil
}

// float reads a JSON number, reporting whether it was written as an integer.
func (v jsonValue) float() (f float64, isInt bool, err error) {
	s := string(bytes.TrimSpace(v.raw))
	if len(s) == 0 || !(s[0] == '-' || s[0] >= '0' && s[0] <= '9') {
		return 0, false, v.errorf("a number")
	}
	f, err = strconv.ParseFloat(s, 64)
	if errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0) {
		return 0, false, v.errorf(fmt.Sprintf("a number within ±%g", math.MaxFloat64))
	}
	if err != nil || math.IsInf(f, 0) {
		return 0, false, v.errorf("a number")
	}
	_, intErr := strconv.ParseInt(s, 10, 64)
	return f, intErr == nil, nil
}

func (v jsonValue) boolean() (bool, error) {
	switch string(bytes.TrimSpace(v.raw)) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	return false, v.errorf("true or false")
}

// tokenID reads one token id: a JSON integer in int32 range (negative ids are kept for Validate).
func (v jsonValue) tokenID() (int32, error) {
	n, err := v.integer()
	if err != nil {
		return 0, v.errorf("a token id (integer)")
	}
	return int32(n), nil
}

// ints reads a JSON list of token ids.
func (v jsonValue) ints() ([]int32, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(v.raw, &items); err != nil || items == nil {
		return nil, v.errorf("a list of token ids")
	}
	out := make([]int32, len(items))
	for i, it := range items {
		id, err := v.part(it).tokenID()
		if err != nil {
			return nil, err
		}
		out[i] = id
	}
	return out, nil
}

// intOrList reads an id given as an int or a list of ints (eos_token_id, forced_eos_token_id).
func (v jsonValue) intOrList() ([]int32, error) {
	if v.isNull() {
		return nil, nil
	}
	if id, err := v.tokenID(); err == nil {
		return []int32{id}, nil
	}
	ids, err := v.ints()
	if err != nil {
		return nil, v.errorf("a token id or a list of token ids")
	}
	return ids, nil
}

// Setters for the common field shapes; each returns the field's setter for configFields.

func intField(get func(*Config) *int, null int) func(*Config, jsonValue) error {
	return func(c *Config, v jsonValue) error {
		if v.isNull() {
			*get(c) = null
			return nil
		}
		n, err := v.integer()
		*get(c) = n
		return err
	}
}

func optIntField(get func(*Config) **int) func(*Config, jsonValue) error {
	return func(c *Config, v jsonValue) error {
		if v.isNull() {
			*get(c) = nil
			return nil
		}
		n, err := v.integer()
		*get(c) = &n
		return err
	}
}

func floatField(get func(*Config) *float64, null float64) func(*Config, jsonValue) error {
	return func(c *Config, v jsonValue) error {
		if v.isNull() {
			*get(c) = null
			return nil
		}
		f, isInt, err := v.float()
		if err != nil {
			return err
		}
		*get(c) = f
		if isInt {
			if c.jsonInts == nil {
				c.jsonInts = map[string]float64{}
			}
			c.jsonInts[v.name] = f
		} else {
			delete(c.jsonInts, v.name)
		}
		return nil
	}
}

func optFloatField(get func(*Config) **float64) func(*Config, jsonValue) error {
	return func(c *Config, v jsonValue) error {
		if v.isNull() {
			*get(c) = nil
			return nil
		}
		f, _, err := v.float()
		*get(c) = &f
		return err
	}
}

func boolField(get func(*Config) *bool) func(*Config, jsonValue) error {
	return func(c *Config, v jsonValue) error {
		b, err := v.boolean()
		*get(c) = b
		return err
	}
}

func optTokenField(get func(*Config) **int32) func(*Config, jsonValue) error {
	return func(c *Config, v jsonValue) error {
		if v.isNull() {
			*get(c) = nil
			return nil
		}
		id, err := v.tokenID()
		*get(c) = &id
		return err
	}
}

func tokenListField(get func(*Config) *[]int32, intAllowed bool) func(*Config, jsonValue) error {
	return func(c *Config, v jsonValue) error {
		var ids []int32
		var err error
		switch {
		case v.isNull():
		case intAllowed:
			ids, err = v.intOrList()
		default:
			ids, err = v.ints()
		}
		*get(c) = ids
		return err
	}
}

// field is one known generation_config.json field: the Go name of its Config field and its setter.
type field struct {
	goName string
	set    func(*Config, jsonValue) error
}

// configFields maps each known generation_config.json field to its Go name and setter.
var configFields = map[string]field{
	"max_length":     {"MaxLength", intField(func(c *Config) *int { return &c.MaxLength }, 20)},
	"max_new_tokens": {"MaxNewTokens", optIntField(func(c *Config) **int { return &c.MaxNewTokens })},
	"min_length":     {"MinLength", intField(func(c *Config) *int { return &c.MinLength }, 0)},
	"min_new_tokens": {"MinNewTokens", optIntField(func(c *Config) **int { return &c.MinNewTokens })},
	"max_time":       {"MaxTime", optFloatField(func(c *Config) **float64 { return &c.MaxTime })},
	"stop_strings": {"StopStrings", func(c *Config, v jsonValue) error {
		c.StopStrings = nil
		if v.isNull() {
			return nil
		}
		var one string
		if json.Unmarshal(v.raw, &one) == nil {
			c.StopStrings = []string{one}
			return nil
		}
		if json.Unmarshal(v.raw, &c.StopStrings) != nil {
			return v.errorf("a string or a list of strings")
		}
		return nil
	}},
	"early_stopping": {"EarlyStopping", func(c *Config, v jsonValue) error {
		return c.EarlyStopping.UnmarshalJSON(v.raw)
	}},
	"do_sample":            {"DoSample", boolField(func(c *Config) *bool { return &c.DoSample })},
	"num_beams":            {"NumBeams", intField(func(c *Config) *int { return &c.NumBeams }, 1)},
	"num_return_sequences": {"NumReturnSequences", intField(func(c *Config) *int { return &c.NumReturnSequences }, 1)},
	"temperature":          {"Temperature", floatField(func(c *Config) *float64 { return &c.Temperature }, 1)},
	"top_k":                {"TopK", intField(func(c *Config) *int { return &c.TopK }, 0)},
	"top_p":                {"TopP", floatField(func(c *Config) *float64 { return &c.TopP }, 1)},
	"min_p":                {"MinP", optFloatField(func(c *Config) **float64 { return &c.MinP })},
	"typical_p":            {"TypicalP", floatField(func(c *Config) *float64 { return &c.TypicalP }, 1)},
	"epsilon_cutoff":       {"EpsilonCutoff", floatField(func(c *Config) *float64 { return &c.EpsilonCutoff }, 0)},
	"eta_cutoff":           {"EtaCutoff", floatField(func(c *Config) *float64 { return &c.EtaCutoff }, 0)},
	"repetition_penalty":   {"RepetitionPenalty", floatField(func(c *Config) *float64 { return &c.RepetitionPenalty }, 1)},
	"encoder_repetition_penalty": {"EncoderRepetitionPenalty", floatField(func(c *Config) *float64 {
		return &c.EncoderRepetitionPenalty
	}, 1)},
	"length_penalty":       {"LengthPenalty", floatField(func(c *Config) *float64 { return &c.LengthPenalty }, 1)},
	"no_repeat_ngram_size": {"NoRepeatNGramSize", intField(func(c *Config) *int { return &c.NoRepeatNGramSize }, 0)},
	"encoder_no_repeat_ngram_size": {"EncoderNoRepeatNGramSize", intField(func(c *Config) *int {
		return &c.EncoderNoRepeatNGramSize
	}, 0)},
	"bad_words_ids": {"BadWordsIDs", func(c *Config, v jsonValue) error {
		c.BadWordsIDs = nil
		if v.isNull() {
			return nil
		}
		var words []json.RawMessage
		if err := json.Unmarshal(v.raw, &words); err != nil || words == nil {
			return v.errorf("a list of lists of token ids")
		}
		c.BadWordsIDs = make([][]int32, len(words))
		for i, w := range words {
			ids, err := v.part(w).ints()
			if err != nil {
				return v.errorf("a list of lists of token ids")
			}
			c.BadWordsIDs[i] = ids
		}
		return nil
	}},
	"forced_bos_token_id":   {"ForcedBOSTokenID", optTokenField(func(c *Config) **int32 { return &c.ForcedBOSTokenID })},
	"forced_eos_token_id":   {"ForcedEOSTokenID", tokenListField(func(c *Config) *[]int32 { return &c.ForcedEOSTokenID }, true)},
	"remove_invalid_values": {"RemoveInvalidValues", boolField(func(c *Config) *bool { return &c.RemoveInvalidValues })},
	"exponential_decay_length_penalty": {"ExponentialDecayLengthPenalty", func(c *Config, v jsonValue) error {
		c.ExponentialDecayLengthPenalty = nil
		if v.isNull() {
			return nil
		}
		var pair []json.RawMessage
		if err := json.Unmarshal(v.raw, &pair); err != nil || len(pair) != 2 {
			return v.errorf("[start_index, decay_factor]")
		}
		start, err := v.part(pair[0]).integer()
		if err != nil {
			return v.errorf("[start_index (integer), decay_factor]")
		}
		factor, _, err := v.part(pair[1]).float()
		if err != nil {
			return v.errorf("[start_index, decay_factor (number)]")
		}
		c.ExponentialDecayLengthPenalty = &[2]float64{float64(start), factor}
		return nil
	}},
	"suppress_tokens":       {"SuppressTokens", tokenListField(func(c *Config) *[]int32 { return &c.SuppressTokens }, false)},
	"begin_suppress_tokens": {"BeginSuppressTokens", tokenListField(func(c *Config) *[]int32 { return &c.BeginSuppressTokens }, false)},
	"sequence_bias": {"SequenceBias", func(c *Config, v jsonValue) error {
		c.SequenceBias = nil
		if v.isNull() {
			return nil
		}
		if err := json.Unmarshal(v.raw, &c.SequenceBias); err != nil || c.SequenceBias == nil {
			c.SequenceBias = nil
			var fe *FieldError
			if err != nil && errors.As(err, &fe) && !bytes.HasPrefix(bytes.TrimSpace(v.raw), []byte("{")) {
				return err
			}
			return v.errorf("the list form [[[token ids...], bias], ...]")
		}
		return nil
	}},
	"renormalize_logits":     {"RenormalizeLogits", boolField(func(c *Config) *bool { return &c.RenormalizeLogits })},
	"guidance_scale":         {"GuidanceScale", optFloatField(func(c *Config) **float64 { return &c.GuidanceScale })},
	"token_healing":          {"TokenHealing", boolField(func(c *Config) *bool { return &c.TokenHealing })},
	"eos_token_id":           {"EOSTokenID", tokenListField(func(c *Config) *[]int32 { return &c.EOSTokenID }, true)},
	"pad_token_id":           {"PadTokenID", optTokenField(func(c *Config) **int32 { return &c.PadTokenID })},
	"bos_token_id":           {"BOSTokenID", optTokenField(func(c *Config) **int32 { return &c.BOSTokenID })},
	"decoder_start_token_id": {"DecoderStartTokenID", optTokenField(func(c *Config) **int32 { return &c.DecoderStartTokenID })},
	"use_cache":              {"UseCache", boolField(func(c *Config) *bool { return &c.UseCache })},
	"output_scores":          {"OutputScores", boolField(func(c *Config) *bool { return &c.OutputScores })},
	"output_logits":          {"OutputLogits", boolField(func(c *Config) *bool { return &c.OutputLogits })},
	"return_dict_in_generate": {"ReturnDictInGenerate", boolField(func(c *Config) *bool {
		return &c.ReturnDictInGenerate
	})},
	"num_beam_groups":   {"NumBeamGroups", intField(func(c *Config) *int { return &c.NumBeamGroups }, 1)},
	"diversity_penalty": {"DiversityPenalty", floatField(func(c *Config) *float64 { return &c.DiversityPenalty }, 0)},
	"penalty_alpha":     {"PenaltyAlpha", optFloatField(func(c *Config) **float64 { return &c.PenaltyAlpha })},
}
