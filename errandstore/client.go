package errandstore

import (
	"strings"

	"github.com/errandhq/errand/errandtype"
)

// maxArgsBytes bounds a job's args. Jobs should carry ids, not documents.
const MaxArgsBytes = 1 << 20

// checkOperatorAction validates who performs an operator action and why:
// doing says what they do, for the message.
func CheckOperatorAction(operator, reason, doing string) error {
	if strings.TrimSpace(operator) == "" {
		return &errandtype.InputError{Field: "operator", Message: "is empty; say who is " + doing}
	}
	if strings.TrimSpace(reason) == "" {
		return &errandtype.InputError{Field: "reason", Message: "is empty; say why you are " + doing}
	}
	if err := CheckIdentifier("operator", operator, MaxIDBytes); err != nil {
		return err
	}
	return checkReason(reason)
}

// checkPreviewAudit checks the operator and reason a dry run was given,
// if any, as the run itself would: a preview accepts nothing the run
// would refuse. A dry run needs neither.
func checkPreviewAudit(operator, reason string) error {
	if operator != "" {
		if err := CheckIdentifier("operator", operator, MaxIDBytes); err != nil {
			return err
		}
	}
	if reason != "" {
		return checkReason(reason)
	}
	return nil
}
