package genconfig

import (
	"errors"
	"fmt"
	"math"
)

// Validate checks c with transformers 4.57's rules, and the bounds of the sizes it asks for (see
// MaxTokens, Bound): what GenerationConfig.validate() or a processor constructor rejects, or a size
// beyond its bound, is a *FieldError naming the field and its value (errors.Join of all of them,
// see FieldErrors); what
// transformers only warns about is returned as warnings. vocabSize > 0 also checks that the token ids
// that would index the scores (bad_words_ids, sequence_bias, forced_bos_token_id,
// forced_eos_token_id) lie inside the vocabulary; 0 means unknown.
//
// Processor checks apply only to processors the config enables, as in transformers: temperature 0
// is an error with do_sample, a warning without it.
func (c *Config) Validate(vocabSize int) (warnings []string, err error) {
	var errs []error
	fail := func(name string, value any, format string, args ...any) {
		errs = append(errs, fieldError(name, value, format, args...))
	}
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }

	// GenerationConfig.validate(): errors.
	switch c.EarlyStopping {
	case EarlyStoppingFalse, EarlyStoppingTrue, EarlyStoppingNever:
	default:
		fail("early_stopping", int(c.EarlyStopping), `must be true, false or "never"`)
	}
	if c.MaxNewTokens != nil && *c.MaxNewTokens <= 0 {
		fail("max_new_tokens", *c.MaxNewTokens, "must be greater than 0")
	}
	if c.NumBeams < 1 {
		fail("num_beams", c.NumBeams, "must be at least 1")
	}
	if c.NumReturnSequences < 1 {
		fail("num_return_sequences", c.NumReturnSequences, "must be at least 1")
	} else if c.NumReturnSequences != 1 && c.NumBeams == 1 && !c.DoSample {
		fail("num_return_sequences", c.NumReturnSequences, "> 1 needs sampling (do_sample=true) or beam search (num_beams > 1)")
	} else if c.NumBeams > 1 && c.NumReturnSequences > c.NumBeams {
		fail("num_return_sequences", c.NumReturnSequences, "must not exceed num_beams (=%d)", c.NumBeams)
	}
	// Modes that 4.57 only runs as Hub-hosted code.
	if c.NumBeamGroups > 1 {
		fail("num_beam_groups", c.NumBeamGroups, "selects group beam search, a Hub-hosted mode in transformers 4.57: not supported")
	}
	if c.PenaltyAlpha != nil && *c.PenaltyAlpha > 0 && c.TopK > 1 && !c.DoSample {
		fail("penalty_alpha", *c.PenaltyAlpha, "selects contrastive search, a Hub-hosted mode in transformers 4.57: not supported")
	}
	for _, name := range []string{"constraints", "force_words_ids", "dola_layers"} {
		if raw, ok := c.Extra[name]; ok && string(raw) != "null" {
			fail(name, raw, "selects a Hub-hosted mode of transformers 4.57: not supported")
		}
	}
	if c.GuidanceScale != nil && *c.GuidanceScale != 1 {
		fail("guidance_scale", *c.GuidanceScale, "selects classifier-free guidance: not supported")
	}
	if raw, ok := c.Extra["watermarking_config"]; ok && string(raw) != "null" {
		fail("watermarking_config", raw, "selects watermarking: not supported")
	}

	// GenerationConfig.validate(): warnings.
	if !c.DoSample {
		const hint = "is set but do_sample is false: it only applies to sampling and is ignored"
		if c.Temperature != 1 {
			warn("temperature (=%g) %s", c.Temperature, hint)
		}
		if c.TopP != 1 {
			warn("top_p (=%g) %s", c.TopP, hint)
		}
		if c.MinP != nil {
			warn("min_p (=%g) %s", *c.MinP, hint)
		}
		if c.TypicalP != 1 {
			warn("typical_p (=%g) %s", c.TypicalP, hint)
		}
		if c.TopK != 50 && c.TopK != 0 {
			warn("top_k (=%d) %s", c.TopK, hint)
		}
		if c.EpsilonCutoff != 0 {
			warn("epsilon_cutoff (=%g) %s", c.EpsilonCutoff, hint)
		}
		if c.EtaCutoff != 0 {
			warn("eta_cutoff (=%g) %s", c.EtaCutoff, hint)
		}
	}
	if c.NumBeams == 1 {
		if c.EarlyStopping != EarlyStoppingFalse {
			warn("early_stopping (=%v) is set but num_beams is 1: it only applies to beam search and is ignored", c.EarlyStopping)
		}
		if c.LengthPenalty != 1 {
			warn("length_penalty (=%g) is set but num_beams is 1: it only applies to beam search and is ignored", c.LengthPenalty)
		}
	}
	if c.PadTokenID != nil && *c.PadTokenID < 0 {
		warn("pad_token_id (=%d) is negative", *c.PadTokenID)
	}
	for _, e := range c.EOSTokenID {
		if e < 0 {
			warn("eos_token_id contains a negative id (%d): generation will never stop on it", e)
		} else if vocabSize > 0 && int(e) >= vocabSize {
			warn("eos_token_id %d is outside the vocabulary (size %d): processors ignore it", e, vocabSize)
		}
	}
	if c.DoSample && (c.EpsilonCutoff < 0 || c.EpsilonCutoff >= 1) && c.EpsilonCutoff != 0 {
		warn("epsilon_cutoff (=%g) is outside (0, 1): no epsilon warper is applied", c.EpsilonCutoff)
	}
	if c.DoSample && (c.EtaCutoff < 0 || c.EtaCutoff >= 1) && c.EtaCutoff != 0 {
		warn("eta_cutoff (=%g) is outside (0, 1): no eta warper is applied", c.EtaCutoff)
	}

	errs = append(errs, c.boundErrors()...)
	// Processor constructors (raised inside generate()).
	errs = append(errs, c.processorErrors(vocabSize, warn)...)
	errs = append(errs, c.assistedErrors()...)
	return warnings, errors.Join(errs...)
}

// The bounds of the sizes a config may ask for, whatever sets it (a
// generation_config.json, a command line, a request): llamaloop allocates
// by them, where transformers would fail later or run out of memory.
const (
	// MaxTokens bounds every length, n-gram size and token count: the most
	// tokens a llama.cpp sequence holds (2^24 cells).
	MaxTokens = 1 << 24
	// MaxBeams bounds num_beams: llama.cpp's most sequences (LLAMA_MAX_SEQ).
	MaxBeams = 256
	// MaxReturnSequences bounds num_return_sequences: each is a sequence
	// of its own, with its own output.
	MaxReturnSequences = 1 << 16
)

// bounds are the largest values of the integer fields that size something
// (Parse keeps every integer in int32 already).
var bounds = []struct {
	name string
	max  int
	get  func(c *Config) (int, bool)
}{
	{"max_new_tokens", MaxTokens, func(c *Config) (int, bool) { return deref(c.MaxNewTokens) }},
	{"max_length", MaxTokens, func(c *Config) (int, bool) { return c.MaxLength, true }},
	{"min_new_tokens", MaxTokens, func(c *Config) (int, bool) { return deref(c.MinNewTokens) }},
	{"min_length", MaxTokens, func(c *Config) (int, bool) { return c.MinLength, true }},
	{"num_beams", MaxBeams, func(c *Config) (int, bool) { return c.NumBeams, true }},
	{"num_return_sequences", MaxReturnSequences, func(c *Config) (int, bool) { return c.NumReturnSequences, true }},
	{"no_repeat_ngram_size", MaxTokens, func(c *Config) (int, bool) { return c.NoRepeatNGramSize, true }},
	{"encoder_no_repeat_ngram_size", MaxTokens, func(c *Config) (int, bool) { return c.EncoderNoRepeatNGramSize, true }},
	{"num_assistant_tokens", MaxTokens, func(c *Config) (int, bool) { return c.NumAssistantTokens, true }},
	{"prompt_lookup_num_tokens", MaxTokens, func(c *Config) (int, bool) { return deref(c.PromptLookupNumTokens) }},
	{"max_matching_ngram_size", MaxTokens, func(c *Config) (int, bool) { return deref(c.MaxMatchingNGramSize) }},
}

func deref(p *int) (int, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

// Bound returns the largest value Validate accepts for the integer field
// name (its JSON name), and whether the field has a bound: the commands
// check their options against it before anything loads.
func Bound(name string) (int, bool) {
	for _, b := range bounds {
		if b.name == name {
			return b.max, true
		}
	}
	return 0, false
}

// boundErrors checks the fields of bounds.
func (c *Config) boundErrors() []error {
	var errs []error
	for _, b := range bounds {
		if v, ok := b.get(c); ok && v > b.max {
			errs = append(errs, fieldError(b.name, v, "must be at most %d", b.max))
		}
	}
	return errs
}

// processorErrors checks the arguments of the processors that c enables, as their constructors do.
func (c *Config) processorErrors(vocabSize int, warn func(string, ...any)) []error {
	var errs []error
	fail := func(name string, value any, format string, args ...any) {
		errs = append(errs, fieldError(name, value, format, args...))
	}
	inVocab := func(id int32) bool { return vocabSize <= 0 || int(id) < vocabSize }

	if c.SequenceBias != nil {
		if len(c.SequenceBias) == 0 {
			fail("sequence_bias", "[]", "must be a non-empty list of [[token ids...], bias] pairs")
		}
		// One error per field: a list of megabytes gets a message of a
		// line.
		before := len(errs)
		for _, sb := range c.SequenceBias {
			if len(errs) > before {
				break
			}
			if len(sb.Tokens) == 0 {
				fail("sequence_bias", sb.Tokens, "needs a non-empty list of token ids in each entry")
			}
			for _, id := range sb.Tokens {
				if id <= 0 {
					fail("sequence_bias", sb.Tokens, "token ids must be positive integers in the list form, got %d", id)
					break
				} else if !inVocab(id) {
					fail("sequence_bias", sb.Tokens, "token id %d is outside the vocabulary (size %d)", id, vocabSize)
					break
				}
			}
			if sb.intBias {
				fail("sequence_bias", sb.Tokens, "the bias must be a float, got the integer %g", sb.Bias)
			}
		}
	}
	if p := c.EncoderRepetitionPenalty; p != 1 && (!(p > 0) || c.isJSONInt("encoder_repetition_penalty", p)) {
		fail("encoder_repetition_penalty", p, "has to be a strictly positive float")
	}
	if p := c.RepetitionPenalty; p != 1 && (!(p > 0) || c.isJSONInt("repetition_penalty", p)) {
		fail("repetition_penalty", p, "has to be a strictly positive float")
	}
	if c.BadWordsIDs != nil {
		if len(c.BadWordsIDs) == 0 {
			fail("bad_words_ids", "[]", "has to be a non-empty list")
		}
		before := len(errs)
		for _, w := range c.BadWordsIDs {
			if len(errs) > before {
				break
			}
			if len(w) == 0 {
				fail("bad_words_ids", w, "each entry must be a non-empty list of token ids")
			}
			for _, id := range w {
				if id < 0 {
					fail("bad_words_ids", w, "has to be a list of lists of non-negative integers, got %d", id)
					break
				} else if !inVocab(id) {
					fail("bad_words_ids", w, "token id %d is outside the vocabulary (size %d)", id, vocabSize)
					break
				}
			}
		}
	}
	if c.ForcedBOSTokenID != nil {
		if id := *c.ForcedBOSTokenID; id < 0 || !inVocab(id) {
			fail("forced_bos_token_id", id, "is not a token id of the vocabulary (size %d)", vocabSize)
		}
	}
	if c.ForcedEOSTokenID != nil {
		for _, id := range c.ForcedEOSTokenID {
			if id < 0 {
				fail("forced_eos_token_id", c.ForcedEOSTokenID, "has to be a list of positive integers")
				break
			} else if !inVocab(id) {
				fail("forced_eos_token_id", c.ForcedEOSTokenID, "token id %d is outside the vocabulary (size %d)", id, vocabSize)
				break
			}
		}
	}
	if c.ExponentialDecayLengthPenalty != nil && len(c.EOSTokenID) == 0 {
		fail("exponential_decay_length_penalty", *c.ExponentialDecayLengthPenalty, "needs eos_token_id")
	}
	for _, field := range []struct {
		name string
		ids  []int32
	}{{"suppress_tokens", c.SuppressTokens}, {"begin_suppress_tokens", c.BeginSuppressTokens}} {
		for _, id := range field.ids {
			if id < 0 || !inVocab(id) {
				warn("%s: token id %d is outside the vocabulary: ignored, as transformers does", field.name, id)
			}
		}
	}
	if !c.DoSample {
		return errs
	}
	if t := c.Temperature; t != 1 && (!(t > 0) || math.IsInf(t, 1) || c.isJSONInt("temperature", t)) {
		msg := "has to be a strictly positive float"
		if t == 0 {
			msg += "; for greedy decoding set do_sample=false instead of temperature 0"
		}
		fail("temperature", t, "%s", msg)
	}
	if c.TopK < 0 {
		fail("top_k", c.TopK, "has to be a non-negative integer")
	}
	if c.TopP < 0 || c.TopP != c.TopP { // top_p >= 1 builds no warper
		fail("top_p", c.TopP, "has to be a float in [0, 1]")
	}
	if c.MinP != nil && !(*c.MinP >= 0 && *c.MinP <= 1) {
		fail("min_p", *c.MinP, "has to be a float in [0, 1]")
	}
	if c.TypicalP <= 0 || c.TypicalP != c.TypicalP {
		fail("typical_p", c.TypicalP, "has to be a float in (0, 1)")
	}
	return errs
}

// Resolve returns a copy of c with its lengths resolved for a prompt of promptLen tokens, as
// generate() does before it builds the processors (_prepare_generated_length):
//   - max_new_tokens set: MaxLength = promptLen + MaxNewTokens (it wins over max_length);
//   - otherwise a MaxLength of 20, transformers' default, counts as unset: MaxLength = 20 + promptLen;
//   - otherwise MaxLength is already a total length;
//   - min_new_tokens set: MinLength = promptLen + MinNewTokens.
//
// MaxNewTokens and MinNewTokens stay set, so resolving twice for the same prompt length changes
// nothing. The cap by the model's max_position_embeddings is left to the caller, who knows it.
func (c *Config) Resolve(promptLen int) *Config {
	r := c.Clone()
	r.MaxLength = c.maxLength(promptLen)
	r.MinLength = c.minLength(promptLen)
	return r
}

// maxLength is the total length limit for a prompt of promptLen tokens (see Resolve).
func (c *Config) maxLength(promptLen int) int {
	switch {
	case c.MaxNewTokens != nil:
		return promptLen + *c.MaxNewTokens
	case c.MaxLength == 20:
		return promptLen + 20
	}
	return c.MaxLength
}

// minLength is the total minimum length for a prompt of promptLen tokens (see Resolve).
func (c *Config) minLength(promptLen int) int {
	if c.MinNewTokens != nil {
		return promptLen + *c.MinNewTokens
	}
	return c.MinLength
}

// CheckLengths applies generate()'s length checks for a prompt of promptLen tokens: a prompt at
// least as long as the resolved max_length is an error; a min_length (or prompt + min_new_tokens)
// beyond max_length is a warning.
func (c *Config) CheckLengths(promptLen int) (warnings []string, err error) {
	maxLen, minLen := c.maxLength(promptLen), c.minLength(promptLen)
	if promptLen >= maxLen {
		name, value := "max_length", any(c.MaxLength)
		if c.MaxNewTokens != nil {
			name, value = "max_new_tokens", *c.MaxNewTokens
		}
		return nil, fieldError(name, value, "leaves no room: the prompt has %d tokens and max_length is %d", promptLen, maxLen)
	}
	if minLen > maxLen {
		warnings = append(warnings, fmt.Sprintf("min_length (=%d) is larger than max_length (=%d): the minimum cannot be reached",
			minLen, maxLen))
	}
	return warnings, nil
}

// PipelineMaxNewTokens returns the number of new tokens that transformers' text-generation and
// text2text pipelines allow for a prompt of promptLen tokens: max_new_tokens when it is set;
// otherwise 256, the pipelines' default, when max_length is unset or transformers' default 20;
// otherwise max_length - promptLen (a model's own max_length, such as Whisper's 448, is honoured as
// a total length). The result is never below 0.
func (c *Config) PipelineMaxNewTokens(promptLen int) int {
	switch {
	case c.MaxNewTokens != nil:
		return max(*c.MaxNewTokens, 0)
	case c.MaxLength == 20:
		return 256
	}
	return max(c.MaxLength-promptLen, 0)
}
