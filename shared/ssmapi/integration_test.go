package ssmapi_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// TestParameterLifeOnTheEmulator runs the five calls over HTTP against
// moto's SSM: a tagged SecureString written, read back decrypted, listed
// under its path with its tags, deleted, and the errors of one gone.
func TestParameterLifeOnTheEmulator(t *testing.T) {
	t.Parallel()
	cfg := emulator.ForTest(t).ConfigForTest(t)
	c := ssmapi.New(cfg)
	ctx := context.Background()
	name := "/ghclaim/runners/ssmapi-" + time.Now().UTC().Format("150405.000000000")
	tags := []ssmapi.Tag{{Key: "ghclaim:stack", Value: "ssmapi-test"}}
	before := time.Now().Add(-time.Minute)

	put, err := c.PutParameter(ctx, &ssmapi.PutParameterInput{
		Name: name, Value: `{"jit":"config"}`, Type: ssmapi.TypeSecureString, Tier: ssmapi.TierStandard,
		Description: "ssmapi test", Tags: tags,
	})
	if err != nil || put.Version != 1 {
		t.Fatalf("put: got %+v, %v; want version 1", put, err)
	}
	_, err = c.PutParameter(ctx, &ssmapi.PutParameterInput{Name: name, Value: "again", Type: ssmapi.TypeSecureString})
	if !ssmapi.IsCode(err, ssmapi.CodeParameterAlreadyExists) {
		t.Errorf("put again: got %v, want %s", err, ssmapi.CodeParameterAlreadyExists)
	}

	got, err := c.GetParameter(ctx, &ssmapi.GetParameterInput{Name: name, WithDecryption: true})
	if err != nil || got.Parameter == nil {
		t.Fatalf("get: got %+v, %v", got, err)
	}
	if p := got.Parameter; p.Value != `{"jit":"config"}` || p.Type != ssmapi.TypeSecureString || p.Version != 1 || p.LastModifiedDate.Before(before) {
		t.Errorf("get: got %+v, want the value decrypted, version 1, modified now", p)
	}

	var found *ssmapi.ParameterMetadata
	in := &ssmapi.DescribeParametersInput{
		ParameterFilters: []ssmapi.ParameterStringFilter{{Key: "Path", Option: "OneLevel", Values: []string{"/ghclaim/runners"}}},
		MaxResults:       50,
	}
	for pages := 0; found == nil && pages < 100; pages++ {
		page, err := c.DescribeParameters(ctx, in)
		if err != nil {
			t.Fatalf("describe: %v", err)
		}
		for i, p := range page.Parameters {
			if p.Name == name {
				found = &page.Parameters[i]
			}
		}
		if page.NextToken == "" {
			break
		}
		in.NextToken = page.NextToken
	}
	if found == nil || found.Type != ssmapi.TypeSecureString || found.LastModifiedDate.Before(before) {
		t.Errorf("describe: got %+v, want %s listed, modified now", found, name)
	}

	listed, err := c.ListTagsForResource(ctx, &ssmapi.ListTagsForResourceInput{ResourceType: ssmapi.ResourceTypeParameter, ResourceID: name})
	if err != nil || !reflect.DeepEqual(listed.TagList, tags) {
		t.Errorf("tags: got %+v, %v; want %+v", listed, err, tags)
	}

	if _, err := c.DeleteParameter(ctx, &ssmapi.DeleteParameterInput{Name: name}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.DeleteParameter(ctx, &ssmapi.DeleteParameterInput{Name: name}); !ssmapi.IsCode(err, ssmapi.CodeParameterNotFound) {
		t.Errorf("delete again: got %v, want %s", err, ssmapi.CodeParameterNotFound)
	}
	if _, err := c.GetParameter(ctx, &ssmapi.GetParameterInput{Name: name}); !ssmapi.IsCode(err, ssmapi.CodeParameterNotFound) {
		t.Errorf("get a deleted parameter: got %v, want %s", err, ssmapi.CodeParameterNotFound)
	}
	_, err = c.ListTagsForResource(ctx, &ssmapi.ListTagsForResourceInput{ResourceType: ssmapi.ResourceTypeParameter, ResourceID: name})
	if !ssmapi.IsCode(err, ssmapi.CodeInvalidResourceID) {
		t.Errorf("tags of a deleted parameter: got %v, want %s", err, ssmapi.CodeInvalidResourceID)
	}
}
