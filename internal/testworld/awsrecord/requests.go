package awsrecord

import (
	"cmp"
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/arn"
)

// Condition keys the documents pin.
const (
	KeyLeadingKeys    = "dynamodb:LeadingKeys"
	KeyPoolTag        = "aws:ResourceTag/ec2runners:pool"
	KeySourceInstance = "ec2:SourceInstanceARN"
	KeyCreateAction   = "ec2:CreateAction"
	partitionKey      = "PK" // the pool table's partition key attribute
)

// request is one request on its way to the emulator.
type request struct {
	service, action string
	body            []byte
	url             *url.URL // its path and query, for the REST APIs' (Lambda's)
	base            Call     // the role, partition, region and account
	sourceInstance  string   // the agent's instance ARN; "" for other roles
}

// call is base for action on resource with the context keys of cond.
func (q request) call(action, resource string, cond map[string][]string) Call {
	return q.callUnknown(action, resource, cond, nil)
}

// callUnknown is call with condition keys whose values AWS would know but
// the recorder could not learn.
func (q request) callUnknown(action, resource string, cond map[string][]string, unknown []string) Call {
	c := q.base
	c.Unknown = unknown
	c.Action, c.Resource = q.service+":"+action, resource
	if action != q.action {
		c.API = q.action
	}
	c.Context = map[string][]string{}
	for k, v := range cond {
		c.Context[k] = v
	}
	if q.sourceInstance != "" {
		c.Context[KeySourceInstance] = []string{q.sourceInstance}
	}
	if len(c.Context) == 0 {
		c.Context = nil
	}
	return c
}

// calls are the authorizations AWS evaluates for the request.
func (q request) calls(ctx context.Context, r *recorder) []Call {
	switch q.service {
	case "dynamodb":
		return q.dynamoDB(r)
	case "sqs":
		return q.sqs(r)
	case "ec2":
		return q.ec2(ctx, r)
	case "logs":
		return q.logs(r)
	case "ssm":
		return q.ssm(r)
	case "secretsmanager":
		return q.secretsManager(r)
	case "lambda":
		return q.lambda()
	case "":
		return nil // not an AWS API request
	}
	return []Call{q.call(q.action, "*", nil)}
}

// dynamoDB: the table (or index) ARN; for item reads and writes, the
// partition keys they touch, which dynamodb:LeadingKeys conditions see.
// Transactions are authorized as the item actions they contain.
func (q request) dynamoDB(r *recorder) []Call {
	var in struct {
		TableName, IndexName, ResourceArn string
		Key, Item                         map[string]attr
		KeyConditionExpression            string
		ExpressionAttributeNames          map[string]string
		ExpressionAttributeValues         map[string]attr
		RequestItems                      map[string]json.RawMessage
		TransactItems                     []map[string]struct {
			TableName string
			Key, Item map[string]attr
		}
	}
	_ = json.Unmarshal(q.body, &in)
	table := func(name string) string { return r.arn(q.base.Region, "dynamodb", "table/"+name) }
	leading := func(keys ...string) map[string][]string {
		slices.Sort(keys)
		return map[string][]string{KeyLeadingKeys: slices.Compact(keys)}
	}
	switch q.action {
	case "GetItem", "DeleteItem", "UpdateItem":
		return []Call{q.call(q.action, table(in.TableName), leading(in.Key[partitionKey].S))}
	case "PutItem":
		return []Call{q.call(q.action, table(in.TableName), leading(in.Item[partitionKey].S))}
	case "Query":
		res := table(in.TableName)
		if in.IndexName != "" {
			res += "/index/" + in.IndexName
		}
		return []Call{q.call(q.action, res, leading(queryPartition(in.KeyConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)))}
	case "BatchGetItem", "BatchWriteItem":
		var calls []Call
		for name, raw := range in.RequestItems {
			calls = append(calls, q.call(q.action, table(name), leading(batchPartitions(raw)...)))
		}
		return calls
	case "TransactWriteItems", "TransactGetItems":
		var calls []Call
		for _, item := range in.TransactItems {
			for kind, op := range item {
				action := map[string]string{"ConditionCheck": "ConditionCheckItem", "Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "Get": "GetItem"}[kind]
				pk := op.Key[partitionKey].S
				if kind == "Put" {
					pk = op.Item[partitionKey].S
				}
				calls = append(calls, q.call(action, table(op.TableName), leading(pk)))
			}
		}
		return calls
	}
	switch {
	case in.TableName != "":
		return []Call{q.call(q.action, table(in.TableName), nil)}
	case in.ResourceArn != "":
		return []Call{q.call(q.action, in.ResourceArn, nil)}
	}
	return []Call{q.call(q.action, "*", nil)}
}

// attr is a DynamoDB attribute value; only strings matter here.
type attr struct{ S string }

var equality = regexp.MustCompile(`([#\w]+)\s*=\s*(:\w+)`)

// queryPartition is the partition key value of a key condition ("#pk = :pk").
func queryPartition(expr string, names map[string]string, values map[string]attr) string {
	for _, m := range equality.FindAllStringSubmatch(expr, -1) {
		name := m[1]
		if n, ok := names[name]; ok {
			name = n
		}
		if name == partitionKey {
			return values[m[2]].S
		}
	}
	return ""
}

// batchPartitions are the partition keys of one table's batch requests:
// {"Keys": [...]} for BatchGetItem, [{"PutRequest": {"Item"}}, {"DeleteRequest": {"Key"}}] for BatchWriteItem.
func batchPartitions(raw json.RawMessage) []string {
	var keys []string
	var get struct{ Keys []map[string]attr }
	if json.Unmarshal(raw, &get) == nil {
		for _, k := range get.Keys {
			keys = append(keys, k[partitionKey].S)
		}
		return keys
	}
	var writes []struct {
		PutRequest    struct{ Item map[string]attr }
		DeleteRequest struct{ Key map[string]attr }
	}
	_ = json.Unmarshal(raw, &writes)
	for _, w := range writes {
		if w.PutRequest.Item != nil {
			keys = append(keys, w.PutRequest.Item[partitionKey].S)
		} else {
			keys = append(keys, w.DeleteRequest.Key[partitionKey].S)
		}
	}
	return keys
}

// logs: CloudWatch Logs authorizes a log stream's writes (PutLogEvents)
// on the stream's ARN, and the calls on a log group (CreateLogStream) on
// the group's.
func (q request) logs(r *recorder) []Call {
	var in struct{ LogGroupName, LogStreamName string }
	_ = json.Unmarshal(q.body, &in)
	if in.LogGroupName == "" {
		return []Call{q.call(q.action, "*", nil)}
	}
	group := "log-group:" + in.LogGroupName
	if q.action == "PutLogEvents" || q.action == "GetLogEvents" {
		return []Call{q.call(q.action, r.arn(q.base.Region, "logs", group+":log-stream:"+in.LogStreamName), nil)}
	}
	return []Call{q.call(q.action, r.arn(q.base.Region, "logs", group), nil)}
}

// ssm: a parameter's ARN, parameter/<name> without a path's leading '/'
// (a version or label selector is not part of it).
func (q request) ssm(r *recorder) []Call {
	var in struct{ Name string }
	_ = json.Unmarshal(q.body, &in)
	if in.Name == "" {
		return []Call{q.call(q.action, "*", nil)}
	}
	if strings.HasPrefix(in.Name, "arn:") {
		return []Call{q.call(q.action, in.Name, nil)}
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(in.Name, "/"), ":")
	return []Call{q.call(q.action, r.arn(q.base.Region, "ssm", "parameter/"+name), nil)}
}

// secretsManager: a secret's ARN, which ends in '-' and six random
// characters; a call naming the secret by name is recorded with "??????"
// there, as AWS's documents write that suffix in policies.
func (q request) secretsManager(r *recorder) []Call {
	var in struct{ SecretId string }
	_ = json.Unmarshal(q.body, &in)
	switch {
	case in.SecretId == "":
		return []Call{q.call(q.action, "*", nil)}
	case strings.HasPrefix(in.SecretId, "arn:"):
		return []Call{q.call(q.action, in.SecretId, nil)}
	}
	return []Call{q.call(q.action, r.arn(q.base.Region, "secretsmanager", "secret:"+in.SecretId+"-??????"), nil)}
}

// lambdaInvoke is the path of Lambda's Invoke,
// /2015-03-31/functions/{function}/invocations.
var lambdaInvoke = regexp.MustCompile(`^/2015-03-31/functions/([^/]+)/invocations$`)

// lambda: Invoke is authorized as lambda:InvokeFunction on the function's
// ARN, qualified as invoked (<arn>:<version or alias>), whether the call
// names the function by name, ARN or partial ARN (<account>:function:<name>).
func (q request) lambda() []Call {
	var ref string
	if m := lambdaInvoke.FindStringSubmatch(q.url.EscapedPath()); m != nil {
		ref, _ = url.PathUnescape(m[1])
	}
	if ref == "" {
		return []Call{q.call("InvokeFunction", "*", nil)}
	}
	region, account := q.base.Region, q.base.Account
	if parts := strings.SplitN(ref, ":", 7); len(parts) == 7 && parts[0] == "arn" {
		region, account, ref = parts[3], parts[4], parts[6]
	} else if id, name, ok := strings.Cut(ref, ":function:"); ok {
		account, ref = id, name
	}
	name, qualifier, _ := strings.Cut(ref, ":")
	resource := "function:" + name
	if qualifier = cmp.Or(qualifier, q.url.Query().Get("Qualifier")); qualifier != "" {
		resource += ":" + qualifier
	}
	return []Call{q.call("InvokeFunction", arn.ARN{Partition: q.base.Partition, Service: "lambda", Region: region, AccountID: account, Resource: resource}.String(), nil)}
}

// sqs: the queue's ARN; batch calls are authorized as their single forms.
func (q request) sqs(r *recorder) []Call {
	var in struct{ QueueUrl, QueueName string }
	_ = json.Unmarshal(q.body, &in)
	name := in.QueueName
	if in.QueueUrl != "" {
		name = in.QueueUrl[strings.LastIndex(in.QueueUrl, "/")+1:]
	}
	action := strings.TrimSuffix(q.action, "Batch")
	if name == "" {
		return []Call{q.call(action, "*", nil)}
	}
	return []Call{q.call(action, r.arn(q.base.Region, "sqs", name), nil)}
}

// ec2: terminations, stops, starts and tags per resource with the resource's pool tag;
// launches on the launch template (with its pool tag), the subnets they
// name and what they create, and the tags they create (ec2:CreateTags with
// ec2:CreateAction); describes on "*". An instant CreateFleet is authorized
// as RunInstances too.
func (q request) ec2(ctx context.Context, r *recorder) []Call {
	form, _ := url.ParseQuery(string(q.body))
	arnOf := func(typ, id string) string { return r.arn(q.base.Region, "ec2", typ+"/"+id) }
	switch q.action {
	case "TerminateInstances", "StopInstances", "StartInstances", "CreateTags", "DeleteTags":
		var calls []Call
		for _, id := range indexed(form, "InstanceId", "ResourceId") {
			typ := resourceType(id)
			cond, unknown := r.poolTagContext(ctx, q.base.Region, typ, id)
			calls = append(calls, q.callUnknown(q.action, arnOf(typ, id), cond, unknown))
		}
		return calls
	case "CreateFleet", "RunInstances":
		var calls []Call
		launch := func(resource string, cond map[string][]string, unknown []string) {
			calls = append(calls, q.callUnknown(q.action, resource, cond, unknown))
			if q.action == "CreateFleet" {
				calls = append(calls, q.callUnknown("RunInstances", resource, cond, unknown))
			}
		}
		for k, vs := range form {
			if !strings.HasSuffix(k, "LaunchTemplateId") && !strings.HasSuffix(k, "LaunchTemplateName") {
				continue
			}
			id := vs[0]
			if strings.HasSuffix(k, "LaunchTemplateName") {
				var known bool
				if id, known = r.lookup.launchTemplateID(ctx, q.base.Region, id); !known {
					launch(arnOf("launch-template", "*"), nil, []string{KeyPoolTag})
					continue
				}
			}
			cond, unknown := r.poolTagContext(ctx, q.base.Region, "launch-template", id)
			launch(arnOf("launch-template", id), cond, unknown)
		}
		for k, vs := range form {
			if strings.HasSuffix(k, "SubnetId") {
				launch(arnOf("subnet", vs[0]), nil, nil)
			}
		}
		created := []string{"instance", "volume", "network-interface"}
		if q.action == "CreateFleet" {
			created = append(created, "fleet")
		}
		for _, typ := range created {
			launch(arnOf(typ, "*"), nil, nil)
		}
		for k, vs := range form {
			if strings.HasPrefix(k, "TagSpecification.") && strings.HasSuffix(k, ".ResourceType") {
				calls = append(calls, q.call("CreateTags", arnOf(vs[0], "*"), map[string][]string{KeyCreateAction: {q.action}}))
			}
		}
		return calls
	}
	return []Call{q.call(q.action, "*", nil)}
}

// poolTagContext is the aws:ResourceTag/ec2runners:pool context of a
// resource: its value when the resource has the tag, nothing when it has
// none, and the key as unknown when the emulator did not say.
func (r *recorder) poolTagContext(ctx context.Context, region, typ, id string) (cond map[string][]string, unknown []string) {
	switch pool, state := r.lookup.poolTag(ctx, region, typ, id); state {
	case tagFound:
		return map[string][]string{KeyPoolTag: {pool}}, nil
	case tagUnknown:
		return nil, []string{KeyPoolTag}
	}
	return nil, nil
}

// indexed are the values of the query parameters name.1, name.2, ... of
// any of names.
func indexed(form url.Values, names ...string) []string {
	var out []string
	for k, vs := range form {
		base, _, ok := strings.Cut(k, ".")
		if ok && slices.Contains(names, base) {
			out = append(out, vs...)
		}
	}
	slices.Sort(out)
	return out
}

// resourceType is the ARN resource type of an EC2 id.
func resourceType(id string) string {
	prefix, _, _ := strings.Cut(id, "-")
	switch prefix {
	case "i":
		return "instance"
	case "lt":
		return "launch-template"
	case "vol":
		return "volume"
	case "subnet":
		return "subnet"
	case "sg":
		return "security-group"
	case "fleet":
		return "fleet"
	}
	return prefix
}
