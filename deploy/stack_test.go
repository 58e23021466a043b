package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/verdict-dev/verdict/internal/results"
)

// The results table's key schema is a contract with the code that reads
// and writes it (the workers and the front door): these are its names.
const (
	resultsTable   = "ResultsTable"
	ttlAttribute   = "expires_at"
	backlogExpr    = "m1 / IF(m2 >= 1, m2, 1)"
	ecsStopTimeout = 120 * time.Second // the most ECS waits between SIGTERM and SIGKILL
)

type obj = map[string]any

// at walks v along string keys and int indices; nil where the path ends.
func at(v any, path ...any) any {
	for _, k := range path {
		switch k := k.(type) {
		case string:
			m, _ := v.(obj)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any) string { s, _ := v.(string); return s }

func isRef(v any, name string) bool {
	m, ok := v.(obj)
	return ok && len(m) == 1 && m["Ref"] == name
}

func isGetAtt(v any, res, attr string) bool {
	g, _ := at(v, "Fn::GetAtt").([]any)
	return len(g) == 2 && g[0] == res && g[1] == attr
}

func isSub(v any, s string) bool { return at(v, "Fn::Sub") == s }

// refName is the name a {"Ref": …} names, "" for anything else.
func refName(v any) string { return str(at(v, "Ref")) }

// number reads a JSON number or a numeric string.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

// resourcesOf lists the logical ids of the resources of one type, sorted.
func resourcesOf(raw any, typ string) []string {
	var names []string
	for n, r := range at(raw, "Resources").(obj) {
		if at(r, "Type") == typ {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func props(raw any, name string) obj {
	m, _ := at(raw, "Resources", name, "Properties").(obj)
	return m
}

// env reads a container's Environment list or a Lambda's Variables map.
func env(v any) obj {
	out := obj{}
	switch e := v.(type) {
	case []any:
		for _, kv := range e {
			out[str(at(kv, "Name"))] = at(kv, "Value")
		}
	case obj:
		return e
	}
	return out
}

// workerContainers: every container that runs `verdict worker`, by task
// definition.
func workerContainers(raw any) map[string]obj {
	out := map[string]obj{}
	for _, td := range resourcesOf(raw, "AWS::ECS::TaskDefinition") {
		cs, _ := at(props(raw, td), "ContainerDefinitions").([]any)
		for _, c := range cs {
			if at(c, "Command", 0) == "worker" {
				out[td] = c.(obj)
			}
		}
	}
	return out
}

// statementsOf flattens the inline policy statements of an IAM role.
func statementsOf(raw any, role string) []obj {
	var out []obj
	ps, _ := at(props(raw, role), "Policies").([]any)
	for _, p := range ps {
		ss, _ := at(p, "PolicyDocument", "Statement").([]any)
		for _, s := range ss {
			out = append(out, s.(obj))
		}
	}
	return out
}

func stringsOf(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, y := range x {
			out = append(out, str(y))
		}
		return out
	}
	return nil
}

// allows: some Allow statement of role grants every action on a resource
// list that holds each of resources (compared as JSON).
func allows(raw any, role string, actions []string, resources ...any) bool {
	for _, s := range statementsOf(raw, role) {
		if s["Effect"] != "Allow" {
			continue
		}
		granted := stringsOf(s["Action"])
		if !containsAll(granted, actions) {
			continue
		}
		rs, ok := s["Resource"].([]any)
		if !ok {
			rs = []any{s["Resource"]}
		}
		have := map[string]bool{}
		for _, r := range rs {
			b, _ := json.Marshal(r)
			have[string(b)] = true
		}
		all := true
		for _, r := range resources {
			b, _ := json.Marshal(r)
			all = all && have[string(b)]
		}
		if all {
			return true
		}
	}
	return false
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// keySchema renders a KeySchema as "name HASH, name RANGE".
func keySchema(v any) string {
	var parts []string
	ks, _ := v.([]any)
	for _, k := range ks {
		parts = append(parts, str(at(k, "AttributeName"))+" "+str(at(k, "KeyType")))
	}
	return strings.Join(parts, ", ")
}

// checkResultsTable: the DynamoDB results table as the code expects it,
// its name and retention handed to the workers and the front door, the
// roles allowed what each does with it, and the name among the outputs.
func checkResultsTable(raw any) problems {
	var p problems
	if tables := resourcesOf(raw, "AWS::DynamoDB::Table"); !slices.Equal(tables, []string{resultsTable}) {
		p.add("want one DynamoDB table, %s; the template has %v", resultsTable, tables)
		return p
	}
	t := props(raw, resultsTable)
	if t["BillingMode"] != "PAY_PER_REQUEST" {
		p.add("%s: BillingMode %v, want PAY_PER_REQUEST", resultsTable, t["BillingMode"])
	}
	if at(t, "SSESpecification", "SSEEnabled") != true {
		p.add("%s: SSESpecification.SSEEnabled is not true", resultsTable)
	}
	if at(t, "TimeToLiveSpecification", "AttributeName") != ttlAttribute || at(t, "TimeToLiveSpecification", "Enabled") != true {
		p.add("%s: TimeToLiveSpecification %v, want %s enabled", resultsTable, t["TimeToLiveSpecification"], ttlAttribute)
	}
	// The layout is package results' (TableDefinition): one place.
	want := results.TableDefinition(resultsTable)
	if got, w := keySchema(t["KeySchema"]), keySchema(jsonAny(want.KeySchema)); got != w {
		p.add("%s: KeySchema %q, want %q", resultsTable, got, w)
	}
	attrs := map[string]string{}
	as, _ := t["AttributeDefinitions"].([]any)
	for _, a := range as {
		attrs[str(at(a, "AttributeName"))] = str(at(a, "AttributeType"))
	}
	wantAttrs := map[string]string{}
	for _, a := range want.AttributeDefinitions {
		wantAttrs[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	if fmt.Sprint(attrs) != fmt.Sprint(wantAttrs) {
		p.add("%s: AttributeDefinitions %v, want %v", resultsTable, attrs, wantAttrs)
	}
	if got, w := indexes(t["GlobalSecondaryIndexes"]), indexes(jsonAny(want.GlobalSecondaryIndexes)); got != w {
		p.add("%s: global secondary indexes %s, want %s (results.TableDefinition)", resultsTable, got, w)
	}

	// The name and the retention, where the code reads them.
	days := at(raw, "Parameters", "ResultsRetentionDays")
	ttls := map[string]string{}
	for _, v := range stringsOf(at(days, "AllowedValues")) {
		ttl := str(at(raw, "Mappings", "ResultsRetention", v, "Ttl"))
		n, _ := strconv.Atoi(v)
		if d, err := time.ParseDuration(ttl); err != nil || d != time.Duration(n)*24*time.Hour {
			p.add("Mappings.ResultsRetention.%s.Ttl %q is not %s days as a Go duration", v, ttl, v)
		}
		ttls[v] = ttl
	}
	if def := fmt.Sprint(at(days, "Default")); ttls[def] == "" {
		p.add("Parameters.ResultsRetentionDays: default %s has no ResultsRetention mapping", def)
	}
	ttlRef := obj{"Fn::FindInMap": []any{"ResultsRetention", obj{"Ref": "ResultsRetentionDays"}, "Ttl"}}
	sameJSON := func(a, b any) bool { x, _ := json.Marshal(a); y, _ := json.Marshal(b); return string(x) == string(y) }
	envs := map[string]obj{}
	for td, c := range workerContainers(raw) {
		envs["Resources."+td] = env(c["Environment"])
	}
	if len(envs) < 2 {
		p.add("want worker containers in two task definitions, found %d", len(envs))
	}
	for _, fn := range resourcesOf(raw, "AWS::Lambda::Function") {
		envs["Resources."+fn] = env(at(props(raw, fn), "Environment", "Variables"))
	}
	for where, e := range envs {
		if !isRef(e["VERDICT_RESULTS_TABLE"], resultsTable) {
			p.add("%s: VERDICT_RESULTS_TABLE is %v, want Ref %s", where, e["VERDICT_RESULTS_TABLE"], resultsTable)
		}
		if !sameJSON(e["VERDICT_RESULTS_TTL"], ttlRef) {
			p.add("%s: VERDICT_RESULTS_TTL is %v, want the ResultsRetentionDays mapping", where, e["VERDICT_RESULTS_TTL"])
		}
	}

	// What each role may do with the table and its index.
	arn := obj{"Fn::GetAtt": []any{resultsTable, "Arn"}}
	index := obj{"Fn::Sub": "${" + resultsTable + ".Arn}/index/*"}
	worker := []string{"dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:DescribeTable"}
	if !allows(raw, "WorkerTaskRole", worker, arn, index) {
		p.add("WorkerTaskRole: no statement allows %v on the table and its indexes", worker)
	}
	front := append(slices.Clone(worker), "dynamodb:BatchWriteItem")
	if !allows(raw, "FrontDoorRole", front, arn, index) {
		p.add("FrontDoorRole: no statement allows %v on the table and its indexes", front)
	}
	named := false
	for _, o := range at(raw, "Outputs").(obj) {
		named = named || isRef(at(o, "Value"), resultsTable)
	}
	if !named {
		p.add("Outputs: no output gives the results table's name")
	}
	return p
}

// checkScaling: each worker service follows its queue. A scalable target
// whose minimum may be 0; target tracking on messages waiting per running
// task (metric math over the queue and Container Insights); a step policy
// that starts the first task, fired by an alarm on the same queue. The GPU
// capacity provider scales its instances with the tasks and never takes
// one that runs a task.
func checkScaling(raw any) problems {
	var p problems
	settings, _ := at(props(raw, "Cluster"), "ClusterSettings").([]any)
	insights := false
	for _, s := range settings {
		insights = insights || (at(s, "Name") == "containerInsights" && at(s, "Value") == "enabled")
	}
	if !insights {
		p.add("Cluster: containerInsights is not enabled (the scaling policies read RunningTaskCount from it)")
	}
	workers := workerContainers(raw)
	targets := resourcesOf(raw, "AWS::ApplicationAutoScaling::ScalableTarget")
	policies := resourcesOf(raw, "AWS::ApplicationAutoScaling::ScalingPolicy")
	alarms := resourcesOf(raw, "AWS::CloudWatch::Alarm")
	for _, svc := range resourcesOf(raw, "AWS::ECS::Service") {
		s := props(raw, svc)
		queue := refName(env(at(workers[refName(s["TaskDefinition"])], "Environment"))["VERDICT_QUEUE_URL"])
		if queue == "" {
			p.add("%s: its task definition's worker reads no queue of this template", svc)
			continue
		}
		var target string
		for _, t := range targets {
			if isSub(props(raw, t)["ResourceId"], "service/${Cluster}/${"+svc+".Name}") {
				target = t
			}
		}
		if target == "" {
			p.add("%s: no scalable target (ResourceId service/${Cluster}/${%s.Name})", svc, svc)
			continue
		}
		t := props(raw, target)
		if t["ServiceNamespace"] != "ecs" || t["ScalableDimension"] != "ecs:service:DesiredCount" {
			p.add("%s: scales %v %v, want ecs ecs:service:DesiredCount", target, t["ServiceNamespace"], t["ScalableDimension"])
		}
		minP, maxP := refName(t["MinCapacity"]), refName(t["MaxCapacity"])
		if mv, ok := number(at(raw, "Parameters", minP, "MinValue")); minP == "" || !ok || mv != 0 {
			p.add("%s: MinCapacity is not a parameter that allows 0 (%v)", target, t["MinCapacity"])
		}
		if at(raw, "Parameters", maxP) == nil {
			p.add("%s: MaxCapacity is not a parameter (%v)", target, t["MaxCapacity"])
		}
		if d, ok := number(at(raw, "Parameters", refName(s["DesiredCount"]), "Default")); ok {
			lo, _ := number(at(raw, "Parameters", minP, "Default"))
			hi, _ := number(at(raw, "Parameters", maxP, "Default"))
			if d < lo || d > hi {
				p.add("%s: default DesiredCount %v outside the defaults [%v, %v] of %s", svc, d, lo, hi, target)
			}
		}
		queueDims := fmt.Sprint([]any{obj{"Name": "QueueName", "Value": obj{"Fn::GetAtt": []any{queue, "QueueName"}}}})
		serviceDims := fmt.Sprint([]any{obj{"Name": "ClusterName", "Value": obj{"Ref": "Cluster"}},
			obj{"Name": "ServiceName", "Value": obj{"Fn::GetAtt": []any{svc, "Name"}}}})
		// metric finds the metric-math query of id among ms.
		metric := func(ms any, id string) obj {
			l, _ := ms.([]any)
			for _, m := range l {
				if at(m, "Id") == id {
					return m.(obj)
				}
			}
			return nil
		}
		isMetric := func(m obj, ns, name, dims string) bool {
			return at(m, "MetricStat", "Metric", "Namespace") == ns && at(m, "MetricStat", "Metric", "MetricName") == name &&
				fmt.Sprint(at(m, "MetricStat", "Metric", "Dimensions")) == dims && at(m, "ReturnData") == false
		}
		var tracking, step string
		for _, pol := range policies {
			pp := props(raw, pol)
			if !isRef(pp["ScalingTargetId"], target) {
				continue
			}
			switch pp["PolicyType"] {
			case "TargetTrackingScaling":
				tracking = pol
				c := at(pp, "TargetTrackingScalingPolicyConfiguration")
				if !isRef(at(c, "TargetValue"), "BacklogPerWorker") {
					p.add("%s: TargetValue %v, want Ref BacklogPerWorker", pol, at(c, "TargetValue"))
				}
				for _, k := range []string{"ScaleInCooldown", "ScaleOutCooldown"} {
					if n, ok := number(at(c, k)); !ok || n <= 0 {
						p.add("%s: no %s", pol, k)
					}
				}
				ms := at(c, "CustomizedMetricSpecification", "Metrics")
				if !isMetric(metric(ms, "m1"), "AWS/SQS", "ApproximateNumberOfMessagesVisible", queueDims) {
					p.add("%s: m1 is not %s's ApproximateNumberOfMessagesVisible (AWS/SQS, QueueName), ReturnData false", pol, queue)
				}
				if !isMetric(metric(ms, "m2"), "ECS/ContainerInsights", "RunningTaskCount", serviceDims) {
					p.add("%s: m2 is not %s's RunningTaskCount (ECS/ContainerInsights, ClusterName, ServiceName), ReturnData false", pol, svc)
				}
				if e := metric(ms, "e1"); at(e, "Expression") != backlogExpr || at(e, "ReturnData") != true {
					p.add("%s: e1 is %v, want %q with ReturnData true", pol, e, backlogExpr)
				}
				if l, _ := ms.([]any); len(l) != 3 {
					p.add("%s: %d metric queries, want m1, m2, e1", pol, len(l))
				}
			case "StepScaling":
				step = pol
				c := at(pp, "StepScalingPolicyConfiguration")
				adj := at(c, "StepAdjustments", 0, "ScalingAdjustment")
				if n, _ := number(adj); (at(c, "AdjustmentType") != "ChangeInCapacity" && at(c, "AdjustmentType") != "ExactCapacity") || n != 1 {
					p.add("%s: %v %v, want ChangeInCapacity or ExactCapacity 1", pol, at(c, "AdjustmentType"), adj)
				}
				if lb, ok := number(at(c, "StepAdjustments", 0, "MetricIntervalLowerBound")); !ok || lb != 0 {
					p.add("%s: the step does not start at the alarm's threshold (MetricIntervalLowerBound 0)", pol)
				}
			}
		}
		if tracking == "" {
			p.add("%s: no target tracking policy on %s", svc, target)
		}
		if step == "" {
			p.add("%s: no step scaling policy on %s (target tracking cannot start the first task)", svc, target)
			continue
		}
		var alarm string
		for _, a := range alarms {
			acts, _ := at(props(raw, a), "AlarmActions").([]any)
			for _, act := range acts {
				if isRef(act, step) {
					alarm = a
				}
			}
		}
		if alarm == "" {
			p.add("%s: no alarm triggers %s", svc, step)
			continue
		}
		a := props(raw, alarm)
		if a["TreatMissingData"] != "notBreaching" || a["ComparisonOperator"] != "GreaterThanThreshold" {
			p.add("%s: TreatMissingData %v, ComparisonOperator %v; want notBreaching, GreaterThanThreshold", alarm, a["TreatMissingData"], a["ComparisonOperator"])
		}
		if n, ok := number(a["Threshold"]); !ok || n != 0 {
			p.add("%s: Threshold %v, want 0 (a message waiting)", alarm, a["Threshold"])
		}
		// The alarm watches the service's own queue: a metric-math alarm
		// returns an expression of it.
		var onQueue bool
		ms, _ := a["Metrics"].([]any)
		for _, m := range ms {
			if isMetric(m.(obj), "AWS/SQS", "ApproximateNumberOfMessagesVisible", queueDims) {
				for _, e := range ms {
					onQueue = onQueue || (at(e, "ReturnData") == true && strings.Contains(str(at(e, "Expression")), str(at(m, "Id"))))
				}
			}
			if at(m, "MetricStat", "Metric", "Namespace") == "ECS/ContainerInsights" &&
				fmt.Sprint(at(m, "MetricStat", "Metric", "Dimensions")) != serviceDims {
				p.add("%s: reads Container Insights of another service than %s", alarm, svc)
			}
		}
		if len(ms) == 0 {
			onQueue = a["Namespace"] == "AWS/SQS" && a["MetricName"] == "ApproximateNumberOfMessagesVisible" && fmt.Sprint(a["Dimensions"]) == queueDims
		}
		if !onQueue {
			p.add("%s: does not alarm on %s's ApproximateNumberOfMessagesVisible", alarm, queue)
		}
	}

	// GPU instances: added and removed by ECS with the tasks.
	for _, cp := range resourcesOf(raw, "AWS::ECS::CapacityProvider") {
		g := at(props(raw, cp), "AutoScalingGroupProvider")
		if at(g, "ManagedScaling", "Status") != "ENABLED" {
			p.add("%s: ManagedScaling is not ENABLED", cp)
		}
		if n, _ := number(at(g, "ManagedScaling", "TargetCapacity")); n != 100 {
			p.add("%s: ManagedScaling.TargetCapacity %v, want 100", cp, at(g, "ManagedScaling", "TargetCapacity"))
		}
		asg := props(raw, refName(at(g, "AutoScalingGroupArn")))
		if asg == nil {
			p.add("%s: AutoScalingGroupArn is not a Ref of this template's group", cp)
			continue
		}
		if n, _ := number(asg["MinSize"]); n != 0 {
			p.add("%s: MinSize %v, want 0 (no GPU instance while no GPU task runs)", refName(at(g, "AutoScalingGroupArn")), asg["MinSize"])
		}
		if _, set := asg["DesiredCapacity"]; set {
			p.add("%s: DesiredCapacity is set; managed scaling owns it", refName(at(g, "AutoScalingGroupArn")))
		}
		if at(g, "ManagedTerminationProtection") == "ENABLED" && asg["NewInstancesProtectedFromScaleIn"] != true {
			p.add("%s: ManagedTerminationProtection needs NewInstancesProtectedFromScaleIn true on the group", cp)
		}
	}
	return p
}

// checkStopTimeout: ECS stops a task (scale-in, deployment) with SIGTERM
// and kills it StopTimeout later; the worker drains within its
// --shutdown-timeout. Each worker container sets both, and the first
// outlasts the second, so no task is killed mid-message.
func checkStopTimeout(raw any) problems {
	var p problems
	for td, c := range workerContainers(raw) {
		shutdown := str(env(c["Environment"])["VERDICT_SHUTDOWN_TIMEOUT"])
		cmd := stringsOf(c["Command"])
		for i, a := range cmd {
			if v, ok := strings.CutPrefix(a, "--shutdown-timeout="); ok {
				shutdown = v
			} else if a == "--shutdown-timeout" && i+1 < len(cmd) {
				shutdown = cmd[i+1]
			}
		}
		d, err := time.ParseDuration(shutdown)
		if err != nil {
			p.add("Resources.%s: the worker's shutdown timeout %q is not set or not a duration (the default could change unseen): %v", td, shutdown, err)
			continue
		}
		st, ok := number(c["StopTimeout"])
		stop := time.Duration(st) * time.Second
		switch {
		case !ok:
			p.add("Resources.%s: no StopTimeout on the worker container", td)
		case stop > ecsStopTimeout:
			p.add("Resources.%s: StopTimeout %v is above the ECS maximum %v", td, stop, ecsStopTimeout)
		case stop <= d:
			p.add("Resources.%s: StopTimeout %v is not longer than the worker's shutdown timeout %v: a scale-in would kill it mid-message", td, stop, d)
		}
	}
	return p
}

// TestResultsAndScalingChecksCatch breaks the parsed template in the ways
// the checks above exist for: each must be reported.
func TestResultsAndScalingChecksCatch(t *testing.T) {
	b, err := os.ReadFile("cloudformation.json")
	if err != nil {
		t.Fatal(err)
	}
	res := func(r obj, name string) obj { return props(r, name) }
	for _, tc := range []struct {
		name   string
		change func(r obj)
		want   string
	}{
		{"provisioned", func(r obj) { res(r, resultsTable)["BillingMode"] = "PROVISIONED" }, "want PAY_PER_REQUEST"},
		{"no sse", func(r obj) { delete(res(r, resultsTable), "SSESpecification") }, "SSEEnabled is not true"},
		{"ttl attribute", func(r obj) { at(res(r, resultsTable), "TimeToLiveSpecification").(obj)["AttributeName"] = "ttl" }, "want expires_at enabled"},
		{"key order", func(r obj) {
			ks := res(r, resultsTable)["KeySchema"].([]any)
			ks[0], ks[1] = ks[1], ks[0]
		}, `KeySchema "sk RANGE, request_id HASH"`},
		{"first_seen a string", func(r obj) { at(res(r, resultsTable), "AttributeDefinitions", 3).(obj)["AttributeType"] = "S" }, "AttributeDefinitions"},
		{"index name", func(r obj) { at(res(r, resultsTable), "GlobalSecondaryIndexes", 0).(obj)["IndexName"] = "by_decision" }, `global secondary indexes by_decision`},
		{"index projection", func(r obj) {
			at(res(r, resultsTable), "GlobalSecondaryIndexes", 0, "Projection").(obj)["ProjectionType"] = "ALL"
		}, "decision: tenant_decision HASH, first_seen RANGE (ALL)"},
		{"ttl days", func(r obj) { at(r, "Mappings", "ResultsRetention", "7").(obj)["Ttl"] = "7d" }, "is not 7 days"},
		{"worker without table", func(r obj) {
			c := at(res(r, "GpuWorkerTaskDefinition"), "ContainerDefinitions", 1).(obj)
			c["Environment"] = slices.DeleteFunc(c["Environment"].([]any), func(e any) bool { return at(e, "Name") == "VERDICT_RESULTS_TABLE" })
		}, "GpuWorkerTaskDefinition: VERDICT_RESULTS_TABLE"},
		{"lambda without ttl", func(r obj) {
			delete(at(res(r, "FrontDoorFunction"), "Environment", "Variables").(obj), "VERDICT_RESULTS_TTL")
		}, "FrontDoorFunction: VERDICT_RESULTS_TTL"},
		{"front door cannot batch write", func(r obj) {
			s := at(res(r, "FrontDoorRole"), "Policies", 0, "PolicyDocument", "Statement", 1).(obj)
			s["Action"] = slices.DeleteFunc(slices.Clone(s["Action"].([]any)), func(a any) bool { return a == "dynamodb:BatchWriteItem" })
		}, "FrontDoorRole: no statement allows"},
		{"worker not on the index", func(r obj) {
			s := at(res(r, "WorkerTaskRole"), "Policies", 0, "PolicyDocument", "Statement", 2).(obj)
			s["Resource"] = s["Resource"].([]any)[:1]
		}, "WorkerTaskRole: no statement allows"},
		{"no table output", func(r obj) { delete(r["Outputs"].(obj), "ResultsTableName") }, "results table's name"},
		{"no container insights", func(r obj) { delete(res(r, "Cluster"), "ClusterSettings") }, "containerInsights is not enabled"},
		{"min above 0", func(r obj) { at(r, "Parameters", "MinGpuWorkers").(obj)["MinValue"] = 1 }, "GpuWorkerScalableTarget: MinCapacity is not a parameter that allows 0"},
		{"no scalable target", func(r obj) { delete(r["Resources"].(obj), "CpuWorkerScalableTarget") }, "CpuWorkerService: no scalable target"},
		{"expression", func(r obj) {
			at(res(r, "GpuBacklogScalingPolicy"), "TargetTrackingScalingPolicyConfiguration", "CustomizedMetricSpecification", "Metrics", 2).(obj)["Expression"] = "m1 / m2"
		}, "GpuBacklogScalingPolicy: e1"},
		{"other queue", func(r obj) {
			at(res(r, "CpuBacklogScalingPolicy"), "TargetTrackingScalingPolicyConfiguration", "CustomizedMetricSpecification", "Metrics", 0, "MetricStat", "Metric", "Dimensions", 0).(obj)["Value"] = obj{"Fn::GetAtt": []any{"GpuQueue", "QueueName"}}
		}, "CpuBacklogScalingPolicy: m1 is not CpuQueue's"},
		{"desired, not running", func(r obj) {
			at(res(r, "CpuBacklogScalingPolicy"), "TargetTrackingScalingPolicyConfiguration", "CustomizedMetricSpecification", "Metrics", 1, "MetricStat", "Metric").(obj)["MetricName"] = "DesiredTaskCount"
		}, "CpuBacklogScalingPolicy: m2 is not CpuWorkerService's RunningTaskCount"},
		{"no step policy", func(r obj) { delete(r["Resources"].(obj), "GpuScaleFromZeroPolicy") }, "GpuWorkerService: no step scaling policy"},
		{"alarm fires the other pool", func(r obj) {
			res(r, "CpuQueueWaitingAlarm")["AlarmActions"] = []any{obj{"Ref": "GpuScaleFromZeroPolicy"}}
		}, "CpuWorkerService: no alarm triggers CpuScaleFromZeroPolicy"},
		{"alarm on the other queue", func(r obj) {
			at(res(r, "GpuQueueWaitingAlarm"), "Metrics", 0, "MetricStat", "Metric", "Dimensions", 0).(obj)["Value"] = obj{"Fn::GetAtt": []any{"CpuQueue", "QueueName"}}
		}, "GpuQueueWaitingAlarm: does not alarm on GpuQueue's"},
		{"missing data breaches", func(r obj) { res(r, "GpuQueueWaitingAlarm")["TreatMissingData"] = "breaching" }, "want notBreaching"},
		{"unmanaged gpu scaling", func(r obj) {
			at(res(r, "GpuCapacityProvider"), "AutoScalingGroupProvider", "ManagedScaling").(obj)["Status"] = "DISABLED"
		}, "ManagedScaling is not ENABLED"},
		{"unprotected instances", func(r obj) { res(r, "GpuAutoScalingGroup")["NewInstancesProtectedFromScaleIn"] = false }, "needs NewInstancesProtectedFromScaleIn"},
		{"gpu group floor", func(r obj) { res(r, "GpuAutoScalingGroup")["MinSize"] = "1" }, "MinSize 1, want 0"},
		{"stop too soon", func(r obj) {
			at(res(r, "CpuWorkerTaskDefinition"), "ContainerDefinitions", 1).(obj)["StopTimeout"] = 60
		}, "CpuWorkerTaskDefinition: StopTimeout 1m0s is not longer"},
		{"stop above ECS", func(r obj) {
			at(res(r, "GpuWorkerTaskDefinition"), "ContainerDefinitions", 1).(obj)["StopTimeout"] = 300
		}, "above the ECS maximum"},
		{"shutdown by flag", func(r obj) {
			c := at(res(r, "GpuWorkerTaskDefinition"), "ContainerDefinitions", 1).(obj)
			c["Command"] = []any{"worker", "--shutdown-timeout", "2m"}
		}, "GpuWorkerTaskDefinition: StopTimeout 2m0s is not longer than the worker's shutdown timeout 2m0s"},
		{"shutdown unset", func(r obj) {
			c := at(res(r, "CpuWorkerTaskDefinition"), "ContainerDefinitions", 1).(obj)
			c["Environment"] = slices.DeleteFunc(c["Environment"].([]any), func(e any) bool { return at(e, "Name") == "VERDICT_SHUTDOWN_TIMEOUT" })
		}, "CpuWorkerTaskDefinition: the worker's shutdown timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r obj
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			tc.change(r)
			var p problems
			p = append(p, checkResultsTable(r)...)
			p = append(p, checkScaling(r)...)
			p = append(p, checkStopTimeout(r)...)
			if !strings.Contains(strings.Join(p, "\n"), tc.want) {
				t.Errorf("want a problem containing %q, got %q", tc.want, p)
			}
		})
	}
}

// indexes describes global secondary indexes as "name: keys (projection)"
// lines, in order.
func indexes(v any) string {
	gs, _ := v.([]any)
	var out []string
	for _, g := range gs {
		out = append(out, fmt.Sprintf("%s: %s (%v)", str(at(g, "IndexName")), keySchema(at(g, "KeySchema")), at(g, "Projection", "ProjectionType")))
	}
	return strings.Join(out, "; ")
}
