package lambda

import (
	"context"
	"fmt"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

// PolicyAuthorizer adapts a policy to Config.AuthorizeFunc: a decision the
// policy refuses (Plan.Outcome with status refused) is answered 403 before
// anything is enqueued; options the caller may not receive are removed
// from the decision that is enqueued (authorization mode filter). Rules are
// left to the worker, which runs the policy again. current returns the
// policy in force (policy.Holder.Current).
func PolicyAuthorizer(current func() *policy.Policy) func(context.Context, Caller, *decision.Decision) error {
	return func(_ context.Context, c Caller, d *decision.Decision) error {
		plan := current().Before(*d, policy.Caller{Tenant: c.Tenant, APIKey: c.APIKey})
		if plan.Outcome != nil && plan.Outcome.Status == decision.StatusRefused {
			return fmt.Errorf("%w: %s", ErrForbidden, plan.Outcome.Reason)
		}
		if len(plan.Removed) > 0 {
			d.Options = plan.Decision.Options
		}
		return nil
	}
}
