package ssmapi_test

import (
	"testing"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// TestRequestsAndAnswersMatchSSMsModel checks every member this package
// sends or reads against SSM's published model, and the protocol's names.
func TestRequestsAndAnswersMatchSSMsModel(t *testing.T) {
	t.Parallel()
	m, err := emulator.LoadJSONModel("ssm", "2014-11-06")
	if err != nil {
		t.Fatal(err)
	}
	if m.Metadata.TargetPrefix != "AmazonSSM" || m.Metadata.JSONVersion != "1.1" {
		t.Errorf("protocol: got target prefix %q, JSON %q; want AmazonSSM, 1.1", m.Metadata.TargetPrefix, m.Metadata.JSONVersion)
	}
	m.CheckOperation(t, "GetParameter", ssmapi.GetParameterInput{}, ssmapi.GetParameterOutput{})
	m.CheckOperation(t, "PutParameter", ssmapi.PutParameterInput{}, ssmapi.PutParameterOutput{})
	m.CheckOperation(t, "DeleteParameter", ssmapi.DeleteParameterInput{}, ssmapi.DeleteParameterOutput{})
	m.CheckOperation(t, "DescribeParameters", ssmapi.DescribeParametersInput{}, ssmapi.DescribeParametersOutput{})
	m.CheckOperation(t, "ListTagsForResource", ssmapi.ListTagsForResourceInput{}, ssmapi.ListTagsForResourceOutput{})
	m.CheckEnum(t, "ParameterType", ssmapi.TypeString, ssmapi.TypeSecureString)
	m.CheckEnum(t, "ParameterTier", ssmapi.TierStandard, ssmapi.TierAdvanced, ssmapi.TierIntelligentTiering)
	m.CheckEnum(t, "ResourceTypeForTagging", ssmapi.ResourceTypeParameter)
	m.CheckErrors(t, ssmapi.CodeParameterNotFound, ssmapi.CodeParameterAlreadyExists, ssmapi.CodeInvalidResourceID)
}
