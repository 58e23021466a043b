package results

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/verdict-dev/verdict/internal/sink"
)

// The table's layout, a contract with deploy/cloudformation.json. One
// partition per request: its accepted record, one item per accepted
// decision and one per stored result. The index "decision" finds a
// tenant's requests by decision id.
const (
	attrRequestID      = "request_id" // partition key (S)
	attrSK             = "sk"         // sort key (S): skRequest, skQueued+id, skResult+id
	attrTenantDecision = "tenant_decision"
	attrFirstSeen      = "first_seen" // ms since the epoch (N), the index's sort key
	attrExpiresAt      = "expires_at" // s since the epoch (N), the table's TTL attribute
	attrTenant         = "tenant"
	attrModel          = "model"
	attrAcceptedAt     = "accepted_at"
	attrPosition       = "position"
	attrRoute          = "route"
	attrDecisionID     = "decision_id"
	attrStatus         = "status"
	attrBody           = "body"     // the record's exact bytes (B)
	attrEncoding       = "encoding" // "gzip" when body is compressed

	skRequest = "request"
	skQueued  = "q#"
	skResult  = "r#"

	// DecisionIndex is the global secondary index over tenant_decision.
	DecisionIndex = "decision"
)

// maxItemBytes is DynamoDB's item size limit.
const maxItemBytes = 400 << 10

// compressFrom is the body size from which a record is stored gzipped,
// keeping every record the field limits allow under maxItemBytes
// (TestLargestRecordFitsOneItem).
const compressFrom = 32 << 10

// DynamoConfig configures a DynamoDB store.
type DynamoConfig struct {
	// Table is the table's name. Required.
	Table string
	// Client is the DynamoDB client. Required.
	Client *dynamodb.Client
	// TTL is how long items live (the table's TTL attribute expires_at).
	// Defaults to 7 days; negative: items never expire.
	TTL time.Duration
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
}

// Dynamo is the results store in one DynamoDB table.
type Dynamo struct {
	cfg DynamoConfig
}

// DefaultTTL is how long a stored result and its request live.
const DefaultTTL = 7 * 24 * time.Hour

// NewDynamo returns the store; it makes no request (Check does).
func NewDynamo(cfg DynamoConfig) (*Dynamo, error) {
	if strings.TrimSpace(cfg.Table) == "" || cfg.Client == nil {
		return nil, fmt.Errorf("%w: the DynamoDB results store needs a table name and a client", sink.ErrConfig)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	return &Dynamo{cfg: cfg}, nil
}

// Name is "dynamodb".
func (d *Dynamo) Name() string { return "dynamodb" }

// Close does nothing: the client holds no resources of its own.
func (d *Dynamo) Close() error { return nil }

// Check reads the table's description and writes one probe item, so that
// a missing table or a missing permission stops a worker at its start
// with one line naming the table and the action.
func (d *Dynamo) Check(ctx context.Context) error {
	out, err := d.cfg.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(d.cfg.Table)})
	if err != nil {
		return d.unavailable("DescribeTable", err)
	}
	keys := map[string]types.KeyType{}
	for _, k := range out.Table.KeySchema {
		keys[aws.ToString(k.AttributeName)] = k.KeyType
	}
	if keys[attrRequestID] != types.KeyTypeHash || keys[attrSK] != types.KeyTypeRange {
		return fmt.Errorf("%w: results table %s: its key must be %s (partition) and %s (sort), as deploy/cloudformation.json creates it",
			ErrUnavailable, d.cfg.Table, attrRequestID, attrSK)
	}
	_, err = d.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(d.cfg.Table), Item: map[string]types.AttributeValue{
		attrRequestID: str("verdict:probe"), attrSK: str("probe"), attrExpiresAt: num(d.cfg.NowFunc().Add(time.Hour).Unix()),
	}})
	if err != nil {
		return d.unavailable("PutItem", err)
	}
	return nil
}

// unavailable explains a failed call: the table, the action and, for
// the failures a deployment causes, what is wrong.
func (d *Dynamo) unavailable(action string, err error) error {
	var nf *types.ResourceNotFoundException
	var ae smithy.APIError
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("%w: results table %s does not exist (dynamodb:%s)", ErrUnavailable, d.cfg.Table, action)
	case errors.As(err, &ae) && (ae.ErrorCode() == "AccessDeniedException" || ae.ErrorCode() == "UnrecognizedClientException"):
		return fmt.Errorf("%w: results table %s: not allowed dynamodb:%s: %s", ErrUnavailable, d.cfg.Table, action, ae.ErrorMessage())
	}
	return fmt.Errorf("%w: results table %s: dynamodb:%s: %w", ErrUnavailable, d.cfg.Table, action, err)
}

// tenantDecision is the index key of a tenant's decision id: the tenant's
// length first, so that no two (tenant, id) pairs share a key.
func tenantDecision(tenant, decisionID string) string {
	return strconv.Itoa(len(tenant)) + ":" + tenant + "/" + decisionID
}

func (d *Dynamo) expiresAt() types.AttributeValue {
	if d.cfg.TTL < 0 {
		return nil
	}
	return num(d.cfg.NowFunc().Add(d.cfg.TTL).Unix())
}

// setExpiry adds expires_at to item unless items never expire.
func (d *Dynamo) setExpiry(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if v := d.expiresAt(); v != nil {
		item[attrExpiresAt] = v
	}
	return item
}

// Accept writes the request's item (the first copy is kept) and one item
// per decision, so that lookups by decision id find it while queued.
func (d *Dynamo) Accept(ctx context.Context, a Accepted) error {
	at := a.AcceptedAt.UnixMilli()
	_, err := d.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(d.cfg.Table),
		Item: d.setExpiry(map[string]types.AttributeValue{
			attrRequestID: str(a.RequestID), attrSK: str(skRequest), attrTenant: str(a.Tenant), attrModel: str(a.Model),
			attrAcceptedAt: num(at),
		}),
		ConditionExpression: aws.String("attribute_not_exists(" + attrSK + ")"),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // recorded before: a retried request
	} else if err != nil {
		return d.unavailable("PutItem", err)
	}
	var puts []types.WriteRequest
	for i, dec := range a.Decisions {
		puts = append(puts, types.WriteRequest{PutRequest: &types.PutRequest{Item: d.setExpiry(map[string]types.AttributeValue{
			attrRequestID: str(a.RequestID), attrSK: str(skQueued + dec.ID), attrDecisionID: str(dec.ID),
			attrPosition: num(int64(i)), attrRoute: str(dec.Route),
			attrTenantDecision: str(tenantDecision(a.Tenant, dec.ID)), attrFirstSeen: num(at),
		})}})
	}
	for len(puts) > 0 {
		n := min(len(puts), 25) // BatchWriteItem's limit
		if err := d.batchWrite(ctx, puts[:n]); err != nil {
			return err
		}
		puts = puts[n:]
	}
	return nil
}

// batchWrite writes reqs, resending what DynamoDB left unprocessed (it
// does so under throttling) with a short backoff, until ctx ends.
func (d *Dynamo) batchWrite(ctx context.Context, reqs []types.WriteRequest) error {
	wait := 50 * time.Millisecond
	for {
		out, err := d.cfg.Client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{d.cfg.Table: reqs}})
		if err != nil {
			return d.unavailable("BatchWriteItem", err)
		}
		reqs = out.UnprocessedItems[d.cfg.Table]
		if len(reqs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: results table %s: %d items left unprocessed: %w", ErrUnavailable, d.cfg.Table, len(reqs), context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Publish stores each record unless a copy is stored already: a
// redelivered message stores the same record and never a different one.
func (d *Dynamo) Publish(ctx context.Context, recs []sink.Record) error {
	for i := range recs {
		if err := d.put(ctx, &recs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (d *Dynamo) put(ctx context.Context, r *sink.Record) error {
	item, err := d.resultItem(r)
	if err != nil {
		return err
	}
	if reviewOpen(r) {
		input, err := json.Marshal(r.Input)
		if err != nil {
			return fmt.Errorf("%w: %w", sink.ErrPermanent, err)
		}
		if err := d.putInput(ctx, r.RequestID, r.DecisionID, input); err != nil {
			return err
		}
		item[attrReviewTenant] = str(tenantKey(r.Tenant))
	}
	_, err = d.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(d.cfg.Table), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(" + attrSK + ")"),
	})
	var ccf *types.ConditionalCheckFailedException
	if err == nil || errors.As(err, &ccf) {
		return nil
	}
	return d.unavailable("PutItem", err)
}

// resultItem is a record's item: its exact bytes, gzipped from
// compressFrom on. A record that would not fit one item even so is
// refused for good (ErrPermanent) rather than stored cut.
func (d *Dynamo) resultItem(r *sink.Record) (map[string]types.AttributeValue, error) {
	body, err := r.Marshal()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", sink.ErrPermanent, err)
	}
	item := d.setExpiry(map[string]types.AttributeValue{
		attrRequestID: str(r.RequestID), attrSK: str(skResult + r.DecisionID), attrDecisionID: str(r.DecisionID),
		attrTenant: str(r.Tenant), attrStatus: str(string(r.Status)),
		attrTenantDecision: str(tenantDecision(r.Tenant, r.DecisionID)),
		attrFirstSeen:      num(d.cfg.NowFunc().UnixMilli()),
	})
	body, gz := compress(body)
	if gz {
		item[attrEncoding] = str("gzip")
	}
	item[attrBody] = &types.AttributeValueMemberB{Value: body}
	if n := itemSize(item); n > maxItemBytes {
		return nil, fmt.Errorf("%w: result %s is %d bytes stored, more than DynamoDB's item limit of %d", sink.ErrPermanent, r.Key(), n, maxItemBytes)
	}
	return item, nil
}

// itemSize is an item's size as DynamoDB counts it: names and values,
// with a few bytes for each number (an upper bound).
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberB:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value) + 1
		default:
			n++
		}
	}
	return n
}

// Request reads the request's partition.
func (d *Dynamo) Request(ctx context.Context, requestID string) (Entry, error) {
	var e Entry
	var queued []queuedItem
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(d.cfg.Table),
		KeyConditionExpression:    aws.String("#pk = :id"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrRequestID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(requestID)},
		ConsistentRead:            aws.Bool(true),
	}
	p := dynamodb.NewQueryPaginator(d.cfg.Client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return Entry{}, d.unavailable("Query", err)
		}
		for _, item := range out.Items {
			sk := getS(item, attrSK)
			switch {
			case sk == skRequest:
				ms, _ := getN(item, attrAcceptedAt)
				e.Accepted = &Accepted{RequestID: requestID, Tenant: getS(item, attrTenant), Model: getS(item, attrModel),
					AcceptedAt: time.UnixMilli(ms).UTC()}
			case strings.HasPrefix(sk, skQueued):
				pos, _ := getN(item, attrPosition)
				queued = append(queued, queuedItem{pos: pos, d: AcceptedDecision{ID: getS(item, attrDecisionID), Route: getS(item, attrRoute)}})
			case strings.HasPrefix(sk, skResult):
				st, err := storedFrom(item)
				if err != nil {
					return Entry{}, err
				}
				e.Records = append(e.Records, st)
			}
		}
	}
	if e.Accepted != nil {
		sort.Slice(queued, func(i, j int) bool { return queued[i].pos < queued[j].pos })
		for _, q := range queued {
			e.Accepted.Decisions = append(e.Accepted.Decisions, q.d)
		}
	}
	sort.SliceStable(e.Records, func(i, j int) bool { return e.Records[i].StoredAt.Before(e.Records[j].StoredAt) })
	return e, nil
}

type queuedItem struct {
	pos int64
	d   AcceptedDecision
}

// storedFrom decodes a result item.
func storedFrom(item map[string]types.AttributeValue) (Stored, error) {
	var st Stored
	b, _ := item[attrBody].(*types.AttributeValueMemberB)
	if b == nil {
		return st, fmt.Errorf("results: stored item %s/%s has no body", getS(item, attrRequestID), getS(item, attrSK))
	}
	var err error
	if st.Body, err = decompress(b.Value, getS(item, attrEncoding) == "gzip"); err != nil {
		return st, fmt.Errorf("results: stored item %s/%s: %w", getS(item, attrRequestID), getS(item, attrSK), err)
	}
	if err := json.Unmarshal(st.Body, &st.Record); err != nil {
		return st, fmt.Errorf("results: stored record is corrupt: %w", err)
	}
	ms, _ := getN(item, attrFirstSeen)
	st.StoredAt = time.UnixMilli(ms)
	return st, nil
}

// RequestsOf queries the decision index.
func (d *Dynamo) RequestsOf(ctx context.Context, tenant, decisionID string) ([]string, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(d.cfg.Table),
		IndexName:                 aws.String(DecisionIndex),
		KeyConditionExpression:    aws.String("#k = :k"),
		ExpressionAttributeNames:  map[string]string{"#k": attrTenantDecision},
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": str(tenantDecision(tenant, decisionID))},
	}
	var ids []string
	seen := map[string]bool{}
	p := dynamodb.NewQueryPaginator(d.cfg.Client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, d.unavailable("Query", err)
		}
		for _, item := range out.Items {
			if id := getS(item, attrRequestID); !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func getS(item map[string]types.AttributeValue, k string) string {
	if v, ok := item[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, k string) (int64, bool) {
	if v, ok := item[k].(*types.AttributeValueMemberN); ok {
		n, err := strconv.ParseInt(v.Value, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// compress gzips b from compressFrom bytes on.
func compress(b []byte) ([]byte, bool) {
	if len(b) < compressFrom {
		return b, false
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes(), true
}

func decompress(b []byte, gz bool) ([]byte, error) {
	if !gz {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
