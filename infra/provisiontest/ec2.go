package provisiontest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"

	"github.com/ghclaim/ghclaim/shared/ec2api"
)

// The EC2 calls ghclaim never makes but its tests and the chaos run need
// to set the emulator up, through ec2api's Call (Query keys and elements
// as in EC2's model).

// LaunchTemplate creates a launch template named name that launches
// imageID ("" for the first image the emulator lists) as instanceType,
// with what README asks of a pool's own launch template (IMDSv2 required,
// instance metadata tags on, shutdown behaviour terminate), and returns
// its id.
func LaunchTemplate(ctx context.Context, c *ec2api.Client, name, imageID, instanceType string) (string, error) {
	return LaunchTemplateWith(ctx, c, name, imageID, instanceType, url.Values{
		"LaunchTemplateData.MetadataOptions.HttpTokens":           {"required"},
		"LaunchTemplateData.MetadataOptions.InstanceMetadataTags": {"enabled"},
		"LaunchTemplateData.InstanceInitiatedShutdownBehavior":    {"terminate"},
	})
}

// LaunchTemplateWith is LaunchTemplate with data (LaunchTemplateData.*
// Query keys) instead of those three settings: none, for a template made
// for the release at 674a79e.
func LaunchTemplateWith(ctx context.Context, c *ec2api.Client, name, imageID, instanceType string, data url.Values) (string, error) {
	if imageID == "" {
		imgs, err := Images(ctx, c)
		if err != nil {
			return "", err
		}
		if len(imgs) == 0 {
			return "", fmt.Errorf("create launch template %s: the emulator lists no image", name)
		}
		imageID = imgs[0]
	}
	p := url.Values{
		"LaunchTemplateName":              {name},
		"LaunchTemplateData.ImageId":      {imageID},
		"LaunchTemplateData.InstanceType": {instanceType},
		"LaunchTemplateData.UserData":     {"IyEvYmluL2Jhc2gK"}, // the boot script would be here
	}
	for k, v := range data {
		p[k] = v
	}
	// Its own ClientToken: the client's retry of a create whose answer was
	// cut gets the template, not InvalidLaunchTemplateName.AlreadyExistsException.
	p.Set("ClientToken", rand.Text())
	var out struct {
		ID string `xml:"launchTemplate>launchTemplateId"`
	}
	if err := c.Call(ctx, "CreateLaunchTemplate", p, &out); err != nil {
		return "", fmt.Errorf("create launch template %s: %w", name, err)
	}
	return out.ID, nil
}

// LaunchTemplateVersion adds a version with data (LaunchTemplateData.*
// Query keys) to the launch template named name.
func LaunchTemplateVersion(ctx context.Context, c *ec2api.Client, name string, data url.Values) error {
	p := url.Values{"LaunchTemplateName": {name}}
	for k, v := range data {
		p[k] = v
	}
	if err := c.Call(ctx, "CreateLaunchTemplateVersion", p, &struct{}{}); err != nil {
		return fmt.Errorf("create a version of launch template %s: %w", name, err)
	}
	return nil
}

// RunInstance starts one instance of imageID as instanceType, tagged
// tags, and returns its id. Its own ClientToken makes the client's retry
// of a launch whose answer was cut start nothing more, as on EC2: tests
// count the instances of a tag.
func RunInstance(ctx context.Context, c *ec2api.Client, imageID, instanceType string, tags []ec2api.Tag) (string, error) {
	p := ec2api.TagSpecifications([]ec2api.TagSpecification{{ResourceType: ec2api.ResourceTypeInstance, Tags: tags}})
	p.Set("ClientToken", rand.Text())
	p.Set("ImageId", imageID)
	p.Set("InstanceType", instanceType)
	p.Set("MinCount", "1")
	p.Set("MaxCount", "1")
	var out struct {
		IDs []string `xml:"instancesSet>item>instanceId"`
	}
	if err := c.Call(ctx, "RunInstances", p, &out); err != nil {
		return "", fmt.Errorf("run instance of %s: %w", imageID, err)
	}
	if len(out.IDs) != 1 {
		return "", fmt.Errorf("run instance of %s: %d instances started, want 1", imageID, len(out.IDs))
	}
	return out.IDs[0], nil
}

// Images lists the ids of the emulator's images, or of those of ids that
// exist.
func Images(ctx context.Context, c *ec2api.Client, ids ...string) ([]string, error) {
	p := url.Values{}
	for i, id := range ids {
		p.Set(fmt.Sprintf("ImageId.%d", i+1), id)
	}
	var out struct {
		IDs []string `xml:"imagesSet>item>imageId"`
	}
	if err := c.Call(ctx, "DescribeImages", p, &out); err != nil {
		return nil, fmt.Errorf("describe images: %w", err)
	}
	return out.IDs, nil
}

// Subnets lists the ids of the emulator's subnets.
func Subnets(ctx context.Context, c *ec2api.Client) ([]string, error) {
	var out struct {
		IDs []string `xml:"subnetSet>item>subnetId"`
	}
	if err := c.Call(ctx, "DescribeSubnets", nil, &out); err != nil {
		return nil, fmt.Errorf("describe subnets: %w", err)
	}
	return out.IDs, nil
}

// State returns the state name of instance id ("" when EC2 does not list it).
func State(ctx context.Context, c *ec2api.Client, id string) (string, error) {
	out, err := c.DescribeInstances(ctx, &ec2api.DescribeInstancesInput{InstanceIDs: []string{id}})
	if err != nil {
		return "", fmt.Errorf("describe instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if i.InstanceID == id {
				return i.State.Name, nil
			}
		}
	}
	return "", nil
}

// LaunchTemplateData is the part of a launch template version's data the
// tests check.
type LaunchTemplateData struct {
	ImageID              string `xml:"imageId"`
	InstanceProfileARN   string `xml:"iamInstanceProfile>arn"`
	UserData             string `xml:"userData"`
	ShutdownBehavior     string `xml:"instanceInitiatedShutdownBehavior"`
	HTTPTokens           string `xml:"metadataOptions>httpTokens"`
	HTTPPutHopLimit      int    `xml:"metadataOptions>httpPutResponseHopLimit"`
	InstanceMetadataTags string `xml:"metadataOptions>instanceMetadataTags"`
}

// TemplateData returns the data of launch template id's default version.
func TemplateData(ctx context.Context, c *ec2api.Client, id string) (LaunchTemplateData, error) {
	var out struct {
		Versions []LaunchTemplateData `xml:"launchTemplateVersionSet>item>launchTemplateData"`
	}
	p := url.Values{"LaunchTemplateId": {id}, "LaunchTemplateVersion.1": {"$Default"}}
	if err := c.Call(ctx, "DescribeLaunchTemplateVersions", p, &out); err != nil {
		return LaunchTemplateData{}, fmt.Errorf("describe launch template versions of %s: %w", id, err)
	}
	if len(out.Versions) == 0 {
		return LaunchTemplateData{}, fmt.Errorf("describe launch template versions of %s: none", id)
	}
	return out.Versions[0], nil
}
