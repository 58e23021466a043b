package results

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/verdict-dev/verdict/decision"
)

// The table's layout for feedback and reviews (the same contract with
// deploy/cloudformation.json). A result item whose outcome is review
// carries review_tenant until it is answered: the sparse index "review"
// is the inbox. The decision's input is an item of its own (sk i#id). An
// answer is an item (sk f#id#<ms>#<n>); the result item carries the
// current label and label_tenant, the sparse index "labeled".
const (
	attrReviewTenant = "review_tenant"
	attrLabelTenant  = "label_tenant"
	attrLabelAt      = "label_at"
	attrLabel        = "label"
	attrInput        = "input"

	skInput    = "i#"
	skFeedback = "f#"

	// ReviewIndex and LabeledIndex are the sparse global secondary
	// indexes of open reviews and labeled decisions.
	ReviewIndex  = "review"
	LabeledIndex = "labeled"
)

// tenantKey is a tenant as an index key, never empty ("" is the default
// tenant).
func tenantKey(tenant string) string { return "t:" + tenant }

// putInput stores the input of a decision sent to review, gzipped when
// large; it is written before the result item that opens the review.
func (d *Dynamo) putInput(ctx context.Context, requestID, decisionID string, input []byte) error {
	item := d.setExpiry(map[string]types.AttributeValue{
		attrRequestID: str(requestID), attrSK: str(skInput + decisionID),
	})
	body, gz := compress(input)
	if gz {
		item[attrEncoding] = str("gzip")
	}
	item[attrInput] = &types.AttributeValueMemberB{Value: body}
	if n := itemSize(item); n > maxItemBytes {
		return fmt.Errorf("results: the input of %s/%s is %d bytes stored, more than DynamoDB's item limit", requestID, decisionID, n)
	}
	_, err := d.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(d.cfg.Table), Item: item})
	if err != nil {
		return d.unavailable("PutItem", err)
	}
	return nil
}

// Label records fb unless it repeats the current label, and moves the
// decision from the review index to the labeled one.
func (d *Dynamo) Label(ctx context.Context, fb Feedback) ([]Feedback, bool, error) {
	history, err := d.Labels(ctx, fb.RequestID, fb.DecisionID)
	if err != nil {
		return nil, false, err
	}
	if replays(history, fb) {
		return history, true, nil
	}
	body, err := json.Marshal(fb)
	if err != nil {
		return nil, false, err
	}
	ms := fb.At.UnixMilli()
	sk := fmt.Sprintf("%s%s#%015d#%04d", skFeedback, fb.DecisionID, ms, len(history))
	_, err = d.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(d.cfg.Table),
		Item: d.setExpiry(map[string]types.AttributeValue{
			attrRequestID: str(fb.RequestID), attrSK: str(sk), attrBody: &types.AttributeValueMemberB{Value: body},
		}),
		ConditionExpression: aws.String("attribute_not_exists(" + attrSK + ")"),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) { // a concurrent answer took the slot: keep both, in order
		return nil, false, d.unavailable("PutItem", err)
	}
	_, err = d.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.cfg.Table),
		Key:       map[string]types.AttributeValue{attrRequestID: str(fb.RequestID), attrSK: str(skResult + fb.DecisionID)},
		UpdateExpression: aws.String("REMOVE " + attrReviewTenant + " SET " + attrLabelTenant + " = :t, " +
			attrLabelAt + " = :at, " + attrLabel + " = :l"),
		ConditionExpression:       aws.String("attribute_exists(" + attrSK + ")"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": str(tenantKey(fb.Tenant)), ":at": num(ms), ":l": &types.AttributeValueMemberB{Value: body}},
	})
	if err != nil {
		return nil, false, d.unavailable("UpdateItem", err)
	}
	return append(history, fb), false, nil
}

// Labels returns a decision's answers, oldest first.
func (d *Dynamo) Labels(ctx context.Context, requestID, decisionID string) ([]Feedback, error) {
	p := dynamodb.NewQueryPaginator(d.cfg.Client, &dynamodb.QueryInput{
		TableName:                 aws.String(d.cfg.Table),
		KeyConditionExpression:    aws.String("#pk = :id AND begins_with(#sk, :p)"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrRequestID, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(requestID), ":p": str(skFeedback + decisionID + "#")},
		ConsistentRead:            aws.Bool(true),
	})
	var out []Feedback
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, d.unavailable("Query", err)
		}
		for _, item := range page.Items {
			var fb Feedback
			b, _ := item[attrBody].(*types.AttributeValueMemberB)
			if b == nil || json.Unmarshal(b.Value, &fb) != nil {
				return nil, fmt.Errorf("results: stored feedback %s/%s is corrupt", requestID, getS(item, attrSK))
			}
			out = append(out, fb)
		}
	}
	return out, nil
}

// Reviews reads one page of the review index and the items it names.
func (d *Dynamo) Reviews(ctx context.Context, tenant, cursor string, limit int) ([]Review, string, error) {
	limit = min(max(limit, 1), MaxReviewsPage)
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(d.cfg.Table),
		IndexName:                 aws.String(ReviewIndex),
		KeyConditionExpression:    aws.String("#k = :k"),
		ExpressionAttributeNames:  map[string]string{"#k": attrReviewTenant},
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": str(tenantKey(tenant))},
		Limit:                     aws.Int32(int32(limit)),
	}
	if cursor != "" {
		start, err := decodeStartKey(cursor)
		if err != nil {
			return nil, "", err
		}
		in.ExclusiveStartKey = start
	}
	out, err := d.cfg.Client.Query(ctx, in)
	if err != nil {
		return nil, "", d.unavailable("Query", err)
	}
	var page []Review
	for _, k := range out.Items {
		rv, ok, err := d.review(ctx, getS(k, attrRequestID), strings.TrimPrefix(getS(k, attrSK), skResult))
		if err != nil {
			return nil, "", err
		}
		if ok {
			page = append(page, rv)
		}
	}
	next := ""
	if len(out.LastEvaluatedKey) > 0 {
		next = encodeStartKey(out.LastEvaluatedKey)
	}
	return page, next, nil
}

// review reads a review's result and input items; ok is false when it was
// answered in between.
func (d *Dynamo) review(ctx context.Context, requestID, decisionID string) (Review, bool, error) {
	var rv Review
	res, err := d.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.cfg.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{attrRequestID: str(requestID), attrSK: str(skResult + decisionID)}})
	if err != nil {
		return rv, false, d.unavailable("GetItem", err)
	}
	if res.Item == nil || res.Item[attrReviewTenant] == nil {
		return rv, false, nil
	}
	if rv.Stored, err = storedFrom(res.Item); err != nil {
		return rv, false, err
	}
	in, err := d.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.cfg.Table),
		Key: map[string]types.AttributeValue{attrRequestID: str(requestID), attrSK: str(skInput + decisionID)}})
	if err != nil {
		return rv, false, d.unavailable("GetItem", err)
	}
	b, _ := in.Item[attrInput].(*types.AttributeValueMemberB)
	if b == nil {
		return rv, false, fmt.Errorf("results: review %s/%s has no input", requestID, decisionID)
	}
	raw, err := decompress(b.Value, getS(in.Item, attrEncoding) == "gzip")
	if err == nil {
		err = json.Unmarshal(raw, &rv.Input)
	}
	if err != nil {
		return rv, false, fmt.Errorf("results: the input of review %s/%s is corrupt: %w", requestID, decisionID, err)
	}
	return rv, true, nil
}

// EachLabeled queries the labeled index over the time range.
func (d *Dynamo) EachLabeled(ctx context.Context, f LabelFilter, fn func(Labeled) error) error {
	from, to := int64(0), int64(1<<62)
	if !f.From.IsZero() {
		from = f.From.UnixMilli()
	}
	if !f.To.IsZero() {
		to = f.To.UnixMilli() - 1 // [From, To)
	}
	p := dynamodb.NewQueryPaginator(d.cfg.Client, &dynamodb.QueryInput{
		TableName:                 aws.String(d.cfg.Table),
		IndexName:                 aws.String(LabeledIndex),
		KeyConditionExpression:    aws.String("#k = :k AND #at BETWEEN :from AND :to"),
		ExpressionAttributeNames:  map[string]string{"#k": attrLabelTenant, "#at": attrLabelAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": str(tenantKey(f.Tenant)), ":from": num(from), ":to": num(to)},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return d.unavailable("Query", err)
		}
		for _, k := range page.Items {
			res, err := d.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.cfg.Table),
				Key: map[string]types.AttributeValue{attrRequestID: k[attrRequestID], attrSK: k[attrSK]}})
			if err != nil {
				return d.unavailable("GetItem", err)
			}
			if res.Item == nil {
				continue // expired in between
			}
			var l Labeled
			if l.Stored, err = storedFrom(res.Item); err != nil {
				return err
			}
			b, _ := res.Item[attrLabel].(*types.AttributeValueMemberB)
			if b == nil || json.Unmarshal(b.Value, &l.Label) != nil {
				return fmt.Errorf("results: the label of %s is corrupt", l.Stored.Record.Key())
			}
			if f.Kind != "" && l.Stored.Record.Result.Kind != f.Kind {
				continue
			}
			if err := fn(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// A DynamoDB page position as a cursor: its key attributes, strings and
// numbers by name.
func encodeStartKey(k map[string]types.AttributeValue) string {
	m := map[string]string{}
	for name, v := range k {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			m["s:"+name] = v.Value
		case *types.AttributeValueMemberN:
			m["n:"+name] = v.Value
		}
	}
	b, _ := json.Marshal(m)
	return encodeCursor(b)
}

func decodeStartKey(s string) (map[string]types.AttributeValue, error) {
	bad := &InputError{Fields: []decision.FieldError{{Path: "cursor", Message: "is not a cursor this inbox gave"}}}
	b, err := decodeCursor(s)
	if err != nil {
		return nil, bad
	}
	var m map[string]string
	if json.Unmarshal(b, &m) != nil || len(m) == 0 {
		return nil, bad
	}
	out := map[string]types.AttributeValue{}
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, "s:"):
			out[k[2:]] = str(v)
		case strings.HasPrefix(k, "n:"):
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return nil, bad
			}
			out[k[2:]] = &types.AttributeValueMemberN{Value: v}
		default:
			return nil, bad
		}
	}
	return out, nil
}
