package main

import (
	"testing"

	"github.com/errandhq/errand/errandtype"
)

// TestEveryNextStepHasASentence: errand inspect words every step of
// errandtype.NextOf.
func TestEveryNextStepHasASentence(t *testing.T) {
	for _, step := range errandtype.NextSteps {
		if sentences[step] == nil {
			t.Errorf("next step %s has no sentence in errand inspect: add it to sentences", step)
		}
	}
}
