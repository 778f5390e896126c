package awslimits_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
)

// What the front adds to a request a rule watches: reading the body and
// applying the rules (go test -bench CheckHTTP ./internal/awslimits).
func BenchmarkCheckHTTP(b *testing.B) {
	var entries, puts, keys []string
	for i := range 10 {
		entries = append(entries, fmt.Sprintf(`{"Id":"%d","MessageBody":"{\"id\":\"i-0123456789abcdef%d\",\"v\":1}"}`, i, i))
		puts = append(puts, fmt.Sprintf(`{"Put":{"TableName":"ci-runners","Item":{"PK":{"S":"TYPE#INSTANCE"},"SK":{"S":"i-%017d"},"state":{"S":"idle"},"runId":{"S":"none"}},`+
			`"ConditionExpression":"#state = :s","ExpressionAttributeNames":{"#state":"state"},"ExpressionAttributeValues":{":s":{"S":"created"}}}}`, i))
	}
	for i := range 20 {
		keys = append(keys, fmt.Sprintf(`{"PK":{"S":"TYPE#INSTANCE"},"SK":{"S":"i-%017d"}}`, i))
	}
	json := func(target string) http.Header {
		return http.Header{"X-Amz-Target": {target}, "Content-Type": {"application/x-amz-json-1.0"}}
	}
	for _, c := range []struct {
		name, service string
		header        http.Header
		body          string
	}{
		{"SQS SendMessageBatch of 10", "sqs", json("AmazonSQS.SendMessageBatch"), `{"QueueUrl":"q","Entries":[` + strings.Join(entries, ",") + `]}`},
		{"DynamoDB TransactWriteItems of 10", "dynamodb", json("DynamoDB_20120810.TransactWriteItems"), `{"TransactItems":[` + strings.Join(puts, ",") + `]}`},
		{"DynamoDB BatchGetItem of 20", "dynamodb", json("DynamoDB_20120810.BatchGetItem"), `{"RequestItems":{"ci-runners":{"Keys":[` + strings.Join(keys, ",") + `],"ConsistentRead":true}}}`},
		{"EC2 DescribeInstances", "ec2", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
			"Action=DescribeInstances&Version=2016-11-15&Filter.1.Name=tag%3Aec2runners%3Apool&Filter.1.Value.1=ci-runners&Filter.2.Name=instance-state-name&Filter.2.Value.1=running&Filter.2.Value.2=stopped"},
	} {
		b.Run(c.name, func(b *testing.B) {
			body := []byte(c.body)
			for b.Loop() {
				if r := awslimits.CheckHTTP(c.service, c.header, body); r != nil {
					b.Fatal(r)
				}
			}
		})
	}
}
