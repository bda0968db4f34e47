package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// completionTokens posts a completion request (streamed or not) and returns
// its text and the tokens its logprobs list, all chunks together.
func completionTokens(t *testing.T, url, body string, stream bool) (string, []string) {
	t.Helper()
	if stream {
		body = strings.TrimSuffix(body, "}") + `,"stream":true}`
	}
	resp := post(t, url+"/v1/completions", body)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var chunks []string
	if stream {
		chunks = events(t, resp.Body)
		require.Equal(t, "[DONE]", chunks[len(chunks)-1])
		chunks = chunks[:len(chunks)-1]
	} else {
		var raw json.RawMessage
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&raw))
		chunks = []string{string(raw)}
	}
	var text strings.Builder
	var tokens []string
	for _, c := range chunks {
		var chunk struct {
			Choices []struct {
				Text     string                  `json:"text"`
				Logprobs *completionLogprobsJSON `json:"logprobs"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(c), &chunk), c)
		require.Len(t, chunk.Choices, 1)
		text.WriteString(chunk.Choices[0].Text)
		if lp := chunk.Choices[0].Logprobs; lp != nil {
			tokens = append(tokens, lp.Tokens...)
		}
	}
	return text.String(), tokens
}

// The logprobs list the tokens of the text only: not the end token, nor
// the tokens of a stop string that is left out of the text, streamed or
// not (issue 29).
func TestLogprobsListTheTextOnly(t *testing.T) {
	ts, _ := newServer(t, 1, Config{})
	for _, stream := range []bool{false, true} {
		// The end token, made certain by its bias: no text, no token.
		body := fmt.Sprintf(`{"prompt":"The model","max_tokens":5,"temperature":0,"logprobs":2,"logit_bias":{"%d":100}}`, testmodel.EOS)
		text, tokens := completionTokens(t, ts.URL, body, stream)
		assert.Empty(t, text)
		assert.Empty(t, tokens, "stream %v", stream)

		// A stop string two tokens long, found in the greedy reply: the
		// tokens before it are listed, its own are not.
		free := fmt.Sprintf(`{"prompt":"The model","max_tokens":20,"temperature":0,"logprobs":1,"logit_bias":{"%d":-100}}`, testmodel.EOS)
		full, all := completionTokens(t, ts.URL, free, false)
		require.Len(t, all, 20)
		require.Equal(t, full, strings.Join(all, ""))
		cut := -1
		for i := 3; i+1 < len(all); i++ {
			stop := all[i] + all[i+1]
			if strings.Index(full, stop) == len(strings.Join(all[:i], "")) && strings.TrimSpace(stop) != "" {
				cut = i
				break
			}
		}
		require.Positive(t, cut, "no stop string found in %q", full)
		stop, _ := json.Marshal(all[cut] + all[cut+1])
		withStop := strings.TrimSuffix(free, "}") + `,"stop":` + string(stop) + `}`
		text, tokens = completionTokens(t, ts.URL, withStop, stream)
		assert.Equal(t, strings.Join(all[:cut], ""), text, "stream %v", stream)
		assert.Equal(t, all[:cut], tokens, "stream %v", stream)
	}

	// Chat's logprobs too.
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"temperature":0,"logprobs":true,"logit_bias":{"%d":100}}`, testmodel.EOS)
	resp := post(t, ts.URL+"/v1/chat/completions", body)
	defer resp.Body.Close()
	var chat struct {
		Choices []struct {
			Message  struct{ Content string }
			Logprobs struct{ Content []json.RawMessage }
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&chat))
	require.Len(t, chat.Choices, 1)
	assert.Empty(t, chat.Choices[0].Message.Content)
	assert.Empty(t, chat.Choices[0].Logprobs.Content)
}
