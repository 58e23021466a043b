package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The cascade as the stack wires it: the CPU pool is the first stage and
// sends what its policy escalates on to the GPU pool's queue; the GPU
// pool is the last stage. Each pool has its own model.
const (
	cpuModel = "s3://cpu-models/small/model.gguf"
	gpuModel = "s3://gpu-models/big/model.gguf"
	// policyURI is a policy with escalate clauses; the cascade escalates
	// only when both pools load one.
	policyURI = "s3://verdict-policies/cascade/policy.yaml"
)

// noValue is what Ref AWS::NoValue evaluates to: the evaluator drops it
// from the map or list that holds it, as CloudFormation does.
var noValue = &struct{ noValue bool }{true}

// evaluator evaluates the template's intrinsic functions for one set of
// parameter values (a parameter not given takes its Default), as
// CloudFormation would when it creates the stack. Without physical, a
// resource's Ref evaluates to "ref:NAME" and a Fn::GetAtt to
// "getatt:NAME.ATTR", so that what a value points at stays visible; with
// physical (a created stack's resources by logical name), to the created
// resource's id, name or ARN.
type evaluator struct {
	raw      any
	params   map[string]string
	physical map[string]string
}

func (e evaluator) ref(name string) any {
	switch name {
	case "AWS::NoValue":
		return noValue
	case "AWS::Partition":
		return "aws"
	case "AWS::Region":
		return "us-east-1"
	case "AWS::AccountId":
		return "123456789012"
	case "AWS::StackName":
		return "verdict"
	}
	if v, ok := e.params[name]; ok {
		return v
	}
	if p, ok := at(e.raw, "Parameters", name).(obj); ok {
		if d, ok := p["Default"]; ok {
			return d
		}
		return fmt.Errorf("parameter %s has no value and no default", name)
	}
	if e.physical != nil {
		return e.physical[name]
	}
	return "ref:" + name
}

// getAtt is Fn::GetAtt of a resource: with physical, a service's Name or
// a queue's QueueName (the last part of its id) or else the id itself (an
// ARN).
func (e evaluator) getAtt(res, attr string) string {
	if e.physical == nil {
		return "getatt:" + res + "." + attr
	}
	id := e.physical[res]
	switch attr {
	case "Name", "QueueName":
		return id[strings.LastIndex(id, "/")+1:]
	}
	return id
}

// condition evaluates a condition of the Conditions section, or an
// expression of one.
func (e evaluator) condition(v any) (bool, error) {
	if name, ok := v.(string); ok {
		c, ok := at(e.raw, "Conditions", name).(obj)
		if !ok {
			return false, fmt.Errorf("no condition %q", name)
		}
		return e.condition(c)
	}
	m, _ := v.(obj)
	var args []any
	for _, k := range []string{"Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or"} {
		if l, ok := m[k].([]any); ok {
			args = l
		}
	}
	switch {
	case m["Condition"] != nil:
		return e.condition(str(m["Condition"]))
	case m["Fn::Equals"] != nil && len(args) == 2:
		a, b := e.eval(args[0]), e.eval(args[1])
		return fmt.Sprint(a) == fmt.Sprint(b), nil
	case m["Fn::Not"] != nil && len(args) == 1:
		c, err := e.condition(args[0])
		return !c, err
	case m["Fn::And"] != nil || m["Fn::Or"] != nil:
		and := m["Fn::And"] != nil
		for _, a := range args {
			c, err := e.condition(a)
			if err != nil || c != and {
				return c, err
			}
		}
		return and, nil
	}
	return false, fmt.Errorf("not a condition: %v", v)
}

func (e evaluator) eval(v any) any {
	switch x := v.(type) {
	case obj:
		if len(x) == 1 {
			for k, a := range x {
				l, _ := a.([]any)
				switch k {
				case "Ref":
					return e.ref(str(a))
				case "Fn::GetAtt":
					if len(l) == 2 {
						return e.getAtt(str(l[0]), str(l[1]))
					}
				case "Fn::If":
					if len(l) == 3 {
						c, err := e.condition(str(l[0]))
						if err != nil {
							return err
						}
						if c {
							return e.eval(l[1])
						}
						return e.eval(l[2])
					}
				case "Fn::Join":
					if len(l) == 2 {
						var parts []string
						items, _ := e.eval(l[1]).([]any)
						for _, it := range items {
							parts = append(parts, fmt.Sprint(it))
						}
						return strings.Join(parts, str(l[0]))
					}
				case "Fn::Split":
					if len(l) == 2 {
						var out []any
						for _, s := range strings.Split(fmt.Sprint(e.eval(l[1])), str(l[0])) {
							out = append(out, s)
						}
						return out
					}
				case "Fn::Select":
					if len(l) == 2 {
						i, _ := number(e.eval(l[0]))
						items, _ := e.eval(l[1]).([]any)
						if int(i) < len(items) {
							return items[int(i)]
						}
						return fmt.Errorf("Fn::Select %v of %v", i, items)
					}
				case "Fn::FindInMap":
					if len(l) == 3 {
						return at(e.raw, "Mappings", fmt.Sprint(e.eval(l[0])), fmt.Sprint(e.eval(l[1])), fmt.Sprint(e.eval(l[2])))
					}
				case "Fn::Sub":
					s, vars := str(a), obj{}
					if len(l) == 2 {
						s, _ = l[0].(string)
						vars, _ = l[1].(obj)
					}
					return subVar.ReplaceAllStringFunc(s, func(m string) string {
						n := m[2 : len(m)-1]
						if v, ok := vars[n]; ok {
							return fmt.Sprint(e.eval(v))
						}
						if res, attr, ok := strings.Cut(n, "."); ok {
							return e.getAtt(res, attr)
						}
						return fmt.Sprint(e.ref(n))
					})
				}
			}
		}
		out := obj{}
		for k, vv := range x {
			if r := e.eval(vv); r != noValue {
				out[k] = r
			}
		}
		return out
	case []any:
		var out []any
		for _, vv := range x {
			if r := e.eval(vv); r != noValue {
				out = append(out, r)
			}
		}
		return out
	}
	return v
}

// s3Resource is the IAM resource of the objects of an s3:// URI's bucket.
func s3Resource(uri string) string {
	bucket, _, _ := strings.Cut(strings.TrimPrefix(uri, "s3://"), "/")
	return "arn:aws:s3:::" + bucket + "/*"
}

// evalResources: every resource on which some Allow statement of role,
// evaluated, grants action.
func evalResources(e evaluator, role, action string) []string {
	var out []string
	ps, _ := at(e.eval(props(e.raw, role)), "Policies").([]any)
	for _, p := range ps {
		ss, _ := at(p, "PolicyDocument", "Statement").([]any)
		for _, s := range ss {
			if at(s, "Effect") == "Allow" && slices.Contains(stringsOf(at(s, "Action")), action) {
				for _, r := range asList(at(s, "Resource")) {
					out = append(out, fmt.Sprint(r))
				}
			}
		}
	}
	return out
}

// asList: a list as it is, anything else as a list of one.
func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// evalAllows: some Allow statement of role, evaluated, grants action on
// resource (evaluated too: a string).
func evalAllows(e evaluator, role, action, resource string) bool {
	ps, _ := at(e.eval(props(e.raw, role)), "Policies").([]any)
	for _, p := range ps {
		ss, _ := at(p, "PolicyDocument", "Statement").([]any)
		for _, s := range ss {
			if at(s, "Effect") != "Allow" || !slices.Contains(stringsOf(at(s, "Action")), action) {
				continue
			}
			if slices.Contains(stringsOf(at(s, "Resource")), resource) {
				return true
			}
		}
	}
	return false
}

// poolQueues: the queue each pool's workers read, by which a worker task
// definition's pool is known.
var poolQueues = map[string]string{"cpu": "CpuQueue", "gpu": "GpuQueue"}

// checkCascade: each worker names its pool (VERDICT_POOL) after the queue
// it reads; the CPU worker escalates to the GPU pool's queue
// (VERDICT_ESCALATE gpu=<GpuQueue URL>) and its role may send there; no
// worker escalates to its own pool or to a pool no worker of the stack
// serves. The GPU worker's model is GpuModelS3Uri when it is given and
// ModelS3Uri otherwise, the CPU worker's always ModelS3Uri. With
// PolicyS3Uri given, both workers wait for an init container that copies
// it onto a volume they mount and name that copy in VERDICT_POLICY (the
// policy's escalate clauses are what make the cascade escalate); without
// it, VERDICT_POLICY is empty or unset (the permissive default) and no
// container copies anything but the model. The task role may read each
// model's bucket and the policy's, and no other bucket.
func checkCascade(raw any) problems {
	var p problems
	// The parameters: ModelS3Uri required as before, GpuModelS3Uri and
	// PolicyS3Uri optional.
	if _, ok := at(raw, "Parameters", "ModelS3Uri", "Default").(string); ok {
		p.add("Parameters.ModelS3Uri has a default: a stack created without it would start workers without a model")
	}
	for _, opt := range []struct {
		name, what  string
		match, miss []string
	}{
		{"GpuModelS3Uri", "the GPU pool's model", []string{"", gpuModel}, []string{"s3://b/model.bin", "https://b/model.gguf"}},
		{"PolicyS3Uri", "the policy file of both pools", []string{"", policyURI, "s3://b/p.yml"}, []string{"s3://b/policy.json", "https://b/policy.yaml", "s3://b/model.gguf", "s3://b"}},
	} {
		gp, _ := at(raw, "Parameters", opt.name).(obj)
		if gp == nil {
			p.add("Parameters: no %s (%s)", opt.name, opt.what)
			continue
		}
		if d, ok := gp["Default"].(string); !ok || d != "" {
			p.add("Parameters.%s: Default %v, want \"\" (a stack created with today's parameters stays as it was)", opt.name, gp["Default"])
		}
		re, err := regexp.Compile(str(gp["AllowedPattern"]))
		if err != nil || gp["AllowedPattern"] == nil {
			p.add("Parameters.%s: AllowedPattern %v: %v", opt.name, gp["AllowedPattern"], err)
			continue
		}
		for _, uri := range append(slices.Clone(opt.match), opt.miss...) {
			if want := slices.Contains(opt.match, uri); re.MatchString(uri) != want {
				p.add("Parameters.%s: AllowedPattern %q matches %q: %v, want %v", opt.name, re, uri, !want, want)
			}
		}
	}

	workers := workerContainers(raw)
	byPool := map[string]string{} // pool → task definition
	for td, c := range workers {
		q := refName(env(c["Environment"])["VERDICT_QUEUE_URL"])
		for pool, queue := range poolQueues {
			if q == queue {
				byPool[pool] = td
			}
		}
	}
	if byPool["cpu"] == "" || byPool["gpu"] == "" {
		p.add("want a worker task definition reading CpuQueue and one reading GpuQueue, found %v", byPool)
		return p
	}

	for _, gpu := range []*string{nil, ptr(""), ptr(gpuModel)} {
		for _, pol := range []*string{nil, ptr(""), ptr(policyURI)} {
			p = append(p, checkCascadeWith(raw, byPool, gpu, pol)...)
		}
	}
	// The environment is checked under each set of parameters: say each
	// problem once.
	seen := map[string]bool{}
	return slices.DeleteFunc(p, func(s string) bool { dup := seen[s]; seen[s] = true; return dup })
}

func ptr[T any](v T) *T { return &v }

// checkCascadeWith checks both pools' task definitions with the template's
// functions evaluated for ModelS3Uri=cpuModel and GpuModelS3Uri and
// PolicyS3Uri as given (nil: unset, so the default).
func checkCascadeWith(raw any, byPool map[string]string, gpu, pol *string) problems {
	var p problems
	params := map[string]string{"ModelS3Uri": cpuModel}
	describe := func(name string, v *string) string {
		if v == nil {
			return name + " unset"
		}
		params[name] = *v
		return fmt.Sprintf("%s=%q", name, *v)
	}
	given := describe("GpuModelS3Uri", gpu) + ", " + describe("PolicyS3Uri", pol)
	e := evaluator{raw: raw, params: params}
	for _, pool := range []string{"cpu", "gpu"} {
		td := byPool[pool]
		tdp, _ := e.eval(props(raw, td)).(obj)
		var worker obj
		cs, _ := tdp["ContainerDefinitions"].([]any)
		for _, c := range cs {
			if at(c, "Command", 0) == "worker" {
				worker = c.(obj)
			}
		}
		// The init containers: those the worker waits for to have exited
		// with 0. The model container is the one that copies a .gguf.
		var inits []obj
		var model obj
		deps, _ := worker["DependsOn"].([]any)
		for _, dep := range deps {
			for _, c := range cs {
				if at(c, "Name") == at(dep, "ContainerName") && at(dep, "Condition") == "SUCCESS" {
					inits = append(inits, c.(obj))
					if strings.HasSuffix(str(at(c, "Command", 3)), ".gguf") {
						model = c.(obj)
					}
				}
			}
		}
		for _, c := range inits {
			if at(c, "Essential") != false {
				p.add("Resources.%s (%s pool): container %v, which the worker waits for to exit, is essential: its exit would stop the task", td, pool, at(c, "Name"))
			}
		}
		// A copy from an empty or missing source fails the task: only a
		// given model or policy is copied.
		for _, c := range cs {
			cmd := stringsOf(at(c, "Command"))
			if len(cmd) >= 2 && cmd[0] == "s3" && cmd[1] == "cp" && (len(cmd) < 4 || !strings.HasPrefix(cmd[2], "s3://") || len(cmd[2]) <= len("s3://")) {
				p.add("Resources.%s (%s pool), %s: container %v runs %q: a copy from no S3 object fails the task", td, pool, given, at(c, "Name"), cmd)
			}
		}
		want := cpuModel
		if pool == "gpu" && params["GpuModelS3Uri"] != "" {
			want = gpuModel
		}
		cmd := stringsOf(model["Command"])
		if len(cmd) < 3 || cmd[0] != "s3" || cmd[1] != "cp" || cmd[2] != want {
			p.add("Resources.%s (%s pool), %s: the worker's model container runs %q, want s3 cp %s …", td, pool, given, cmd, want)
		}
		role := strings.TrimSuffix(strings.TrimPrefix(str(tdp["TaskRoleArn"]), "getatt:"), ".Arn")
		if !evalAllows(e, role, "s3:GetObject", s3Resource(want)) {
			p.add("%s (task role of %s), %s: s3:GetObject is not allowed on %s", role, td, given, s3Resource(want))
		}

		we := env(worker["Environment"])
		policyPath := str(we["VERDICT_POLICY"])
		if params["PolicyS3Uri"] == "" {
			if policyPath != "" {
				p.add("Resources.%s (%s pool), %s: VERDICT_POLICY %q, want empty or unset (the permissive default; no policy file is copied)", td, pool, given, policyPath)
			}
			for _, c := range inits {
				if c := stringsOf(c["Command"]); len(c) >= 3 && c[0] == "s3" && c[1] == "cp" && c[2] != want {
					p.add("Resources.%s (%s pool), %s: the worker waits for a copy of %s, want only its model's", td, pool, given, c[2])
				}
			}
		} else {
			// The policy container: one the worker waits for that copies
			// PolicyS3Uri to the file VERDICT_POLICY names, on a volume
			// the worker mounts at the same place.
			wvol, wrel := mountedAt(worker, policyPath)
			var copies []string
			found := false
			for _, c := range inits {
				cmd := stringsOf(c["Command"])
				if len(cmd) < 4 || cmd[0] != "s3" || cmd[1] != "cp" || cmd[2] != policyURI {
					continue
				}
				vol, rel := mountedAt(c, cmd[3])
				copies = append(copies, fmt.Sprintf("%v: %s on volume %q", c["Name"], cmd[3], vol))
				if vol != "" && vol == wvol && rel == wrel {
					found = true
				}
			}
			switch {
			case !strings.HasPrefix(policyPath, "/"):
				p.add("Resources.%s (%s pool), %s: VERDICT_POLICY %q, want the path of the copied policy", td, pool, given, policyPath)
			case wvol == "":
				p.add("Resources.%s (%s pool), %s: VERDICT_POLICY %q is on no volume the worker mounts", td, pool, given, policyPath)
			case !found:
				p.add("Resources.%s (%s pool), %s: the worker does not wait (SUCCESS) for a container that copies %s to its VERDICT_POLICY %q on volume %q; copies the worker waits for: %q", td, pool, given, policyURI, policyPath, wvol, copies)
			}
			if !evalAllows(e, role, "s3:GetObject", s3Resource(policyURI)) {
				p.add("%s (task role of %s), %s: s3:GetObject is not allowed on %s (the policy's bucket)", role, td, given, s3Resource(policyURI))
			}
		}

		// Least privilege: the role reads the models' and the policy's
		// buckets and nothing else.
		mayRead := map[string]bool{s3Resource(cpuModel): true}
		if params["GpuModelS3Uri"] != "" {
			mayRead[s3Resource(gpuModel)] = true
		}
		if params["PolicyS3Uri"] != "" {
			mayRead[s3Resource(policyURI)] = true
		}
		for _, r := range evalResources(e, role, "s3:GetObject") {
			if !mayRead[r] {
				p.add("%s (task role of %s), %s: s3:GetObject is allowed on %s, which holds neither a model nor the policy given", role, td, given, r)
			}
		}

		if got := str(we["VERDICT_POOL"]); got != pool {
			p.add("Resources.%s: VERDICT_POOL %q, want %q (it reads %s)", td, got, pool, poolQueues[pool])
		}
		esc, set := we["VERDICT_ESCALATE"]
		targets := map[string]bool{}
		if set {
			for _, part := range strings.Split(fmt.Sprint(esc), ",") {
				to, queue, ok := strings.Cut(strings.TrimSpace(part), "=")
				switch {
				case !ok || poolQueues[to] == "":
					p.add("Resources.%s: VERDICT_ESCALATE %q: %q is not POOL=QUEUE with a pool cpu or gpu", td, esc, part)
				case to == pool:
					p.add("Resources.%s: VERDICT_ESCALATE %q escalates to its own pool %s", td, esc, pool)
				case queue != "ref:"+poolQueues[to]:
					p.add("Resources.%s: VERDICT_ESCALATE %q sends %s's decisions to %s, not to %s (the queue the %s workers read)", td, esc, to, queue, poolQueues[to], to)
				default:
					targets[to] = true
					if !evalAllows(e, role, "sqs:SendMessage", "getatt:"+poolQueues[to]+".Arn") {
						p.add("%s (task role of %s): sqs:SendMessage is not allowed on %s (escalated decisions go there)", role, td, poolQueues[to])
					}
				}
			}
		}
		if pool == "cpu" && !targets["gpu"] {
			p.add("Resources.%s: VERDICT_ESCALATE is %v, want gpu=<GpuQueue URL> (a policy that escalates to gpu would stop the CPU worker)", td, esc)
		}
	}
	return p
}

// mountedAt: the volume of container c's mount point that holds path, and
// path inside that volume ("" when no mount point holds it).
func mountedAt(c obj, path string) (volume, rel string) {
	best := -1
	ms, _ := c["MountPoints"].([]any)
	for _, m := range ms {
		dir := strings.TrimSuffix(str(at(m, "ContainerPath")), "/")
		if r, ok := strings.CutPrefix(path, dir+"/"); ok && dir != "" && len(dir) > best {
			best, volume, rel = len(dir), str(at(m, "SourceVolume")), r
		}
	}
	return volume, rel
}

// TestCascadeChecksCatch breaks the template in the ways checkCascade
// exists for: each must be reported.
func TestCascadeChecksCatch(t *testing.T) {
	b, err := os.ReadFile("cloudformation.json")
	if err != nil {
		t.Fatal(err)
	}
	container := func(r obj, td string, i int) obj { return at(props(r, td), "ContainerDefinitions", i).(obj) }
	dropEnv := func(c obj, name string) {
		c["Environment"] = slices.DeleteFunc(c["Environment"].([]any), func(e any) bool { return at(e, "Name") == name })
	}
	setEnv := func(c obj, name string, v any) {
		for _, e := range c["Environment"].([]any) {
			if at(e, "Name") == name {
				e.(obj)["Value"] = v
			}
		}
	}
	policyContainer := func(r obj, td string) obj {
		for _, c := range at(props(r, td), "ContainerDefinitions").([]any) {
			if at(c, "Name") == "policy" {
				return c.(obj)
			}
		}
		t.Fatalf("%s has no container named policy", td)
		return nil
	}
	s3Statement := func(r obj) obj {
		return at(props(r, "WorkerTaskRole"), "Policies", 0, "PolicyDocument", "Statement", 3).(obj)
	}
	for _, tc := range []struct {
		name   string
		change func(r obj)
		want   string
	}{
		{"no escalate", func(r obj) { dropEnv(container(r, "CpuWorkerTaskDefinition", 1), "VERDICT_ESCALATE") },
			"CpuWorkerTaskDefinition: VERDICT_ESCALATE is <nil>, want gpu="},
		{"escalate to the cpu queue", func(r obj) {
			setEnv(container(r, "CpuWorkerTaskDefinition", 1), "VERDICT_ESCALATE", obj{"Fn::Sub": "gpu=${CpuQueue}"})
		}, "sends gpu's decisions to ref:CpuQueue"},
		{"escalate to itself", func(r obj) {
			setEnv(container(r, "CpuWorkerTaskDefinition", 1), "VERDICT_ESCALATE", obj{"Fn::Sub": "cpu=${CpuQueue}"})
		}, "escalates to its own pool cpu"},
		{"escalate without a pool name", func(r obj) {
			setEnv(container(r, "CpuWorkerTaskDefinition", 1), "VERDICT_ESCALATE", obj{"Ref": "GpuQueue"})
		}, "is not POOL=QUEUE"},
		{"cpu worker without pool", func(r obj) { dropEnv(container(r, "CpuWorkerTaskDefinition", 1), "VERDICT_POOL") },
			`CpuWorkerTaskDefinition: VERDICT_POOL "", want "cpu"`},
		{"gpu worker says cpu", func(r obj) { setEnv(container(r, "GpuWorkerTaskDefinition", 1), "VERDICT_POOL", "cpu") },
			`GpuWorkerTaskDefinition: VERDICT_POOL "cpu", want "gpu"`},
		{"cannot send to the gpu queue", func(r obj) {
			s := at(props(r, "WorkerTaskRole"), "Policies", 0, "PolicyDocument", "Statement", 1).(obj)
			s["Resource"] = s["Resource"].([]any)[:1]
		}, "sqs:SendMessage is not allowed on GpuQueue"},
		{"gpu worker ignores GpuModelS3Uri", func(r obj) {
			at(container(r, "GpuWorkerTaskDefinition", 0), "Command").([]any)[2] = obj{"Ref": "ModelS3Uri"}
		}, `GpuModelS3Uri="s3://gpu-models/big/model.gguf", PolicyS3Uri unset: the worker's model container runs`},
		{"gpu worker always GpuModelS3Uri", func(r obj) {
			at(container(r, "GpuWorkerTaskDefinition", 0), "Command").([]any)[2] = obj{"Ref": "GpuModelS3Uri"}
		}, `GpuModelS3Uri unset, PolicyS3Uri unset: the worker's model container runs ["s3" "cp" "" `},
		{"cpu worker loads the gpu model", func(r obj) {
			at(container(r, "CpuWorkerTaskDefinition", 0), "Command").([]any)[2] = at(container(r, "GpuWorkerTaskDefinition", 0), "Command", 2)
		}, "CpuWorkerTaskDefinition (cpu pool), GpuModelS3Uri="},
		{"role cannot read the gpu model", func(r obj) {
			s := s3Statement(r)
			s["Resource"] = at(s, "Resource", "Fn::If", 2, "Fn::If", 2)
		}, "s3:GetObject is not allowed on arn:aws:s3:::gpu-models/*"},
		{"gpu model required", func(r obj) { delete(at(r, "Parameters", "GpuModelS3Uri").(obj), "Default") },
			"Parameters.GpuModelS3Uri: Default <nil>"},
		{"gpu model pattern refuses empty", func(r obj) {
			at(r, "Parameters", "GpuModelS3Uri").(obj)["AllowedPattern"] = at(r, "Parameters", "ModelS3Uri", "AllowedPattern")
		}, `matches "": false, want true`},
		{"condition inverted", func(r obj) {
			c := at(r, "Conditions").(obj)
			c["HasGpuModel"] = at(c, "HasGpuModel", "Fn::Not", 0)
		}, "the worker's model container runs"},
		{"no gpu model parameter", func(r obj) { delete(r["Parameters"].(obj), "GpuModelS3Uri") }, "Parameters: no GpuModelS3Uri"},
		// The policy.
		{"gpu worker without VERDICT_POLICY", func(r obj) { dropEnv(container(r, "GpuWorkerTaskDefinition", 1), "VERDICT_POLICY") },
			`GpuWorkerTaskDefinition (gpu pool), GpuModelS3Uri unset, PolicyS3Uri="s3://verdict-policies/cascade/policy.yaml": VERDICT_POLICY "", want the path`},
		{"VERDICT_POLICY names another file", func(r obj) {
			setEnv(container(r, "CpuWorkerTaskDefinition", 1), "VERDICT_POLICY", obj{"Fn::If": []any{"HasPolicy", "/opt/ml/model/cascade.yaml", ""}})
		}, `CpuWorkerTaskDefinition (cpu pool), GpuModelS3Uri unset, PolicyS3Uri="s3://verdict-policies/cascade/policy.yaml": the worker does not wait (SUCCESS) for a container that copies`},
		{"VERDICT_POLICY always set", func(r obj) {
			setEnv(container(r, "CpuWorkerTaskDefinition", 1), "VERDICT_POLICY", "/opt/ml/model/policy.yaml")
		}, `CpuWorkerTaskDefinition (cpu pool), GpuModelS3Uri unset, PolicyS3Uri unset: VERDICT_POLICY "/opt/ml/model/policy.yaml", want empty or unset`},
		{"policy container not waited for", func(r obj) {
			c := container(r, "CpuWorkerTaskDefinition", 1)
			c["DependsOn"] = slices.DeleteFunc(c["DependsOn"].([]any), func(d any) bool { return at(d, "ContainerName") == "policy" })
		}, `CpuWorkerTaskDefinition (cpu pool), GpuModelS3Uri unset, PolicyS3Uri="s3://verdict-policies/cascade/policy.yaml": the worker does not wait (SUCCESS) for a container that copies`},
		{"policy container only started", func(r obj) {
			for _, d := range container(r, "GpuWorkerTaskDefinition", 1)["DependsOn"].([]any) {
				if at(d, "ContainerName") == "policy" {
					d.(obj)["Condition"] = "START"
				}
			}
		}, `GpuWorkerTaskDefinition (gpu pool), GpuModelS3Uri unset, PolicyS3Uri="s3://verdict-policies/cascade/policy.yaml": the worker does not wait (SUCCESS)`},
		{"policy container essential", func(r obj) { policyContainer(r, "GpuWorkerTaskDefinition")["Essential"] = true },
			"GpuWorkerTaskDefinition (gpu pool): container policy, which the worker waits for to exit, is essential"},
		{"policy copied off the volume", func(r obj) { delete(policyContainer(r, "CpuWorkerTaskDefinition"), "MountPoints") },
			`copies the worker waits for: ["policy: /opt/ml/model/policy.yaml on volume \"\""]`},
		{"policy container ignores PolicyS3Uri", func(r obj) {
			at(policyContainer(r, "GpuWorkerTaskDefinition"), "Command", "Fn::If").([]any)[1] = []any{"--version"}
		}, `GpuWorkerTaskDefinition (gpu pool), GpuModelS3Uri="s3://gpu-models/big/model.gguf", PolicyS3Uri="s3://verdict-policies/cascade/policy.yaml": the worker does not wait (SUCCESS) for a container that copies`},
		{"policy container always copies", func(r obj) {
			c := policyContainer(r, "CpuWorkerTaskDefinition")
			c["Command"] = at(c, "Command", "Fn::If", 1)
		}, `CpuWorkerTaskDefinition (cpu pool), GpuModelS3Uri="", PolicyS3Uri="": container policy runs ["s3" "cp" "" "/opt/ml/model/policy.yaml" "--only-show-errors"]: a copy from no S3 object fails the task`},
		{"policy condition inverted", func(r obj) {
			c := at(r, "Conditions").(obj)
			c["HasPolicy"] = at(c, "HasPolicy", "Fn::Not", 0)
		}, `PolicyS3Uri unset: container policy runs ["s3" "cp" ""`},
		{"role cannot read the policy", func(r obj) {
			s := s3Statement(r)
			s["Resource"] = at(s, "Resource", "Fn::If", 2)
		}, `GpuModelS3Uri="s3://gpu-models/big/model.gguf", PolicyS3Uri="s3://verdict-policies/cascade/policy.yaml": s3:GetObject is not allowed on arn:aws:s3:::verdict-policies/* (the policy's bucket)`},
		{"role reads the policy's bucket unconditionally", func(r obj) {
			s := s3Statement(r)
			s["Resource"] = at(s, "Resource", "Fn::If", 1)
		}, `GpuModelS3Uri unset, PolicyS3Uri unset: s3:GetObject is allowed on arn:aws:s3:::Fn::Select 2 of []/*, which holds neither`},
		{"role reads the gpu model's bucket without it", func(r obj) {
			s := s3Statement(r)
			s["Resource"] = at(s, "Resource", "Fn::If", 1, "Fn::If", 1)
		}, `GpuModelS3Uri="", PolicyS3Uri="s3://verdict-policies/cascade/policy.yaml": s3:GetObject is allowed on arn:aws:s3:::Fn::Select 2 of []/*, which holds neither`},
		{"policy required", func(r obj) { delete(at(r, "Parameters", "PolicyS3Uri").(obj), "Default") },
			"Parameters.PolicyS3Uri: Default <nil>"},
		{"policy pattern refuses yml", func(r obj) {
			at(r, "Parameters", "PolicyS3Uri").(obj)["AllowedPattern"] = "^(s3://[a-z0-9.\\-]+/.+\\.yaml)?$"
		}, `Parameters.PolicyS3Uri: AllowedPattern "^(s3://[a-z0-9.\\-]+/.+\\.yaml)?$" matches "s3://b/p.yml": false, want true`},
		{"policy pattern takes anything", func(r obj) { at(r, "Parameters", "PolicyS3Uri").(obj)["AllowedPattern"] = ".*" },
			`Parameters.PolicyS3Uri: AllowedPattern ".*" matches "s3://b/model.gguf": true, want false`},
		{"no policy parameter", func(r obj) { delete(r["Parameters"].(obj), "PolicyS3Uri") }, "Parameters: no PolicyS3Uri"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r obj
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			tc.change(r)
			p := checkCascade(r)
			if !strings.Contains(strings.Join(p, "\n"), tc.want) {
				t.Errorf("want a problem containing %q, got %q", tc.want, p)
			}
		})
	}
}
