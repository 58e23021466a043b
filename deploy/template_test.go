package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/queue/queuetest"
)

// template is the part of a CloudFormation template the checks read.
type template struct {
	Parameters map[string]struct {
		Type           string `json:"Type"`
		AllowedPattern string `json:"AllowedPattern"`
	} `json:"Parameters"`
	Conditions map[string]any `json:"Conditions"`
	Resources  map[string]struct {
		Type       string          `json:"Type"`
		Condition  string          `json:"Condition"`
		DependsOn  []string        `json:"DependsOn"`
		Properties json.RawMessage `json:"Properties"`
	} `json:"Resources"`
	Outputs map[string]any `json:"Outputs"`
}

var pseudoParams = map[string]bool{
	"AWS::AccountId": true, "AWS::NotificationARNs": true, "AWS::NoValue": true, "AWS::Partition": true,
	"AWS::Region": true, "AWS::StackId": true, "AWS::StackName": true, "AWS::URLSuffix": true,
}

func loadTemplate(t *testing.T, b []byte) (template, any) {
	t.Helper()
	var tpl template
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatalf("cloudformation.json: %v", err)
	}
	var raw any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	return tpl, raw
}

var subVar = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// checkReferences walks every value: Ref, Fn::GetAtt, Fn::Sub and
// DependsOn must name a parameter, a resource or a pseudo parameter the
// template has; every parameter must be used. Fn::If and Condition must
// name a condition of the Conditions section, whose Refs may name only
// parameters; every condition must be used.
func checkReferences(tpl template, raw any) problems {
	var p problems
	used, usedCond := map[string]bool{}, map[string]bool{}
	cond := func(c any, where string) {
		n, _ := c.(string)
		usedCond[n] = true
		if _, ok := tpl.Conditions[n]; !ok {
			p.add("%s: %v is not a condition of the Conditions section", where, c)
		}
	}
	isResource := func(n string) bool { _, ok := tpl.Resources[n]; return ok }
	isParam := func(n string) bool { _, ok := tpl.Parameters[n]; return ok }
	name := func(n, where string) {
		used[n] = true
		if !isResource(n) && !isParam(n) && !pseudoParams[n] {
			p.add("%s: %q is neither a resource, a parameter nor a pseudo parameter", where, n)
		}
	}
	var walk func(v any, where string, local map[string]bool)
	walk = func(v any, where string, local map[string]bool) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 1 {
				if r, ok := x["Ref"].(string); ok {
					name(r, where+" Ref")
					return
				}
				if g, ok := x["Fn::GetAtt"].([]any); ok {
					if r, ok := g[0].(string); !ok || !isResource(r) {
						p.add("%s: Fn::GetAtt of %v, not a resource", where, g[0])
					}
					return
				}
				if f, ok := x["Fn::If"].([]any); ok && len(f) == 3 {
					cond(f[0], where+" Fn::If")
					walk(f[1], where+" Fn::If", local)
					walk(f[2], where+" Fn::If", local)
					return
				}
				if c, ok := x["Condition"]; ok {
					cond(c, where+" Condition")
					return
				}
				if s, ok := x["Fn::Sub"]; ok {
					str, vars := "", map[string]bool{}
					switch y := s.(type) {
					case string:
						str = y
					case []any:
						str, _ = y[0].(string)
						if m, ok := y[1].(map[string]any); ok {
							for k, vv := range m {
								vars[k] = true
								walk(vv, where+" Fn::Sub", local)
							}
						}
					}
					for _, m := range subVar.FindAllStringSubmatch(str, -1) {
						n, _, _ := strings.Cut(m[1], ".")
						if !vars[n] {
							name(n, where+" Fn::Sub")
						}
					}
					return
				}
			}
			for k, vv := range x {
				walk(vv, where+"."+k, local)
			}
		case []any:
			for i, vv := range x {
				walk(vv, where+"["+strconv.Itoa(i)+"]", local)
			}
		}
	}
	top := raw.(map[string]any)
	walk(top["Resources"], "Resources", nil)
	walk(top["Outputs"], "Outputs", nil)
	for n, o := range tpl.Outputs {
		if c, ok := at(o, "Condition").(string); ok {
			cond(c, "Outputs."+n+".Condition")
		}
	}
	for n, c := range tpl.Conditions {
		walk(c, "Conditions."+n, nil)
	}
	var inConditions func(v any, where string)
	inConditions = func(v any, where string) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := x["Ref"].(string); ok && isResource(r) {
				p.add("%s: Ref %q: a condition may refer only to parameters", where, r)
			}
			for k, vv := range x {
				inConditions(vv, where+"."+k)
			}
		case []any:
			for _, vv := range x {
				inConditions(vv, where)
			}
		}
	}
	inConditions(top["Conditions"], "Conditions")
	for n, r := range tpl.Resources {
		if r.Condition != "" {
			cond(r.Condition, "Resources."+n+".Condition")
		}
		for _, d := range r.DependsOn {
			if !isResource(d) {
				p.add("Resources.%s.DependsOn: %q is not a resource", n, d)
			}
		}
		if !strings.HasPrefix(r.Type, "AWS::") {
			p.add("Resources.%s: type %q", n, r.Type)
		}
	}
	for n := range tpl.Conditions {
		if !usedCond[n] {
			p.add("Conditions.%s: declared but never used", n)
		}
	}
	for n := range tpl.Parameters {
		if !used[n] {
			p.add("Parameters.%s: declared but never referenced", n)
		}
	}
	sort.Strings(p)
	return p
}

// checkQueues: every work queue has a redrive policy to a queue the
// template defines, maxReceiveCount >= 5, and a visibility timeout of at
// least 6x the longest processing time, which is the workers' own
// visibility (VERDICT_VISIBILITY of their task definitions).
func checkQueues(tpl template) problems {
	var p problems
	longest := time.Duration(0)
	for n, r := range tpl.Resources {
		if r.Type != "AWS::ECS::TaskDefinition" {
			continue
		}
		var td struct {
			ContainerDefinitions []struct {
				Image       any `json:"Image"`
				Environment []struct {
					Name  string `json:"Name"`
					Value any    `json:"Value"`
				} `json:"Environment"`
			} `json:"ContainerDefinitions"`
		}
		if err := json.Unmarshal(r.Properties, &td); err != nil {
			p.add("Resources.%s: %v", n, err)
			continue
		}
		for _, c := range td.ContainerDefinitions {
			for _, e := range c.Environment {
				if e.Name == "VERDICT_VISIBILITY" {
					d, err := time.ParseDuration(e.Value.(string))
					if err != nil {
						p.add("Resources.%s: VERDICT_VISIBILITY: %v", n, err)
					}
					longest = max(longest, d)
				}
			}
		}
	}
	if longest == 0 {
		p.add("no worker task definition sets VERDICT_VISIBILITY (the longest processing time)")
	}
	dlqs := 0
	for n, r := range tpl.Resources {
		if r.Type != "AWS::SQS::Queue" {
			continue
		}
		var q struct {
			VisibilityTimeout *int `json:"VisibilityTimeout"`
			RedrivePolicy     *struct {
				Target          map[string]any `json:"deadLetterTargetArn"`
				MaxReceiveCount int            `json:"maxReceiveCount"`
			} `json:"RedrivePolicy"`
		}
		if err := json.Unmarshal(r.Properties, &q); err != nil {
			p.add("Resources.%s: %v", n, err)
			continue
		}
		if strings.Contains(n, "DeadLetter") {
			dlqs++
			continue
		}
		if q.RedrivePolicy == nil {
			p.add("Resources.%s: no RedrivePolicy (a dead-letter queue)", n)
			continue
		}
		if q.RedrivePolicy.MaxReceiveCount < 5 {
			p.add("Resources.%s: maxReceiveCount %d < 5", n, q.RedrivePolicy.MaxReceiveCount)
		}
		g, _ := q.RedrivePolicy.Target["Fn::GetAtt"].([]any)
		if len(g) != 2 || g[1] != "Arn" || tpl.Resources[g[0].(string)].Type != "AWS::SQS::Queue" {
			p.add("Resources.%s: deadLetterTargetArn is not the Arn of a queue of this template", n)
		}
		if q.VisibilityTimeout == nil || time.Duration(*q.VisibilityTimeout)*time.Second < 6*longest {
			p.add("Resources.%s: VisibilityTimeout %v s < 6 x the workers' %v", n, q.VisibilityTimeout, longest)
		}
	}
	if dlqs < 3 {
		p.add("want dead-letter queues for the cpu, gpu and results queues, found %d", dlqs)
	}
	return p
}

// checkImages: every container image (ECS, SageMaker) is a parameter
// that accepts only references by digest.
func checkImages(tpl template, raw any) problems {
	var p problems
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch x := v.(type) {
		case map[string]any:
			for k, vv := range x {
				if k == "Image" {
					m, _ := vv.(map[string]any)
					r, _ := m["Ref"].(string)
					param, ok := tpl.Parameters[r]
					if !ok {
						p.add("%s.Image: %v is not a parameter", where, vv)
					} else if !strings.Contains(param.AllowedPattern, "@sha256:") {
						p.add("%s.Image: parameter %s accepts references that are not digests", where, r)
					}
					continue
				}
				walk(vv, where+"."+k)
			}
		case []any:
			for i, vv := range x {
				walk(vv, where+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	walk(raw.(map[string]any)["Resources"], "Resources")
	re := func(name string) *regexp.Regexp { return regexp.MustCompile(tpl.Parameters[name].AllowedPattern) }
	for _, n := range []string{"CpuImage", "GpuImage"} {
		if re(n).MatchString("123456789012.dkr.ecr.us-east-1.amazonaws.com/verdict:1.0") {
			p.add("Parameters.%s accepts a tag", n)
		}
		if !re(n).MatchString("123456789012.dkr.ecr.us-east-1.amazonaws.com/verdict@sha256:" + strings.Repeat("ab", 32)) {
			p.add("Parameters.%s refuses a digest reference", n)
		}
	}
	return p
}

// wantTypes: the deployment the issue names, each part present.
var wantTypes = map[string]int{
	"AWS::SQS::Queue": 6, "AWS::Lambda::Function": 1, "AWS::Lambda::Url": 1, "AWS::ECS::Service": 2,
	"AWS::ECS::TaskDefinition": 2, "AWS::SageMaker::Model": 1, "AWS::SageMaker::EndpointConfig": 1, "AWS::SageMaker::Endpoint": 1,
	"AWS::DynamoDB::Table": 1, "AWS::ApplicationAutoScaling::ScalableTarget": 2, "AWS::ApplicationAutoScaling::ScalingPolicy": 4,
	"AWS::CloudWatch::Alarm": 2, "AWS::ECS::CapacityProvider": 1,
}

func TestCloudFormationTemplate(t *testing.T) {
	b, err := os.ReadFile("cloudformation.json")
	if err != nil {
		t.Fatal(err)
	}
	tpl, raw := loadTemplate(t, b)
	var p problems
	p = append(p, checkReferences(tpl, raw)...)
	p = append(p, checkQueues(tpl)...)
	p = append(p, checkImages(tpl, raw)...)
	p = append(p, checkResultsTable(raw)...)
	p = append(p, checkScaling(raw)...)
	p = append(p, checkStopTimeout(raw)...)
	p = append(p, checkCascade(raw)...)
	got := map[string]int{}
	for _, r := range tpl.Resources {
		got[r.Type]++
	}
	for typ, n := range wantTypes {
		if got[typ] < n {
			p.add("want %d %s, the template has %d", n, typ, got[typ])
		}
	}
	for _, msg := range p {
		t.Error(msg)
	}
}

// TestTemplateChecksCatch breaks the real template in the ways the checks
// exist for: each must be reported.
func TestTemplateChecksCatch(t *testing.T) {
	b, err := os.ReadFile("cloudformation.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"dangling Ref", `"Ref": "ResultsQueue"`, `"Ref": "ResultQueue"`, `"ResultQueue" is neither`},
		{"dangling GetAtt", `"FrontDoorRole",`, `"FrontDoorRoles",`, "not a resource"},
		{"dangling Sub", `${AWS::StackName}-front-door`, `${StackName}-front-door`, `"StackName" is neither`},
		{"few receives", `"maxReceiveCount": 5`, `"maxReceiveCount": 2`, "maxReceiveCount 2 < 5"},
		{"short visibility", `"VisibilityTimeout": 1800`, `"VisibilityTimeout": 600`, "< 6 x"},
		{"dangling condition", `"HasGpuModel",`, `"HasGpuModels",`, `HasGpuModels is not a condition`},
		{"dangling policy condition", `"HasPolicy",`, `"HasPolicies",`, `HasPolicies is not a condition`},
		{"unused condition", `"Conditions": {`, `"Conditions": {"Unused": {"Fn::Equals": ["a", "b"]}, `, "Conditions.Unused: declared but never used"},
		{"condition on a resource", `"Ref": "GpuModelS3Uri"
            },
            ""`, `"Ref": "GpuQueue"
            },
            ""`, `Ref "GpuQueue": a condition may refer only to parameters`},
		{"tag image", `"AllowedPattern": "^[^@\\s]+@sha256:[0-9a-f]{64}$",`, `"AllowedPattern": ".+",`, "not digests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(b), tc.old) {
				t.Fatalf("the template no longer has %s; update this case", tc.old)
			}
			tpl, raw := loadTemplate(t, []byte(strings.Replace(string(b), tc.old, tc.new, 1)))
			var p problems
			p = append(p, checkReferences(tpl, raw)...)
			p = append(p, checkQueues(tpl)...)
			p = append(p, checkImages(tpl, raw)...)
			if !strings.Contains(strings.Join(p, "\n"), tc.want) {
				t.Errorf("want a problem containing %q, got %q", tc.want, p)
			}
		})
	}
}

// TestTemplateValidatesWithCloudFormationAPI sends the template to
// moto_server's CloudFormation API through the AWS CLI, as `aws
// cloudformation validate-template` would to AWS.
func TestTemplateValidatesWithCloudFormationAPI(t *testing.T) {
	aws, err := exec.LookPath("aws")
	if err != nil {
		t.Fatal("the AWS CLI is required (.ci/run checks it is installed)")
	}
	m, err := queuetest.StartMoto()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	validate := func(path string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, aws, "cloudformation", "validate-template", "--endpoint-url", m.Endpoint,
			"--template-body", "file://"+path, "--output", "json")
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
			"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")
		return cmd.CombinedOutput()
	}
	out, err := validate("cloudformation.json")
	if err != nil {
		t.Fatalf("validate-template: %v\n%s", err, out)
	}
	var res struct {
		Description string `json:"Description"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("validate-template answer: %v\n%s", err, out)
	}
	b, _ := os.ReadFile("cloudformation.json")
	var want struct{ Description string }
	_ = json.Unmarshal(b, &want)
	if res.Description != want.Description || want.Description == "" {
		t.Errorf("validate-template read the description %q, the template has %q", res.Description, want.Description)
	}
	// The API refuses what is not a template.
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := validate(bad); err == nil {
		t.Errorf("validate-template accepted half a template: %s", out)
	}
}
