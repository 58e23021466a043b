package results

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates a results table laid out as deploy/cloudformation.json
// lays it out (keys, the decision index, on-demand billing), for tests and
// local stacks such as moto or LocalStack, and waits until it is active.
// The TTL setting is the template's business.
func CreateTable(ctx context.Context, c *dynamodb.Client, name string) error {
	s := types.ScalarAttributeTypeS
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrRequestID), AttributeType: s},
			{AttributeName: aws.String(attrSK), AttributeType: s},
			{AttributeName: aws.String(attrTenantDecision), AttributeType: s},
			{AttributeName: aws.String(attrFirstSeen), AttributeType: types.ScalarAttributeTypeN},
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
		}},
	})
	if err != nil {
		return fmt.Errorf("results: create table %s: %w", name, err)
	}
	w := dynamodb.NewTableExistsWaiter(c)
	return w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 2*time.Minute)
}
