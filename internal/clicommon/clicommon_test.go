package clicommon

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLine(t *testing.T) {
	err := fmt.Errorf("generation: request 0: %w", errors.New("logits: top_k -1\nmust be positive"))
	assert.Equal(t, "request 0: top_k -1; must be positive", Line(err))
}
