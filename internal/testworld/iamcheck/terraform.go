package iamcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
)

// exampleRoles: the aws_iam_policy_document data sources of the example
// that are a role's permissions (the others are trust policies).
var exampleRoles = map[string]string{
	"runner": awsrecord.RoleAgent, "broker": awsrecord.RoleBroker, "ci": awsrecord.RoleCI,
	"scheduler": awsrecord.RoleScheduler, "plan": awsrecord.RoleReadOnly,
}

// exampleInputs are what the example's policies and locals refer to beyond
// its own locals, bound to the document variables.
func exampleInputs() map[string]cty.Value {
	str := cty.StringVal
	v := func(name string) cty.Value { return str("${" + name + "}") }
	return map[string]cty.Value{
		"var": cty.ObjectVal(map[string]cty.Value{
			"region": v(varRegion), "pool_name": v(varPool), "state_bucket": v("doc:state-bucket"),
		}),
		"data": cty.ObjectVal(map[string]cty.Value{
			"aws_caller_identity": cty.ObjectVal(map[string]cty.Value{"current": cty.ObjectVal(map[string]cty.Value{"account_id": v(varAccount)})}),
			"aws_partition":       cty.ObjectVal(map[string]cty.Value{"current": cty.ObjectVal(map[string]cty.Value{"partition": v(varPartition)})}),
		}),
		// The pool's queues: <pool>-<class>, one per resource class.
		"ec2runners_pool": cty.ObjectVal(map[string]cty.Value{"this": cty.ObjectVal(map[string]cty.Value{
			"queue_arns": cty.MapVal(map[string]cty.Value{
				"class": str("arn:${" + varPartition + "}:sqs:${" + varRegion + "}:${" + varAccount + "}:${" + varPool + "}-${" + varClass + "}"),
			}),
		})}),
		"aws_iam_role": cty.ObjectVal(map[string]cty.Value{"runner": cty.ObjectVal(map[string]cty.Value{
			"arn": str("arn:${" + varPartition + "}:iam::${" + varAccount + "}:role/${" + varRole + "}"),
		})}),
		"aws_lambda_function": cty.ObjectVal(map[string]cty.Value{"broker": cty.ObjectVal(map[string]cty.Value{
			"arn": str("arn:${" + varPartition + "}:lambda:${" + varRegion + "}:${" + varAccount + "}:function:${" + varFunction + "}"),
		})}),
	}
}

var exampleFunctions = map[string]function.Function{"values": stdlib.ValuesFunc}

// TerraformPolicies reads the role policies of the Terraform configuration
// in dir (its aws_iam_policy_document data sources named in exampleRoles).
func TerraformPolicies(dir string) ([]Policy, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var bodies []*hclsyntax.Body
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
		if diags.HasErrors() {
			return nil, diags
		}
		bodies = append(bodies, f.Body.(*hclsyntax.Body))
	}
	ctx := &hcl.EvalContext{Variables: exampleInputs(), Functions: exampleFunctions}
	ctx.Variables["local"] = evalLocals(bodies, ctx)

	var out []Policy
	for _, body := range bodies {
		for _, b := range body.Blocks {
			if b.Type != "data" || len(b.Labels) != 2 || b.Labels[0] != "aws_iam_policy_document" {
				continue
			}
			role, ok := exampleRoles[b.Labels[1]]
			if !ok {
				continue
			}
			source := fmt.Sprintf("%s (data.aws_iam_policy_document.%s)", filepath.Base(b.Range().Filename), b.Labels[1])
			statements, err := policyDocument(b.Body, ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", source, err)
			}
			out = append(out, Policy{Source: "examples/complete/" + source, Role: role, Statements: statements})
		}
	}
	for _, role := range exampleRoles {
		if !hasRole(out, role) {
			return nil, fmt.Errorf("%s: no policy document for the role %s", dir, role)
		}
	}
	return out, nil
}

// evalLocals evaluates every local that the inputs determine; the others
// (which depend on resources) stay unknown, and a policy using one fails.
func evalLocals(bodies []*hclsyntax.Body, ctx *hcl.EvalContext) cty.Value {
	pending := map[string]hcl.Expression{}
	for _, body := range bodies {
		for _, b := range body.Blocks {
			if b.Type == "locals" {
				for name, a := range b.Body.Attributes {
					pending[name] = a.Expr
				}
			}
		}
	}
	known := map[string]cty.Value{}
	for progress := true; progress; {
		progress = false
		ctx.Variables["local"] = cty.ObjectVal(known)
		for name, expr := range pending {
			if v, diags := expr.Value(ctx); !diags.HasErrors() && v.IsWhollyKnown() {
				known[name] = v
				delete(pending, name)
				progress = true
			}
		}
	}
	return cty.ObjectVal(known)
}

// policyDocument reads the statement blocks of an aws_iam_policy_document,
// dynamic ones with their content (each.value bound like the inputs).
func policyDocument(body *hclsyntax.Body, ctx *hcl.EvalContext) ([]Statement, error) {
	var out []Statement
	for _, b := range body.Blocks {
		switch {
		case b.Type == "statement":
			s, err := statement(b.Body, ctx)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		case b.Type == "dynamic" && len(b.Labels) == 1 && b.Labels[0] == "statement":
			inner := ctx.NewChild()
			inner.Variables = map[string]cty.Value{"statement": cty.ObjectVal(map[string]cty.Value{
				"key": cty.StringVal("0"), "value": cty.StringVal("${doc:state-bucket}"),
			})}
			for _, c := range b.Body.Blocks {
				if c.Type == "content" {
					s, err := statement(c.Body, inner)
					if err != nil {
						return nil, err
					}
					out = append(out, s)
				}
			}
		default:
			return nil, fmt.Errorf("block %s: the checker does not read it", b.Type)
		}
	}
	return out, nil
}

func statement(body *hclsyntax.Body, ctx *hcl.EvalContext) (Statement, error) {
	s := Statement{Effect: "Allow"}
	for name, a := range body.Attributes {
		v, diags := a.Expr.Value(ctx)
		if diags.HasErrors() {
			return s, diags
		}
		switch name {
		case "sid":
			s.Sid = v.AsString()
		case "effect":
			s.Effect = v.AsString()
		case "actions":
			s.Actions = stringList(v)
		case "resources":
			s.Resources = stringList(v)
		default:
			return s, fmt.Errorf("statement attribute %s: the checker does not evaluate it", name)
		}
	}
	for _, b := range body.Blocks {
		if b.Type != "condition" {
			return s, fmt.Errorf("statement %q: block %s: the checker does not evaluate it", s.Sid, b.Type)
		}
		var c Condition
		for name, a := range b.Body.Attributes {
			v, diags := a.Expr.Value(ctx)
			if diags.HasErrors() {
				return s, diags
			}
			switch name {
			case "test":
				c.Operator = v.AsString()
			case "variable":
				c.Key = v.AsString()
			case "values":
				c.Values = stringList(v)
			}
		}
		s.Conditions = append(s.Conditions, c)
	}
	return s, nil
}

// stringList is a list, tuple or set of strings.
func stringList(v cty.Value) []string {
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, e.AsString())
	}
	return out
}
