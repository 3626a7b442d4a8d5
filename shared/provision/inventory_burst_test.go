package provision

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// burstCatalog is Parameter Store during a burst: fresh parameters (written
// a moment ago, each read and deleted by its machine within a minute), old
// ones (leftovers), and the account's request rate spent on the tag read
// of the one named throttled.
type burstCatalog struct {
	fresh, old int
	at         time.Time
	throttled  string
	tagReads   []string
}

func (c *burstCatalog) DescribeParameters(_ context.Context, in *ssmapi.DescribeParametersInput) (*ssmapi.DescribeParametersOutput, error) {
	out := &ssmapi.DescribeParametersOutput{}
	add := func(name string, at time.Time) {
		out.Parameters = append(out.Parameters, ssmapi.ParameterMetadata{Name: ParameterPrefix + name, LastModifiedDate: ssmapi.Timestamp{Time: at}})
	}
	for i := range c.fresh {
		add(fmt.Sprintf("linux-%d", i), c.at.Add(-time.Minute))
	}
	for i := range c.old {
		add(fmt.Sprintf("linux-old-%d", i), c.at.Add(-time.Hour))
	}
	return out, nil
}

func (c *burstCatalog) ListTagsForResource(_ context.Context, in *ssmapi.ListTagsForResourceInput) (*ssmapi.ListTagsForResourceOutput, error) {
	name := in.ResourceID
	c.tagReads = append(c.tagReads, name)
	if name == c.throttled {
		return nil, provisiontest.ClientError("SSM", "ListTagsForResource", "ThrottlingException", "Rate exceeded")
	}
	return &ssmapi.ListTagsForResourceOutput{}, nil
}

func (c *burstCatalog) DeleteParameter(context.Context, *ssmapi.DeleteParameterInput) (*ssmapi.DeleteParameterOutput, error) {
	return &ssmapi.DeleteParameterOutput{}, nil
}

// TestConfigsUnderABurst: during a burst of 300 claims the janitor read
// the tags of all 300 parameters in flight (a call each, on the account's
// Parameter Store rate the booting machines need), though none was old
// enough to be deleted; and one throttled tag read failed the whole
// listing, so that pass deleted no leftover at all. Parameters younger
// than the janitor's cut are left out unread, and a throttled one is left
// for the next listing, named as unread so the janitor's pass says it did
// not finish (it once left it out without a word).
func TestConfigsUnderABurst(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	c := &burstCatalog{fresh: 300, old: 3, at: now, throttled: ParameterPrefix + "linux-old-1"}
	cs, err := Leftovers{Parameters: c}.Configs(context.Background(), now.Add(-15*time.Minute))
	if err != nil {
		t.Fatalf("one throttled tag read: %v, want the rest listed", err)
	}
	var names []string
	for _, p := range cs.Parameters {
		names = append(names, p.Name)
	}
	want := []string{ParameterPrefix + "linux-old-0", ParameterPrefix + "linux-old-2"}
	if !slices.Equal(names, want) || len(c.tagReads) != 3 {
		t.Fatalf("listed %v after %d tag reads; want %v after 3 (the old ones only; the throttled one left for the next listing)", names, len(c.tagReads), want)
	}
	if want := []string{c.throttled}; !slices.Equal(cs.Unread, want) {
		t.Errorf("unread %v, want %v (the throttled one)", cs.Unread, want)
	}
}
