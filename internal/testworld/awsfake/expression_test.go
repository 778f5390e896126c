package awsfake

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

var exprTestEnv = newExprEnv(
	map[string]string{"#st": "state", "#n": "count", "#ids": "ids", "#doc": "doc", "#l": "list", "#gone": "gone"},
	map[string]types.AttributeValue{
		":idle": s("idle"), ":busy": s("busy"), ":id": s("id"), ":i": s("i-"), ":one": n("1"), ":two": n("2"), ":ten": n("10"),
		":a": &types.AttributeValueMemberSS{Value: []string{"a"}}, ":ab": &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		":l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("z")}}, ":S": s("S"), ":x": s("x"),
	})

func exprTestItem() item {
	return item{
		"PK": s("TYPE#INSTANCE"), "SK": s("ID#i-1"), "state": s("idle"), "count": n("2"),
		"ids":  &types.AttributeValueMemberSS{Value: []string{"a", "c"}},
		"doc":  &types.AttributeValueMemberM{Value: item{"id": s("i-1")}},
		"list": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("x"), s("y")}},
	}
}

func TestConditions(t *testing.T) {
	for expr, want := range map[string]bool{
		"#st = :idle":                    true,
		"#st <> :idle":                   false,
		"#gone <> :idle":                 true, // a missing attribute equals nothing
		"#gone = :idle OR #gone < :idle": false,
		"#n > :one AND #n <= :two":       true,
		"#n >= :ten":                     false,
		"#n BETWEEN :one AND :two":       true,
		"#st IN (:busy, :idle)":          true,
		"NOT #st IN (:busy)":             true,
		"attribute_exists(PK) AND attribute_not_exists(#gone)": true,
		"attribute_not_exists(PK) OR #n < :one":                false,
		"#st = :busy AND #n = :two OR #n = :two":               true, // AND binds before OR
		"#st = :busy AND (#n = :two OR #n = :two)":             false,
		"begins_with(SK, :id) OR begins_with(#doc.id, :i)":     true,
		"contains(#ids, :x) OR contains(#l, :x)":               true,
		"contains(#st, :x)":                                    false,
		"size(#ids) = :two AND size(#l[1]) = :one":             true,
		"attribute_type(#st, :S) and #doc.id = :idle":          false,
	} {
		c, err := parseCondition(exprTestEnv, expr)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		if got, err := c(exprTestItem()); err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", expr, got, err, want)
		}
	}
	for _, bad := range []string{"#st =", "#st = :undefined", "#undefined = :idle", "nosuch(#st)", "#st = :idle AND", "(#st = :idle", "#st ! :idle"} {
		if _, err := parseCondition(exprTestEnv, bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestUpdates(t *testing.T) {
	ss := func(v ...string) types.AttributeValue { return &types.AttributeValueMemberSS{Value: v} }
	l := func(v ...types.AttributeValue) types.AttributeValue { return &types.AttributeValueMemberL{Value: v} }
	doc := func(id string) types.AttributeValue { return &types.AttributeValueMemberM{Value: item{"id": s(id)}} }
	for expr, want := range map[string]item{ // nil: the attribute is gone
		"SET #st = :busy REMOVE #doc":             {"state": s("busy"), "doc": nil},
		"SET #n = #n + :one":                      {"count": n("3")},
		"SET #n = #n - :ten":                      {"count": n("-8")},
		"ADD #n :ten":                             {"count": n("12")},
		"ADD #gone :one":                          {"gone": n("1")},
		"ADD #ids :ab":                            {"ids": ss("a", "b", "c")},
		"DELETE #ids :ab":                         {"ids": ss("c")},
		"DELETE #ids :ab, #gone :a":               {"ids": ss("c"), "gone": nil},
		"SET #gone = if_not_exists(#gone, :idle)": {"gone": s("idle")},
		"SET #st = if_not_exists(#st, :busy)":     {"state": s("idle")},
		"SET #l = list_append(#l, :l)":            {"list": l(s("x"), s("y"), s("z"))},
		"SET #doc.id = :x, #l[0] = :idle":         {"doc": doc("x"), "list": l(s("idle"), s("y"))},
		"REMOVE #l[0], #ids":                      {"list": l(s("y")), "ids": nil},
		"set #st = :busy, #n = #n + :one":         {"state": s("busy"), "count": n("3")},
	} {
		it := exprTestItem()
		if err := exprTestEnv.applyUpdate(expr, it); err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		for attr, v := range want {
			if got := it[attr]; (v == nil) != (got == nil) || v != nil && !equal(got, v) {
				t.Errorf("%s: %s is %#v, want %#v", expr, attr, got, v)
			}
		}
	}
	for _, bad := range []string{"SET PK = :x", "SET #st = :busy SET #n = :one", "ADD #st :x", "DELETE #ids :one", "SET #st = #gone", "UPSERT #st :x", ""} {
		if err := exprTestEnv.applyUpdate(bad, exprTestItem()); err == nil {
			t.Errorf("%q applied", bad)
		}
	}
}

// A reserved word is refused as a bare attribute name, in any case and in
// any expression, as DynamoDB refuses it; as a placeholder's value it is
// fine.
func TestReservedWords(t *testing.T) {
	ctx := context.Background()
	tbl := NewTable("pool")
	tbl.Put(exprTestItem())
	pk := map[string]types.AttributeValue{":pk": s("TYPE#INSTANCE")}
	for _, tc := range []struct {
		call    func() error
		message string
	}{
		{func() error {
			return sdkErr(tbl.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("pool"), Key: key("TYPE#INSTANCE", "ID#i-1"),
				UpdateExpression: aws.String("SET status = :s"), ExpressionAttributeValues: map[string]types.AttributeValue{":s": s("x")}}))
		}, "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: status"},
		{func() error {
			return sdkErr(tbl.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("pool"), Item: key("TYPE#INSTANCE", "ID#i-2"),
				ConditionExpression: aws.String("attribute_not_exists(#doc.Value)"), ExpressionAttributeNames: map[string]string{"#doc": "doc"}}))
		}, "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: Value"},
		{func() error {
			return sdkErr(tbl.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("pool"), KeyConditionExpression: aws.String("PK = :pk"),
				FilterExpression: aws.String("STATE = :pk"), ExpressionAttributeValues: pk}))
		}, "Invalid FilterExpression: Attribute name is a reserved keyword; reserved keyword: STATE"},
		{func() error {
			return sdkErr(tbl.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("pool"), KeyConditionExpression: aws.String("PK = :pk"),
				ProjectionExpression: aws.String("SK, name"), ExpressionAttributeValues: pk}))
		}, "Invalid ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: name"},
	} {
		var apiErr smithy.APIError
		if err := tc.call(); !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" || apiErr.ErrorMessage() != tc.message {
			t.Errorf("%v, want ValidationException: %s", err, tc.message)
		}
	}
	_, err := tbl.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("pool"), Key: key("TYPE#INSTANCE", "ID#i-1"),
		UpdateExpression: aws.String("SET #status = :s"), ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": s("x")}})
	if err != nil || protocol.StringAttr(tbl.Get("TYPE#INSTANCE", "i-1"), "status") != "x" {
		t.Errorf("SET #status through a placeholder: %v", err)
	}
	// DynamoDB's list (ReservedWords.html) has 573 words, FLATTERN among them.
	if len(reservedWords) != 573 || !reservedWords["FLATTERN"] || !reservedWords["ZONE"] || reservedWords["PK"] {
		t.Errorf("%d reserved words; want DynamoDB's 573", len(reservedWords))
	}
}
