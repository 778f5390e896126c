package awsfake

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
)

// wantCode checks err is an API error with code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != code {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

// A table is made, tagged, given a TTL and deleted as DynamoDB does it.
func TestTable_lifecycle(t *testing.T) {
	ctx := context.Background()
	tbl := NewTable("pool")
	tbl.Absent = true
	name := aws.String("pool")
	_, err := tbl.GetItem(ctx, &dynamodb.GetItemInput{TableName: name, Key: key("a", "b")})
	wantCode(t, "GetItem before CreateTable", err, "ResourceNotFoundException")
	_, err = tbl.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: name})
	wantCode(t, "DescribeTable before CreateTable", err, "ResourceNotFoundException")

	create := &dynamodb.CreateTableInput{TableName: name, BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("SK"), KeyType: types.KeyTypeRange}},
		Tags:      []types.Tag{{Key: aws.String("team"), Value: aws.String("ci")}}}
	out, err := tbl.CreateTable(ctx, create)
	if err != nil || out.TableDescription.TableStatus != types.TableStatusCreating || aws.ToString(out.TableDescription.TableArn) != tbl.ARN() {
		t.Fatalf("CreateTable = %+v, %v; want CREATING with the table's ARN", out, err)
	}
	_, err = tbl.CreateTable(ctx, create)
	wantCode(t, "CreateTable of a table that exists", err, "ResourceInUseException")
	if d, err := tbl.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: name}); err != nil || d.Table.TableStatus != types.TableStatusActive {
		t.Fatalf("DescribeTable = %+v, %v; want ACTIVE", d, err)
	}

	arn := aws.String(tbl.ARN())
	if _, err := tbl.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: arn, Tags: []types.Tag{{Key: aws.String("env"), Value: aws.String("test")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.UntagResource(ctx, &dynamodb.UntagResourceInput{ResourceArn: arn, TagKeys: []string{"team"}}); err != nil {
		t.Fatal(err)
	}
	tags, err := tbl.ListTagsOfResource(ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: arn})
	if err != nil || len(tags.Tags) != 1 || aws.ToString(tags.Tags[0].Key) != "env" {
		t.Errorf("tags %+v, %v; want env alone", tags, err)
	}
	_, err = tbl.ListTagsOfResource(ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: aws.String(tbl.ARN() + "x")})
	wantCode(t, "tags of another table", err, "ResourceNotFoundException")

	ttl := &dynamodb.UpdateTimeToLiveInput{TableName: name, TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(true)}}
	if _, err := tbl.UpdateTimeToLive(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	d, err := tbl.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: name})
	if err != nil || d.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.TimeToLiveDescription.AttributeName) != "expiresAt" {
		t.Errorf("DescribeTimeToLive = %+v, %v; want enabled on expiresAt", d, err)
	}
	_, err = tbl.UpdateTimeToLive(ctx, ttl)
	wantCode(t, "enabling TTL twice", err, "ValidationException")

	tbl.Put(key("TYPE#X", "1"))
	if _, err := tbl.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: name}); err != nil {
		t.Fatal(err)
	}
	_, err = tbl.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: name})
	wantCode(t, "DescribeTable after DeleteTable", err, "ResourceNotFoundException")
	if tbl.Get("TYPE#X", "1") != nil || tbl.ItemsAtDelete[ItemKey(key("TYPE#X", "1"))] == nil {
		t.Error("DeleteTable kept its items, or did not keep them for the test")
	}
}

// A queue's name is taken again only with the same attributes and tags,
// and not for a minute after its queue is deleted.
func TestSQS_queueLifecycle(t *testing.T) {
	ctx := context.Background()
	q := NewSQS()
	create := func(attrs, tags map[string]string) (string, error) {
		out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("pool-large"), Attributes: attrs, Tags: tags})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.QueueUrl), nil
	}
	attrs, tags := map[string]string{"VisibilityTimeout": "30"}, map[string]string{"team": "ci"}
	url, err := create(attrs, tags)
	if err != nil || url != QueueURL("pool-large") {
		t.Fatalf("CreateQueue = %q, %v", url, err)
	}
	if again, err := create(attrs, tags); err != nil || again != url {
		t.Errorf("CreateQueue with the same attributes and tags = %q, %v; want the queue's URL", again, err)
	}
	_, err = create(attrs, map[string]string{"team": "other"})
	wantCode(t, "CreateQueue with other tags", err, "QueueAlreadyExists")
	_, err = create(map[string]string{"VisibilityTimeout": "60"}, tags)
	wantCode(t, "CreateQueue with other attributes", err, "QueueAlreadyExists")
	if got, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("pool-large")}); err != nil || aws.ToString(got.QueueUrl) != url {
		t.Errorf("GetQueueUrl = %+v, %v", got, err)
	}

	q.Add(url, "visible")
	q.AddAt(url, "delayed", q.Clock.Add(time.Minute))
	q.AddInFlight(url, "in flight", time.Minute)
	a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	want := map[string]string{"VisibilityTimeout": "30", "QueueArn": "arn:aws:sqs:" + Region + ":" + Account + ":pool-large",
		"ApproximateNumberOfMessages": "1", "ApproximateNumberOfMessagesNotVisible": "1", "ApproximateNumberOfMessagesDelayed": "1"}
	if err != nil || !reflect.DeepEqual(a.Attributes, want) {
		t.Errorf("GetQueueAttributes = %v, %v; want %v", a.Attributes, err, want)
	}

	if _, err := q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
		t.Fatal(err)
	}
	_, err = q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("pool-large")})
	wantCode(t, "GetQueueUrl of a deleted queue", err, "AWS.SimpleQueueService.NonExistentQueue")
	_, err = create(attrs, tags)
	wantCode(t, "CreateQueue right after DeleteQueue", err, "AWS.SimpleQueueService.QueueDeletedRecently")
	q.Clock = q.Clock.Add(queueDeletedFor)
	if _, err := create(nil, nil); err != nil {
		t.Errorf("CreateQueue a minute after DeleteQueue: %v", err)
	}
}

// The fakes' SQS errors are what the SDK makes of SQS's answers, whose
// x-amzn-query-error carries the query-compatible code (SQS's API
// reference names the shapes; the codes are those of its query API).
func TestSQS_errorsAreTheSDKs(t *testing.T) {
	for _, tc := range []struct {
		fake        error
		shape, code string
	}{
		{queueMissing(), "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"},
		{queueNameExists("tags"), "QueueNameExists", "QueueAlreadyExists"},
	} {
		var fake smithy.APIError
		errors.As(tc.fake, &fake)
		refusal := &awslimits.Refusal{Status: http.StatusBadRequest, Code: tc.code, Type: "com.amazonaws.sqs#" + tc.shape, Message: fake.ErrorMessage()}
		client := sqs.New(sqs.Options{Region: Region, BaseEndpoint: nowhere, Credentials: aws.AnonymousCredentials{}, Retryer: aws.NopRetryer{},
			HTTPClient: answering{func(w http.ResponseWriter) { awslimits.WriteRefusal(w, "sqs", refusal) }}})
		_, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("q")})
		var sdk smithy.APIError
		if !errors.As(err, &sdk) || reflect.TypeOf(sdk) != reflect.TypeOf(fake) || sdk.ErrorCode() != fake.ErrorCode() || sdk.ErrorMessage() != fake.ErrorMessage() {
			t.Errorf("the SDK makes %T %v of SQS's answer; the fake answers %T %v", sdk, err, fake, fake)
		}
	}
}

// answering is an HTTP client that answers every request with write.
type answering struct{ write func(http.ResponseWriter) }

func (a answering) Do(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	rec := httptest.NewRecorder()
	a.write(rec)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// TerminateInstances fails as a whole for instances EC2 does not know,
// naming them all, and for those the caller may not terminate.
func TestEC2_terminateRefusals(t *testing.T) {
	ctx := context.Background()
	e := &EC2{Gone: map[string]bool{"i-a": true, "i-c": true}, Denied: map[string]bool{"i-d": true}}
	_, err := e.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-a", "i-b", "i-c"}})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidInstanceID.NotFound" || apiErr.ErrorMessage() != "The instance IDs 'i-a, i-c' do not exist" {
		t.Errorf("terminating unknown instances: %v", err)
	}
	_, err = e.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-b", "i-d"}})
	wantCode(t, "terminating a denied instance", err, "UnauthorizedOperation")
	if len(e.Terminated) != 0 {
		t.Errorf("refused calls terminated %v", e.Terminated)
	}
}

// One Log holds the calls of every fake given it, in order; the reads are
// not among the mutating ones.
func TestLog_acrossFakes(t *testing.T) {
	ctx := context.Background()
	log := &Log{}
	tbl, q, e, s := NewTable("pool"), NewSQS(), &EC2{}, &STS{}
	tbl.Log, q.Log, e.Log, s.Log = log, log, log, log
	if _, err := s.GetCallerIdentity(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("pool-large")}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("pool"), Item: key("TYPE#X", "1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("pool"), Key: key("TYPE#X", "1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-1", "i-2"}}); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, c := range log.Calls() {
		all = append(all, c.Service+" "+c.String())
	}
	want := []string{"sts GetCallerIdentity", "sqs CreateQueue pool-large", "dynamodb PutItem TYPE#X|1", "dynamodb GetItem TYPE#X|1", "ec2 TerminateInstances i-1,i-2"}
	if !slices.Equal(all, want) {
		t.Errorf("calls %q, want %q", all, want)
	}
	if got, want := log.Mutating(), []string{"CreateQueue pool-large", "PutItem TYPE#X|1", "TerminateInstances i-1,i-2"}; !slices.Equal(got, want) {
		t.Errorf("mutating calls %q, want %q", got, want)
	}
}
