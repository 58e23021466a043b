package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"

	"github.com/verdict-dev/verdict/decision"
)

// DefaultRuleCostLimit bounds the CEL cost of evaluating one rule against one
// decision when the policy does not set rule_cost_limit. A substring search
// over a 256 KiB state costs about 26,000.
const DefaultRuleCostLimit = 1_000_000

// Variables visible to rule expressions.
const (
	varID       = "id"       // string: the decision id
	varKind     = "kind"     // string: the resolved kind
	varState    = "state"    // string: the state text, or the state's canonical JSON text
	varIsJSON   = "is_json"  // bool: the state is a JSON object or array
	varJSON     = "json"     // dyn: the state's JSON value; {} for text states
	varQuestion = "question" // string
	varOptions  = "options"  // list(string): option ids after authorization
	varMetadata = "metadata" // map(string, string): the decision's metadata
	varCaller   = "caller"   // map(string, string): the caller's metadata
	varTenant   = "tenant"   // string: the caller's tenant
)

// celEnv is built once; cel environments are safe for concurrent use.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(varID, cel.StringType),
		cel.Variable(varKind, cel.StringType),
		cel.Variable(varState, cel.StringType),
		cel.Variable(varIsJSON, cel.BoolType),
		cel.Variable(varJSON, cel.DynType),
		cel.Variable(varQuestion, cel.StringType),
		cel.Variable(varOptions, cel.ListType(cel.StringType)),
		cel.Variable(varMetadata, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varCaller, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varTenant, cel.StringType),
		ext.Strings(),
		cel.OptionalTypes(),
	)
})

// rule is one compiled deterministic rule.
type rule struct {
	name   string
	when   string
	option string
	prg    cel.Program
}

// compileRule compiles a CEL expression that must yield a bool. The
// returned message is one line, for a FieldError.
func compileRule(expr string, costLimit uint64) (cel.Program, string) {
	env, err := celEnv()
	if err != nil {
		return nil, "rule environment: " + err.Error()
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		var msgs []string
		for _, e := range iss.Errors() {
			loc := e.Location
			if loc != nil && loc.Line() > 0 {
				msgs = append(msgs, fmt.Sprintf("%d:%d: %s", loc.Line(), loc.Column()+1, e.Message))
			} else {
				msgs = append(msgs, e.Message)
			}
		}
		if len(msgs) == 0 {
			msgs = append(msgs, oneLine(iss.Err().Error()))
		}
		return nil, "does not compile: " + strings.Join(msgs, "; ")
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Sprintf("must be a boolean expression, has type %s", t)
	}
	prg, err := env.Program(ast, cel.CostLimit(costLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, "cannot be prepared: " + oneLine(err.Error())
	}
	return prg, ""
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// activation builds the variables a rule sees for one decision.
func activation(d *decision.Decision, kind string, c Caller) map[string]any {
	var js any = map[string]any{}
	if d.State.IsJSON() {
		var v any
		if err := json.Unmarshal(d.State.JSON, &v); err == nil && v != nil {
			js = v
		}
	}
	state := d.State.Text
	if d.State.IsJSON() {
		state = string(d.State.JSON)
	}
	md := d.Metadata
	if md == nil {
		md = map[string]string{}
	}
	cm := c.Metadata
	if cm == nil {
		cm = map[string]string{}
	}
	return map[string]any{
		varID:       d.ID,
		varKind:     kind,
		varState:    state,
		varIsJSON:   d.State.IsJSON(),
		varJSON:     js,
		varQuestion: d.Question,
		varOptions:  d.OptionIDs(),
		varMetadata: md,
		varCaller:   cm,
		varTenant:   c.Tenant,
	}
}

// eval runs a rule. An error covers evaluation failures (a missing key, a
// type mismatch, the cost limit) and non-boolean results.
func (r *rule) eval(act map[string]any) (bool, error) {
	val, _, err := r.prg.Eval(act)
	if err != nil {
		return false, err
	}
	b, ok := val.Value().(bool)
	if !ok {
		return false, fmt.Errorf("result is %s, not a boolean", val.Type().TypeName())
	}
	return b, nil
}
