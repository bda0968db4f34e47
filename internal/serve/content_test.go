package serve

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Content-Type check: JSON (or none) passes, other types are 415.
func TestCheckContentType(t *testing.T) {
	for _, ok := range []string{"", "application/json", "application/json; charset=utf-8", "Application/JSON; charset=UTF-8", "application/vnd.api+json"} {
		assert.Nil(t, checkContentType(ok), ok)
	}
	for h, msg := range map[string]string{
		"text/plain":                        "Content-Type text/plain: the body must be JSON, sent as application/json",
		"application/x-www-form-urlencoded": "add -H 'Content-Type: application/json'",
		"multipart/form-data; boundary=x":   "Content-Type multipart/form-data: the body must be JSON",
		"application/json; charset=latin1":  "Content-Type charset latin1: the body must be UTF-8",
		"application/json; =":               "cannot be read",
	} {
		e := checkContentType(h)
		require.NotNil(t, e, h)
		assert.Equal(t, 415, e.status, h)
		assert.Equal(t, "unsupported_media_type", e.code, h)
		assert.True(t, strings.Contains(e.msg, msg), "%s: %s", h, e.msg)
	}
}
