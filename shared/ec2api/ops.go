package ec2api

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// Instance states (InstanceState.Name).
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
)

// Fleet types, capacity types and allocation strategies ghclaim uses.
const (
	FleetTypeInstant                = "instant"
	CapacitySpot                    = "spot"
	CapacityOnDemand                = "on-demand"
	SpotPriceCapacityOptimized      = "price-capacity-optimized"
	SpotInterruptTerminate          = "terminate"
	OnDemandPrioritized             = "prioritized"
	ResourceTypeInstance            = "instance"
	CodeInstanceNotFound            = "InvalidInstanceID.NotFound"
	CodeIdempotentParameterMismatch = "IdempotentParameterMismatch"
)

// Filter narrows a Describe call: Name (e.g. "tag:Key", "tag-key",
// "instance-state-name") matches any of Values.
type Filter struct {
	Name   string
	Values []string
}

// Tag is a resource tag.
type Tag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

// TagSpecification tags the resources of ResourceType a call creates.
type TagSpecification struct {
	ResourceType string
	Tags         []Tag
}

// LaunchTemplateSpecification names a launch template by id or name, and
// its version ("$Default", "$Latest" or a number).
type LaunchTemplateSpecification struct {
	LaunchTemplateID   string `xml:"launchTemplateId"`
	LaunchTemplateName string `xml:"launchTemplateName"`
	Version            string `xml:"version"`
}

// FleetOverride is one option of a fleet's launch template: an instance
// type in a subnet, Priority 0 the most wanted (prioritized on-demand).
type FleetOverride struct {
	InstanceType     string   `xml:"instanceType"`
	SubnetID         string   `xml:"subnetId"`
	AvailabilityZone string   `xml:"availabilityZone"`
	Priority         *float64 `xml:"priority"`
}

// FleetLaunchTemplateConfig is a launch template and its options.
type FleetLaunchTemplateConfig struct {
	LaunchTemplateSpecification LaunchTemplateSpecification
	Overrides                   []FleetOverride
}

// TargetCapacitySpecification is how many instances a fleet wants, and of
// which market by default.
type TargetCapacitySpecification struct {
	TotalTargetCapacity       int
	DefaultTargetCapacityType string
}

// SpotOptions are a fleet's spot settings.
type SpotOptions struct {
	AllocationStrategy           string
	InstanceInterruptionBehavior string
}

// OnDemandOptions are a fleet's on-demand settings.
type OnDemandOptions struct {
	AllocationStrategy string
}

// CreateFleetInput is the part of CreateFleet ghclaim sends.
type CreateFleetInput struct {
	ClientToken                 string
	Type                        string
	TargetCapacitySpecification TargetCapacitySpecification
	LaunchTemplateConfigs       []FleetLaunchTemplateConfig
	TagSpecifications           []TagSpecification
	SpotOptions                 *SpotOptions
	OnDemandOptions             *OnDemandOptions
}

func (in *CreateFleetInput) params() url.Values {
	p := url.Values{}
	set(p, "ClientToken", in.ClientToken)
	set(p, "Type", in.Type)
	if t := in.TargetCapacitySpecification; t.TotalTargetCapacity != 0 || t.DefaultTargetCapacityType != "" {
		p.Set("TargetCapacitySpecification.TotalTargetCapacity", strconv.Itoa(t.TotalTargetCapacity))
		set(p, "TargetCapacitySpecification.DefaultTargetCapacityType", t.DefaultTargetCapacityType)
	}
	for i, c := range in.LaunchTemplateConfigs {
		k := "LaunchTemplateConfigs." + strconv.Itoa(i+1)
		s := c.LaunchTemplateSpecification
		set(p, k+".LaunchTemplateSpecification.LaunchTemplateId", s.LaunchTemplateID)
		set(p, k+".LaunchTemplateSpecification.LaunchTemplateName", s.LaunchTemplateName)
		set(p, k+".LaunchTemplateSpecification.Version", s.Version)
		for j, o := range c.Overrides {
			ok := k + ".Overrides." + strconv.Itoa(j+1)
			set(p, ok+".InstanceType", o.InstanceType)
			set(p, ok+".SubnetId", o.SubnetID)
			set(p, ok+".AvailabilityZone", o.AvailabilityZone)
			if o.Priority != nil {
				p.Set(ok+".Priority", strconv.FormatFloat(*o.Priority, 'f', -1, 64))
			}
		}
	}
	tagSpecifications(p, in.TagSpecifications)
	if s := in.SpotOptions; s != nil {
		set(p, "SpotOptions.AllocationStrategy", s.AllocationStrategy)
		set(p, "SpotOptions.InstanceInterruptionBehavior", s.InstanceInterruptionBehavior)
	}
	if o := in.OnDemandOptions; o != nil {
		set(p, "OnDemandOptions.AllocationStrategy", o.AllocationStrategy)
	}
	return p
}

// CreateFleetOutput is CreateFleet's answer. An instant fleet answers
// with the instances it launched and an error per option that launched
// none; both may be present.
type CreateFleetOutput struct {
	FleetID   string                `xml:"fleetId"`
	Errors    []CreateFleetError    `xml:"errorSet>item"`
	Instances []CreateFleetInstance `xml:"fleetInstanceSet>item"`
}

// LaunchTemplateAndOverrides is the option an instant fleet's error or
// instance is about.
type LaunchTemplateAndOverrides struct {
	LaunchTemplateSpecification LaunchTemplateSpecification `xml:"launchTemplateSpecification"`
	Overrides                   FleetOverride               `xml:"overrides"`
}

// CreateFleetError is an option of an instant fleet that launched nothing.
type CreateFleetError struct {
	LaunchTemplateAndOverrides LaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                     `xml:"lifecycle"`
	ErrorCode                  string                     `xml:"errorCode"`
	ErrorMessage               string                     `xml:"errorMessage"`
}

// CreateFleetInstance is what an option of an instant fleet launched.
type CreateFleetInstance struct {
	LaunchTemplateAndOverrides LaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                     `xml:"lifecycle"`
	InstanceIDs                []string                   `xml:"instanceIds>item"`
	InstanceType               string                     `xml:"instanceType"`
}

// CreateFleet launches a fleet.
func (c *Client) CreateFleet(ctx context.Context, in *CreateFleetInput) (*CreateFleetOutput, error) {
	out := new(CreateFleetOutput)
	if err := c.Call(ctx, "CreateFleet", in.params(), out); err != nil {
		return nil, err
	}
	return out, nil
}

// DescribeInstancesInput selects instances by id and filters, a page at a
// time.
type DescribeInstancesInput struct {
	InstanceIDs []string
	Filters     []Filter
	NextToken   string
	MaxResults  int
}

func (in *DescribeInstancesInput) params() url.Values {
	p := url.Values{}
	list(p, "InstanceId", in.InstanceIDs)
	filters(p, in.Filters)
	set(p, "NextToken", in.NextToken)
	if in.MaxResults > 0 {
		p.Set("MaxResults", strconv.Itoa(in.MaxResults))
	}
	return p
}

// DescribeInstancesOutput is a page of instances; NextToken "" is the last.
type DescribeInstancesOutput struct {
	Reservations []Reservation `xml:"reservationSet>item"`
	NextToken    string        `xml:"nextToken"`
}

// Reservation is a launch's instances and the account that owns them.
type Reservation struct {
	ReservationID string     `xml:"reservationId"`
	OwnerID       string     `xml:"ownerId"`
	Instances     []Instance `xml:"instancesSet>item"`
}

// Instance is the part of an instance's description ghclaim reads.
type Instance struct {
	InstanceID   string        `xml:"instanceId"`
	ImageID      string        `xml:"imageId"`
	InstanceType string        `xml:"instanceType"`
	SubnetID     string        `xml:"subnetId"`
	State        InstanceState `xml:"instanceState"`
	LaunchTime   time.Time     `xml:"launchTime"`
	Tags         []Tag         `xml:"tagSet>item"`
}

// InstanceState is an instance's state: Name is one of the State constants.
type InstanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

// DescribeInstances returns a page of instances.
func (c *Client) DescribeInstances(ctx context.Context, in *DescribeInstancesInput) (*DescribeInstancesOutput, error) {
	out := new(DescribeInstancesOutput)
	if err := c.Call(ctx, "DescribeInstances", in.params(), out); err != nil {
		return nil, err
	}
	return out, nil
}

// TerminateInstancesInput names the instances to terminate.
type TerminateInstancesInput struct {
	InstanceIDs []string
}

// TerminateInstancesOutput is each instance's state change.
type TerminateInstancesOutput struct {
	TerminatingInstances []InstanceStateChange `xml:"instancesSet>item"`
}

// InstanceStateChange is an instance's state before and after a call.
type InstanceStateChange struct {
	InstanceID    string        `xml:"instanceId"`
	CurrentState  InstanceState `xml:"currentState"`
	PreviousState InstanceState `xml:"previousState"`
}

// TerminateInstances terminates instances; one already terminated is no
// error.
func (c *Client) TerminateInstances(ctx context.Context, in *TerminateInstancesInput) (*TerminateInstancesOutput, error) {
	p := url.Values{}
	list(p, "InstanceId", in.InstanceIDs)
	out := new(TerminateInstancesOutput)
	if err := c.Call(ctx, "TerminateInstances", p, out); err != nil {
		return nil, err
	}
	return out, nil
}

// DescribeLaunchTemplatesInput selects launch templates by id or name.
type DescribeLaunchTemplatesInput struct {
	LaunchTemplateIDs   []string
	LaunchTemplateNames []string
	Filters             []Filter
	NextToken           string
}

// DescribeLaunchTemplatesOutput is a page of launch templates.
type DescribeLaunchTemplatesOutput struct {
	LaunchTemplates []LaunchTemplate `xml:"launchTemplates>item"`
	NextToken       string           `xml:"nextToken"`
}

// LaunchTemplate is the part of a launch template's description ghclaim
// reads.
type LaunchTemplate struct {
	LaunchTemplateID     string `xml:"launchTemplateId"`
	LaunchTemplateName   string `xml:"launchTemplateName"`
	DefaultVersionNumber int64  `xml:"defaultVersionNumber"`
	LatestVersionNumber  int64  `xml:"latestVersionNumber"`
	Tags                 []Tag  `xml:"tagSet>item"`
}

// DescribeLaunchTemplates returns a page of launch templates. A name or id
// that matches none is an error (InvalidLaunchTemplateName.NotFoundException,
// InvalidLaunchTemplateId.NotFound).
func (c *Client) DescribeLaunchTemplates(ctx context.Context, in *DescribeLaunchTemplatesInput) (*DescribeLaunchTemplatesOutput, error) {
	p := url.Values{}
	list(p, "LaunchTemplateId", in.LaunchTemplateIDs)
	list(p, "LaunchTemplateName", in.LaunchTemplateNames)
	filters(p, in.Filters)
	set(p, "NextToken", in.NextToken)
	out := new(DescribeLaunchTemplatesOutput)
	if err := c.Call(ctx, "DescribeLaunchTemplates", p, out); err != nil {
		return nil, err
	}
	return out, nil
}

// DescribeLaunchTemplateVersionsInput selects versions of one launch
// template, by id or name: "$Default", "$Latest" or a number.
type DescribeLaunchTemplateVersionsInput struct {
	LaunchTemplateID   string
	LaunchTemplateName string
	Versions           []string
}

// DescribeLaunchTemplateVersionsOutput is the versions asked for.
type DescribeLaunchTemplateVersionsOutput struct {
	Versions []LaunchTemplateVersion `xml:"launchTemplateVersionSet>item"`
}

// LaunchTemplateVersion is the part of a launch template version ghclaim
// reads: what the machines it launches do at boot and at power-off.
type LaunchTemplateVersion struct {
	LaunchTemplateID   string             `xml:"launchTemplateId"`
	LaunchTemplateName string             `xml:"launchTemplateName"`
	VersionNumber      int64              `xml:"versionNumber"`
	Data               LaunchTemplateData `xml:"launchTemplateData"`
}

// LaunchTemplateData is a version's instance settings ghclaim depends on.
// An unset one reads "": EC2's default applies (shutdown behaviour stop,
// metadata endpoint enabled, instance metadata tags disabled).
type LaunchTemplateData struct {
	InstanceInitiatedShutdownBehavior string          `xml:"instanceInitiatedShutdownBehavior"`
	MetadataOptions                   MetadataOptions `xml:"metadataOptions"`
}

// MetadataOptions are an instance's IMDS settings.
type MetadataOptions struct {
	HTTPEndpoint         string `xml:"httpEndpoint"`
	HTTPTokens           string `xml:"httpTokens"`
	InstanceMetadataTags string `xml:"instanceMetadataTags"`
}

// DescribeLaunchTemplateVersions returns the versions of one launch
// template asked for. A template that does not exist is an error
// (InvalidLaunchTemplateId.NotFound, InvalidLaunchTemplateName.NotFoundException).
func (c *Client) DescribeLaunchTemplateVersions(ctx context.Context, in *DescribeLaunchTemplateVersionsInput) (*DescribeLaunchTemplateVersionsOutput, error) {
	p := url.Values{}
	set(p, "LaunchTemplateId", in.LaunchTemplateID)
	set(p, "LaunchTemplateName", in.LaunchTemplateName)
	list(p, "LaunchTemplateVersion", in.Versions)
	out := new(DescribeLaunchTemplateVersionsOutput)
	if err := c.Call(ctx, "DescribeLaunchTemplateVersions", p, out); err != nil {
		return nil, err
	}
	return out, nil
}

// set adds key=v unless v is empty.
func set(p url.Values, key, v string) {
	if v != "" {
		p.Set(key, v)
	}
}

// list adds a Query protocol list: prefix.1, prefix.2, ...
func list(p url.Values, prefix string, vs []string) {
	for i, v := range vs {
		p.Set(prefix+"."+strconv.Itoa(i+1), v)
	}
}

// filters adds Filter.N.Name and Filter.N.Value.M.
func filters(p url.Values, fs []Filter) {
	for i, f := range fs {
		k := "Filter." + strconv.Itoa(i+1)
		p.Set(k+".Name", f.Name)
		list(p, k+".Value", f.Values)
	}
}

// tagSpecifications adds TagSpecification.N.ResourceType and its
// TagSpecification.N.Tag.M.Key/Value.
func tagSpecifications(p url.Values, specs []TagSpecification) {
	for i, s := range specs {
		k := "TagSpecification." + strconv.Itoa(i+1)
		set(p, k+".ResourceType", s.ResourceType)
		for j, t := range s.Tags {
			tk := k + ".Tag." + strconv.Itoa(j+1)
			p.Set(tk+".Key", t.Key)
			p.Set(tk+".Value", t.Value)
		}
	}
}

// TagSpecifications returns specs as Query protocol parameters, for a kit
// that calls another creating action (RunInstances, CreateLaunchTemplate)
// through Call.
func TagSpecifications(specs []TagSpecification) url.Values {
	p := url.Values{}
	tagSpecifications(p, specs)
	return p
}
