package emulator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The front's cost, measured rather than asserted (a loaded machine makes
// any threshold flaky): EC2RUNNERS_FRONT_COST=<calls> prints the mean time
// per call of a mix of the calls claims make (SQS SendMessageBatch and
// ReceiveMessage, DynamoDB PutItem, TransactWriteItems and BatchGetItem, EC2
// DescribeInstances), each made straight to a backend and through a front
// before it, in turn, twice: with a backend that answers at once (what the front
// itself costs) and with the emulator (what a test sees).
func TestFrontCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EC2RUNNERS_FRONT_COST"))
	if n <= 0 {
		t.Skip("set EC2RUNNERS_FRONT_COST=<calls> to measure")
	}
	instant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Amz-Target") != "" {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			_, _ = w.Write([]byte("{}"))
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write([]byte(`<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><reservationSet/></DescribeInstancesResponse>`))
	}))
	defer instant.Close()
	ctx := t.Context()
	startup, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	target, release, err := ensureLocal(startup, listenAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	calls := prepareCostCalls(t, ctx, target)
	for _, backend := range []struct{ name, url string }{{"instant backend", instant.URL}, {"emulator", target}} {
		f, err := startFront(backend.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		direct, through := measure(ctx, backend.url, f.url, calls, n)
		f.close()
		fmt.Printf("front cost, %s, %d calls: direct %v per call, through the front %v per call (+%v)\n",
			backend.name, n, direct, through, through-direct)
	}
}

// costCall is one call of the mix, against an endpoint.
type costCall func(ctx context.Context, endpoint string) error

// measure makes each call straight and through the front in turn, so that
// the emulator slowing down as its queue grows weighs on both alike.
func measure(ctx context.Context, backend, front string, calls []costCall, n int) (direct, through time.Duration) {
	for i := range n {
		call := calls[i%len(calls)]
		for _, m := range []struct {
			endpoint string
			total    *time.Duration
		}{{backend, &direct}, {front, &through}} {
			start := time.Now()
			_ = call(ctx, m.endpoint) // the instant backend's answers do not parse: only the time counts
			*m.total += time.Since(start)
		}
	}
	return direct / time.Duration(n), through / time.Duration(n)
}

// prepareCostCalls creates a queue and a table on the emulator for the mix.
func prepareCostCalls(t *testing.T, ctx context.Context, target string) []costCall {
	creds := credentials.NewStaticCredentialsProvider("test", "test", "")
	sqsAt := func(endpoint string) *sqs.Client {
		return sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds, RetryMaxAttempts: 1})
	}
	ddbAt := func(endpoint string) *dynamodb.Client {
		return dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds, RetryMaxAttempts: 1})
	}
	ec2At := func(endpoint string) *ec2.Client {
		return ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds, RetryMaxAttempts: 1})
	}
	name := "front-cost-" + randomHex(4)
	q, err := sqsAt(target).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = sqsAt(target).DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})
	})
	_, err = ddbAt(target).CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("PK"), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String("SK"), KeyType: ddbtypes.KeyTypeRange}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("PK"), AttributeType: ddbtypes.ScalarAttributeTypeS}, {AttributeName: aws.String("SK"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ddbAt(target).DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	item := func(i int) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"PK": s("TYPE#INSTANCE"), "SK": s(fmt.Sprintf("i-%017d", i)),
			"state": s("idle"), "runId": s("none"), "updatedAt": s("2030-01-01T00:00:00.000Z")}
	}
	return []costCall{
		func(ctx context.Context, ep string) error {
			var entries []sqstypes.SendMessageBatchRequestEntry
			for i := range 10 {
				entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(`{"id":"i-0123456789abcdef0","v":1}`)})
			}
			_, err := sqsAt(ep).SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: entries})
			return err
		},
		func(ctx context.Context, ep string) error {
			_, err := sqsAt(ep).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 1})
			return err
		},
		func(ctx context.Context, ep string) error {
			_, err := ddbAt(ep).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: item(1),
				ConditionExpression:      aws.String("attribute_not_exists(PK) OR #updatedAt < :cutoff"),
				ExpressionAttributeNames: map[string]string{"#updatedAt": "updatedAt"}, ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":cutoff": s("2031")}})
			return err
		},
		func(ctx context.Context, ep string) error {
			var writes []ddbtypes.TransactWriteItem
			for i := range 10 {
				writes = append(writes, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(name), Item: item(100 + i)}})
			}
			_, err := ddbAt(ep).TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: writes})
			return err
		},
		func(ctx context.Context, ep string) error {
			var keys []map[string]ddbtypes.AttributeValue
			for i := range 20 {
				keys = append(keys, map[string]ddbtypes.AttributeValue{"PK": s("TYPE#INSTANCE"), "SK": s(fmt.Sprintf("i-%017d", 100+i))})
			}
			_, err := ddbAt(ep).BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{name: {Keys: keys}}})
			return err
		},
		func(ctx context.Context, ep string) error {
			_, err := ec2At(ep).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
			return err
		},
	}
}
