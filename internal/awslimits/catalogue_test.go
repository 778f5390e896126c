package awslimits_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
)

// The catalogue has two halves. The Service limits guide, for users,
// gives each limit a row whose Limit cell starts with its name in bold
// (**User data** is ...) and whose "AWS's answer" cell gives what AWS
// answers a request that breaks it: the HTTP status, the error codes in
// backticks (an action's name in backticks says which call answers so),
// and AWS's messages in double quotes (Markdown's backslash escapes
// undone), "…" standing for text AWS prints from the request. A message
// that is the front's own, not AWS's, is not quoted: the cell says no
// message is published. The developer catalogue, this package's README,
// gives each of the guide's rows, by that name, the rule that enforces it
// (its id in backticks, or "—") and the tests.
const (
	guide              = "../../templates/guides/service-limits.md.tmpl"
	developerCatalogue = "README.md"
)

// catalogueRow is a row of the guide: its answer cell, and where it is.
type catalogueRow struct {
	answer string
	line   int
}

// tableRow is a row of a Markdown table, its cells by their column's
// header.
type tableRow struct {
	cells map[string]string
	first string // the first cell
	line  int
}

// tableRows reads the rows of a file's Markdown tables.
func tableRows(t *testing.T, path string) []tableRow {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []tableRow
	var header []string
	for i, line := range strings.Split(string(text), "\n") {
		switch {
		case !strings.HasPrefix(line, "|"):
			header = nil // a table ends
		case header == nil:
			header = tableCells(line)
		case strings.HasPrefix(line, "|-"): // the header's rule
		default:
			cells := tableCells(line)
			if len(cells) != len(header) {
				t.Fatalf("%s:%d: %d cells, the header has %d", path, i+1, len(cells), len(header))
			}
			row := tableRow{cells: map[string]string{}, first: cells[0], line: i + 1}
			for c, h := range header {
				row.cells[h] = cells[c]
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// guideRows reads the guide's rows, by the name that starts each.
func guideRows(t *testing.T) map[string]catalogueRow {
	t.Helper()
	rows := map[string]catalogueRow{}
	for _, r := range tableRows(t, guide) {
		m := rowName.FindStringSubmatch(r.first)
		if m == nil {
			t.Errorf("%s:%d: the row's Limit cell does not start with its name in bold", guide, r.line)
			continue
		}
		if _, twice := rows[m[1]]; twice {
			t.Errorf("%s:%d: a second row named %q", guide, r.line, m[1])
		}
		answer, ok := r.cells["AWS's answer"]
		if !ok {
			answer = r.cells["GitHub's answer"]
		}
		rows[m[1]] = catalogueRow{answer: answer, line: r.line}
	}
	return rows
}

// rowName is the name in bold that starts a row of the guide.
var rowName = regexp.MustCompile(`^\*\*(.+?)\*\*`)

// developerRow is a row of the developer catalogue: the guide's row it
// is about, and the rule that enforces it ("" for none).
type developerRow struct {
	guideRow, rule string
	line           int
}

// developerRows reads the developer catalogue's rows.
func developerRows(t *testing.T) []developerRow {
	t.Helper()
	var rows []developerRow
	for _, r := range tableRows(t, developerCatalogue) {
		name, rule := r.cells["Guide's row"], r.cells["Rule"]
		if name == "" || rule == "" {
			t.Fatalf("%s:%d: want the columns \"Guide's row\" and \"Rule\"", developerCatalogue, r.line)
		}
		if rule == "—" {
			rule = ""
		} else if m := ruleID.FindStringSubmatch(rule); m != nil {
			rule = m[1]
		} else {
			t.Errorf("%s:%d: the Rule cell %q is neither a rule id in backticks nor \"—\"", developerCatalogue, r.line, rule)
		}
		rows = append(rows, developerRow{guideRow: name, rule: rule, line: r.line})
	}
	return rows
}

// ruleID is a Rule cell that names a rule.
var ruleID = regexp.MustCompile("^`([a-z0-9]+(?:-[a-z0-9]+)+)`$")

// tableCells splits a Markdown table row at its unescaped pipes.
func tableCells(line string) []string {
	var cells []string
	var cell strings.Builder
	line = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|")
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteString(`\|`)
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// pageAnswer is what an answer cell says.
type pageAnswer struct {
	status      int      // the first HTTP status it names
	statuses    []int    // every status it names
	codes       []string // the error codes in backticks
	messages    []string // the quoted messages, unescaped
	unpublished bool     // it says no message is published
}

var (
	statusPattern  = regexp.MustCompile(`(?:^|[\s:;(])([1-5][0-9][0-9])(?:[\s,;.)]|$)`)
	codePattern    = regexp.MustCompile("`([A-Za-z][A-Za-z0-9.]*)`")
	messagePattern = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	// markdownEscape is a backslash escape of Markdown (CommonMark: any
	// ASCII punctuation), which the page shows as the character alone.
	markdownEscape = regexp.MustCompile("\\\\([!-/:-@\\[-`{-~])")
)

// readAnswer reads an answer cell; actions are the names that are not
// error codes (the calls a cell names).
func readAnswer(cell string, actions map[string]bool) pageAnswer {
	var a pageAnswer
	for _, m := range statusPattern.FindAllStringSubmatch(cell, -1) {
		n, _ := strconv.Atoi(m[1])
		a.statuses = append(a.statuses, n)
	}
	if len(a.statuses) > 0 {
		a.status = a.statuses[0]
	}
	for _, m := range codePattern.FindAllStringSubmatch(cell, -1) {
		if !actions[m[1]] && !slices.Contains(a.codes, m[1]) {
			a.codes = append(a.codes, m[1])
		}
	}
	for _, m := range messagePattern.FindAllStringSubmatch(cell, -1) {
		a.messages = append(a.messages, markdownEscape.ReplaceAllString(m[1], "$1"))
	}
	a.unpublished = strings.Contains(cell, unpublishedMessage)
	return a
}

// matches tells whether an answer's message is one the page quotes, "…"
// standing for any text.
func matches(quoted, message string) bool {
	parts := strings.Split(quoted, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, "(?s:.*)") + "$").MatchString(message)
}

// codeAnswer is one answer of the code to an example.
type codeAnswer struct {
	status        int // 0 for an entry's failure (the call answers 200)
	code, message string
}

// frontsWording marks the messages that are the front's, not AWS's.
const frontsWording = "(the test front's wording)"

// unpublishedMessage is what an answer cell of the guide says where AWS
// publishes the code and no message (the front answers its own).
const unpublishedMessage = "no message is published"

// Every rule's row in the guide gives the code's answers, and only them:
// the status, every error code, every message of AWS's that the code
// answers the examples (catalogueExamples) with, the messages that are the
// front's said to be unpublished, and no message the code does not
// answer; and every rule has its row in the developer catalogue, every
// rule there is one, and the guide has the row it names.
func TestCatalogue_answersAreTheCodes(t *testing.T) {
	rows := guideRows(t)
	ruleRows := map[string]developerRow{}
	for _, d := range developerRows(t) {
		if d.rule == "" {
			continue
		}
		if _, twice := ruleRows[d.rule]; twice {
			t.Errorf("%s:%d: a second row for rule %s", developerCatalogue, d.line, d.rule)
		}
		ruleRows[d.rule] = d
	}
	actions := map[string]bool{}
	for _, r := range awslimits.Rules {
		for _, a := range r.Actions {
			actions[a] = true
		}
	}
	actions["SendMessage"] = true
	examples := catalogueExamples(t)
	for _, r := range awslimits.Rules {
		d, ok := ruleRows[r.ID]
		if !ok {
			t.Errorf("rule %s: no row in %s", r.ID, developerCatalogue)
			continue
		}
		delete(ruleRows, r.ID)
		row, ok := rows[d.guideRow]
		if !ok {
			t.Errorf("%s:%d: rule %s's row %q: no row of %s starts with it in bold", developerCatalogue, d.line, r.ID, d.guideRow, guide)
			continue
		}
		var answers []codeAnswer
		for i, ex := range examples[r.ID] {
			if !slices.Contains(r.Actions, ex.action) {
				t.Errorf("rule %s, example %d: %s is not among the rule's actions %v", r.ID, i+1, ex.action, r.Actions)
				continue
			}
			doc := exampleDocument(t, r.Service, ex.body)
			got := 0
			if refusal := r.Check(ex.action, doc); refusal != nil {
				answers = append(answers, codeAnswer{refusal.Status, refusal.Code, refusal.Message})
				got++
			}
			if r.Entries != nil {
				for _, f := range r.Entries(ex.action, doc) {
					answers = append(answers, codeAnswer{0, f.Code, f.Message})
					got++
				}
			}
			if got == 0 {
				t.Errorf("rule %s, example %d (%s): taken, want it to break the rule", r.ID, i+1, ex.action)
			}
		}
		for _, s := range r.Stateful {
			answers = append(answers, codeAnswer{s.Status, s.Code, s.Message})
		}
		if len(answers) == 0 {
			t.Errorf("rule %s: no example (catalogueExamples)", r.ID)
			continue
		}
		for _, problem := range checkRow(r.ID, row, readAnswer(row.answer, actions), answers) {
			t.Error(problem)
		}
	}
	for id, d := range ruleRows {
		t.Errorf("%s:%d: a row for rule %s, which awslimits lacks", developerCatalogue, d.line, id)
	}
}

// The developer catalogue has a row for each of the guide's rows, and
// only for them.
func TestCatalogue_rowsMatchTheGuide(t *testing.T) {
	rows := guideRows(t)
	seen := map[string]bool{}
	for _, d := range developerRows(t) {
		if seen[d.guideRow] {
			t.Errorf("%s:%d: a second row for the guide's row %q", developerCatalogue, d.line, d.guideRow)
		}
		seen[d.guideRow] = true
		if _, ok := rows[d.guideRow]; !ok {
			t.Errorf("%s:%d: the guide's row %q: no row of %s starts with it in bold", developerCatalogue, d.line, d.guideRow, guide)
		}
	}
	for name, row := range rows {
		if !seen[name] {
			t.Errorf("%s:%d: the row %q has none in %s", guide, row.line, name, developerCatalogue)
		}
	}
}

// checkRow compares a rule's row with the code's answers, and returns
// where they differ.
func checkRow(id string, row catalogueRow, page pageAnswer, answers []codeAnswer) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	where := fmt.Sprintf("%s:%d (%s)", guide, row.line, id)
	var codes []string
	entries := false
	for _, a := range answers {
		if !slices.Contains(codes, a.code) {
			codes = append(codes, a.code)
		}
		switch {
		case a.status == 0:
			entries = true
		case a.status != page.status:
			fail("%s: the page gives HTTP %d, the code answers %d (%s)", where, page.status, a.status, a.code)
		}
		switch quoted := slices.ContainsFunc(page.messages, func(q string) bool { return matches(q, a.message) }); {
		case strings.Contains(a.message, frontsWording) && !page.unpublished:
			fail("%s: the code answers %s %q, the front's message, and the page does not say %q", where, a.code, a.message, unpublishedMessage)
		case !strings.Contains(a.message, frontsWording) && !quoted:
			fail("%s: the code answers %s %q, which the page does not quote", where, a.code, a.message)
		}
	}
	if entries && !slices.Contains(page.statuses, 200) {
		fail("%s: the code fails batch entries alone (the call answers 200), the page does not say so", where)
	}
	for _, q := range page.messages {
		if !slices.ContainsFunc(answers, func(a codeAnswer) bool { return matches(q, a.message) }) {
			fail("%s: the page quotes %q, which the code answers to no example", where, q)
		}
	}
	slices.Sort(codes)
	pageCodes := slices.Sorted(slices.Values(page.codes))
	if !slices.Equal(codes, pageCodes) {
		fail("%s: the page names the codes %v, the code answers %v", where, pageCodes, codes)
	}
	return problems
}

// example is a request that breaks a rule: its action and its body as
// the SDK sends it (JSON, or EC2's query form).
type example struct {
	action, body string
}

// exampleDocument reads an example's body as the rules read it.
func exampleDocument(t *testing.T, service, body string) map[string]any {
	t.Helper()
	if service == "ec2" {
		form, err := url.ParseQuery(body)
		if err != nil {
			t.Fatal(err)
		}
		return awslimits.FormDocument(form)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return doc
}

// The examples' pieces.

func ec2Tags(prefix string, n int, key, value func(i int) string) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf("%sTag.%d.Key=%s&%sTag.%d.Value=%s", prefix, i+1, url.QueryEscape(key(i)), prefix, i+1, url.QueryEscape(value(i))))
	}
	return strings.Join(parts, "&")
}

func fixed(s string) func(int) string { return func(int) string { return s } }

func numbered(prefix string) func(int) string {
	return func(i int) string { return prefix + strconv.Itoa(i) }
}

func jsonList(n int, element func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = element(i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func key(pk, sk string) string {
	return fmt.Sprintf(`{"PK":{"S":%s},"SK":{"S":%s}}`, jsonString(pk), jsonString(sk))
}

func entriesJSON(n int, body func(i int) string) string {
	return jsonList(n, func(i int) string { return fmt.Sprintf(`{"Id":"id%d","MessageBody":%s}`, i, jsonString(body(i))) })
}

func keysJSON(n int, pk string) string {
	return jsonList(n, func(i int) string { return key(pk, strconv.Itoa(i)) })
}

func putsJSON(n int, pk string) string {
	return jsonList(n, func(i int) string { return `{"PutRequest":{"Item":` + key(pk, strconv.Itoa(i)) + `}}` })
}

func userDataOf(n int) string {
	return url.QueryEscape(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("#"), n)))
}

// catalogueExamples are requests that break each rule, one at least for
// every answer the rule gives, shaped as the guide's quoted answers
// are (the values AWS prints back).
func catalogueExamples(t *testing.T) map[string][]example {
	t.Helper()
	long := func(n int) string { return strings.Repeat("x", n) }
	filterValues := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf("Filter.1.Value.%d=i-%017x", i+1, i))
		}
		return "Filter.1.Name=instance-id&" + strings.Join(parts, "&")
	}
	fleetTags := func(n int, key, value func(int) string) string {
		return "Type=instant&TagSpecification.1.ResourceType=instance&" + ec2Tags("TagSpecification.1.", n, key, value)
	}
	logEvents := func(n int, message string, step int64) string {
		return `{"logGroupName":"/g","logStreamName":"s","logEvents":` +
			jsonList(n, func(i int) string {
				return fmt.Sprintf(`{"timestamp":%d,"message":%s}`, 1700000000000+int64(i)*step, jsonString(message))
			}) + `}`
	}
	return map[string][]example{
		"ec2-user-data": {
			{"RunInstances", "UserData=" + userDataOf(16385)},
			{"RunInstances", "UserData=" + url.QueryEscape("#!/bin/sh")},
		},
		"ec2-launch-template-user-data": {
			{"CreateLaunchTemplate", "LaunchTemplateData.UserData=" + userDataOf(16385)},
			{"CreateLaunchTemplateVersion", "LaunchTemplateData.UserData=" + url.QueryEscape("#!/bin/sh")},
		},
		"ec2-tags-per-resource": {
			{"CreateFleet", fleetTags(51, numbered("k"), fixed("v"))},
		},
		"ec2-tag-length": {
			{"CreateFleet", fleetTags(1, fixed("k"), fixed(long(257)))},
			{"CreateTags", ec2Tags("", 1, fixed(long(129)), fixed("v"))},
			{"RunInstances", "TagSpecification.1.ResourceType=instance&" + ec2Tags("TagSpecification.1.", 1, fixed(""), fixed("v"))},
		},
		"ec2-tag-aws-prefix": {
			{"RunInstances", "TagSpecification.1.ResourceType=instance&" + ec2Tags("TagSpecification.1.", 1, fixed("aws:x"), fixed("v"))},
			{"CreateTags", ec2Tags("", 1, fixed("aws:autoscaling:groupName"), fixed("v"))},
			{"CreateLaunchTemplate", "TagSpecification.1.ResourceType=launch-template&" + ec2Tags("TagSpecification.1.", 1, fixed("aws:x"), fixed("v"))},
		},
		"ec2-fleet-tag-resource-types": {
			{"CreateFleet", "Type=instant&TagSpecification.1.ResourceType=volume&" + ec2Tags("TagSpecification.1.", 1, fixed("k"), fixed("v"))},
		},
		"ec2-client-token": {
			{"CreateFleet", "ClientToken=" + long(65)},
			{"CreateLaunchTemplate", "ClientToken=" + long(129)},
		},
		"ec2-filter-values": {
			{"DescribeInstances", filterValues(201)},
			{"DescribeImages", "Filter.1.Name=name&Filter.1.Value.1=" + long(256)},
		},
		"ec2-describe-page-size": {
			{"DescribeInstances", "InstanceId.1=i-0123456789abcdef0&MaxResults=5"},
			{"DescribeInstances", "MaxResults=1"},
			{"DescribeInstanceTypes", "MaxResults=101"},
		},
		"ec2-terminate-ids": {
			{"TerminateInstances", strings.TrimPrefix(strings.ReplaceAll(filterValues(1001), "Filter.1.Value.", "InstanceId."), "Filter.1.Name=instance-id&")},
		},
		"sqs-batch-entries": {
			{"SendMessageBatch", `{"Entries":` + entriesJSON(11, fixed("x")) + `}`},
			{"SendMessageBatch", `{"Entries":[]}`},
			{"SendMessageBatch", `{"Entries":[{"Id":"id1","MessageBody":"a"},{"Id":"id1","MessageBody":"b"}]}`},
			{"DeleteMessageBatch", `{"Entries":[{"Id":"i-0123.4","ReceiptHandle":"rh"}]}`},
		},
		"sqs-message-size": {
			{"SendMessage", `{"MessageBody":` + jsonString(long(1<<20+1)) + `}`},
			{"SendMessageBatch", `{"Entries":` + entriesJSON(10, fixed(long(104858))) + `}`},
		},
		"sqs-message-characters": {
			{"SendMessage", `{"MessageBody":"{\"id\":\"\u0001\"}"}`},
			{"SendMessage", `{"MessageBody":""}`},
			{"SendMessageBatch", `{"Entries":[{"Id":"a","MessageBody":"ok"},{"Id":"b","MessageBody":"\u0001"}]}`},
		},
		"sqs-delay-seconds": {
			{"SendMessageBatch", `{"Entries":[{"Id":"a","MessageBody":"x","DelaySeconds":1000}]}`},
		},
		"sqs-receive": {
			{"ReceiveMessage", `{"MaxNumberOfMessages":11}`},
			{"ReceiveMessage", `{"WaitTimeSeconds":21}`},
		},
		"sqs-visibility-timeout": {
			{"ChangeMessageVisibilityBatch", `{"Entries":[{"Id":"a","ReceiptHandle":"rh","VisibilityTimeout":43201}]}`},
		},
		"sqs-queue-name": {
			{"CreateQueue", `{"QueueName":` + jsonString(strings.Repeat("q", 81)) + `}`},
		},
		"sqs-queue-attributes": {
			{"CreateQueue", `{"QueueName":"q","Attributes":{"DelaySeconds":"901"}}`},
		},
		"sqs-tags": {
			{"TagQueue", `{"Tags":{"aws:x":"v"}}`},
			{"CreateQueue", `{"QueueName":"q","tags":{` + jsonString(long(129)) + `:"v"}}`},
			{"TagQueue", `{"Tags":{"k":` + jsonString(long(257)) + `}}`},
		},
		"dynamodb-table-name": {
			{"DescribeTable", `{"TableName":"ab"}`},
			{"CreateTable", `{"TableName":` + jsonString(long(256)) + `}`},
			{"GetItem", `{"TableName":"a b c"}`},
		},
		"dynamodb-item-size": {
			{"PutItem", `{"TableName":"t","Item":{"PK":{"S":"TYPE#X"},"SK":{"S":"1"},"v":{"S":` + jsonString(long(409600-11)) + `}}}`},
		},
		"dynamodb-key": {
			{"GetItem", `{"TableName":"t","Key":` + key("TYPE#X", "") + `}`},
			{"DeleteItem", `{"TableName":"t","Key":` + key(long(2049), "1") + `}`},
			{"PutItem", `{"TableName":"t","Item":` + key("TYPE#X", long(1025)) + `}`},
		},
		"dynamodb-empty-set": {
			{"PutItem", `{"TableName":"t","Item":{"PK":{"S":"a"},"SK":{"S":"b"},"ids":{"SS":[]}}}`},
			{"UpdateItem", `{"TableName":"t","Key":` + key("a", "b") + `,"UpdateExpression":"DELETE #ids :ids","ExpressionAttributeNames":{"#ids":"ids"},"ExpressionAttributeValues":{":ids":{"SS":[]}}}`},
		},
		"dynamodb-expressions": {
			{"UpdateItem", `{"UpdateExpression":"SET #a = :a","ExpressionAttributeNames":{"#a":"a","#unused":"u"},"ExpressionAttributeValues":{":a":{"S":"x"}}}`},
			{"PutItem", `{"ConditionExpression":"#missing = :v","ExpressionAttributeValues":{":v":{"S":"x"}}}`},
			{"Query", `{"KeyConditionExpression":"PK = :pk","FilterExpression":` + jsonString("attribute_exists(x)"+strings.Repeat(" ", 4096)) + `,"ExpressionAttributeValues":{":pk":{"S":"a"}}}`},
			{"PutItem", `{"ConditionExpression":"attribute_not_exists(PK)","ExpressionAttributeValues":{":unused":{"S":"x"}}}`},
			{"DeleteItem", `{"ConditionExpression":"#s = :missing","ExpressionAttributeNames":{"#s":"s"}}`},
		},
		"dynamodb-transact-write": {
			{"TransactWriteItems", `{"TransactItems":` + jsonList(101, func(i int) string { return `{"Put":{"TableName":"t","Item":` + key("a", strconv.Itoa(i)) + `}}` }) + `}`},
			{"TransactWriteItems", `{"TransactItems":[]}`},
			{"TransactWriteItems", `{"TransactItems":[{"Put":{"TableName":"t","Item":` + key("a", "1") + `}},{"Delete":{"TableName":"t","Key":` + key("a", "1") + `}}]}`},
			{"TransactWriteItems", `{"TransactItems":` + jsonList(11, func(i int) string {
				return `{"Put":{"TableName":"t","Item":{"PK":{"S":"a"},"SK":{"S":"` + strconv.Itoa(i) + `"},"v":{"S":` + jsonString(long(400000)) + `}}}}`
			}) + `}`},
		},
		"dynamodb-batch-get": {
			{"BatchGetItem", `{"RequestItems":{"TABLE":{"Keys":` + keysJSON(101, "a") + `}}}`},
			{"BatchGetItem", `{"RequestItems":{"a":{"Keys":` + keysJSON(60, "a") + `},"b":{"Keys":` + keysJSON(41, "b") + `}}}`},
			{"BatchGetItem", `{"RequestItems":{"t":{"Keys":[` + key("a", "1") + `,` + key("a", "1") + `]}}}`},
		},
		"dynamodb-batch-write": {
			{"BatchWriteItem", `{"RequestItems":{"TABLE":` + putsJSON(26, "a") + `}}`},
			{"BatchWriteItem", `{"RequestItems":{"a":` + putsJSON(13, "a") + `,"b":` + putsJSON(13, "b") + `}}`},
			{"BatchWriteItem", `{"RequestItems":{"t":[{"PutRequest":{"Item":` + key("a", "1") + `}},{"DeleteRequest":{"Key":` + key("a", "1") + `}}]}}`},
		},
		"dynamodb-tags": {
			{"TagResource", `{"Tags":` + jsonList(51, func(i int) string { return fmt.Sprintf(`{"Key":"k%d","Value":"v"}`, i) }) + `}`},
			{"CreateTable", `{"TableName":"t","Tags":[{"Key":"aws:x","Value":"v"}]}`},
		},
		"logs-names": {
			{"CreateLogGroup", `{"logGroupName":"a:b"}`},
			{"CreateLogStream", `{"logGroupName":"/g","logStreamName":` + jsonString(long(513)) + `}`},
			{"CreateLogStream", `{"logGroupName":"/g","logStreamName":"a:b"}`},
			{"PutLogEvents", `{"logGroupName":"","logStreamName":"s"}`},
		},
		"logs-batch-events": {
			{"PutLogEvents", logEvents(10001, "x", 1)},
			{"PutLogEvents", `{"logGroupName":"/g","logStreamName":"s","logEvents":[]}`},
		},
		"logs-batch-size": {
			{"PutLogEvents", logEvents(1, long(1<<20-25), 1)},
			{"PutLogEvents", logEvents(2, long(600000), 1)},
		},
		"logs-event-order": {
			{"PutLogEvents", `{"logEvents":[{"timestamp":2,"message":"x"},{"timestamp":1,"message":"x"}]}`},
			{"PutLogEvents", logEvents(2, "x", 24*3600*1000+1)},
		},
		"ssm-parameter-name": {
			{"GetParameter", `{"Name":"/ec2runners//github"}`},
		},
		"ssm-parameter-name-length": {
			{"GetParameter", `{"Name":` + jsonString("/"+long(2048)) + `}`},
		},
		"secretsmanager-secret-id": {
			{"GetSecretValue", `{"SecretId":"ec2runners/pool#github"}`},
		},
		"secretsmanager-secret-id-length": {
			{"GetSecretValue", `{"SecretId":` + jsonString(long(2049)) + `}`},
			{"GetSecretValue", `{"SecretId":""}`},
		},
	}
}

// The comparison fails on a wrong row: a message changed on either side,
// a code the page lacks, a status that differs.
func TestCatalogue_comparisonFailsOnAWrongRow(t *testing.T) {
	actions := map[string]bool{"CreateTags": true}
	answers := []codeAnswer{
		{400, "InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use"},
		{400, "InvalidParameterValue", "Value ( aws:x ) for parameter key is invalid. Tag keys starting with 'aws:' are reserved for internal use"},
		{400, "TagLimitExceeded", "A resource takes at most 50 tags " + frontsWording + "."},
	}
	good := "400 `InvalidParameterValue` \"Tag keys starting with 'aws:' are reserved for internal use\"; `CreateTags`: \"Value ( aws:… ) for parameter key is invalid. " +
		"Tag keys starting with 'aws:' are reserved for internal use\"; `TagLimitExceeded`, no message is published"
	for name, tc := range map[string]struct {
		cell string
		ok   bool
	}{
		"as the code answers":         {good, true},
		"a message changed":           {strings.Replace(good, "internal use\";", "internal use.\";", 1), false},
		"a message the code lacks":    {good + "; \"Tag keys must not be empty\"", false},
		"a code missing":              {strings.Replace(good, "`TagLimitExceeded`", "TagLimitExceeded", 1), false},
		"another status":              {strings.Replace(good, "400", "409", 1), false},
		"the front's message unnamed": {strings.Replace(good, ", no message is published", "", 1), false},
	} {
		problems := checkRow("ec2-tag-aws-prefix", catalogueRow{answer: tc.cell, line: 1}, readAnswer(tc.cell, actions), answers)
		if (len(problems) == 0) != tc.ok {
			t.Errorf("%s: problems %q, want ok = %v", name, problems, tc.ok)
		}
	}
}
