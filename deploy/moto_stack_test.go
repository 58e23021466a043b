package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/verdict-dev/verdict/internal/results"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/queue/queuetest"
)

// motoLacks: resource types of the template that moto's CloudFormation
// (moto 5) does not create. It logs "No Moto CloudFormation support for
// …" and skips them, and an output that reads an attribute of one makes
// its create-stack fail, so such outputs are left out of the stack made
// here. The scaling parts are replayed below through moto's Application
// Auto Scaling and CloudWatch APIs; the capacity provider and the URL are
// checked statically only (checkScaling, checkReferences).
var motoLacks = map[string]bool{
	"AWS::Lambda::Url": true,
	"AWS::ApplicationAutoScaling::ScalableTarget":   true,
	"AWS::ApplicationAutoScaling::ScalingPolicy":    true,
	"AWS::CloudWatch::Alarm":                        true,
	"AWS::ECS::CapacityProvider":                    true,
	"AWS::ECS::ClusterCapacityProviderAssociations": true,
}

// awsCLI runs the AWS CLI against endpoint and decodes its JSON answer
// into out (when out is not nil).
func awsCLI(t *testing.T, endpoint string, out any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "aws", append(args, "--endpoint-url", endpoint, "--output", "json")...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
		"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")
	b, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("aws %s: %v\n%s", strings.Join(args[:2], " "), err, stderr)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("aws %s: %v\n%s", strings.Join(args[:2], " "), err, b)
		}
	}
}

// TestTemplateCreatesInMoto creates the stack in moto_server (every
// resource type moto's CloudFormation knows), then reads back what the
// code depends on: the results table's keys and index, the names and
// settings handed to the workers and the front door, and the cascade
// (checkCascadeInMoto; a second stack is given GpuModelS3Uri). The scaling
// resources, which moto's CloudFormation skips, are then sent through
// moto's Application Auto Scaling and CloudWatch APIs with their
// template properties resolved against the stack, so the AWS CLI's model
// of those APIs checks every property name and type.
func TestTemplateCreatesInMoto(t *testing.T) {
	if _, err := exec.LookPath("aws"); err != nil {
		t.Fatal("the AWS CLI is required (.ci/run checks it is installed)")
	}
	m, err := queuetest.StartMoto()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	cli := func(out any, args ...string) { t.Helper(); awsCLI(t, m.Endpoint, out, args...) }

	b, err := os.ReadFile("cloudformation.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw obj
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	resources := raw["Resources"].(obj)
	for name, o := range raw["Outputs"].(obj) {
		if g, ok := at(o, "Value", "Fn::GetAtt").([]any); ok && motoLacks[str(at(resources, str(g[0]), "Type"))] {
			delete(raw["Outputs"].(obj), name)
		}
	}
	derived, _ := json.Marshal(raw)
	dir := t.TempDir()
	tplPath := filepath.Join(dir, "stack.json")
	if err := os.WriteFile(tplPath, derived, 0o644); err != nil {
		t.Fatal(err)
	}

	// What the stack's parameters name must exist: a subnet (moto's
	// default VPC has some; it does not look the security group up) and
	// the front door's package (moto's Lambda reads it).
	var subnets struct{ Subnets []struct{ SubnetId string } }
	cli(&subnets, "ec2", "describe-subnets")
	if len(subnets.Subnets) == 0 {
		t.Fatal("moto has no default subnet")
	}
	zip := filepath.Join(dir, "bootstrap.zip")
	if err := os.WriteFile(zip, []byte("not a real package"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(nil, "s3api", "create-bucket", "--bucket", "verdict-code")
	cli(nil, "s3api", "put-object", "--bucket", "verdict-code", "--key", "verdict/bootstrap.zip", "--body", zip)

	digest := "@sha256:" + strings.Repeat("ab", 32)
	params := map[string]string{
		"CpuImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/verdict" + digest, "GpuImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/verdict" + digest,
		"AwsCliImage": "public.ecr.aws/aws-cli/aws-cli" + digest, "FrontDoorCodeBucket": "verdict-code", "ApiKeys": "k1=acme",
		"ModelS3Uri": "s3://verdict-code/models/model.gguf", "EndpointModelDataUrl": "s3://verdict-code/models/model.tar.gz",
		"Subnets": subnets.Subnets[0].SubnetId, "WorkerSecurityGroup": "sg-0123456789abcdef0",
		// moto's SageMaker knows an older list of instance types than AWS.
		"EndpointInstanceType": "ml.g4dn.xlarge",
	}
	physical := createStack(t, cli, "verdict", tplPath, params)
	for name, r := range resources {
		if typ := str(at(r, "Type")); !motoLacks[typ] {
			if _, ok := physical[name]; !ok {
				t.Errorf("moto did not create %s (%s)", name, typ)
			}
		}
	}

	// The cascade as moto resolved it: with today's parameters both pools
	// load ModelS3Uri and no policy; a second stack given GpuModelS3Uri
	// loads it on the GPU pool only, and the task role may read both
	// buckets; a third, given GpuModelS3Uri and PolicyS3Uri as a cascade
	// is deployed, copies the policy for both pools and names it in
	// VERDICT_POLICY, and the role may read all three buckets; a fourth
	// gives PolicyS3Uri alone.
	checkCascadeInMoto(t, cli, raw, physical, params)
	with := func(extra map[string]string) map[string]string {
		out := maps.Clone(params)
		maps.Copy(out, extra)
		return out
	}
	withGpuModel := with(map[string]string{"GpuModelS3Uri": "s3://verdict-gpu-models/big/model.gguf"})
	checkCascadeInMoto(t, cli, raw, createStack(t, cli, "verdict-gpu-model", tplPath, withGpuModel), withGpuModel)
	withPolicy := with(map[string]string{"GpuModelS3Uri": "s3://verdict-gpu-models/big/model.gguf", "PolicyS3Uri": "s3://verdict-policies/cascade/policy.yml"})
	checkCascadeInMoto(t, cli, raw, createStack(t, cli, "verdict-policy", tplPath, withPolicy), withPolicy)
	policyOnly := with(map[string]string{"PolicyS3Uri": "s3://verdict-policies/policy.yaml"})
	checkCascadeInMoto(t, cli, raw, createStack(t, cli, "verdict-policy-one-model", tplPath, policyOnly), policyOnly)

	// The results table as the code reads it. moto's CloudFormation does
	// not apply TimeToLiveSpecification and does not report
	// SSESpecification back: those two are checked statically
	// (checkResultsTable).
	table := physical[resultsTable]
	var described struct {
		Table struct {
			KeySchema              any
			BillingModeSummary     struct{ BillingMode string }
			GlobalSecondaryIndexes []struct {
				IndexName  string
				KeySchema  any
				Projection struct{ ProjectionType string }
			}
		}
	}
	cli(&described, "dynamodb", "describe-table", "--table-name", table)
	tb := described.Table
	if got := keySchema(jsonAny(tb.KeySchema)); got != "request_id HASH, sk RANGE" {
		t.Errorf("table %s: key schema %q", table, got)
	}
	if tb.BillingModeSummary.BillingMode != "PAY_PER_REQUEST" {
		t.Errorf("table %s: billing mode %q", table, tb.BillingModeSummary.BillingMode)
	}
	if got, want := indexes(jsonAny(tb.GlobalSecondaryIndexes)), indexes(jsonAny(results.TableDefinition(table).GlobalSecondaryIndexes)); got != want {
		t.Errorf("table %s: indexes %s, want %s", table, got, want)
	}

	// What the workers and the front door are told.
	wantTTL := str(at(raw, "Mappings", "ResultsRetention", fmt.Sprint(at(raw, "Parameters", "ResultsRetentionDays", "Default")), "Ttl"))
	for _, td := range resourcesOf(raw, "AWS::ECS::TaskDefinition") {
		var d struct {
			TaskDefinition struct {
				ContainerDefinitions []struct {
					Name        string
					Command     []string
					StopTimeout int
					Environment []struct{ Name, Value string }
				}
			}
		}
		cli(&d, "ecs", "describe-task-definition", "--task-definition", physical[td])
		for _, c := range d.TaskDefinition.ContainerDefinitions {
			if len(c.Command) == 0 || c.Command[0] != "worker" {
				continue
			}
			e := map[string]string{}
			for _, kv := range c.Environment {
				e[kv.Name] = kv.Value
			}
			if e["VERDICT_RESULTS_TABLE"] != table || e["VERDICT_RESULTS_TTL"] != wantTTL {
				t.Errorf("%s: VERDICT_RESULTS_TABLE %q VERDICT_RESULTS_TTL %q, want %q %q", td, e["VERDICT_RESULTS_TABLE"], e["VERDICT_RESULTS_TTL"], table, wantTTL)
			}
			if d, err := time.ParseDuration(e["VERDICT_SHUTDOWN_TIMEOUT"]); err != nil || time.Duration(c.StopTimeout)*time.Second <= d {
				t.Errorf("%s: stopTimeout %d s, VERDICT_SHUTDOWN_TIMEOUT %q", td, c.StopTimeout, e["VERDICT_SHUTDOWN_TIMEOUT"])
			}
		}
	}
	var fn struct {
		Environment struct{ Variables map[string]string }
	}
	cli(&fn, "lambda", "get-function-configuration", "--function-name", physical["FrontDoorFunction"])
	if v := fn.Environment.Variables; v["VERDICT_RESULTS_TABLE"] != table || v["VERDICT_RESULTS_TTL"] != wantTTL {
		t.Errorf("FrontDoorFunction: environment %v, want the table %q and %q", v, table, wantTTL)
	}

	// The scaling resources, replayed through the APIs.
	r := evaluator{raw: raw, physical: physical, params: params}
	for _, tgt := range resourcesOf(raw, "AWS::ApplicationAutoScaling::ScalableTarget") {
		in := r.eval(props(raw, tgt)).(obj)
		cli(nil, "application-autoscaling", "register-scalable-target", "--cli-input-json", mustJSON(in))
	}
	for _, pol := range resourcesOf(raw, "AWS::ApplicationAutoScaling::ScalingPolicy") {
		in := r.eval(props(raw, pol)).(obj)
		tgt := props(raw, refName(props(raw, pol)["ScalingTargetId"]))
		if tgt == nil {
			t.Fatalf("%s: ScalingTargetId is not a scalable target", pol)
		}
		delete(in, "ScalingTargetId")
		for k, v := range r.eval(tgt).(obj) {
			if k == "ServiceNamespace" || k == "ResourceId" || k == "ScalableDimension" {
				in[k] = v
			}
		}
		var out struct{ PolicyARN string }
		cli(&out, "application-autoscaling", "put-scaling-policy", "--cli-input-json", mustJSON(in))
		r.physical[pol] = out.PolicyARN
	}
	for _, al := range resourcesOf(raw, "AWS::CloudWatch::Alarm") {
		in := r.eval(props(raw, al)).(obj)
		in["AlarmName"] = al
		for _, a := range stringsOf(in["AlarmActions"]) {
			if !strings.HasPrefix(a, "arn:") {
				t.Errorf("%s: alarm action %q is not a scaling policy of the stack", al, a)
			}
		}
		cli(nil, "cloudwatch", "put-metric-alarm", "--cli-input-json", mustJSON(in))
	}
	var targets struct {
		ScalableTargets []struct {
			ResourceId               string
			MinCapacity, MaxCapacity int
		}
	}
	cli(&targets, "application-autoscaling", "describe-scalable-targets", "--service-namespace", "ecs")
	var services []string
	for _, svc := range resourcesOf(raw, "AWS::ECS::Service") {
		arn := physical[svc]
		services = append(services, "service/"+physical["Cluster"]+"/"+arn[strings.LastIndex(arn, "/")+1:])
	}
	var scaled []string
	for _, st := range targets.ScalableTargets {
		scaled = append(scaled, st.ResourceId)
		if st.MinCapacity > st.MaxCapacity {
			t.Errorf("%s: MinCapacity %d > MaxCapacity %d", st.ResourceId, st.MinCapacity, st.MaxCapacity)
		}
	}
	sort.Strings(scaled)
	if fmt.Sprint(scaled) != fmt.Sprint(services) {
		t.Errorf("scalable targets %v, want the services %v", scaled, services)
	}
}

// createStack creates the template as stack in moto and waits for it;
// it answers the physical id of each resource created, all of which must
// be CREATE_COMPLETE.
func createStack(t *testing.T, cli func(out any, args ...string), stack, tplPath string, params map[string]string) map[string]string {
	t.Helper()
	args := []string{"cloudformation", "create-stack", "--stack-name", stack, "--template-body", "file://" + tplPath,
		"--capabilities", "CAPABILITY_IAM", "--parameters"}
	for k, v := range params {
		args = append(args, "ParameterKey="+k+",ParameterValue="+v)
	}
	cli(nil, args...)
	var stacks struct {
		Stacks []struct{ StackStatus, StackStatusReason string }
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		cli(&stacks, "cloudformation", "describe-stacks", "--stack-name", stack)
		if s := stacks.Stacks[0].StackStatus; s != "CREATE_IN_PROGRESS" || time.Now().After(deadline) {
			break
		}
	}
	if s := stacks.Stacks[0]; s.StackStatus != "CREATE_COMPLETE" {
		t.Fatalf("create-stack %s: %s %s", stack, s.StackStatus, s.StackStatusReason)
	}
	var listed struct {
		StackResourceSummaries []struct{ LogicalResourceId, PhysicalResourceId, ResourceType, ResourceStatus string }
	}
	cli(&listed, "cloudformation", "list-stack-resources", "--stack-name", stack)
	physical := map[string]string{}
	for _, r := range listed.StackResourceSummaries {
		if r.LogicalResourceId != "" {
			physical[r.LogicalResourceId] = r.PhysicalResourceId
			if r.ResourceStatus != "CREATE_COMPLETE" {
				t.Errorf("%s: %s: %s", stack, r.LogicalResourceId, r.ResourceStatus)
			}
		}
	}
	return physical
}

// checkCascadeInMoto reads back what moto stored for the worker task
// definitions and the task role of a stack created with params: each
// worker's VERDICT_POOL after the queue it reads, the CPU worker's
// VERDICT_ESCALATE naming the GPU queue's URL, the model each pool's init
// container copies (GpuModelS3Uri on the GPU pool when given, ModelS3Uri
// otherwise), the policy (with PolicyS3Uri given, a container the worker
// waits for copies it to the file VERDICT_POLICY names; without it,
// VERDICT_POLICY is empty and nothing but the model is copied), and the
// role's permission to send to the GPU queue and to read each model's
// bucket and the policy's.
func checkCascadeInMoto(t *testing.T, cli func(out any, args ...string), raw obj, physical, params map[string]string) {
	t.Helper()
	queues := map[string]string{physical["CpuQueue"]: "cpu", physical["GpuQueue"]: "gpu"}
	gpuQueue := physical["GpuQueue"]
	if !strings.HasPrefix(gpuQueue, "http") {
		t.Fatalf("GpuQueue's physical id %q is not its URL", gpuQueue)
	}
	models := map[string]string{"cpu": params["ModelS3Uri"], "gpu": params["ModelS3Uri"]}
	if v := params["GpuModelS3Uri"]; v != "" {
		models["gpu"] = v
	}
	seen := map[string]bool{}
	for _, td := range resourcesOf(raw, "AWS::ECS::TaskDefinition") {
		var d struct {
			TaskDefinition struct {
				ContainerDefinitions []struct {
					Name        string
					Command     []string
					Environment []struct{ Name, Value string }
					DependsOn   []struct{ ContainerName, Condition string }
				}
			}
		}
		cli(&d, "ecs", "describe-task-definition", "--task-definition", physical[td])
		copies := map[string][2]string{} // container → source, destination
		for _, c := range d.TaskDefinition.ContainerDefinitions {
			if len(c.Command) >= 4 && c.Command[0] == "s3" && c.Command[1] == "cp" {
				copies[c.Name] = [2]string{c.Command[2], c.Command[3]}
			}
		}
		for _, c := range d.TaskDefinition.ContainerDefinitions {
			if len(c.Command) == 0 || c.Command[0] != "worker" {
				continue
			}
			e := map[string]string{}
			for _, kv := range c.Environment {
				e[kv.Name] = kv.Value
			}
			pool := queues[e["VERDICT_QUEUE_URL"]]
			seen[pool] = true
			if pool == "" {
				t.Errorf("%s: VERDICT_QUEUE_URL %q is neither the cpu nor the gpu queue", td, e["VERDICT_QUEUE_URL"])
				continue
			}
			if e["VERDICT_POOL"] != pool {
				t.Errorf("%s: VERDICT_POOL %q, want %q", td, e["VERDICT_POOL"], pool)
			}
			want := map[string]string{"cpu": "gpu=" + gpuQueue, "gpu": ""}[pool]
			if e["VERDICT_ESCALATE"] != want {
				t.Errorf("%s: VERDICT_ESCALATE %q, want %q", td, e["VERDICT_ESCALATE"], want)
			}
			if got := copies["model"][0]; got != models[pool] {
				t.Errorf("%s (GpuModelS3Uri %q): the model container copies %q, want %q", td, params["GpuModelS3Uri"], got, models[pool])
			}
			waits := map[string]bool{}
			for _, dep := range c.DependsOn {
				if dep.Condition == "SUCCESS" {
					waits[dep.ContainerName] = true
				}
			}
			if policy := params["PolicyS3Uri"]; policy != "" {
				ok := false
				for name, cp := range copies {
					ok = ok || (waits[name] && cp == [2]string{policy, e["VERDICT_POLICY"]})
				}
				if !ok || !strings.HasPrefix(e["VERDICT_POLICY"], e["VERDICT_MODEL_DIR"]+"/") {
					t.Errorf("%s (PolicyS3Uri %q): VERDICT_POLICY %q (model dir %q), copies %v, the worker waits for %v: want a copy of the policy to VERDICT_POLICY on the model volume, waited for", td, policy, e["VERDICT_POLICY"], e["VERDICT_MODEL_DIR"], copies, waits)
				}
			} else {
				if v, ok := e["VERDICT_POLICY"]; ok && v != "" {
					t.Errorf("%s (no PolicyS3Uri): VERDICT_POLICY %q, want empty or unset", td, v)
				}
				for name, cp := range copies {
					if name != "model" {
						t.Errorf("%s (no PolicyS3Uri): container %s copies %q to %q, want only the model copied", td, name, cp[0], cp[1])
					}
				}
			}
		}
	}
	if !seen["cpu"] || !seen["gpu"] {
		t.Errorf("worker pools found: %v, want cpu and gpu", seen)
	}

	// The task role, as moto stored its inline policy. (moto's ECS does
	// not keep a task definition's TaskRoleArn from CloudFormation; that
	// the workers run as WorkerTaskRole is checked statically, checkCascade.)
	// moto 5 hands back a role policy created by CloudFormation as a
	// Python repr ('…' for "…"); this policy has no quotes in its strings.
	var rp struct{ PolicyDocument any }
	cli(&rp, "iam", "get-role-policy", "--role-name", physical["WorkerTaskRole"], "--policy-name", "worker")
	doc := rp.PolicyDocument
	if s, ok := doc.(string); ok {
		if json.Unmarshal([]byte(s), &doc) != nil {
			if err := json.Unmarshal([]byte(strings.ReplaceAll(s, "'", `"`)), &doc); err != nil {
				t.Fatalf("WorkerTaskRole's policy %q: %v", s, err)
			}
		}
	}
	grants := func(action, resource string) bool {
		ss, _ := at(doc, "Statement").([]any)
		for _, s := range ss {
			if at(s, "Effect") == "Allow" && slices.Contains(stringsOf(at(s, "Action")), action) && slices.Contains(stringsOf(at(s, "Resource")), resource) {
				return true
			}
		}
		return false
	}
	gpuQueueArn := "arn:aws:sqs:us-east-1:123456789012:" + gpuQueue[strings.LastIndex(gpuQueue, "/")+1:]
	if !grants("sqs:SendMessage", gpuQueueArn) {
		t.Errorf("WorkerTaskRole may not sqs:SendMessage to %s (the CPU workers escalate there): %v", gpuQueueArn, doc)
	}
	for _, m := range models {
		if !grants("s3:GetObject", s3Resource(m)) {
			t.Errorf("WorkerTaskRole may not s3:GetObject on %s (model %s): %v", s3Resource(m), m, doc)
		}
	}
	if policy := params["PolicyS3Uri"]; policy != "" && !grants("s3:GetObject", s3Resource(policy)) {
		t.Errorf("WorkerTaskRole may not s3:GetObject on %s (policy %s): %v", s3Resource(policy), policy, doc)
	}
}

func jsonAny(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
