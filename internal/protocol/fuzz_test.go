package protocol

// Fuzz targets for everything the protocol reads from AWS or from users.
// `go test` runs their seeds and testdata/fuzz/<FuzzName>; `make fuzz` runs
// the fuzzers themselves for a while.

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ---------------------------------------------------------------- messages

func FuzzParseMessage(f *testing.F) {
	swap := func(old, new string) string { return strings.Replace(protocolBody, old, new, 1) }
	for _, body := range []string{
		protocolBody,
		protocolMessage.Body(),
		`{"id":"i-1","resourceClass":"16xlarge","instanceType":"m7g.16xlarge","cpu":64,"mmem":262144,"usageClass":"spot","threshold":"2030-01-01T00:00:00Z"}`,
		// Field names match case-insensitively in encoding/json.
		`{"ID":"i-0abc","ResourceClass":"large","INSTANCETYPE":"c6i.large","Cpu":2,"MMEM":4096,"usageclass":"on-demand","Threshold":"2026-06-01T12:00:00Z"}`,
		// Duplicate keys: the last wins.
		`{"id":"i-1","id":"","resourceClass":"large","instanceType":"c6i.large","cpu":2,"mmem":4096,"usageClass":"on-demand","threshold":"2026-06-01T12:00:00Z"}`,
		// Unknown fields are ignored.
		swap(`"id":"i-0abc"`, `"id":"i-0abc","extra":{"nested":[1,2,{"x":null}]}`),
		"", " ", "{", "}", "{}", "[]", "null", "true", "0", `"i-0abc"`, "not json", "\x00", "\xff\xfe",
		protocolBody + "garbage", protocolBody + " ", " \n\t" + protocolBody,
		swap(`"cpu":2`, `"cpu":"2"`),
		swap(`"cpu":2`, `"cpu":2.0`),
		swap(`"cpu":2`, `"cpu":1e1`),
		swap(`"cpu":2`, `"cpu":-2`),
		swap(`"cpu":2`, `"cpu":0`),
		swap(`"cpu":2`, `"cpu":9223372036854775807`),
		swap(`"cpu":2`, `"cpu":9223372036854775808`),
		swap(`"cpu":2`, `"cpu":1e400`),
		swap(`"cpu":2`, `"cpu":null`),
		swap(`"mmem":4096`, `"mmem":4096.5`),
		swap(`"id":"i-0abc"`, `"id":7`),
		swap(`"id":"i-0abc"`, `"id":["i-0abc"]`),
		swap(`"id":"i-0abc"`, `"id":"i-\u00e9\ud83d\ude00"`),
		swap(`"id":"i-0abc"`, `"id":"i-\ud800"`),   // lone surrogate
		swap(`"id":"i-0abc"`, "\"id\":\"i-\xff\""), // invalid UTF-8
		swap(`"id":"i-0abc"`, `"id":"<script>&amp;"`),
		swap(`"id":"i-0abc"`, `"id":"`+strings.Repeat("i", 4096)+`"`),
		swap("2026-06-01T12:00:00Z", "2026-06-01T12:00:00.5Z"),
		swap("2026-06-01T12:00:00Z", "2026-06-01T14:00:00+02:00"),
		swap("2026-06-01T12:00:00Z", "2026-02-30T12:00:00Z"),
		swap("2026-06-01T12:00:00Z", "9999-12-31T23:59:59Z"),
		swap("2026-06-01T12:00:00Z", "0000-01-01T00:00:00Z"),
		swap("2026-06-01T12:00:00Z", ""),
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, err := ParseMessage(body)
		if err != nil {
			if m != (Message{}) {
				t.Errorf("ParseMessage(%q) returned %+v with its error", body, m)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "not a runner message") && !strings.HasPrefix(msg, "runner message ") {
				t.Errorf("ParseMessage(%q) error %q does not say it is about a runner message", body, msg)
			}
			return
		}
		// Every field is required.
		if m.ID == "" || m.ResourceClass == "" || m.InstanceType == "" || m.UsageClass == "" || m.CPU <= 0 || m.MemoryMiB <= 0 {
			t.Fatalf("ParseMessage(%q) = %+v: a required field is empty", body, m)
		}
		ts, err := ParseTime(m.Threshold)
		if err != nil || FormatTime(ts) != m.Threshold {
			t.Fatalf("ParseMessage(%q) accepted threshold %q (%v)", body, m.Threshold, err)
		}
		// The body is a JSON object.
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &obj); err != nil {
			t.Fatalf("ParseMessage(%q) accepted a body that is not a JSON object: %v", body, err)
		}
		// Rendering and parsing again gives the same message, and the
		// rendering is stable.
		rendered := m.Body()
		back, err := ParseMessage(rendered)
		if err != nil {
			t.Fatalf("ParseMessage(%q.Body() = %q) = %v", body, rendered, err)
		}
		if back != m {
			t.Fatalf("round trip of %q: %+v, then %+v", body, m, back)
		}
		if again := back.Body(); again != rendered {
			t.Fatalf("Body() not stable: %q, then %q", rendered, again)
		}
	})
}

// ---------------------------------------------------------------- timestamps

var wireTimeFields = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z$`)

// referenceTime is an independent reading of the pool protocol's timestamp rule:
// exactly YYYY-MM-DDTHH:MM:SSZ, with a real calendar date and time of day.
func referenceTime(s string) (time.Time, bool) {
	m := wireTimeFields.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, false
	}
	n := make([]int, 6)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	year, month, day, hour, minute, second := n[0], n[1], n[2], n[3], n[4], n[5]
	if month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, second, 0, time.UTC)
	if t.Day() != day { // 30 February and the like roll over
		return time.Time{}, false
	}
	return t, true
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{
		"2026-06-01T12:00:00Z", "1970-01-01T00:00:00Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
		"2028-02-29T00:00:00Z", "2026-02-29T00:00:00Z", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
		"2026-06-00T00:00:00Z", "2026-06-31T00:00:00Z", "2026-06-01T24:00:00Z", "2026-06-01T23:60:00Z", "2026-06-01T23:59:60Z",
		"2026-06-01T12:00:00.5Z", "2026-06-01T12:00:00.000Z", "2026-06-01T12:00:00,5Z",
		"2026-06-01T12:00:00", "2026-06-01 12:00:00Z", "2026-06-01T12:00:00+00:00", "2026-06-01T14:00:00+02:00",
		"2026-06-01T12:00:00z", "2026-06-01t12:00:00Z", "2026-6-1T12:00:00Z", "2026-06-01T1:00:00Z", "+2026-06-01T12:00:00Z",
		"-2026-06-01T12:00:00Z", "12026-06-01T12:00:00Z", "2026-06-01T12:00:00ZZ", " 2026-06-01T12:00:00Z", "2026-06-01T12:00:00Z\n",
		"2026-06-01T12:00:00UTC", "Mon, 01 Jun 2026 12:00:00 GMT", "1780315200", "", "Z", "２０２６-06-01T12:00:00Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTime(s)
		want, valid := referenceTime(s)
		if (err == nil) != valid {
			t.Fatalf("ParseTime(%q) = %v, %v; the protocol's format says valid = %v", s, got, err, valid)
		}
		if err != nil {
			if !got.IsZero() {
				t.Errorf("ParseTime(%q) returned %v with its error", s, got)
			}
			return
		}
		if !got.Equal(want) || got.Location() != time.UTC || got.Nanosecond() != 0 {
			t.Errorf("ParseTime(%q) = %v, want %v in UTC", s, got, want)
		}
		if back := FormatTime(got); back != s {
			t.Errorf("FormatTime(ParseTime(%q)) = %q", s, back)
		}
	})
}

// ---------------------------------------------------------------- items

// Attribute shapes the item fuzzers build from a selector.
func fuzzAttr(shape uint8, s string) types.AttributeValue {
	switch shape % 6 {
	case 0, 1: // a string most of the time
		return &types.AttributeValueMemberS{Value: s}
	case 2:
		return nil // absent
	case 3:
		return &types.AttributeValueMemberN{Value: s}
	case 4:
		return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"S": &types.AttributeValueMemberS{Value: s}}}
	default:
		return &types.AttributeValueMemberSS{Value: []string{s}}
	}
}

func setAttr(item map[string]types.AttributeValue, name string, v types.AttributeValue) {
	if v != nil {
		item[name] = v
	}
}

func strIfS(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// validPoolConfig is a pool config document as the provider writes it.
const validPoolConfig = `{"name":"ci-runners","instanceArnPrefix":"arn:aws:ec2:eu-west-1:123456789012:instance/","resourceClasses":{"large":{"cpu":2,"memoryMiB":4096},"xlarge":{"cpu":4,"memoryMiB":8192}},` +
	`"idleTimeout":"7m","maxRuntime":"30m","fleet":{"launchTemplateId":"lt-0123456789abcdef0","launchTemplateVersion":"$Default",` +
	`"subnetIds":["subnet-0a1b2c3d"],"instanceSelection":"attribute-based"},` +
	`"queueUrls":{"large":"https://sqs.eu-west-1.amazonaws.com/123456789012/ci-runners-large"},"github":{"owner":"octo","repository":"app"}}`

func FuzzPoolConfigFromItem(f *testing.F) {
	swap := func(old, new string) string { return strings.Replace(validPoolConfig, old, new, 1) }
	for _, doc := range []string{
		validPoolConfig,
		`{"name":"p","instanceArnPrefix":"arn:aws-cn:ec2:cn-north-1:123456789012:instance/","resourceClasses":{"large":{"cpu":2,"memoryMiB":4096}},"idleTimeout":"1h","maxRuntime":"6h","queueUrls":{}}`,
		`{"name":"gpu_pool-2","instanceArnPrefix":"arn:aws:ec2:us-east-1:000000000000:instance/","resourceClasses":{"big":{"cpu":8,"memoryMiB":32768}},"idleTimeout":"45s","maxRuntime":"2h0m5s",` +
			`"fleet":{"launchTemplateName":"runner","launchTemplateVersion":"3","subnetIds":["subnet-a","subnet-b"],"instanceSelection":"explicit"},"queueUrls":null}`,
		"", "null", "{}", "[]", `"ci"`, "{", validPoolConfig + "x",
		swap(`"name":"ci-runners"`, `"name":""`),
		swap(`"name":"ci-runners"`, `"name":"my pool"`),
		swap(`"name":"ci-runners"`, `"name":5`),
		swap(`"cpu":2,`, `"cpu":0,`),
		swap(`"cpu":4,`, `"cpu":2,`),
		swap(`"memoryMiB":8192`, `"memoryMiB":4096`),
		swap(`"large":{"cpu":2`, `"my class":{"cpu":2`),
		swap(`"large":{"cpu":2`, `"gpu-big":{"cpu":2`), // a class named before '-' was refused
		swap(`"resourceClasses":{"large":{"cpu":2,"memoryMiB":4096},"xlarge":{"cpu":4,"memoryMiB":8192}}`, `"resourceClasses":{}`),
		swap(`"idleTimeout":"7m"`, `"idleTimeout":"soon"`),
		swap(`"idleTimeout":"7m"`, `"idleTimeout":"-7m"`),
		swap(`"idleTimeout":"7m"`, `"idleTimeout":null`),
		swap(`"idleTimeout":"7m"`, `"idleTimeout":420000000000`),
		swap(`"maxRuntime":"30m"`, `"maxRuntime":"2562047h47m16.854775807s"`),
		swap(`"maxRuntime":"30m"`, `"maxRuntime":"2562048h"`),
		swap(`"maxRuntime":"30m"`, `"maxRuntime":"1.5h"`),
		swap(`"launchTemplateId":"lt-0123456789abcdef0"`, `"launchTemplateId":"lt-1","launchTemplateName":"runners"`),
		swap(`"launchTemplateId":"lt-0123456789abcdef0"`, `"launchTemplateId":""`),
		swap(`"subnetIds":["subnet-0a1b2c3d"]`, `"subnetIds":[]`),
		swap(`"subnetIds":["subnet-0a1b2c3d"]`, `"subnetIds":"subnet-0a1b2c3d"`),
		swap(`"instanceSelection":"attribute-based"`, `"instanceSelection":"cheapest"`),
		swap(`"launchTemplateVersion":"$Default"`, `"launchTemplateVersion":""`),
		swap(`"fleet":{`, `"fleet":null,"x":{`),
		swap(`"owner":"octo"`, `"owner":"-octo"`),
		swap(`"repository":"app"`, `"repository":"octo/app"`),
		swap(`"github":{"owner":"octo","repository":"app"}`, `"github":{}`),
		swap(`"github":{"owner":"octo","repository":"app"}`, `"github":null`),
		swap(`"github":{`, `"access":{"repositories":[{"repository":"octo/app","workflows":["octo/app/.github/workflows/*"],"maxRunners":4,"maxRuntime":"20m","resourceClasses":["large"]},{"repository":"octo/docs"}]},"github":{`),
		swap(`"github":{`, `"access":{"repositories":[{"repository":"octo/app","workflows":["octo/other/.github/workflows/*"]}]},"github":{`),
		swap(`"github":{`, `"access":{"repositories":[{"repository":"octo/app","workflows":[]}]},"github":{`),
		swap(`"github":{`, `"access":{"repositories":[{"repository":"octo/app","maxRuntime":"1h"}]},"github":{`),
		swap(`"github":{`, `"access":{"repositories":[{"repository":"octo/app"},{"repository":"OCTO/APP"}]},"github":{`),
		swap(`"github":{`, `"access":{"repositories":null},"github":{`),
		swap(`"github":{`, `"access":null,"github":{`),
		swap(`"queueUrls":{`, `"queueUrls":{"xlarge":"","`),
		swap(`"instanceArnPrefix":"arn:aws:ec2:eu-west-1:123456789012:instance/",`, ``),
		swap(`:instance/"`, `:instance/i-0abc"`),
		swap(`:instance/"`, `:instance"`),
		swap(`123456789012:instance`, `12345:instance`),
		swap(`arn:aws:ec2:eu-west-1`, `arn:aws:ec2:*`),
		swap(`"instanceArnPrefix":"arn:aws:ec2:eu-west-1:123456789012:instance/"`, `"instanceArnPrefix":null`),
		swap(`"instanceArnPrefix":"arn:aws:ec2:eu-west-1:123456789012:instance/"`, `"instanceArnPrefix":["arn:aws:ec2:eu-west-1:123456789012:instance/"]`),
	} {
		f.Add(doc, uint8(0))
	}
	f.Add(validPoolConfig, uint8(2)) // no value attribute
	f.Add(validPoolConfig, uint8(3)) // a number
	f.Add(validPoolConfig, uint8(4)) // a map
	const now = "2026-06-01T12:00:00Z"
	f.Fuzz(func(t *testing.T, doc string, shape uint8) {
		item := BaseItem(TypeMetadata, PoolConfigID, now)
		setAttr(item, AttrValue, fuzzAttr(shape, doc))
		c, err := PoolConfigFromItem(item)
		if err != nil {
			if !reflect.DeepEqual(c, PoolConfig{}) {
				t.Errorf("PoolConfigFromItem returned %+v with its error", c)
			}
			if !strings.HasPrefix(err.Error(), "pool config item is not valid: ") {
				t.Errorf("error %q does not name the pool config item", err)
			}
			return
		}
		if _, isS := item[AttrValue].(*types.AttributeValueMemberS); !isS {
			t.Fatalf("PoolConfigFromItem accepted a value attribute of type %T", item[AttrValue])
		}
		// What a claim relies on holds.
		if err := ValidatePoolName(c.Name); err != nil {
			t.Errorf("accepted config %q: %v", doc, err)
		}
		if err := ValidateResourceClasses(c.ResourceClasses); err != nil {
			t.Errorf("accepted config %q: %v", doc, err)
		}
		for class := range c.ResourceClasses {
			// Config items may be older than the rule against '-' in classes.
			if err := validateStoredClassName(c.Name, class); err != nil {
				t.Errorf("accepted config %q: %v", doc, err)
			}
		}
		if c.IdleTimeout < 0 || c.MaxRuntime < 0 {
			t.Errorf("accepted config %q with a negative duration: %+v", doc, c)
		}
		if fl := c.Fleet; fl != nil {
			if (fl.LaunchTemplateID == "") == (fl.LaunchTemplateName == "") || len(fl.SubnetIDs) == 0 ||
				(fl.InstanceSelection != SelectionAttributeBased && fl.InstanceSelection != SelectionExplicit) {
				t.Errorf("accepted config %q with an unusable fleet %+v", doc, *fl)
			}
		}
		if !referenceAgentPK.MatchString("AGENT#"+c.InstanceARNPrefix+"i-1") || !strings.HasSuffix(c.InstanceARNPrefix, ":instance/") {
			t.Errorf("accepted config %q with instance ARN prefix %q", doc, c.InstanceARNPrefix)
		}
		if g := c.GitHub; g != nil && !GitHubOwnerPattern.MatchString(g.Owner) {
			t.Errorf("accepted config %q with GitHub owner %q", doc, g.Owner)
		}
		// The broker's policy admits each repository's own workflows alone.
		if a := c.Access; a != nil {
			for _, r := range a.Repositories {
				for _, w := range r.Workflows {
					if !strings.HasPrefix(strings.ToLower(w), strings.ToLower(r.Repository)+"/") || strings.Contains(r.Repository, "*") {
						t.Errorf("accepted config %q whose entry for %q admits workflow %q", doc, r.Repository, w)
					}
				}
			}
		}
		// The config re-renders to an item that reads back the same.
		again := c.Item(now)
		back, err := PoolConfigFromItem(again)
		if err != nil {
			t.Fatalf("config %+v read from %q does not read back from its own item: %v", c, doc, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip of %q:\n%+v\nthen\n%+v", doc, c, back)
		}
		if a, b := strIfS(again[AttrValue]), strIfS(back.Item(now)[AttrValue]); a != b {
			t.Fatalf("rendering is not stable: %s, then %s", a, b)
		}
	})
}

// referenceAgentPK is an independent reading of the agent partition key:
// AGENT#arn:<partition>:ec2:<region>:<12-digit account>:instance/<id>.
var referenceAgentPK = regexp.MustCompile(`^AGENT#arn:aws(-[a-z]+)*:ec2:[a-z]{2}(-[a-z]+)+-[0-9]+:[0-9]{12}:instance/([A-Za-z0-9-]+)$`)

// referenceAgentID is the instance id an agent partition key names, or "".
func referenceAgentID(pk string) string {
	if m := referenceAgentPK.FindStringSubmatch(pk); m != nil {
		return m[3]
	}
	return ""
}

// referenceTarget: GitHub's owner, or owner/repository.
var referenceTarget = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}(/[A-Za-z0-9_.-]{1,100})?$`)

const fuzzPK = "AGENT#arn:aws:ec2:eu-west-1:123456789012:instance/i-0abc"

// agentFuzzItem builds an agent partition item from fuzz input: the key
// attributes, then the value map's fields (or, by the last shape, a string
// value or none), each of a shape chosen by shapes.
func agentFuzzItem(shapes []byte, pk, sk, identifier, updatedAt string, value []struct{ name, value string }) map[string]types.AttributeValue {
	shape := func(i int) uint8 {
		if i < len(shapes) {
			return shapes[i]
		}
		return 0
	}
	item := map[string]types.AttributeValue{}
	for i, a := range []struct{ name, value string }{{AttrPK, pk}, {AttrSK, sk}, {AttrIdentifier, identifier}, {AttrUpdatedAt, updatedAt}} {
		setAttr(item, a.name, fuzzAttr(shape(i), a.value))
	}
	m := map[string]types.AttributeValue{}
	for i, fl := range value {
		setAttr(m, fl.name, fuzzAttr(shape(4+i), fl.value))
	}
	switch shape(4+len(value)) % 3 {
	case 0:
		item[AttrValue] = &types.AttributeValueMemberM{Value: m}
	case 1:
		if len(value) > 0 {
			item[AttrValue] = &types.AttributeValueMemberS{Value: value[0].value}
		}
	}
	return item
}

// agentKeyValid reads an agent item's key independently: the partition
// names an instance, identifier is its id, and the sort key is sk.
func agentKeyValid(item map[string]types.AttributeValue, sk string) bool {
	id := referenceAgentID(strIfS(item[AttrPK]))
	return id != "" && strIfS(item[AttrIdentifier]) == id && strIfS(item[AttrSK]) == sk
}

// valueMap is the item's value map, or nil.
func valueMap(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if m, ok := item[AttrValue].(*types.AttributeValueMemberM); ok {
		return m.Value
	}
	return nil
}

func FuzzRunnerTokenFromItem(f *testing.F) {
	const exp = "2026-06-01T13:00:00Z"
	// shapes: PK, SK, identifier, updatedAt, then the value's token,
	// expires_at, runId and target, then the value's shape.
	all := make([]byte, 9)
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "AABBCC", exp, "run-1", "octo/app", all)
	f.Add(fuzzPK, SortKeyRemovalToken, "i-0abc", "RRMM", exp, "run-1", "octo", all)
	f.Add(fuzzPK, "TOKEN#register", "i-0abc", "AABBCC", exp, "run-1", "octo/app", all)
	f.Add(fuzzPK, "ID#gh_registration_token", "i-0abc", "AABBCC", exp, "run-1", "octo/app", all)
	f.Add("TYPE#METADATA", SortKeyRegistrationToken, "i-0abc", "AABBCC", exp, "run-1", "octo/app", all)
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abd", "AABBCC", exp, "run-1", "octo/app", all) // another instance's id
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "", exp, "run-1", "octo/app", all)
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "AABBCC", exp, "", "octo/app", all)
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "AABBCC", exp, "run-1", "", all)
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "AABBCC", exp, "run-1", "octo/app/x", all)
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "AABBCC", exp, "run-1", "-octo", all)
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "AABBCC", "2026-06-01T13:00:00.5Z", "run-1", "octo/app", all)
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "AABBCC", "0000-01-01T00:00:00Z", "run-1", "octo/app", all)
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "AABBCC", exp, "run-1", "octo/app", []byte{0, 0, 0, 0, 3, 0, 0, 0, 0}) // token is a number
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "AABBCC", exp, "run-1", "octo/app", []byte{0, 0, 2, 0, 0, 0, 0, 0, 0}) // no identifier
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "AABBCC", exp, "run-1", "octo/app", []byte{0, 0, 0, 0, 0, 0, 0, 0, 1}) // value is a string
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", "AABBCC", exp, "run-1", "octo/app", []byte{0, 0, 0, 0, 0, 0, 0, 0, 2}) // no value
	f.Add(fuzzPK, SortKeyRegistrationToken, "i-0abc", strings.Repeat("T", 5000), exp, strings.Repeat("r", 100), "octo/"+strings.Repeat("a", 100), all)
	f.Fuzz(func(t *testing.T, pk, sk, identifier, token, expiresAt, runID, target string, shapes []byte) {
		item := agentFuzzItem(shapes, pk, sk, identifier, "2026-06-01T12:00:00Z", []struct{ name, value string }{
			{"token", token}, {"expires_at", expiresAt}, {"runId", runID}, {"target", target},
		})
		got, err := RunnerTokenFromItem(item)

		// What the item holds, read independently.
		v := valueMap(item)
		in := map[string]string{}
		for _, name := range []string{"token", "expires_at", "runId", "target"} {
			in[name] = strIfS(v[name])
		}
		sortKey := strIfS(item[AttrSK])
		_, okTime := referenceTime(in["expires_at"])
		valid := (sortKey == SortKeyRegistrationToken || sortKey == SortKeyRemovalToken) && agentKeyValid(item, sortKey) &&
			v != nil && in["token"] != "" && in["runId"] != "" && okTime && referenceTarget.MatchString(in["target"])
		if (err == nil) != valid {
			t.Fatalf("RunnerTokenFromItem(%v) = %+v, %v; want valid = %v", item, got, err, valid)
		}
		if err != nil {
			if !reflect.DeepEqual(got, RunnerToken{}) {
				t.Errorf("returned %+v with its error", got)
			}
			if !strings.HasPrefix(err.Error(), "runner token item") {
				t.Errorf("error %q does not name the runner token item", err)
			}
			return
		}
		if "AGENT#"+got.InstanceARN != strIfS(item[AttrPK]) || got.SortKey != sortKey || got.Token != in["token"] || got.RunID != in["runId"] ||
			got.Target != in["target"] || FormatTime(got.ExpiresAt) != in["expires_at"] || got.UpdatedAt != strIfS(item[AttrUpdatedAt]) {
			t.Fatalf("RunnerTokenFromItem(%v) = %+v", in, got)
		}
		// Re-rendered, it has the same key and value and reads back the same.
		again := got.Item()
		for _, name := range []string{AttrPK, AttrSK, AttrIdentifier} {
			if strIfS(again[name]) != strIfS(item[name]) {
				t.Errorf("re-rendered %s = %q, read %q", name, strIfS(again[name]), strIfS(item[name]))
			}
		}
		for name, want := range in {
			if s := strIfS(valueMap(again)[name]); s != want {
				t.Errorf("re-rendered %s = %q, read %q", name, s, want)
			}
		}
		if back, err := RunnerTokenFromItem(again); err != nil || !reflect.DeepEqual(back, got) {
			t.Fatalf("round trip: %+v, then %+v, %v", got, back, err)
		}
	})
}

// instanceAttrs are the attributes an instance record's fuzz input sets, in order.
var instanceAttrs = []string{AttrPK, AttrSK, AttrState, AttrRunID, AttrThreshold, AttrResourceClass, AttrInstanceType, AttrUsageClass, AttrUpdatedAt}

func FuzzInstanceFromItem(f *testing.F) {
	const th, now = "2026-06-01T13:00:00Z", "2026-06-01T12:00:00Z"
	all := make([]byte, len(instanceAttrs))
	f.Add(TypeInstance, "ID#i-0abc", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Add(TypeInstance, "ID#i-0abc", StateRunning, "run-42", th, "2xlarge", "m7g.2xlarge", UsageSpot, now, all)
	f.Add(TypeInstance, "ID#i-1", StateTerminated, "run-1", th, "", "", "", now, all)
	f.Add(TypeInstance, "ID#i-1", "exploded", "", "garbage", "huge", "x", "free", "yesterday", all) // nonsense the reader passes on
	f.Add(TypeInstance, "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, []byte{0, 0, 2, 0, 0, 0, 0, 0, 0})
	f.Add(TypeInstance, "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, []byte{0, 0, 3, 3, 3, 3, 3, 3, 3})
	f.Add(TypeInstance, "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, []byte{0, 0, 0, 2, 0, 0, 0, 0, 0}) // runId absent
	f.Add(TypeInstance, "i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)                                  // SK without ID#
	f.Add(TypeInstance, "ID#", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Add(TypeInstance, "ID#ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Add(TypeMetadata, "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Add("type#instance", "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Add(TypeInstance, "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, []byte{2, 2, 2, 2, 2, 2, 2, 2, 2})
	f.Add(TypeInstance, "ID#"+strings.Repeat("i", 2048), StateIdle, strings.Repeat("r", 2048), th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Fuzz(func(t *testing.T, pk, sk, state, runID, threshold, rc, it, uc, updatedAt string, shapes []byte) {
		values := []string{pk, sk, state, runID, threshold, rc, it, uc, updatedAt}
		item := map[string]types.AttributeValue{}
		in := map[string]string{}
		for i, name := range instanceAttrs {
			var shape uint8
			if i < len(shapes) {
				shape = shapes[i]
			}
			v := fuzzAttr(shape, values[i])
			setAttr(item, name, v)
			in[name] = strIfS(v)
		}
		inst, err := InstanceFromItem(item)
		id, hasPrefix := strings.CutPrefix(in[AttrSK], "ID#")
		valid := in[AttrPK] == TypeInstance && hasPrefix && id != "" && in[AttrState] != ""
		if (err == nil) != valid {
			t.Fatalf("InstanceFromItem(%v) = %+v, %v; want valid = %v", in, inst, err, valid)
		}
		if err != nil {
			if inst != (Instance{}) {
				t.Errorf("returned %+v with its error", inst)
			}
			if !strings.Contains(err.Error(), "not an instance record") {
				t.Errorf("error %q does not say it is not an instance record", err)
			}
			return
		}
		want := Instance{ID: id, State: in[AttrState], RunID: in[AttrRunID], Threshold: in[AttrThreshold], ResourceClass: in[AttrResourceClass],
			InstanceType: in[AttrInstanceType], UsageClass: in[AttrUsageClass], UpdatedAt: in[AttrUpdatedAt]}
		if inst != want {
			t.Fatalf("InstanceFromItem(%v) = %+v, want %+v", in, inst, want)
		}
		// Re-rendered, the record has the same key and attributes and reads back the same.
		again := inst.Item()
		for _, name := range instanceAttrs {
			if got := strIfS(again[name]); got != in[name] {
				t.Errorf("re-rendered %s = %q, read %q", name, got, in[name])
			}
		}
		if back, err := InstanceFromItem(again); err != nil || back != inst {
			t.Fatalf("round trip: %+v, then %+v, %v", inst, back, err)
		}
	})
}

func FuzzSignalFromItem(f *testing.F) {
	const now = "2026-06-01T12:00:00Z"
	// shapes: PK, SK, identifier, updatedAt, value.state, value.runId, then the value's shape.
	all := make([]byte, 7)
	for _, sig := range []string{SignalUserDataOK, SignalUserDataFailed, SignalRegistered, SignalRegistrationFailed,
		SignalDeregistered, SignalDeregistrationFailed, SignalReleased} {
		f.Add(fuzzPK, SortKeySignal, "i-0abc", sig, "run-1", now, all)
	}
	f.Add(fuzzPK, SortKeySignal, "i-0abc", "UD_SOMETHING_NEW", "run-1", now, all) // unknown signals pass through
	f.Add(fuzzPK, SortKeySignal, "i-0abc", "", "run-1", now, all)
	f.Add(fuzzPK, SortKeySignal, "i-0abc", SignalRegistered, "", "", all)
	f.Add(fuzzPK, SortKeySignal, "i-0abc", SignalRegistered, "run-1", "garbage", all)
	f.Add(fuzzPK, SortKeySignal, "i-0abc", SignalRegistered, "run-1", now, []byte{0, 0, 0, 0, 3, 0, 0}) // state is a number
	f.Add(fuzzPK, SortKeySignal, "i-0abc", SignalRegistered, "run-1", now, []byte{0, 0, 0, 0, 0, 2, 0}) // no runId
	f.Add(fuzzPK, SortKeySignal, "i-0abc", SignalRegistered, "run-1", now, []byte{0, 0, 0, 0, 0, 0, 1}) // value is a string
	f.Add(fuzzPK, SortKeySignal, "i-0abc", SignalRegistered, "run-1", now, []byte{0, 0, 0, 0, 0, 0, 2}) // no value
	f.Add(fuzzPK, SortKeySignal, "i-0abc", SignalRegistered, "run-1", now, []byte{0, 0, 2, 0, 0, 0, 0}) // no identifier
	f.Add(fuzzPK, SortKeyHeartbeat, "i-0abc", SignalRegistered, "run-1", now, all)
	f.Add(fuzzPK, "ID#i-0abc", "i-0abc", SignalRegistered, "run-1", now, all)
	f.Add("TYPE#WS", SortKeySignal, "i-0abc", SignalRegistered, "run-1", now, all)
	f.Add("AGENT#i-0abc", SortKeySignal, "i-0abc", SignalRegistered, "run-1", now, all)
	f.Add(fuzzPK, SortKeySignal, "i-0abd", SignalRegistered, "run-1", now, all)
	f.Add("AGENT#arn:aws:ec2:eu-west-1:123456789012:instance/", SortKeySignal, "", SignalRegistered, "run-1", now, all)
	f.Add("AGENT#arn:aws:ec2:eu-west-1:123456789012:instance/i-0abc/x", SortKeySignal, "x", SignalRegistered, "run-1", now, all)
	f.Add(fuzzPK, SortKeySignal, "i-0abc", strings.Repeat("UD_", 2000), strings.Repeat("r", 2000), now, all)
	f.Fuzz(func(t *testing.T, pk, sk, identifier, state, runID, updatedAt string, shapes []byte) {
		item := agentFuzzItem(shapes, pk, sk, identifier, updatedAt, []struct{ name, value string }{{"state", state}, {"runId", runID}})
		s, ok := SignalFromItem(item)
		v := valueMap(item)
		wantState, wantRun := strIfS(v["state"]), strIfS(v["runId"])
		valid := v != nil && agentKeyValid(item, SortKeySignal) && wantState != ""
		if ok != valid {
			t.Fatalf("SignalFromItem(%v) = %+v, %v; want ok = %v", item, s, ok, valid)
		}
		if !ok {
			if s != (Signal{}) {
				t.Errorf("returned %+v with ok = false", s)
			}
			return
		}
		want := Signal{InstanceARN: strings.TrimPrefix(strIfS(item[AttrPK]), "AGENT#"), State: wantState, RunID: wantRun, UpdatedAt: strIfS(item[AttrUpdatedAt])}
		if s != want {
			t.Fatalf("SignalFromItem = %+v, want %+v", s, want)
		}
		again := s.Item()
		for _, name := range []string{AttrPK, AttrSK, AttrIdentifier, AttrUpdatedAt} {
			if strIfS(again[name]) != strIfS(item[name]) {
				t.Errorf("re-rendered %s = %q, read %q", name, strIfS(again[name]), strIfS(item[name]))
			}
		}
		if back, ok := SignalFromItem(again); !ok || back != s {
			t.Fatalf("round trip: %+v, then %+v, %v", s, back, ok)
		}
	})
}

func FuzzHeartbeatFromItem(f *testing.F) {
	const now = "2026-06-01T12:00:05Z"
	// shapes: PK, SK, identifier, updatedAt, then the value's shape (a
	// string by default: shape 1 of agentFuzzItem's value).
	str := []byte{0, 0, 0, 0, 0, 1}
	f.Add(fuzzPK, SortKeyHeartbeat, "i-0abc", HeartbeatValue, now, str)
	f.Add(fuzzPK, SortKeyHeartbeat, "i-0abc", "PONG", now, str)
	f.Add(fuzzPK, SortKeyHeartbeat, "i-0abc", "ping", now, str)
	f.Add(fuzzPK, SortKeyHeartbeat, "i-0abc", HeartbeatValue, "", str)
	f.Add(fuzzPK, SortKeyHeartbeat, "i-0abc", HeartbeatValue, "2026-06-01T12:00:05.5Z", str)
	f.Add(fuzzPK, SortKeyHeartbeat, "i-0abc", HeartbeatValue, "2026-06-01T14:00:05+02:00", str)
	f.Add(fuzzPK, SortKeyHeartbeat, "i-0abc", HeartbeatValue, now, []byte{0, 0, 0, 0, 0, 0}) // value is a map
	f.Add(fuzzPK, SortKeyHeartbeat, "i-0abc", HeartbeatValue, now, []byte{0, 0, 0, 0, 0, 2}) // no value
	f.Add(fuzzPK, SortKeyHeartbeat, "i-0abc", HeartbeatValue, now, []byte{0, 0, 0, 3, 0, 1}) // updatedAt is a number
	f.Add(fuzzPK, SortKeySignal, "i-0abc", HeartbeatValue, now, str)
	f.Add("TYPE#HEARTBEAT", "ID#i-0abc", "i-0abc", HeartbeatValue, now, str)
	f.Add(fuzzPK, SortKeyHeartbeat, "i-1", HeartbeatValue, now, str)
	f.Fuzz(func(t *testing.T, pk, sk, identifier, value, updatedAt string, shapes []byte) {
		item := agentFuzzItem(shapes, pk, sk, identifier, updatedAt, []struct{ name, value string }{{"value", value}})
		arn, at, ok := HeartbeatFromItem(item)
		want, okTime := referenceTime(strIfS(item[AttrUpdatedAt]))
		valid := agentKeyValid(item, SortKeyHeartbeat) && strIfS(item[AttrValue]) == HeartbeatValue && okTime
		if ok != valid {
			t.Fatalf("HeartbeatFromItem(%v) = %q, %v, %v; want ok = %v", item, arn, at, ok, valid)
		}
		if !ok {
			if arn != "" || !at.IsZero() {
				t.Errorf("returned %q, %v with ok = false", arn, at)
			}
			return
		}
		if "AGENT#"+arn != strIfS(item[AttrPK]) || !at.Equal(want) {
			t.Fatalf("HeartbeatFromItem = %q, %v", arn, at)
		}
		if back, bat, ok := HeartbeatFromItem(HeartbeatItem(arn, FormatTime(at))); !ok || back != arn || !bat.Equal(at) {
			t.Fatalf("round trip: %q %v, then %q %v %v", arn, at, back, bat, ok)
		}
	})
}

// ---------------------------------------------------------------- names

// nameChars is the pool protocol's character set of pool (and class) names.
func nameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// classChars: a class name has no '-', so the last '-' of a queue name
// separates pool and class.
func classChars(s string) bool { return nameChars(s) && !strings.Contains(s, "-") }

func FuzzValidatePoolName(f *testing.F) {
	for _, s := range []string{"", "a", "ci-runners", "my_pool-1", "-", "_", strings.Repeat("p", 40), strings.Repeat("p", 41),
		"my pool", "my.pool", "my/pool", "pool\n", "\npool", "pööl", "pool\x00", "POOL", "０", "p\u200bool", strings.Repeat("é", 20)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidatePoolName(name)
		valid := len(name) >= MinPoolNameLength && len(name) <= MaxPoolNameLength && nameChars(name)
		if (err == nil) != valid {
			t.Fatalf("ValidatePoolName(%q) = %v; the protocol says valid = %v", name, err, valid)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("ValidatePoolName(%q) = %q does not quote the name", name, err)
		}
		if valid && len(TableName(name)) > MaxPoolNameLength {
			t.Errorf("table name %q too long", TableName(name))
		}
	})
}

func FuzzValidateRunID(f *testing.F) {
	for _, s := range []string{"", "r", "run-1", "Run-1", "RUN", "12345-1", "build_1.2-x", "-run", ".run", "my run", "pool/run",
		"rün", "\u212a", "İ", strings.Repeat("r", 100), strings.Repeat("r", 101), "run\n", "run\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := ValidateRunID(id)
		valid := len(id) >= 1 && len(id) <= 100 && id[0] != '-' && id[0] != '.' && id[0] != '_'
		for i := 0; valid && i < len(id); i++ {
			c := id[i]
			valid = 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-'
		}
		if (err == nil) != valid {
			t.Fatalf("ValidateRunID(%q) = %v; the protocol says valid = %v", id, err, valid)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(id)) {
			t.Errorf("ValidateRunID(%q) = %q does not quote the run id", id, err)
		}
		// No two valid run ids are one label to GitHub.
		if valid && strings.ToLower(id) != id {
			t.Errorf("ValidateRunID accepted %q, which is not lower case", id)
		}
	})
}

func FuzzValidateClassName(f *testing.F) {
	for _, c := range []struct{ pool, class string }{
		{"ci", "large"}, {"ci", "2xlarge"}, {"ci", "gpu_big-1"}, {"ci", ""}, {"ci", "x large"}, {"ci", "x.large"}, {"ci", "größe"},
		{strings.Repeat("p", 40), strings.Repeat("c", 39)}, {strings.Repeat("p", 40), strings.Repeat("c", 40)},
		{strings.Repeat("p", 10), strings.Repeat("c", 69)}, {strings.Repeat("p", 10), strings.Repeat("c", 70)},
		{"", "large"}, {"ci", "large\n"}, {"ci", "-"},
	} {
		f.Add(c.pool, c.class)
	}
	f.Fuzz(func(t *testing.T, pool, class string) {
		err := ValidateClassName(pool, class)
		valid := class != "" && classChars(class) && len(pool)+1+len(class) <= MaxQueueNameLength
		if (err == nil) != valid {
			t.Fatalf("ValidateClassName(%q, %q) = %v; the protocol says valid = %v", pool, class, err, valid)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(class)) {
			t.Errorf("ValidateClassName(%q, %q) = %q does not quote the class", pool, class, err)
		}
		if valid && QueueName(pool, class) != pool+"-"+class {
			t.Errorf("QueueName(%q, %q) = %q", pool, class, QueueName(pool, class))
		}
		// A class valid now was valid in a config item before.
		if valid && validateStoredClassName(pool, class) != nil {
			t.Errorf("validateStoredClassName(%q, %q) = %v for a valid class", pool, class, validateStoredClassName(pool, class))
		}
		if q := QueueName(pool, class); valid && ValidatePoolName(pool) == nil {
			if i := strings.LastIndex(q, "-"); q[:i] != pool || q[i+1:] != class {
				t.Errorf("queue %q does not split at its last '-' into pool %q and class %q", q, pool, class)
			}
		}
	})
}
