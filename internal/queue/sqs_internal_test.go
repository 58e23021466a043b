package queue

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// A stale receipt is ErrStaleReceipt and keeps the service's entry error in
// the chain (errors.Is/As reach both).
func TestStaleReceiptKeepsTheEntryError(t *testing.T) {
	t.Parallel()
	errs := failedEntries("delete", 2, []types.BatchResultErrorEntry{
		{Id: aws.String("1"), Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("expired")}})
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], ErrStaleReceipt)
	multi, ok := errs[1].(interface{ Unwrap() []error })
	require.True(t, ok, "both errors are wrapped")
	var causes []string
	for _, e := range multi.Unwrap() {
		causes = append(causes, e.Error())
	}
	require.True(t, strings.Contains(strings.Join(causes, "|"), "ReceiptHandleIsInvalid: expired"), "%v", causes)
}
