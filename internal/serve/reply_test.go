package serve

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reasoning_format and the template's markers make the reasoning plan: a
// template whose generation prompt opens <think> starts the reply in it;
// none keeps it inline; a template without markers, or the built-in
// template, reads none.
func TestReasoningPlan(t *testing.T) {
	r1, err := NewChatTemplate(realTemplate(t, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"), "", "")
	require.NoError(t, err)
	hermes, err := NewChatTemplate(hermesTemplate, "", "")
	require.NoError(t, err)
	p := &params{chat: r1}
	rp, err := p.reasoningPlan("", "jinja", "<｜User｜>Hi<｜Assistant｜><think>\n")
	require.NoError(t, err)
	require.NotNil(t, rp)
	assert.Equal(t, "<think>", rp.markers.Open)
	assert.Equal(t, "</think>", rp.markers.Close)
	assert.True(t, rp.inside)
	assert.False(t, rp.inline)

	rp, err = p.reasoningPlan("none", "jinja", "<｜Assistant｜>")
	require.NoError(t, err)
	assert.True(t, rp.inline)
	assert.False(t, rp.inside)

	rp, err = p.reasoningPlan("auto", "builtin", "")
	require.NoError(t, err)
	assert.Nil(t, rp)
	rp, err = (&params{chat: hermes}).reasoningPlan("deepseek", "jinja", "")
	require.NoError(t, err)
	assert.Nil(t, rp)

	_, err = p.reasoningPlan("deepseek-legacy", "jinja", "")
	var re *requestError
	require.True(t, errors.As(err, &re))
	assert.Equal(t, "reasoning_format", re.param)
}

// chat_template_kwargs passes enable_thinking (or thinking) to the
// template, and refuses anything else by name.
func TestTemplateThinking(t *testing.T) {
	no := false
	for _, tc := range []struct {
		kwargs string
		mapped *bool
		want   *bool
		param  string
	}{
		{`{}`, nil, nil, ""},
		{`{}`, &no, &no, ""},
		{`{"enable_thinking": true}`, &no, ptr(true), ""},
		{`{"thinking": false}`, nil, &no, ""},
		{`{"enable_thinking": "yes"}`, nil, nil, "chat_template_kwargs.enable_thinking"},
		{`{"tools_in_user_message": true}`, nil, nil, "chat_template_kwargs"},
	} {
		req := &apiRequest{thinking: tc.mapped}
		require.NoError(t, json.Unmarshal([]byte(tc.kwargs), &req.ChatTemplateKwargs))
		got, err := req.templateThinking()
		if tc.param != "" {
			var re *requestError
			require.True(t, errors.As(err, &re), tc.kwargs)
			assert.Equal(t, tc.param, re.param)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, tc.kwargs)
	}
}
