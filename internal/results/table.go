package results

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates a results table laid out as TableDefinition says,
// for tests and local stacks such as moto or LocalStack, and waits until
// it is active. The TTL setting is the template's business.
func CreateTable(ctx context.Context, c *dynamodb.Client, name string) error {
	_, err := c.CreateTable(ctx, TableDefinition(name))
	if err != nil {
		return fmt.Errorf("results: create table %s: %w", name, err)
	}
	w := dynamodb.NewTableExistsWaiter(c)
	return w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 2*time.Minute)
}

// TableDefinition is the results table's layout, the one place it is
// written: its keys, its three indexes (decision, review, labeled), all
// keys only, and on-demand billing. deploy/cloudformation.json's
// ResultsTable must match it (its test checks that).
func TableDefinition(name string) *dynamodb.CreateTableInput {
	s := types.ScalarAttributeTypeS
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrRequestID), AttributeType: s},
			{AttributeName: aws.String(attrSK), AttributeType: s},
			{AttributeName: aws.String(attrTenantDecision), AttributeType: s},
			{AttributeName: aws.String(attrFirstSeen), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String(attrReviewTenant), AttributeType: s},
			{AttributeName: aws.String(attrLabelTenant), AttributeType: s},
			{AttributeName: aws.String(attrLabelAt), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrRequestID), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(DecisionIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrTenantDecision), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrFirstSeen), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}, {
			IndexName: aws.String(ReviewIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrReviewTenant), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrFirstSeen), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}, {
			IndexName: aws.String(LabeledIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrLabelTenant), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrLabelAt), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	}
}
