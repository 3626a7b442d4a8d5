package emulator

import (
	"fmt"
	"slices"
	"strings"
)

// Index is one global secondary index of the template's DynamoDB table, as
// CloudFormation compares two of them on a stack update.
type Index struct {
	Name string
	// Keys are "attribute TYPE" in order (HASH, then RANGE).
	Keys []string
	// Projection is its ProjectionType, then its NonKeyAttributes sorted.
	Projection []string
}

// TableIndexes returns the global secondary indexes of the one
// AWS::DynamoDB::Table of the template at path, by name, as a stack with
// params (the template's defaults for the rest) would have them: Fn::If
// resolved by its condition (Fn::Equals, Fn::Not, Fn::And, Fn::Or,
// Condition, Ref of a parameter).
func TableIndexes(path string, params map[string]string) (map[string]Index, error) {
	tmpl, err := LoadTemplate(path)
	if err != nil {
		return nil, err
	}
	res, _ := tmpl["Resources"].(map[string]any)
	var tables []string
	for name, v := range res {
		if m, _ := v.(map[string]any); m["Type"] == "AWS::DynamoDB::Table" {
			tables = append(tables, name)
		}
	}
	if len(tables) != 1 {
		return nil, fmt.Errorf("%s: %d DynamoDB tables, want one", path, len(tables))
	}
	v, err := Resolve(path, params, "Resources", tables[0], "Properties")
	if err != nil {
		return nil, err
	}
	props, _ := v.(map[string]any)
	list := props["GlobalSecondaryIndexes"]
	types := map[string]string{}
	for _, a := range AsList(props["AttributeDefinitions"]) {
		m, _ := a.(map[string]any)
		types[fmt.Sprint(m["AttributeName"])] = fmt.Sprint(m["AttributeType"])
	}
	out := map[string]Index{}
	for _, g := range AsList(list) {
		m, _ := g.(map[string]any)
		ix := Index{Name: fmt.Sprint(m["IndexName"])}
		for _, k := range AsList(m["KeySchema"]) {
			km, _ := k.(map[string]any)
			name := fmt.Sprint(km["AttributeName"])
			ix.Keys = append(ix.Keys, name+" "+types[name]+" "+fmt.Sprint(km["KeyType"]))
		}
		p, _ := m["Projection"].(map[string]any)
		var nonKey []string
		for _, a := range AsList(p["NonKeyAttributes"]) {
			nonKey = append(nonKey, fmt.Sprint(a))
		}
		slices.Sort(nonKey)
		ix.Projection = append([]string{fmt.Sprint(p["ProjectionType"])}, nonKey...)
		out[ix.Name] = ix
	}
	return out, nil
}

// CheckIndexUpdate refuses a stack update from the indexes before to those
// after as CloudFormation does (DynamoDB's UpdateTable takes one index
// creation or deletion a call, and no index's key schema or projection
// changes in place): moto's CloudFormation applies either without a word,
// and on AWS the update fails and rolls back, leaving the stack on the old
// version.
func CheckIndexUpdate(before, after map[string]Index) error {
	changes := 0
	for name, b := range before {
		a, ok := after[name]
		if !ok {
			changes++
			continue
		}
		if !slices.Equal(a.Keys, b.Keys) || !slices.Equal(a.Projection, b.Projection) {
			return fmt.Errorf("index %s: Cannot update GSI's properties other than Provisioned Throughput and Contributor Insights Specification. You can create a new GSI with a different name. (keys %s → %s, projection %s → %s)",
				name, strings.Join(b.Keys, ", "), strings.Join(a.Keys, ", "), strings.Join(b.Projection, " "), strings.Join(a.Projection, " "))
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			changes++
		}
	}
	if changes > 1 {
		return fmt.Errorf("Cannot perform more than one GSI creation or deletion in a single update (%d)", changes)
	}
	return nil
}
