package awslimits

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// DynamoDB's limits (JSON protocol: parameters as the JSON body names
// them, attribute values in their wire form, {"S": "..."}).
const (
	// MaxItemBytes is an item's size: 400 KB, the names and values of its
	// attributes (ItemBytes).
	MaxItemBytes = 400 * 1024
	// MaxTransactItems is the most actions a TransactWriteItems takes;
	// MaxTransactBytes bounds their items in all.
	MaxTransactItems = 100
	MaxTransactBytes = 4 << 20
	// MaxBatchGetKeys is the most keys a BatchGetItem reads.
	MaxBatchGetKeys = 100
	// MaxBatchWriteItems is the most writes a BatchWriteItem takes.
	MaxBatchWriteItems = 25
	// MaxPartitionKeyBytes and MaxSortKeyBytes bound a key's values.
	MaxPartitionKeyBytes = 2048
	MaxSortKeyBytes      = 1024
	// MaxExpressionBytes bounds one expression.
	MaxExpressionBytes = 4096
	// MinTableNameLength and MaxTableNameLength bound a table's name.
	MinTableNameLength = 3
	MaxTableNameLength = 255
)

// ItemSizeToUpdate is DynamoDB's answer to an UpdateItem that grows the
// stored item past MaxItemBytes: only a table holding the item can tell
// (the fakes answer it, the front cannot).
var ItemSizeToUpdate = dynamodbValidation("Item size to update has exceeded the maximum allowed size")

// KeySchema is the key of every table this project creates (a pool's:
// protocol.AttrPK and AttrSK, which awslimits' test checks): the front
// learns no table's schema, and needs it to find an item's key.
var KeySchema = struct{ Partition, Sort string }{"PK", "SK"}

const (
	ddbGuide = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/"
	ddbAPI   = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/"
	// conformance's tier-3 tests assert DynamoDB's messages word for word,
	// captured against AWS.
	conformance = "https://github.com/nubo-db/dynamodb-conformance/tree/main/tests/tier3"
)

// tableActions are the single-table actions this project calls.
var tableActions = []string{"CreateTable", "DescribeTable", "DeleteTable", "UpdateTimeToLive", "DescribeTimeToLive",
	"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query"}

var tableNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)

var dynamodbRules = []Rule{
	{
		ID: "dynamodb-table-name", Service: "dynamodb", Actions: tableActions,
		Limit: "A table name is 3 to 255 characters of letters, digits, '_', '-' and '.'.",
		Check: func(_ string, req map[string]any) *Refusal {
			name, ok := str(field(req, "TableName"))
			if !ok {
				return nil
			}
			prefix := "1 validation error detected: Value '" + name + "' at 'tableName' failed to satisfy constraint: "
			switch {
			case len(name) < MinTableNameLength:
				return dynamodbValidation(prefix + fmt.Sprintf("Member must have length greater than or equal to %d", MinTableNameLength))
			case len(name) > MaxTableNameLength:
				return dynamodbValidation(prefix + fmt.Sprintf("Member must have length less than or equal to %d", MaxTableNameLength))
			case !tableNamePattern.MatchString(name):
				return dynamodbValidation(prefix + "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+")
			}
			return nil
		},
		Wording: Reported,
		Source:  ddbGuide + "HowItWorks.NamingRulesDataTypes.html; the answers: " + conformance + "/error-messages/createTable.test.ts, putItem.test.ts",
	},
	{
		ID: "dynamodb-item-size", Service: "dynamodb", Actions: []string{"PutItem", "BatchWriteItem"},
		Limit: "An item is at most 400 KB (409,600 bytes): its attributes' names and values.",
		Check: func(action string, req map[string]any) *Refusal {
			for _, it := range writtenItems(action, req) {
				if ItemBytes(it) > MaxItemBytes {
					return dynamodbValidation("Item size has exceeded the maximum allowed size")
				}
			}
			return nil
		},
		Stateful: []*Refusal{ItemSizeToUpdate},
		Wording:  Reported,
		Source: ddbGuide + "ServiceQuotas.html#limits-items, " + ddbGuide + "CapacityUnitCalculations.html (the sizes; numbers as " +
			"https://github.com/nubo-db/dynamodb-conformance/blob/main/src/item-size.ts measured them); the answer: " + conformance + "/limits/itemSize.test.ts. " +
			"An UpdateItem's size depends on the stored item: the fakes check it (\"Item size to update has exceeded the maximum allowed size\"), the front cannot",
	},
	{
		ID: "dynamodb-key", Service: "dynamodb", Actions: []string{"GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem", "BatchWriteItem", "TransactWriteItems"},
		Limit: "A key's values are not empty; a partition key is at most 2048 bytes, a sort key at most 1024.",
		Check: func(action string, req map[string]any) *Refusal {
			for _, key := range requestKeys(action, req) {
				for _, name := range []string{KeySchema.Partition, KeySchema.Sort} {
					v, ok := key[name].(map[string]any)
					if !ok {
						continue
					}
					n := attributeValueBytes(v)
					s, isString := str(v["S"])
					switch {
					case isString && s == "":
						return dynamodbValidation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: " + name)
					case name == KeySchema.Partition && n > MaxPartitionKeyBytes:
						return dynamodbValidation(fmt.Sprintf("One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of%d bytes", MaxPartitionKeyBytes))
					case name == KeySchema.Sort && n > MaxSortKeyBytes:
						return dynamodbValidation(fmt.Sprintf("One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of %d bytes", MaxSortKeyBytes))
					}
				}
			}
			return nil
		},
		Wording: Reported,
		Source: ddbGuide + "ServiceQuotas.html#limits-partition-sort-keys; the answers: " + conformance + "/error-messages/transactWriteItems.test.ts (empty), " +
			"https://github.com/nextauthjs/next-auth/issues/5827, https://github.com/amazon-archives/dynamodb-janusgraph-storage-backend/issues/296 " +
			"(partition key; \"of2048\" as DynamoDB spells it), https://github.com/formkiq/formkiq-core/issues/271 (sort key)",
	},
	{
		ID: "dynamodb-empty-set", Service: "dynamodb", Actions: []string{"PutItem", "UpdateItem", "DeleteItem", "Query", "BatchWriteItem", "TransactWriteItems"},
		Limit: "A set (SS, NS, BS) is never empty, in an item or an expression's values.",
		Check: func(action string, req map[string]any) *Refusal {
			for _, it := range writtenItems(action, req) {
				if set := emptySet(it); set != "" {
					return dynamodbValidation("One or more parameter values were invalid: An " + set + " set  may not be empty")
				}
			}
			for _, values := range expressionValues(action, req) {
				for _, k := range sortedKeys(values) {
					if set := emptySet(map[string]any{k: values[k]}); set != "" {
						return dynamodbValidation("ExpressionAttributeValues contains invalid value: One or more parameter values were invalid: An " + set + " set  may not be empty for key " + k)
					}
				}
			}
			return nil
		},
		Wording: Reported,
		Source: ddbGuide + "HowItWorks.NamingRulesDataTypes.html#HowItWorks.DataTypes.SetTypes (\"empty sets are not supported\"); the answers: " +
			conformance + "/limits/emptyValues.test.ts (in an item), https://github.com/getmoto/moto (tests/test_dynamodb, verified against AWS) and " +
			"https://github.com/aws/aws-sdk-js/issues/833 (the \"for key\" ending, in an expression's values)",
	},
	{
		ID: "dynamodb-expressions", Service: "dynamodb", Actions: []string{"PutItem", "UpdateItem", "DeleteItem", "Query", "GetItem", "TransactWriteItems"},
		Limit: "An expression is at most 4 KB; every name and value it uses is defined, and every one defined is used.",
		Check: func(action string, req map[string]any) *Refusal {
			for _, op := range expressionOperations(action, req) {
				if r := checkExpressions(op); r != nil {
					return r
				}
			}
			return nil
		},
		Wording: Reported,
		Source: ddbGuide + "ServiceQuotas.html#limits-expression-parameters (4 KB); the answers: " + conformance + "/error-messages/updateItem.test.ts, query.test.ts " +
			"(unused and undefined names and values); the size's, as a FilterExpression's reported in https://github.com/search?q=%22Expression+size+has+exceeded%22 " +
			"(\"Invalid FilterExpression: Expression size has exceeded the maximum allowed size; expression size: 5872\")",
	},
	{
		ID: "dynamodb-transact-write", Service: "dynamodb", Actions: []string{"TransactWriteItems"},
		Limit: "TransactWriteItems takes 1 to 100 actions, one per item, 4 MB of items in all.",
		Check: func(_ string, req map[string]any) *Refusal {
			items := list(req, "TransactItems")
			switch {
			case len(items) == 0:
				return dynamodbValidation("1 validation error detected: Value '[]' at 'transactItems' failed to satisfy constraint: Member must have length greater than or equal to 1")
			case len(items) > MaxTransactItems:
				return dynamodbValidation("1 validation error detected: Value '" + javaList("TransactWriteItem", len(items)) +
					fmt.Sprintf("' at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to %d", MaxTransactItems))
			}
			seen := map[string]bool{}
			total := 0
			for _, ti := range items {
				for _, kind := range []string{"Put", "Update", "Delete", "ConditionCheck"} {
					op, ok := field(ti, kind).(map[string]any)
					if !ok {
						continue
					}
					key, _ := op["Key"].(map[string]any)
					if it, ok := op["Item"].(map[string]any); ok {
						key = it
						total += ItemBytes(it)
					} else {
						total += ItemBytes(key)
					}
					id := tableOf(op) + "|" + keyString(key)
					if seen[id] {
						return dynamodbValidation("Transaction request cannot include multiple operations on one item")
					}
					seen[id] = true
				}
			}
			if total > MaxTransactBytes {
				return dynamodbValidation(fmt.Sprintf("Transaction request cannot be larger than 4 MB: its items come to %d bytes (the test front's wording).", total))
			}
			return nil
		},
		Wording: Reported,
		Source: ddbAPI + "API_TransactWriteItems.html (100 actions, 4 MB, one action per item; 100 since " +
			"https://aws.amazon.com/about-aws/whats-new/2022/09/amazon-dynamodb-supports-100-actions-per-transaction/); the answers: " +
			conformance + "/error-messages/transactWriteItems.test.ts (the list as Java prints it, whose form the test matches, not its content); " +
			"the 4 MB answer is not reported: the front's wording",
	},
	{
		// DynamoDB validates each table's Keys (1 to 100, its model's
		// constraint) before the call's total (100 across the tables).
		ID: "dynamodb-batch-get", Service: "dynamodb", Actions: []string{"BatchGetItem"},
		Limit: "BatchGetItem reads at most 100 keys in all, across its tables, none twice.",
		Check: func(_ string, req map[string]any) *Refusal {
			ri, _ := field(req, "RequestItems").(map[string]any)
			n := 0
			for _, table := range sortedKeys(ri) {
				keys := list(ri[table], "Keys")
				if len(keys) > MaxBatchGetKeys {
					return dynamodbValidation(fmt.Sprintf("1 validation error detected: Value at 'RequestItems.%s.member.Keys' failed to satisfy constraint: Member must have length less than or equal to %d", table, MaxBatchGetKeys))
				}
				n += len(keys)
			}
			if n > MaxBatchGetKeys {
				return dynamodbValidation("Too many items requested for the BatchGetItem call.")
			}
			for _, table := range sortedKeys(ri) {
				if duplicateKeys(list(ri[table], "Keys"), func(k any) map[string]any { m, _ := k.(map[string]any); return m }) {
					return dynamodbValidation("Provided list of item keys contains duplicates")
				}
			}
			return nil
		},
		Wording: Documented,
		Source: ddbAPI + "API_BatchGetItem.html (\"If you request more than 100 items, BatchGetItem returns a ValidationException with the message " +
			"'Too many items requested for the BatchGetItem call.'\"; 16 MB of answer, past which DynamoDB returns UnprocessedKeys, no error); " +
			"one table's 101 keys and a repeated key: " + conformance + "/error-messages/batchGetItem.test.ts",
	},
	{
		// DynamoDB validates each table's writes (1 to 25, its model's
		// constraint) before the call's total (25 across the tables).
		ID: "dynamodb-batch-write", Service: "dynamodb", Actions: []string{"BatchWriteItem"},
		Limit: "BatchWriteItem takes 1 to 25 writes in all, across its tables, none twice to one item.",
		Check: func(_ string, req map[string]any) *Refusal {
			ri, _ := field(req, "RequestItems").(map[string]any)
			n := 0
			for _, table := range sortedKeys(ri) {
				writes, _ := ri[table].([]any)
				if len(writes) == 0 || len(writes) > MaxBatchWriteItems {
					return dynamodbValidation("1 validation error detected: Value '{" + table + "=" + javaList("WriteRequest", len(writes)) + "}' at 'requestItems' failed to satisfy constraint: " +
						fmt.Sprintf("Map value must satisfy constraint: [Member must have length less than or equal to %d, Member must have length greater than or equal to 1]", MaxBatchWriteItems))
				}
				n += len(writes)
			}
			if n > MaxBatchWriteItems {
				return dynamodbValidation("Too many items requested for the BatchWriteItem call")
			}
			for _, table := range sortedKeys(ri) {
				writes, _ := ri[table].([]any)
				if duplicateKeys(writes, func(w any) map[string]any {
					if it, ok := field(field(w, "PutRequest"), "Item").(map[string]any); ok {
						return it
					}
					k, _ := field(field(w, "DeleteRequest"), "Key").(map[string]any)
					return k
				}) {
					return dynamodbValidation("Provided list of item keys contains duplicates")
				}
			}
			return nil
		},
		Wording: Reported,
		Source: ddbAPI + "API_BatchWriteItem.html (\"up to 25 item put or delete operations\" a call; ValidationException when \"There are more than 25 requests in the batch\"); " +
			"the answers: " + conformance + "/error-messages/batchWriteItem.test.ts (one table's 26, the list as Java prints it, whose form the test matches; a repeated key), " +
			"https://github.com/zio/zio-dynamodb/issues/77 (more than 25 in all)",
	},
	{
		ID: "dynamodb-tags", Service: "dynamodb", Actions: []string{"CreateTable", "TagResource"},
		Limit: "A table takes at most 50 tags, keys 1 to 128 characters not starting with aws:, values at most 256.",
		Check: func(_ string, req map[string]any) *Refusal {
			tags := map[string]any{}
			for _, t := range list(req, "Tags") {
				k, _ := str(field(t, "Key"))
				tags[k] = field(t, "Value")
			}
			problem := tagProblem(tags)
			if n := len(list(req, "Tags")); n > MaxTagsPerResource {
				problem = tagCountProblem(n)
			}
			if problem != "" {
				return dynamodbValidation(problem)
			}
			return nil
		},
		Wording: Ours,
		Source:  ddbGuide + "Tagging.html#TaggingRestrictions (the limits); " + ddbAPI + "CommonErrors.html (the code)",
	},
}

// writtenItems are the whole items a request writes.
func writtenItems(action string, req map[string]any) []map[string]any {
	var out []map[string]any
	add := func(v any) {
		if it, ok := v.(map[string]any); ok {
			out = append(out, it)
		}
	}
	switch action {
	case "PutItem":
		add(req["Item"])
	case "BatchWriteItem":
		ri, _ := req["RequestItems"].(map[string]any)
		for _, table := range sortedKeys(ri) {
			writes, _ := ri[table].([]any)
			for _, w := range writes {
				add(field(field(w, "PutRequest"), "Item"))
			}
		}
	case "TransactWriteItems":
		for _, ti := range list(req, "TransactItems") {
			add(field(field(ti, "Put"), "Item"))
		}
	}
	return out
}

// requestKeys are the keys a request names, and its whole items (whose key
// attributes are among theirs).
func requestKeys(action string, req map[string]any) []map[string]any {
	out := writtenItems(action, req)
	add := func(v any) {
		if k, ok := v.(map[string]any); ok {
			out = append(out, k)
		}
	}
	switch action {
	case "GetItem", "UpdateItem", "DeleteItem":
		add(req["Key"])
	case "BatchGetItem":
		ri, _ := req["RequestItems"].(map[string]any)
		for _, table := range sortedKeys(ri) {
			for _, k := range list(ri[table], "Keys") {
				add(k)
			}
		}
	case "BatchWriteItem":
		ri, _ := req["RequestItems"].(map[string]any)
		for _, table := range sortedKeys(ri) {
			writes, _ := ri[table].([]any)
			for _, w := range writes {
				add(field(field(w, "DeleteRequest"), "Key"))
			}
		}
	case "TransactWriteItems":
		for _, ti := range list(req, "TransactItems") {
			for _, kind := range []string{"Update", "Delete", "ConditionCheck"} {
				add(field(field(ti, kind), "Key"))
			}
		}
	}
	return out
}

// expressionOperations are the parts of a request that carry expressions
// with their names and values: the request, or each action of a
// transaction.
func expressionOperations(action string, req map[string]any) []map[string]any {
	if action != "TransactWriteItems" {
		return []map[string]any{req}
	}
	var out []map[string]any
	for _, ti := range list(req, "TransactItems") {
		for _, kind := range []string{"Put", "Update", "Delete", "ConditionCheck"} {
			if op, ok := field(ti, kind).(map[string]any); ok {
				out = append(out, op)
			}
		}
	}
	return out
}

// expressionValues are the ExpressionAttributeValues of a request's
// operations.
func expressionValues(action string, req map[string]any) []map[string]any {
	var out []map[string]any
	for _, op := range expressionOperations(action, req) {
		if v, ok := op["ExpressionAttributeValues"].(map[string]any); ok {
			out = append(out, v)
		}
	}
	return out
}

// expressionKinds are the expressions of an operation, in the order
// DynamoDB reports them.
var expressionKinds = []string{"KeyConditionExpression", "ConditionExpression", "UpdateExpression", "FilterExpression", "ProjectionExpression"}

var (
	namePlaceholder  = regexp.MustCompile(`#[A-Za-z0-9_]+`)
	valuePlaceholder = regexp.MustCompile(`:[A-Za-z0-9_]+`)
)

// checkExpressions applies the expression rules to one operation.
func checkExpressions(op map[string]any) *Refusal {
	names, _ := op["ExpressionAttributeNames"].(map[string]any)
	values, _ := op["ExpressionAttributeValues"].(map[string]any)
	usedNames, usedValues := map[string]bool{}, map[string]bool{}
	for _, kind := range expressionKinds {
		expr, ok := str(op[kind])
		if !ok {
			continue
		}
		label := "Invalid " + kind + ": "
		if len(expr) > MaxExpressionBytes {
			return dynamodbValidation(label + fmt.Sprintf("Expression size has exceeded the maximum allowed size; expression size: %d", len(expr)))
		}
		for _, n := range namePlaceholder.FindAllString(expr, -1) {
			if _, ok := names[n]; !ok {
				return dynamodbValidation(label + "An expression attribute name used in the document path is not defined; attribute name: " + n)
			}
			usedNames[n] = true
		}
		for _, v := range valuePlaceholder.FindAllString(expr, -1) {
			if _, ok := values[v]; !ok {
				return dynamodbValidation(label + "An expression attribute value used in expression is not defined; attribute value: " + v)
			}
			usedValues[v] = true
		}
	}
	if unused := unusedKeys(names, usedNames); unused != "" {
		return dynamodbValidation("Value provided in ExpressionAttributeNames unused in expressions: keys: {" + unused + "}")
	}
	if unused := unusedKeys(values, usedValues); unused != "" {
		return dynamodbValidation("Value provided in ExpressionAttributeValues unused in expressions: keys: {" + unused + "}")
	}
	return nil
}

func unusedKeys(defined map[string]any, used map[string]bool) string {
	var out []string
	for _, k := range sortedKeys(defined) {
		if !used[k] {
			out = append(out, k)
		}
	}
	return strings.Join(out, ", ")
}

// setTypes are the set types, with the word DynamoDB's messages use.
var setTypes = [...]struct{ typ, word string }{{"SS", "string"}, {"NS", "number"}, {"BS", "binary"}}

// emptySet names the first empty set among attrs' values, nested ones
// included ("string", "number", "binary"), or "".
func emptySet(attrs map[string]any) string {
	for _, v := range attrs {
		if s := emptySetIn(v); s != "" {
			return s
		}
	}
	return ""
}

func emptySetIn(v any) string {
	m, _ := v.(map[string]any)
	for _, t := range setTypes {
		if l, ok := m[t.typ].([]any); ok && len(l) == 0 {
			return t.word
		}
	}
	if inner, ok := m["M"].(map[string]any); ok {
		if s := emptySet(inner); s != "" {
			return s
		}
	}
	for _, e := range list(m, "L") {
		if s := emptySetIn(e); s != "" {
			return s
		}
	}
	return ""
}

// ItemBytes is an item's size as DynamoDB counts it: every attribute's name
// (UTF-8) and value.
func ItemBytes(item map[string]any) int {
	n := 0
	for name, v := range item {
		m, _ := v.(map[string]any)
		n += len(name) + attributeValueBytes(m)
	}
	return n
}

// attributeValueBytes is one wire-form value's size: strings in UTF-8,
// binaries decoded, numbers by their significant digits (as measured
// against DynamoDB), a boolean or null 1 byte, a list or map 3 bytes plus
// 1 per element and the elements (a map's names included), a set its
// elements.
func attributeValueBytes(v map[string]any) int {
	for typ, val := range v {
		switch typ {
		case "S":
			s, _ := str(val)
			return len(s)
		case "N":
			s, _ := str(val)
			return numberBytes(s)
		case "B":
			return binaryBytes(val)
		case "BOOL", "NULL":
			return 1
		case "SS", "NS", "BS":
			n := 0
			for _, e := range val.([]any) {
				switch typ {
				case "SS":
					s, _ := str(e)
					n += len(s)
				case "NS":
					s, _ := str(e)
					n += numberBytes(s)
				default:
					n += binaryBytes(e)
				}
			}
			return n
		case "L":
			l, _ := val.([]any)
			n := 3 + len(l)
			for _, e := range l {
				m, _ := e.(map[string]any)
				n += attributeValueBytes(m)
			}
			return n
		case "M":
			m, _ := val.(map[string]any)
			return 3 + len(m) + ItemBytes(m)
		}
	}
	return 0
}

func binaryBytes(v any) int {
	s, _ := str(v)
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return len(s)
	}
	return len(raw)
}

// numberBytes is a number's size: 1 byte, plus a byte per two significant
// digits of its integer part and of its fraction, plus one when negative
// (https://github.com/nubo-db/dynamodb-conformance/blob/main/src/item-size.ts,
// measured against DynamoDB; the developer guide's rule rounds down).
func numberBytes(literal string) int {
	m := numberPattern.FindStringSubmatch(strings.TrimSpace(literal))
	if m == nil || (m[2] == "" && m[3] == "") {
		return len(literal)
	}
	sign, intText, fracText, expText := m[1], m[2], m[3], m[4]
	digits := intText + fracText
	if !strings.ContainsAny(digits, "123456789") {
		return 1
	}
	exp := 0
	fmt.Sscan(expText, &exp)
	point := len(intText) + exp
	var intPart, fracPart string
	switch {
	case point <= 0:
		fracPart = strings.Repeat("0", -point) + digits
	case point >= len(digits):
		intPart = digits + strings.Repeat("0", point-len(digits))
	default:
		intPart, fracPart = digits[:point], digits[point:]
	}
	intPart = strings.TrimLeft(intPart, "0")
	fracPart = strings.TrimRight(fracPart, "0")
	intSig := len(intPart)
	if fracPart == "" {
		intSig = len(strings.TrimRight(intPart, "0"))
	}
	fracSig := len(fracPart)
	if intPart == "" {
		fracSig = len(strings.TrimLeft(fracPart, "0"))
	}
	n := 1 + (intSig+1)/2 + (fracSig+1)/2
	if sign == "-" {
		n++
	}
	return n
}

var numberPattern = regexp.MustCompile(`^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$`)

// keyString identifies an item by its key attributes' wire form.
func keyString(item map[string]any) string {
	var b strings.Builder
	for _, name := range [...]string{KeySchema.Partition, KeySchema.Sort} {
		v, _ := item[name].(map[string]any)
		for typ, val := range v { // one: a key attribute is S, N or B
			s, _ := str(val)
			b.WriteString(typ)
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(len(s)))
			b.WriteByte(':')
			b.WriteString(s)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// duplicateKeys reports whether two of list's elements name one item.
func duplicateKeys(list []any, item func(any) map[string]any) bool {
	seen := map[string]bool{}
	for _, e := range list {
		k := keyString(item(e))
		if seen[k] {
			return true
		}
		seen[k] = true
	}
	return false
}

func tableOf(op map[string]any) string {
	s, _ := str(op["TableName"])
	return s
}

// javaList renders a list of n elements of a DynamoDB request type as
// DynamoDB's messages print them (Java's toString; the elements' hashes
// are made up).
func javaList(typ string, n int) string {
	elems := make([]string, n)
	for i := range elems {
		elems[i] = fmt.Sprintf("com.amazonaws.dynamodb.v20120810.%s@%x", typ, 0x10000001+i)
	}
	return "[" + strings.Join(elems, ", ") + "]"
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
