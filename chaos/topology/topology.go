// Package topology carries the scripts that build database topologies for
// errand's fault tests, so that Go code runs the very script an operator
// runs by hand.
package topology

import _ "embed"

// PGStandby is pg-standby.sh: a PostgreSQL primary with a streaming
// standby, its failover by SIGKILL and pg_ctl promote.
//
//go:embed pg-standby.sh
var PGStandby []byte
