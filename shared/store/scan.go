package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// Scanner is the part of the DynamoDB API an Inventory uses.
type Scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ Scanner = (*dynamodb.Client)(nil)

// InventoryConfig is what NewInventory needs.
type InventoryConfig struct {
	DB    Scanner
	Table string
}

// Inventory lists the whole table for an operator (ghclaim jobs, ghclaim
// rate): a paged Scan with a filter, which reads (and is billed for) every
// item. No function may use it: the functions reach records by key or
// through the sweep index only.
type Inventory struct {
	db    Scanner
	table string
}

// NewInventory returns an inventory of cfg.Table.
func NewInventory(cfg InventoryConfig) *Inventory {
	return &Inventory{db: cfg.DB, table: cfg.Table}
}

// JobFilter narrows a job listing; zero fields match everything. DynamoDB
// applies it after reading each page, so a page may hold fewer records
// than were read (or none) while more follow.
type JobFilter struct {
	States        []job.State
	Pool          string
	CreatedBefore time.Time
	// PageSize caps the items read per page (Scan's Limit); 0 is
	// DynamoDB's 1 MB page.
	PageSize int32
}

// JobPage is one page of a job listing.
type JobPage struct {
	job.Page
	// Scanned counts the items DynamoDB read for this page, matched or not.
	Scanned int
}

// Jobs returns one page of the job records that match f, continuing after
// cursor ("" to start); Next is "" after the last page.
func (v *Inventory) Jobs(ctx context.Context, f JobFilter, cursor string) (JobPage, error) {
	names := map[string]string{"#pk": "pk"}
	vals := map[string]types.AttributeValue{":job": str("job#")}
	conds := []string{"begins_with(#pk, :job)"}
	if len(f.States) > 0 {
		names["#s"] = "state"
		var in []string
		for i, st := range f.States {
			k := ":s" + strconv.Itoa(i)
			vals[k] = str(string(st))
			in = append(in, k)
		}
		conds = append(conds, "#s IN ("+strings.Join(in, ", ")+")")
	}
	if f.Pool != "" {
		names["#p"] = "pool"
		vals[":pool"] = str(f.Pool)
		conds = append(conds, "#p = :pool")
	}
	if !f.CreatedBefore.IsZero() {
		vals[":before"] = n(job.Millis(f.CreatedBefore))
		conds = append(conds, "created_at < :before")
	}
	in := &dynamodb.ScanInput{
		TableName:                 &v.table,
		FilterExpression:          aws.String(strings.Join(conds, " AND ")),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}
	if f.PageSize > 0 {
		in.Limit = aws.Int32(f.PageSize)
	}
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		var pk string
		if err == nil {
			err = json.Unmarshal(b, &pk)
		}
		if err != nil || pk == "" {
			return JobPage{}, fmt.Errorf("scan jobs: bad cursor %q", cursor)
		}
		in.ExclusiveStartKey = key(pk)
	}
	out, err := v.db.Scan(ctx, in)
	if err != nil {
		return JobPage{}, fmt.Errorf("scan jobs: %w", err)
	}
	p := JobPage{Scanned: int(out.ScannedCount)}
	for _, item := range out.Items {
		r, err := unmarshal(item)
		if err != nil {
			pk, _ := item["pk"].(*types.AttributeValueMemberS)
			if pk != nil {
				p.Undecodable = append(p.Undecodable, pk.Value)
			}
			continue
		}
		p.Records = append(p.Records, r)
	}
	if pk, ok := out.LastEvaluatedKey["pk"].(*types.AttributeValueMemberS); ok {
		b, _ := json.Marshal(pk.Value)
		p.Next = base64.RawURLEncoding.EncodeToString(b)
	}
	return p, nil
}

// Rates returns every installation's shared rate reading, by installation
// id.
func (v *Inventory) Rates(ctx context.Context) (map[int64]ratelimit.Reading, error) {
	out := map[int64]ratelimit.Reading{}
	var start map[string]types.AttributeValue
	for {
		page, err := v.db.Scan(ctx, &dynamodb.ScanInput{
			TableName:                 &v.table,
			FilterExpression:          aws.String("begins_with(pk, :rate)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":rate": str("rate#")},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("scan rate readings: %w", err)
		}
		for _, item := range page.Items {
			var it rateItem
			if err := attributevalue.UnmarshalMap(item, &it); err != nil {
				return nil, fmt.Errorf("decode rate reading: %w", err)
			}
			id, err := strconv.ParseInt(strings.TrimPrefix(it.PK, "rate#"), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("decode rate reading: bad pk %q", it.PK)
			}
			out[id] = it.reading()
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = page.LastEvaluatedKey
	}
}
