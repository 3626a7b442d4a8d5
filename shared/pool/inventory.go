package pool

import "time"

// Machine is a live (pending or running) machine a provisioner started for
// a job, as the janitor sees it: the inventory port's own type, so the
// janitor lists machines without importing an adapter.
type Machine struct {
	ID         string // the EC2 instance id
	JobID      int64  // its job-id tag
	Pool       string // its pool tag
	Repo       string // its repo tag, owner/name
	RunnerName string // its runner-name tag
	Scope      string // its scope tag: where its runner was registered ("" on older machines)
	LaunchedAt time.Time
}

// Parameter is a stored JIT config waiting for its machine (an SSM
// parameter under the runners' prefix), without its value.
type Parameter struct {
	Name string
	// InstanceID is the one machine allowed to read it (from its
	// instance-ARN tag); "" when untagged.
	InstanceID string
	ModifiedAt time.Time
}

// ConfigList is a listing of stored JIT configs older than its cut.
type ConfigList struct {
	Parameters []Parameter
	// Unread names the parameters left out because their tags could not
	// be read this time (the account's request rate was spent): which
	// machine may read each (and which stack's it is) is unknown, so none
	// may be judged, and they wait for the next listing.
	Unread []string
}
