package genconfig

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The assisted-generation fields read with transformers 4.57's defaults and
// are checked by Validate.
func TestAssistedFields(t *testing.T) {
	c := Default()
	assert.Equal(t, 20, c.NumAssistantTokens)
	assert.Equal(t, ScheduleConstant, c.NumAssistantTokensSchedule)
	assert.Equal(t, 0.4, c.AssistantConfidenceThreshold)
	assert.Nil(t, c.PromptLookupNumTokens)
	assert.Nil(t, c.MaxMatchingNGramSize)
	assert.False(t, c.PromptLookup())

	c, err := Parse([]byte(`{"num_assistant_tokens": 5, "num_assistant_tokens_schedule": "heuristic",
		"assistant_confidence_threshold": 0.2, "prompt_lookup_num_tokens": 10, "max_matching_ngram_size": 3}`))
	require.NoError(t, err)
	assert.Equal(t, 5, c.NumAssistantTokens)
	assert.Equal(t, ScheduleHeuristic, c.NumAssistantTokensSchedule)
	assert.Equal(t, 0.2, c.AssistantConfidenceThreshold)
	require.NotNil(t, c.PromptLookupNumTokens)
	assert.Equal(t, 10, *c.PromptLookupNumTokens)
	assert.Equal(t, 3, *c.MaxMatchingNGramSize)
	assert.True(t, c.PromptLookup())
	d := c.Clone()
	*d.PromptLookupNumTokens = 2
	assert.Equal(t, 10, *c.PromptLookupNumTokens, "Clone copies the pointers' values")
	_, err = c.Validate(0)
	require.NoError(t, err)

	c, err = Parse([]byte(`{"num_assistant_tokens_schedule": null, "prompt_lookup_num_tokens": null, "max_matching_ngram_size": 0}`))
	require.NoError(t, err)
	assert.Equal(t, ScheduleConstant, c.NumAssistantTokensSchedule)
	assert.Nil(t, c.PromptLookupNumTokens)
	_, err = c.Validate(0)
	assert.NoError(t, err, "max_matching_ngram_size 0 means unset, as in transformers")

	_, err = Parse([]byte(`{"num_assistant_tokens_schedule": 3}`))
	assert.ErrorContains(t, err, "num_assistant_tokens_schedule")
	_, err = Parse([]byte(`{"prompt_lookup_num_tokens": 2.5}`))
	assert.ErrorContains(t, err, "prompt_lookup_num_tokens")

	for _, tc := range []struct {
		json, field string
	}{
		{`{"num_assistant_tokens_schedule": "fast"}`, "NumAssistantTokensSchedule"},
		{`{"num_assistant_tokens": 0}`, "NumAssistantTokens"},
		{`{"prompt_lookup_num_tokens": 0}`, "PromptLookupNumTokens"},
		{`{"prompt_lookup_num_tokens": 3, "num_beams": 2}`, "PromptLookupNumTokens"},
		{`{"max_matching_ngram_size": -1}`, "MaxMatchingNGramSize"},
		{`{"assistant_confidence_threshold": 1.5}`, "AssistantConfidenceThreshold"},
	} {
		c, err := Parse([]byte(tc.json))
		require.NoError(t, err, tc.json)
		_, err = c.Validate(0)
		fes := FieldErrors(err)
		require.NotEmpty(t, fes, tc.json)
		assert.Equal(t, tc.field, fes[0].Field, tc.json)
	}
}
