package genconfig

import "encoding/json"

// The values of num_assistant_tokens_schedule. transformers' AssistedCandidateGenerator grows the
// number of draft tokens by 2 after a step whose candidates were all accepted and shrinks it by 1
// (to at least 1) otherwise, under both heuristic schedules; "heuristic" keeps the value for the
// next generate() call, "heuristic_transient" starts every call from num_assistant_tokens.
const (
	ScheduleConstant           = "constant"
	ScheduleHeuristic          = "heuristic"
	ScheduleHeuristicTransient = "heuristic_transient"
)

func init() {
	configFields["num_assistant_tokens"] = field{"NumAssistantTokens",
		intField(func(c *Config) *int { return &c.NumAssistantTokens }, 20)}
	configFields["num_assistant_tokens_schedule"] = field{"NumAssistantTokensSchedule", func(c *Config, v jsonValue) error {
		if v.isNull() {
			c.NumAssistantTokensSchedule = ScheduleConstant
			return nil
		}
		if json.Unmarshal(v.raw, &c.NumAssistantTokensSchedule) != nil {
			return v.errorf("a string")
		}
		return nil
	}}
	configFields["assistant_confidence_threshold"] = field{"AssistantConfidenceThreshold",
		floatField(func(c *Config) *float64 { return &c.AssistantConfidenceThreshold }, 0)}
	configFields["prompt_lookup_num_tokens"] = field{"PromptLookupNumTokens",
		optIntField(func(c *Config) **int { return &c.PromptLookupNumTokens })}
	configFields["max_matching_ngram_size"] = field{"MaxMatchingNGramSize",
		optIntField(func(c *Config) **int { return &c.MaxMatchingNGramSize })}
}

// PromptLookup reports whether c asks for prompt lookup decoding (prompt_lookup_num_tokens set),
// which transformers selects from the config alone; a draft model is given to the decoder instead.
func (c *Config) PromptLookup() bool { return c.PromptLookupNumTokens != nil }

// assistedErrors checks the fields of assisted generation and prompt lookup: what
// PromptLookupCandidateGenerator raises ("Invalid max_matching_ngram_size or num_output_tokens"),
// generate() raises for beam search, and, stricter than transformers, a schedule it does not know
// (transformers treats any other string as "constant"), a draft length below 1 (transformers then
// drafts nothing) and a confidence threshold outside [0, 1] (a probability).
func (c *Config) assistedErrors() []error {
	var errs []error
	switch c.NumAssistantTokensSchedule {
	case ScheduleConstant, ScheduleHeuristic, ScheduleHeuristicTransient:
	default:
		errs = append(errs, fieldError("num_assistant_tokens_schedule", c.NumAssistantTokensSchedule,
			`must be "constant", "heuristic" or "heuristic_transient"`))
	}
	if c.NumAssistantTokens < 1 {
		errs = append(errs, fieldError("num_assistant_tokens", c.NumAssistantTokens, "must be at least 1"))
	}
	if c.PromptLookupNumTokens != nil && *c.PromptLookupNumTokens <= 0 {
		errs = append(errs, fieldError("prompt_lookup_num_tokens", *c.PromptLookupNumTokens, "must be greater than 0"))
	}
	if c.PromptLookupNumTokens != nil && c.NumBeams > 1 {
		errs = append(errs, fieldError("prompt_lookup_num_tokens", *c.PromptLookupNumTokens,
			"selects assisted generation, which only supports greedy search and sampling (num_beams is %d)", c.NumBeams))
	}
	// 0 means unset: transformers' `max_matching_ngram_size if max_matching_ngram_size else 2`.
	if c.MaxMatchingNGramSize != nil && *c.MaxMatchingNGramSize < 0 {
		errs = append(errs, fieldError("max_matching_ngram_size", *c.MaxMatchingNGramSize, "must not be negative"))
	}
	if c.AssistantConfidenceThreshold < 0 || c.AssistantConfidenceThreshold > 1 {
		errs = append(errs, fieldError("assistant_confidence_threshold", c.AssistantConfidenceThreshold, "must be in [0, 1]"))
	}
	return errs
}
