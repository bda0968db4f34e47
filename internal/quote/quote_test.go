package quote

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestQuote(t *testing.T) {
	assert.Equal(t, `"short\n"`, String("short\n"))
	long := strings.Repeat("ab", 200_000)
	assert.Equal(t, `"`+long[:64]+`"... (400000 bytes)`, String(long))
	// A cut never splits a character: 日 is 3 bytes, 21 of them are 63.
	jp := strings.Repeat("日", 100)
	assert.Equal(t, `"`+strings.Repeat("日", 21)+`"... (300 bytes)`, String(jp))
	assert.Equal(t, "[1 2 3]", Value([]int32{1, 2, 3}))
	ids := make([]int32, 100_000)
	got := Value(ids)
	assert.Equal(t, "[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0... (200001 bytes)", got)
	assert.Equal(t, `{"a":1}`, Value(json.RawMessage(`{"a":1}`)))
}

func TestMessage(t *testing.T) {
	assert.Equal(t, "short", Message("short"))
	long := "bad pattern " + strings.Repeat("x", 200_000)
	got := Message(long)
	assert.Len(t, got, 1024+len("... (200012 bytes)"))
	assert.True(t, strings.HasPrefix(got, "bad pattern xxx"))
	assert.True(t, strings.HasSuffix(got, "... (200012 bytes)"))
}
